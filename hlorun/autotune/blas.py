"""BLAS candidates: which library may run a GEMM, and a bounded list of its
algorithms.

Libraries (XLA's custom-call targets; on ROCm the same targets are served
by rocBLAS / hipBLASLt):

* ``cublas``    -> ``__cublas$gemm``       (legacy cuBLAS; XLA's CUBLAS_FISSION)
* ``cublaslt``  -> ``__cublas$lt$matmul``  (cuBLASLt; CUBLASLT_FISSION, XLA's default)
* ``rocblas``   -> ``__cublas$gemm`` on ROCm
* ``hipblaslt`` -> ``__cublas$lt$matmul`` on ROCm

A library cannot write a non-canonical output layout: fissioning a GEMM to
it pins the result to ``{n-1,...,1,0}`` (S0) -- recorded on the candidate as
``layout_change``, which is what the explorer follows downstream.  FP8 is
offered only where the device's BLAS-Lt library supports it.

Algorithms: XLA asks the library for up to ``GemmConfig::kNumAlgorithms``
(128) and profiles what the heuristic returns (8 for cuBLASLt in every
``gemm_sweep`` log).  hlorun models each algorithm as a kernel tile from a
CUTLASS-like catalogue; the heuristic is our cost model, and the list is
bounded per library (``max_algorithms``).
"""

from __future__ import annotations

from dataclasses import dataclass

from .devices import DeviceSpec
from .problem import GemmProblem


@dataclass(frozen=True)
class Library:
    name: str
    target: str
    platform: str
    lt: bool
    max_algorithms: int
    label: str


LIBRARIES: dict[str, Library] = {
    "cublas": Library("cublas", "__cublas$gemm", "cuda", False, 24, "cuBLAS"),
    "cublaslt": Library("cublaslt", "__cublas$lt$matmul", "cuda", True, 8, "cuBLASLt"),
    "rocblas": Library("rocblas", "__cublas$gemm", "rocm", False, 16, "rocBLAS"),
    "hipblaslt": Library("hipblaslt", "__cublas$lt$matmul", "rocm", True, 32, "hipBLASLt"),
}

#: XLA's cuBLASLt autotuning workspace (the s8[33554432] in the dumps).
WORKSPACE_BYTES = 33554432


@dataclass(frozen=True)
class BlasAlgorithm:
    """One library kernel as hlorun models it."""

    index: int
    block_m: int
    block_n: int
    block_k: int
    stages: int
    split_k: int = 1

    @property
    def label(self) -> str:
        s = f"algo{self.index} ({self.block_m}x{self.block_n}x{self.block_k}/s{self.stages}"
        return s + (f"/sk{self.split_k})" if self.split_k > 1 else ")")


#: Kernel tiles (block_m, block_n, block_k, stages) the libraries ship, in
#: the spirit of CUTLASS's default GEMM configurations.
CATALOGUE = [
    (256, 128, 64, 3), (128, 256, 64, 3), (128, 128, 64, 4), (256, 64, 64, 4), (64, 256, 64, 4),
    (128, 64, 64, 4), (64, 128, 64, 4), (64, 64, 64, 5), (128, 32, 64, 4), (32, 128, 64, 4),
    (64, 32, 64, 5), (32, 64, 64, 5), (32, 32, 64, 6), (128, 128, 32, 5), (256, 128, 32, 4),
    (128, 256, 32, 4), (64, 64, 32, 6), (16, 64, 64, 6), (64, 16, 64, 6), (16, 128, 128, 4),
]
SPLITS = (1, 2, 4, 8, 16)


def device_libraries(device: DeviceSpec) -> tuple[str, ...]:
    return device.blas_libraries


def default_library(device: DeviceSpec) -> str | None:
    """The BLAS library XLA's autotuner fissions to by default: the Lt
    library (XLA enables cuBLASLt / hipBLASLt by default)."""
    libs = device.blas_libraries
    for name in libs:
        if LIBRARIES[name].lt:
            return name
    return libs[0] if libs else None


