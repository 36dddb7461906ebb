"""dot-algorithm-rewriter: split ``dot_bf16_bf16_f32_x3`` / ``_x6`` /
``_x9`` and ``dot_tf32_tf32_f32_x3`` dots into plain dots that cuBLAS can
run (XLA's ``DotAlgorithmRewriter``, xla/service/gpu/transforms/
dot_algorithm_rewriter.cc, run right before the GEMM rewriters).

Only dots left outside fusions are rewritten (a dot Triton took is in a
``__triton_gemm`` fusion computation and keeps its algorithm: Triton emits
the split itself).  Each f32 operand x is split into bf16 parts: high =
bf16(x with the low 16 mantissa bits masked off), low = bf16(x - high)
(x6: a middle part the same way).  Then

* x3: ``(dot(lo, hi) + dot(hi, lo))`` with NaNs replaced by 0, ``+ dot(hi, hi)``;
* x6: ``mm + hl + lh + hm + mh`` (left to right), NaNs replaced by 0,
  ``+ hh``;
* x9: ``ll + lm + ml + mm + hl + lh + hm + mh`` (left to right), NaNs
  replaced by 0, ``+ hh`` (the order of MakeMultiplyForBF16BF16F32X9);
* TF32 x3: the parts stay f32 (high = x with the low 13 mantissa bits
  masked off, low = x - high), ``(lo*hi + hi*lo)`` NaN-zeroed ``+ hi*hi``,
  each dot with ``algorithm=dot_tf32_tf32_f32``;

every new dot with the original shape and dimension numbers and the
precision config without its algorithm (ALG_UNSET; TF32 x3: TF32_TF32_F32),
operand precisions kept -- as XLA's dump of testdata/xla-dumps/
dot_algorithms_no_triton shows (3 + 6 + 9 + 3 cuBLAS-LT calls).  Other
algorithms go to the GEMM rewriter as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.build import make_binary, make_instruction
from ..ir.module import Instruction, Module
from .algorithm_util import algorithm_of
from .base import Pass
from .dfs_rewrite import nonfusion_computations, replace_instruction
from .dot_algorithm_multiply import replace_nan_with_zeros, split2_bf16, split2_tf32, split3_bf16


def _dot(original: Instruction, lhs: Instruction, rhs: Instruction,
         algorithm: str | None = None) -> Instruction:
    attrs = {k: v for k, v in original.attrs.items() if k not in ("algorithm", "metadata")}
    if algorithm:
        attrs["algorithm"] = algorithm
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


def rewrite_x9(dot: Instruction) -> Instruction:
    lh, lm, ll = split3_bf16(dot.operands[0])
    rh, rm, rl = split3_bf16(dot.operands[1])
    pairs = [(ll, rl), (ll, rm), (lm, rl), (lm, rm), (lh, rl), (ll, rh), (lh, rm), (lm, rh)]
    result = None
    for a, b in pairs:
        d = _dot(dot, a, b)
        result = d if result is None else _sum(result, d)
    return _sum(replace_nan_with_zeros(result), _dot(dot, lh, rh))


def rewrite_tf32_x3(dot: Instruction) -> Instruction:
    tf32 = "dot_tf32_tf32_f32"
    lh, ll = split2_tf32(dot.operands[0])
    rh, rl = split2_tf32(dot.operands[1])
    low_high, high_low = _dot(dot, ll, rh, tf32), _dot(dot, lh, rl, tf32)
    low = replace_nan_with_zeros(_sum(low_high, high_low))
    return _sum(low, _dot(dot, lh, rh, tf32))


#: algorithm -> (rewrite, number of dots)
_REWRITES = {"dot_bf16_bf16_f32_x3": (rewrite_x3, 3), "dot_bf16_bf16_f32_x6": (rewrite_x6, 6),
             "dot_bf16_bf16_f32_x9": (rewrite_x9, 9), "dot_tf32_tf32_f32_x3": (rewrite_tf32_x3, 3)}


@dataclass(frozen=True)
class DotAlgorithmRewriter(Pass):
    """Rewrite BF16_BF16_F32_X3/X6/X9 and TF32_TF32_F32_X3 dots outside fusions into dots cuBLAS runs."""

    name = "dot-algorithm-rewriter"

    def run(self, module: Module) -> bool:
        changed = False
        for comp in nonfusion_computations(module):
            for dot in [i for i in comp.instructions if i.opcode == "dot"]:
                alg = algorithm_of(dot)
                if alg not in _REWRITES:
                    continue
                for side, o in (("lhs", dot.operands[0]), ("rhs", dot.operands[1])):
                    if o.shape.element_type != "f32":
                        self.fail(f"Algorithm field set to {alg.upper()}, but the {side} is not F32.", dot)
                rewrite, n = _REWRITES[alg]
                result = rewrite(dot)
                self.remark(result, f"{dot.name} ({alg}) became {n} dots summed in f32", derived_from=[dot])
                replace_instruction(dot, result)
                changed = True
        return changed
