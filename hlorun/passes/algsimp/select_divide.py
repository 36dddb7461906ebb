"""algsimp's HandleSelect and two rules of HandleDivide
(xla/hlo/transforms/simplifiers/algebraic_simplifier.cc).

* select: ``select(p, y, y)`` -> y; ``select(true, a, b)`` -> a;
  ``select(false, a, b)`` -> b (the predicate a constant, or a broadcast
  of one, of all-equal elements: ``IsAll``) -- ``jnp.var``'s
  ``where(n - ddof > 0, ..., nan)`` once constant folding has decided it;
* divide: ``A / 1`` -> A; with ``divide_by_constant_to_multiply`` (off by
  default, see the option), XLA's ``A / C`` -> ``A * (1 / C)`` when A is
  not a constant and C is a floating-point (or complex) constant or a
  broadcast of one (the reciprocal computed elementwise in C's type, as
  XLA's ``InvertConstant``; a broadcast C gets a broadcast of the
  reciprocal with C's dimensions): delayed-scaling fp8 recipes'
  ``max(amax) / 448`` and batch-norm means become multiplies, as in XLA's
  dumps.

Not implemented (stated): the exp / pow / sqrt / rsqrt-denominator rules
that XLA tries before ``A / C`` (none of them applies when the denominator
is a constant), integral divides by a power of two, nested divides,
``select(not(p), a, b)``.
"""

from __future__ import annotations

import numpy as np

from ...ir.literal import Literal, numpy_dtype
from ...ir.module import Instruction
from ...ir.shape import is_complex, is_floating
from ..dfs_rewrite import add_instruction
from .minmax import is_all


def handle_select(v, select: Instruction) -> None:
    pred, a, b = select.operands
    if a is b:
        v.replace_with_operand(select, a)
    elif is_all(pred, True):
        v.replace_with_operand(select, a)
    elif is_all(pred, False):
        v.replace_with_operand(select, b)


def handle_divide(v, divide: Instruction) -> None:
    a, b = divide.operands
    if is_all(b, 1) and a.shape == divide.shape:
        v.replace_with_operand(divide, a)
        return
    if not v.owner.divide_by_constant_to_multiply:
        return
    c = b.operands[0] if b.opcode == "broadcast" else b
    if a.opcode == "constant" or c.opcode != "constant" or c.literal is None:
        return
    t = c.shape.element_type
    if not (is_floating(t) or is_complex(t)):
        return
    inverse = _invert_constant(c)
    if inverse is None:
        return
    inv = v.new("constant", c.shape.with_default_layout_if_missing(), [])
    inv.literal = inverse
    add_instruction(divide.parent, inv)
    if b is not c:
        inv = add_instruction(divide.parent, v.new("broadcast", b.shape, [inv],
                                                   dimensions=b.attrs["dimensions"]))
    v.replace_with_new(divide, v.new("multiply", divide.shape, [a, inv]))


def _invert_constant(c: Instruction) -> Literal | None:
    """``InvertConstant``: ``1 / x`` per element in the constant's own type."""
    try:
        dt = numpy_dtype(c.shape.element_type)
        value = np.asarray(c.literal.value, dtype=dt)
    except (ValueError, TypeError):
        return None
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        inverse = (np.ones_like(value) / value).astype(dt)
    return Literal.from_array(inverse, c.shape.with_default_layout_if_missing())


__all__ = ["handle_divide", "handle_select"]