#: (lhs, rhs, result) element types the Lt libraries take in one call, from
#: the cublasLt type table XLA's GEMM rewriter checks
#: (``TypesAreSupportedByCublasLt``); FP8 pairs are checked separately.
LT_TYPE_COMBINATIONS = frozenset({
    ("f16", "f16", "f16"), ("f16", "f16", "f32"), ("bf16", "bf16", "bf16"),
    ("bf16", "bf16", "f32"), ("f32", "f32", "f32"), ("f64", "f64", "f64"),
    ("s8", "s8", "s32"), ("s8", "s8", "s8"), ("s8", "s8", "f32"),
    ("c64", "c64", "c64"), ("c128", "c128", "c128"),
})


def library_reasons(lib: str, problem: GemmProblem, device: DeviceSpec) -> list[str]:
    """Why ``lib`` cannot run this GEMM on this device (empty: it can)."""
    why: list[str] = []
    L = LIBRARIES.get(lib)
    if L is None:
        return [f"unknown BLAS library {lib}"]
    if lib not in device.blas_libraries:
        have = ", ".join(LIBRARIES[x].label for x in device.blas_libraries) or "none"
        return [f"{L.label} is not available on {device.name} (BLAS libraries there: {have})"]
    types = {problem.lhs_type, problem.rhs_type}
    if any(t.startswith("f8") for t in types):
        if not L.lt:
            why.append(f"{L.label} has no FP8 GEMM (only the Lt library does)")
        elif not device.fp8_blas:
            why.append(f"{device.name} has no FP8 matrix format")
        elif not types <= set(device.fp8_types):
            why.append(f"{'/'.join(sorted(types))} not supported by {L.label} on {device.name} "
                       f"(supports {', '.join(device.fp8_types)})")
    for t in types:
        if t in ("s4", "u4", "f4e2m1fn") or t.startswith("f6"):
            why.append(f"{L.label} has no {t} GEMM")
        if t == "pred":
            why.append(f"{L.label} has no pred GEMM")
    if problem.lhs_type != problem.rhs_type and not any(t.startswith("f8") for t in types):
        why.append(f"mixed operand types {problem.lhs_type} x {problem.rhs_type} (the rewriter "
                   f"would need converts outside the call)")
    elif L.lt and not why and not any(t.startswith("f8") for t in types):
        out = problem.dot_type or problem.out_type
        if (problem.lhs_type, problem.rhs_type, out) not in LT_TYPE_COMBINATIONS:
            ok = sorted(f"{a}x{b}->{c}" for a, b, c in LT_TYPE_COMBINATIONS
                        if a == problem.lhs_type)
            why.append(f"{L.label} has no {problem.lhs_type} x {problem.rhs_type} -> {out} GEMM "
                       f"(its type table takes " + (", ".join(ok) if ok else "none for "
                                                     + problem.lhs_type) + ")")
    return why


def algorithms(lib: str, problem: GemmProblem, device: DeviceSpec, estimate) -> list[BlasAlgorithm]:
    """The algorithm list the library's heuristic returns, best first,
    bounded by ``max_algorithms``.  ``estimate(tile) -> ns`` ranks them (the
    stand-in for the library's heuristic)."""
    L = LIBRARIES[lib]
    op_bytes = max(1, (problem.operand_bits + 7) // 8)
    cands = []
    for (bm, bn, bk, st) in CATALOGUE:
        smem = st * (bm * bk + bk * bn) * op_bytes
        if smem > device.shared_memory_per_block:
            continue   # the library never offers a kernel the device cannot launch
        for sk in SPLITS:
            if sk > 1 and (problem.k // sk < 2 * bk or not L.lt and sk > 4):
                continue
            cands.append((bm, bn, bk, st, sk))
    scored = sorted(cands, key=lambda c: (estimate(c), c))
    out = []
    for i, (bm, bn, bk, st, sk) in enumerate(scored[:L.max_algorithms]):
        out.append(BlasAlgorithm(i, bm, bn, bk, st, sk))
    return out
