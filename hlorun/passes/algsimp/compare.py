"""algsimp's HandleCompare, the rules that decide a comparison outright
(xla/hlo/transforms/simplifiers/algebraic_simplifier.cc):

* an iota against zero: ``iota < 0`` and ``0 > iota`` are false,
  ``iota >= 0`` and ``0 <= iota`` true (an iota is never negative) --
  JAX's negative-index wrap ``select(i < 0, i + n, i)`` on an ``arange``
  (the token index of a MoE scatter) folds to the iota;
* ``x op x`` for an integral x: false for GT / LT / NE, true for
  EQ / GE / LE.

The result is ``broadcast(constant(pred))`` of the compare's shape.

Not implemented (stated): the canonicalizations XLA tries first
(``compare(x + C, y)`` -> ``compare(x, y - C)``, the broadcast-add form,
``compare(-x, C)``) and the unsigned ``x u< 0`` / ``x u>= 0`` rules.
"""

from __future__ import annotations

from ...ir.attrs import format_int_list
from ...ir.build import make_constant
from ...ir.module import Instruction
from .minmax import is_all

_INTEGRAL = frozenset("s2 s4 s8 s16 s32 s64 u2 u4 u8 u16 u32 u64".split())


def decided(compare: Instruction) -> bool | None:
    """The value every element of ``compare`` has, when the rules know it."""
    lhs, rhs = compare.operands
    d = compare.attrs.get("direction")
    if d == "LT" and lhs.opcode == "iota" and is_all(rhs, 0):
        return False
    if d == "GT" and is_all(lhs, 0) and rhs.opcode == "iota":
        return False
    if d == "GE" and lhs.opcode == "iota" and is_all(rhs, 0):
        return True
    if d == "LE" and is_all(lhs, 0) and rhs.opcode == "iota":
        return True
    if lhs is rhs and lhs.shape.is_array and lhs.shape.element_type in _INTEGRAL:
        if d in ("GT", "LT", "NE"):
            return False
        if d in ("EQ", "GE", "LE"):
            return True
    return None


def handle_compare(v, compare: Instruction) -> None:
    value = decided(compare)
    if value is None or not compare.shape.is_array:
        return
    c = make_constant(compare.parent, "pred", value)
    v.replace_with_new(compare, v.new("broadcast", compare.shape, [c], dimensions=format_int_list([])))
