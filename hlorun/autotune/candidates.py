"""Candidates for one GEMM: every Triton config of the search space and every
BLAS algorithm, each feasible (with an estimated time) or rejected (with
its reasons).  Nothing is dropped silently: a rejected candidate stays in
the list and in the report."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from . import blas as B
from .cost import CostParams, Estimate, Tile, blas_time, kernel_time
from .devices import DeviceSpec
from .problem import GemmProblem
from .triton import Resources, SearchSpace, TritonConfig, check, resources

TRITON = "triton"
BACKENDS = ("triton", "cublas", "cublaslt", "rocblas", "hipblaslt")


@dataclass
class Candidate:
    backend: str                               # triton | cublas | cublaslt | rocblas | hipblaslt
    config: TritonConfig | None = None
    algorithm: B.BlasAlgorithm | None = None
    reasons: list[str] = field(default_factory=list)
    resources: Resources | None = None
    estimate: Estimate | None = None
    notes: list[str] = field(default_factory=list)
    scratch_bytes: int = 0
    forced: bool = False
    #: for a rejected Triton config: what it would have taken had it fit
    hypothetical: Estimate | None = None

    @property
    def feasible(self) -> bool:
        return not self.reasons

    @property
    def is_blas(self) -> bool:
        return self.backend != TRITON

    @property
    def ns(self) -> float:
        return self.estimate.ns if self.estimate is not None else float("inf")

    @property
    def label(self) -> str:
        if self.config is not None:
            return f"triton {self.config.label}"
        if self.algorithm is not None:
            return f"{self.backend} {self.algorithm.label}"
        return self.backend

    @property
    def key(self) -> str:
        """Stable identity (cache keys, noise seeds)."""
        if self.config is not None:
            return f"triton:{self.config.label}"
        if self.algorithm is not None:
            return f"{self.backend}:{self.algorithm.index}"
        return self.backend

    def to_json(self) -> dict[str, Any]:
        return {"backend": self.backend, "label": self.label,
                "config": self.config.to_json() if self.config else None,
                "algorithm": self.algorithm.index if self.algorithm else None,
                "feasible": self.feasible, "reasons": list(self.reasons),
                "estimate": self.estimate.to_json() if self.estimate else None,
                "resources": self.resources.to_json() if self.resources else None,
                "hypothetical": self.hypothetical.to_json() if self.hypothetical else None,
                "notes": list(self.notes), "forced": self.forced}


def triton_estimate(cfg: TritonConfig, problem: GemmProblem, device: DeviceSpec,
                    res: Resources | None = None, params: CostParams | None = None) -> Estimate:
    res = res or resources(cfg, problem, device)
    tile = Tile(cfg.block_m, cfg.block_n, cfg.block_k, cfg.num_stages, cfg.num_warps, cfg.split_k,
                cfg.is_tma_allowed)
    return kernel_time(problem, device, tile, "triton", res.smem, res.registers_per_thread, params)


def triton_candidate(cfg: TritonConfig, problem: GemmProblem, device: DeviceSpec,
                     params: CostParams | None = None, forced: bool = False) -> Candidate:
    res = resources(cfg, problem, device)
    why = check(cfg, problem, device, res)
    c = Candidate(TRITON, config=cfg, reasons=why, resources=res, forced=forced)
    if not why:
        c.estimate = triton_estimate(cfg, problem, device, res, params)
    else:
        c.hypothetical = triton_estimate(cfg, problem, device, res, params)
    if res.epilogue_smem:
        c.notes.append(f"epilogue layout conversion through shared memory: {res.epilogue_smem} B "
                       f"({res.epilogue_reason})")
    return c


#: generated search spaces by what they depend on (a large model repeats a few
#: GEMM shapes hundreds of times; XLA's autotuner deduplicates them too)
_SPACES: dict[tuple, tuple[DeviceSpec, tuple[TritonConfig, ...]]] = {}


def search_space_configs(problem: GemmProblem, device: DeviceSpec, *, exhaustive: bool = False,
                         split_k: bool = False) -> tuple[TritonConfig, ...]:
    """``SearchSpace(...).configs()``, memoised on the inputs the search space reads."""
    key = (id(device), problem.batch, problem.m, problem.n, problem.k, problem.operand_bits,
           problem.compute_bits, problem.lhs_expensive, problem.rhs_expensive, exhaustive, split_k)
    hit = _SPACES.get(key)
    if hit is not None and hit[0] is device:
        return hit[1]
    configs = tuple(SearchSpace(problem, device, exhaustive=exhaustive, split_k=split_k).configs())
    if len(_SPACES) > 4096:
        _SPACES.clear()
    _SPACES[key] = (device, configs)
    return configs


def triton_candidates(problem: GemmProblem, device: DeviceSpec, *, exhaustive: bool = False,
                      split_k: bool = False, params: CostParams | None = None) -> list[Candidate]:
    return [triton_candidate(cfg, problem, device, params)
            for cfg in search_space_configs(problem, device, exhaustive=exhaustive, split_k=split_k)]


#: the plain bf16 GEMMs DotAlgorithmRewriter splits a dot of these
#: algorithms into (dot_algorithm_rewriter.py)
_SPLIT_PASSES = {"ALG_DOT_BF16_BF16_F32_X3": 3, "ALG_DOT_BF16_BF16_F32_X6": 6,
                 "ALG_DOT_BF16_BF16_F32_X9": 9}


def blas_runs(problem: GemmProblem) -> tuple[int, GemmProblem]:
    """What the library runs for ``problem``: XLA's BLAS candidate for a GEMM
    fusion is the fusion fissioned by ``FissionToCublas``
    (xla/backends/gpu/autotuner/fission.cc), which runs DotAlgorithmRewriter
    before the GEMM rewriter, so a ``BF16_BF16_F32_X3/X6/X9`` dot is measured
    as 3 / 6 / 9 cuBLAS calls on the bf16 parts of its f32 operands (plus the
    kernels that split the operands, not counted here).  Returns (calls, the
    GEMM each call runs)."""
    n = _SPLIT_PASSES.get(problem.algorithm)
    if n is None or problem.lhs_type != "f32" or problem.rhs_type != "f32":
        return 1, problem
    return n, replace(problem, lhs_type="bf16", rhs_type="bf16", algorithm="ALG_UNSET",
                      input_bytes=max(1, problem.input_bytes // 2))


def blas_candidates(lib: str, problem: GemmProblem, device: DeviceSpec,
                    params: CostParams | None = None) -> list[Candidate]:
    """The library's algorithms, or one rejected candidate saying why the
    library cannot take this GEMM."""
    why = B.library_reasons(lib, problem, device)
    if why:
        return [Candidate(lib, reasons=why)]
    calls, problem = blas_runs(problem)
    layout_note = []
    if not problem.output_canonical and problem.output_shape is not None:
        rank = len(problem.output_shape.dimensions)
        canon = "{" + ",".join(str(i) for i in range(rank - 1, -1, -1)) + "}"
        layout_note.append(f"pins the output layout to the canonical {canon} "
                           f"(the GEMM result has {problem.output_shape.layout})")

    def est(t):
        bm, bn, bk, st, sk = t
        return blas_time(problem, device, bm, bn, bk, st, sk, params).ns
    out = []
    for alg in B.algorithms(lib, problem, device, est):
        e = blas_time(problem, device, alg.block_m, alg.block_n, alg.block_k, alg.stages, alg.split_k, params)
        notes = list(layout_note)
        if calls > 1:
            e = replace(e, ns=e.ns * calls, parts={**e.parts, "split_calls": float(calls)})
            notes.append(f"DotAlgorithmRewriter splits the dot into {calls} bf16 GEMMs "
                         f"(x{calls} this algorithm's time)")
        c = Candidate(lib, algorithm=alg, estimate=e, notes=notes,
                      scratch_bytes=B.WORKSPACE_BYTES if B.LIBRARIES[lib].lt else 0)
        if "unfused_kernels" in e.parts:
            c.notes.append(f"prologue/epilogue left as separate kernels (+{e.parts['unfused_kernels']:.2f} us)")
        out.append(c)
    if not out:
        op_bytes = max(1, (problem.operand_bits + 7) // 8)
        return [Candidate(lib, reasons=[
            f"{B.LIBRARIES[lib].label} offers no algorithm: every kernel of its catalogue needs "
            f"more than the {device.shared_memory_per_block // 1024} KiB of shared memory per "
            f"block of {device.name} at {op_bytes} bytes per operand element"])]
    return out
