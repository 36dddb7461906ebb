"""dot-algorithm-rewriter: split ``dot_bf16_bf16_f32_x3`` / ``_x6`` dots
into plain bf16 dots that cuBLAS can run (XLA's ``DotAlgorithmRewriter``,
xla/service/gpu/transforms/dot_algorithm_rewriter.cc, run right before the
GEMM rewriters).

Only dots left outside fusions are rewritten (a dot Triton took is in a
``__triton_gemm`` fusion computation and keeps its algorithm: Triton emits
the split itself).  Each f32 operand x is split into bf16 parts: high =
bf16(x with the low 16 mantissa bits masked off), low = bf16(x - high)
(x6: a middle part the same way).  Then

* x3: ``(dot(lo, hi) + dot(hi, lo))`` with NaNs replaced by 0, ``+ dot(hi, hi)``;
* x6: ``mm + hl + lh + hm + mh`` (left to right), NaNs replaced by 0,
  ``+ hh``;

every new dot with the original shape and dimension numbers, the
precision config without its algorithm (ALG_UNSET, operand precisions
kept).  Other algorithms are left alone (``_x9`` and TF32 reach the GEMM
rewriter, which takes them through cuBLAS's compute types).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.build import make_binary, make_instruction
from ..ir.module import Instruction, Module
from .algorithm_util import algorithm_of
from .base import Pass
from .dfs_rewrite import nonfusion_computations, replace_instruction
from .dot_algorithm_multiply import replace_nan_with_zeros, split2_bf16, split3_bf16

_REWRITTEN = ("dot_bf16_bf16_f32_x3", "dot_bf16_bf16_f32_x6")


def _dot(original: Instruction, lhs: Instruction, rhs: Instruction) -> Instruction:
    attrs = {k: v for k, v in original.attrs.items() if k not in ("algorithm", "metadata")}
    return make_instruction(original.parent, "dot", original.shape, [lhs, rhs], attrs)


def _sum(a: Instruction, b: Instruction) -> Instruction:
    return make_binary("add", a, b, shape=a.shape)


def rewrite_x3(dot: Instruction) -> Instruction:
    lh, ll = split2_bf16(dot.operands[0])
    rh, rl = split2_bf16(dot.operands[1])
    low_high, high_low, high_high = _dot(dot, ll, rh), _dot(dot, lh, rl), _dot(dot, lh, rh)
    low = replace_nan_with_zeros(_sum(low_high, high_low))
    return _sum(low, high_high)


def rewrite_x6(dot: Instruction) -> Instruction:
    lh, lm, ll = split3_bf16(dot.operands[0])
    rh, rm, rl = split3_bf16(dot.operands[1])
    terms = [_dot(dot, lm, rm), _dot(dot, lh, rl), _dot(dot, ll, rh), _dot(dot, lh, rm),
             _dot(dot, lm, rh)]
    high_high = _dot(dot, lh, rh)
    result = terms[0]
    for t in terms[1:]:
        result = _sum(result, t)
    return _sum(replace_nan_with_zeros(result), high_high)


@dataclass(frozen=True)
class DotAlgorithmRewriter(Pass):
    """Rewrite BF16_BF16_F32_X3/X6 dots outside fusions into bf16 dots cuBLAS runs."""

    name = "dot-algorithm-rewriter"

    def run(self, module: Module) -> bool:
        changed = False
        for comp in nonfusion_computations(module):
            for dot in [i for i in comp.instructions if i.opcode == "dot"]:
                alg = algorithm_of(dot)
                if alg not in _REWRITTEN:
                    continue
                for side, o in (("lhs", dot.operands[0]), ("rhs", dot.operands[1])):
                    if o.shape.element_type != "f32":
                        self.fail(f"Algorithm field set to {alg.upper()}, but the {side} is not F32.", dot)
                result = rewrite_x3(dot) if alg.endswith("x3") else rewrite_x6(dot)
                self.remark(result, f"{dot.name} ({alg}) became {3 if alg.endswith('x3') else 6} "
                                    "bf16 dots summed in f32", derived_from=[dot])
                replace_instruction(dot, result)
                changed = True
        return changed
