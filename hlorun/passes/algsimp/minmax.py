"""XLA AlgebraicSimplifier's HandleMaximum / HandleMinimum identity rules
and the clamp rewrite (the monotone-function rewrites are not implemented):

* ``max(x, x)`` / ``min(x, x)`` -> ``x``;
* ``max(x, lowest)`` -> ``x`` and ``min(x, highest)`` -> ``x`` (lowest /
  highest: -inf / +inf for floating types with infinities, else the type's
  extreme), for integers always and for floating types when min/max
  propagate NaN (XLA:GPU's default: ``--xla_gpu_enable_fast_min_max`` off);
  the constant may be broadcast -- JAX's ``log_softmax`` writes
  ``max(reduce_max(x), -inf)``;
* ``max(max(x, y), y)`` and ``max(max(x, y), x)`` -> the inner max;
  ``max(x, max(x, y))`` -> the inner max; ``max(y, max(x, y))`` ->
  ``max(y, x)`` (NaNs of different sign forbid more); the same for min;
* ``min(max(x, broadcast(lo)), broadcast(hi))`` and
  ``max(min(x, broadcast(hi)), broadcast(lo))`` (operands in any order;
  lo and hi constants of one element) -> ``clamp(broadcast(lo), x,
  broadcast(hi))`` when ``lo < hi`` (``MinMaxToClamp``): ``jnp.clip``
  with constant bounds is one clamp, which cuDNN's ReLU fusion does not
  take for a ReLU.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ...ir.literal import numpy_dtype
from ...ir.module import Instruction
from ...ir.shape import is_floating, is_integral


@lru_cache(maxsize=None)
def extreme(element_type: str, lowest: bool):
    """``LiteralUtil::MinValue`` / ``MaxValue`` as a numpy scalar, or None
    (cached: a pure function of its arguments, and numpy scalars are
    immutable; algsimp asks for every reduce and max/min it visits)."""
    try:
        dt = numpy_dtype(element_type)
    except Exception:
        return None
    if element_type == "pred":
        return np.bool_(not lowest)
    if is_integral(element_type):
        info = np.iinfo(dt)
        return dt.type(info.min if lowest else info.max)
    if is_floating(element_type):
        try:
            import ml_dtypes
            info = ml_dtypes.finfo(dt)
        except Exception:
            info = np.finfo(dt)
        inf = dt.type(np.inf)
        if np.isinf(np.float64(inf)):
            return dt.type(-np.inf if lowest else np.inf)
        return dt.type(info.min if lowest else info.max)
    return None


def is_all(op: Instruction, value) -> bool:
    """``IsAll(op, literal)``: broadcasts unwrapped to a constant whose
    elements all equal ``value``."""
    while op.opcode == "broadcast":
        op = op.operands[0]
    lit = op.literal
    if op.opcode != "constant" or lit is None or value is None:
        return False
    # the answer is memoized on the literal (as ``Literal.is_scalar_value``
    # does; a tuple key never equals that method's float keys)
    memo = lit._all_equal
    if memo is None:
        memo = lit._all_equal = {}
    key = (_IS_ALL, type(value), value)
    got = memo.get(key)
    if got is None:
        try:
            arr = np.asarray(lit.value)
        except Exception:
            return False
        got = memo[key] = arr.size > 0 and bool(np.all(arr == value))
    return got


_IS_ALL = "minmax.is_all"


def simplify(visitor, instr: Instruction, lowest: bool, propagate_nan: bool = True) -> bool:
    """Apply the rules to a ``maximum`` (``lowest`` True) or ``minimum``."""
    lhs, rhs = instr.operands
    op = instr.opcode
    if lhs is rhs:
        visitor.replace_with_operand(instr, lhs)
        return True
    t = instr.shape.element_type
    if is_integral(t) or (is_floating(t) and propagate_nan):
        lt, rt = lhs.shape.element_type, rhs.shape.element_type
        if rt == t and is_all(lhs, extreme(lt, lowest)):
            visitor.replace_with_operand(instr, rhs)
            return True
        if lt == t and is_all(rhs, extreme(rt, lowest)):
            visitor.replace_with_operand(instr, lhs)
            return True
    if lhs.opcode == op and rhs in lhs.operands:
        visitor.replace_with_operand(instr, lhs)
        return True
    if rhs.opcode == op and rhs.operands[0] is lhs:
        visitor.replace_with_operand(instr, rhs)
        return True
    if rhs.opcode == op and rhs.operands[1] is lhs:
        instr.set_operand(1, rhs.operands[0])
        visitor.mark_changed()
        return True
    return False


def _scalar_bcast(x: Instruction):
    """``m::Broadcast(m::ConstantEffectiveScalar())``: the constant's value."""
    if x.opcode != "broadcast":
        return None
    c = x.operands[0]
    if c.opcode != "constant" or c.literal is None or not c.shape.is_array \
            or any(d != 1 for d in c.shape.dimensions):
        return None
    try:
        return np.asarray(c.literal.value).reshape(())
    except Exception:
        return None


def to_clamp(visitor, instr: Instruction, lowest: bool) -> bool:
    """The clamp rule of HandleMaximum (``lowest``) / HandleMinimum."""
    inner_op = "minimum" if lowest else "maximum"
    for outer_bound, inner in (instr.operands, instr.operands[::-1]):
        if _scalar_bcast(outer_bound) is None or inner.opcode != inner_op:
            continue
        for x, inner_bound in (inner.operands, inner.operands[::-1]):
            if _scalar_bcast(inner_bound) is None:
                continue
            lo, hi = (outer_bound, inner_bound) if lowest else (inner_bound, outer_bound)
            if not bool(_scalar_bcast(lo) < _scalar_bcast(hi)):
                return False
            visitor.replace_with_new(instr, visitor.new("clamp", instr.shape, [lo, x, hi]))
            return True
    return False
