"""Dot helpers shared by the GEMM-shaping passes (XLA's matmul_utils,
matmul_indexing_utils, algorithm_util and legacy Triton support checks).

* :class:`OperandDims` -- ``DotOperandDims``: an operand's batch,
  non-contracting and contracting dimensions (in dimension-number order);
* :func:`gemm_accumulator_type` -- ``GetGemmAccumulatorType``;
* :func:`matmul_cost` / :func:`is_too_small_for_rewriting` --
  ``IsMatrixMultiplicationTooSmallForRewriting``;
* :func:`triton_gemm_forbidden` -- ``legacy_triton::CanTritonHandleGEMM``
  (the reason string, or None when Triton can handle the dot).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..ir.module import Instruction
from ..ir.shape import Shape, bit_width, is_f8, is_floating, is_integral
from .base import Target

BATCH, NON_CONTRACTING, CONTRACTING = 0, 1, 2

#: algorithm=... spellings (PrecisionConfig::Algorithm, lower case without ALG_).
ALGORITHM_ACCUMULATOR = {
    "dot_f16_f16_f16": "f16", "dot_any_f8_any_f8_f32": "f32",
    "dot_any_f8_any_f8_f32_fast_accum": "f32", "dot_f16_f16_f32": "f32",
    "dot_bf16_bf16_f32": "f32", "dot_bf16_bf16_f32_x3": "f32", "dot_bf16_bf16_f32_x6": "f32",
    "dot_bf16_bf16_f32_x9": "f32", "dot_tf32_tf32_f32": "f32", "dot_tf32_tf32_f32_x3": "f32",
    "dot_f32_f32_f32": "f32", "dot_bf16_bf16_bf16": "bf16", "dot_f64_f64_f64": "f64",
}


def algorithm(dot: Instruction) -> str | None:
    """The dot's precision-config algorithm (``None`` = ALG_UNSET)."""
    a = dot.attrs.get("algorithm")
    return a.lower() if a else None


def operand_precisions(dot: Instruction) -> list[str]:
    text = dot.attrs.get("operand_precision")
    if not text:
        return []
    return [p.strip().lower() for p in text.strip("{}").split(",") if p.strip()]


@dataclass
class OperandDims:
    """``DotOperandDims``: dimensions of one dot operand by category."""

    shape: Shape
    dims: list[list[int]] = field(default_factory=lambda: [[], [], []])

    @staticmethod
    def of(dot: Instruction, operand: int) -> "OperandDims":
        side = "lhs" if operand == 0 else "rhs"
        shape = dot.operands[operand].shape
        batch = list(dot.int_list(f"{side}_batch_dims"))
        contracting = list(dot.int_list(f"{side}_contracting_dims"))
        nc = [i for i in range(shape.rank) if i not in batch and i not in contracting]
        return OperandDims(shape, [batch, nc, contracting])

    @staticmethod
    def from_dot(dot: Instruction) -> tuple["OperandDims", "OperandDims"]:
        return OperandDims.of(dot, 0), OperandDims.of(dot, 1)

    def indices(self, category: int) -> list[int]:
        return self.dims[category]

    def rank(self, category: int) -> int:
        return len(self.dims[category])

    def sizes(self, category: int) -> list[int]:
        return [self.shape.dimensions[i] for i in self.dims[category]]

    def size(self, category: int) -> int:
        return math.prod(self.sizes(category))

    def apply_permutation(self, permutation: list[int], new_shape: Shape) -> None:
        inv = [0] * len(permutation)
        for i, p in enumerate(permutation):
            inv[p] = i
        self.shape = new_shape
        self.dims = [[inv[d] for d in cat] for cat in self.dims]

    @property
    def is_vector(self) -> bool:
        """Only batch and contracting dimensions (no non-contracting one)."""
        return not self.dims[NON_CONTRACTING]


def gemm_accumulator_type(dot: Instruction) -> str:
    """``GetGemmAccumulatorType``: the algorithm's accumulator if set, else
    f32 for floating-point outputs of at most 32 bits, else the output type."""
    alg = algorithm(dot)
    if alg in ALGORITHM_ACCUMULATOR:
        return ALGORITHM_ACCUMULATOR[alg]
    t = dot.shape.element_type
    if is_floating(t) and bit_width(t) <= 32:
        return "f32"
    return t


def matmul_cost(dot: Instruction) -> tuple[int, int, int, int]:
    """(lhs non-contracting size M, rhs non-contracting size N, contracting
    size K, (N + M) * K) as ``IsMatrixMultiplicationTooSmallForRewriting``
    computes them."""
    lhs, rhs = OperandDims.from_dot(dot)
    m, n, k = lhs.size(NON_CONTRACTING), rhs.size(NON_CONTRACTING), lhs.size(CONTRACTING)
    return m, n, k, (n + m) * k


