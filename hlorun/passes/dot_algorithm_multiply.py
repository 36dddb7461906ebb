"""``MakeMultiplyForDotPrecisionAlgorithm`` (xla/service/gpu/matmul_utils.cc
with DotAlgorithmRewriter's helpers): the elementwise product a dot's
precision algorithm prescribes, for passes that turn a dot into multiply +
reduce (dot-strength-reduction).

* unset / ``dot_f32_f32_f32``: one multiply in the operand type;
* ``dot_bf16_bf16_f32``: operands rounded to bf16, multiplied, upcast to f32;
* ``_x3`` / ``_x6`` / ``_x9``: the operands split into 2 or 3 bf16 parts
  (bit truncation through u32 masks), the partial products summed in f32
  with NaNs of the low-order terms replaced by zeros;
* ``dot_tf32_tf32_f32`` (``_x3``): the same with tf32 truncation in f32.
"""

from __future__ import annotations

from ..ir.build import make_binary, make_broadcast, make_constant, make_instruction
from ..ir.module import Instruction
from ..errors import PassError

_MASK_BF16 = 0xFFFF0000
_MASK_TF32 = 0xFFFFE000


def _upcast_f32(x: Instruction) -> Instruction:
    return make_instruction(x.parent, "convert", x.shape.with_element_type("f32"), [x])


def _round_bf16(x: Instruction) -> Instruction:
    return make_instruction(x.parent, "convert", x.shape.with_element_type("bf16"), [x])


def _sum_f32(a: Instruction, b: Instruction) -> Instruction:
    return make_binary("add", _upcast_f32(a), _upcast_f32(b), shape=a.shape.with_element_type("f32"))


def _truncate(x: Instruction, mask: int) -> Instruction:
    comp = x.parent
    u32 = x.shape.with_element_type("u32")
    as_u32 = make_instruction(comp, "bitcast-convert", u32, [x])
    c = make_constant(comp, "u32", mask)
    m = make_broadcast(c, u32, [])
    masked = make_binary("and", as_u32, m, shape=u32)
    return make_instruction(comp, "bitcast-convert", x.shape, [masked])


def _sub(x: Instruction, high: Instruction) -> Instruction:
    return make_binary("subtract", x, high, shape=x.shape)


def _split2_bf16(x: Instruction) -> tuple[Instruction, Instruction]:
    high = _truncate(x, _MASK_BF16)
    low = _sub(x, high)
    return _round_bf16(high), _round_bf16(low)


def _split3_bf16(x: Instruction) -> tuple[Instruction, Instruction, Instruction]:
    high = _truncate(x, _MASK_BF16)
    mid = _sub(x, high)
    mid_t = _truncate(mid, _MASK_BF16)
    low = _sub(mid, mid_t)
    return _round_bf16(high), _round_bf16(mid_t), _round_bf16(low)


def _split2_tf32(x: Instruction) -> tuple[Instruction, Instruction]:
    high = _truncate(x, _MASK_TF32)
    return high, _sub(x, high)


def _replace_nan_with_zeros(x: Instruction) -> Instruction:
    comp = x.parent
    shape = x.shape
    inf = make_broadcast(make_constant(comp, "f32", float("inf")), shape, [])
    absx = make_instruction(comp, "abs", shape, [x])
    cmp = make_instruction(comp, "compare", shape.with_element_type("pred"), [inf, absx],
                           {"direction": "GE"})
    zero = make_broadcast(make_constant(comp, "f32", 0), shape, [])
    return make_instruction(comp, "select", shape, [cmp, x, zero])


def _mult(a: Instruction, b: Instruction) -> Instruction:
    return make_binary("multiply", a, b)


def _require(x: Instruction, types: tuple[str, ...], alg: str, side: str) -> None:
    if x.shape.element_type not in types:
        raise PassError(f"Algorithm field set to {alg.upper()}, but the {side} is not "
                        f"{' or '.join(t.upper() for t in types)}.")


def make_multiply_for_algorithm(lhs: Instruction, rhs: Instruction, alg: str | None) -> Instruction:
    """The product of ``lhs`` and ``rhs`` (same dimensions) as ``alg``
    prescribes (None = ALG_UNSET)."""
    if alg in (None, "dot_f32_f32_f32"):
        return _mult(lhs, rhs)
    if alg == "dot_bf16_bf16_f32":
        _require(lhs, ("f32", "bf16"), alg, "lhs")
        _require(rhs, ("f32", "bf16"), alg, "rhs")
        if lhs.shape.element_type == "bf16" and rhs.shape.element_type == "bf16":
            return _upcast_f32(_mult(lhs, rhs))
        return _upcast_f32(_mult(_round_bf16(lhs), _round_bf16(rhs)))
    if alg in ("dot_bf16_bf16_f32_x3", "dot_bf16_bf16_f32_x6", "dot_bf16_bf16_f32_x9",
               "dot_tf32_tf32_f32", "dot_tf32_tf32_f32_x3"):
        _require(lhs, ("f32",), alg, "lhs")
        _require(rhs, ("f32",), alg, "rhs")
    if alg == "dot_bf16_bf16_f32_x3":
        lh, ll = _split2_bf16(lhs)
        rh, rl = _split2_bf16(rhs)
        low_high, high_low, high_high = _mult(ll, rh), _mult(lh, rl), _mult(lh, rh)
        low = _replace_nan_with_zeros(_sum_f32(low_high, high_low))
        return _sum_f32(low, high_high)
    if alg == "dot_bf16_bf16_f32_x6":
        lh, lm, ll = _split3_bf16(lhs)
        rh, rm, rl = _split3_bf16(rhs)
        terms = [_mult(lm, rm), _mult(lh, rl), _mult(ll, rh), _mult(lh, rm), _mult(lm, rh)]
        high_high = _mult(lh, rh)
        result = _sum_f32(terms[0], terms[1])
        for t in terms[2:]:
            result = _sum_f32(result, t)
        return _sum_f32(_replace_nan_with_zeros(result), high_high)
    if alg == "dot_bf16_bf16_f32_x9":
        lh, lm, ll = _split3_bf16(lhs)
        rh, rm, rl = _split3_bf16(rhs)
        terms = [_mult(ll, rl), _mult(ll, rm), _mult(lm, rl), _mult(lm, rm), _mult(lh, rl),
                 _mult(ll, rh), _mult(lh, rm), _mult(lm, rh)]
        high_high = _mult(lh, rh)
        result = _sum_f32(terms[0], terms[1])
        for t in terms[2:]:
            result = _sum_f32(result, t)
        return _sum_f32(_replace_nan_with_zeros(result), high_high)
    if alg == "dot_tf32_tf32_f32":
        return _mult(_truncate(lhs, _MASK_TF32), _truncate(rhs, _MASK_TF32))
    if alg == "dot_tf32_tf32_f32_x3":
        lh, ll = _split2_tf32(lhs)
        rh, rl = _split2_tf32(rhs)
        low = _replace_nan_with_zeros(_sum_f32(_mult(ll, rh), _mult(lh, rl)))
        return _sum_f32(low, _mult(lh, rh))
    raise PassError(f"Unsupported dot precision algorithm: {alg}")


__all__ = ["make_multiply_for_algorithm", "replace_nan_with_zeros", "split2_bf16", "split2_tf32",
           "split3_bf16"]

# The operand splits, for DotAlgorithmRewriter (dot_algorithm_rewriter.py).
split2_bf16 = _split2_bf16
split3_bf16 = _split3_bf16
split2_tf32 = _split2_tf32
replace_nan_with_zeros = _replace_nan_with_zeros