def is_too_small_for_rewriting(dot: Instruction, threshold: int) -> bool:
    return matmul_cost(dot)[3] < threshold


# ---------------------------------------------------------------------------
# legacy_triton::CanTritonHandleGEMM
# ---------------------------------------------------------------------------


def _cc(target: Target) -> tuple[int, int]:
    try:
        major, _, minor = target.compute_capability.partition(".")
        return int(major), int(minor or 0)
    except ValueError:
        return (0, 0)


def _rocm_has(target: Target, feature: str) -> bool:
    arch = target.compute_capability
    if feature == "ocp_fp8":
        return arch.startswith(("gfx12", "gfx950"))
    if feature == "nanoo_fp8":
        return arch.startswith(("gfx94",))
    if feature == "bf16":
        return arch.startswith(("gfx90a", "gfx94", "gfx95", "gfx11", "gfx12"))
    return False


def triton_dot_output_type_ok(t: str, target: Target) -> bool:
    """``IsTritonSupportedDotOutputType``."""
    cuda = target.is_cuda
    if t in ("f16", "f32"):
        return True
    if t == "f8e5m2":
        return _cc(target) >= (8, 0) if cuda else (target.is_rocm and _rocm_has(target, "ocp_fp8"))
    if t == "f8e4m3fn":
        return _cc(target) >= (9, 0) if cuda else (target.is_rocm and _rocm_has(target, "ocp_fp8"))
    if t in ("f8e4m3fnuz", "f8e5m2fnuz"):
        return target.is_rocm and _rocm_has(target, "nanoo_fp8")
    if t == "bf16":
        return _rocm_has(target, "bf16") if target.is_rocm else True
    if t == "s32":
        return cuda and _cc(target) >= (8, 0)
    return False


def triton_data_type_ok(t: str, target: Target) -> bool:
    """``IsTritonSupportedDataType``."""
    return triton_dot_output_type_ok(t, target) or t in ("pred", "s8", "s16", "s32")


def triton_algorithm_ok(alg: str, target: Target) -> bool:
    """``IsDotAlgorithmSupportedByTriton``."""
    if alg in ("dot_tf32_tf32_f32", "dot_tf32_tf32_f32_x3", "dot_f32_f32_f32"):
        return target.is_cuda or target.is_rocm
    if alg in ("dot_bf16_bf16_f32", "dot_bf16_bf16_f32_x3"):
        return target.is_cuda or (target.is_rocm and _rocm_has(target, "bf16"))
    if alg in ("dot_bf16_bf16_f32_x6", "dot_bf16_bf16_f32_x9"):
        return target.is_cuda
    if alg == "dot_f16_f16_f32":
        return target.is_rocm
    return False


def triton_gemm_forbidden(dot: Instruction, target: Target) -> str | None:
    """Why Triton cannot handle ``dot`` (``CanTritonHandleGEMM``), or None."""
    if target.platform not in ("cuda", "rocm"):
        return "Triton backend is not supported on this platform."
    alg = algorithm(dot)
    if alg is None:
        if any(p != "default" for p in operand_precisions(dot)):
            return "Having non-default operand precisions for Dot op with unset algorithm."
    elif not triton_algorithm_ok(alg, target):
        return f"Unsupported algorithm on the current device(s): ALG_{alg.upper()}"
    out = dot.shape.element_type
    if not triton_dot_output_type_ok(out, target):
        return "Unsupported output data type for Dot op."
    lt, rt = dot.operands[0].shape.element_type, dot.operands[1].shape.element_type
    if lt != rt and not (is_f8(lt) and is_f8(rt)):
        return "Non-fp8 input types must be the same."
    if not triton_data_type_ok(lt, target) or not triton_data_type_ok(rt, target):
        return "Unsupported input data type for Dot op."
    if out == "s32" and not (lt in ("s8", "u8") and rt in ("s8", "u8")):
        return "Currently, S32 output is only supported for 8-bit integral inputs."
    if is_integral(lt) != is_integral(out):
        return "Dots between integer and floating-point types are not supported."
    return None


def fmt_int(n: int) -> str:
    """1234567 -> "1,234,567" (remarks quote sizes this way)."""
    return f"{n:,}"


__all__ = ["ALGORITHM_ACCUMULATOR", "BATCH", "CONTRACTING", "NON_CONTRACTING", "OperandDims",
           "algorithm", "fmt_int", "gemm_accumulator_type", "is_too_small_for_rewriting",
           "matmul_cost", "operand_precisions", "triton_algorithm_ok", "triton_data_type_ok",
           "triton_dot_output_type_ok", "triton_gemm_forbidden"]
