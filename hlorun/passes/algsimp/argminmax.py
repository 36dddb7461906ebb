"""algsimp's HandleReduce rule that shares a max (min) with an argmax (argmin)
of the same input (xla/hlo/transforms/simplifiers/algebraic_simplifier.cc,
``MatchArgMax`` / ``MatchArgMin`` and the "Replace Use(ReduceMax(Arg)) with
Use(Gte(ReduceArgMax, 0))" step):

* a single-output ``reduce(x, init, maximum)`` whose init is a scalar
  constant -inf (the type's lowest value where it has no infinity), next to
  a variadic argmax reduce of the same ``x`` instruction over the same
  dimensions, becomes ``get-tuple-element(argmax, 0)``; the same for
  ``minimum`` with +inf (highest) and an argmin;
* an argmax reduce is ``reduce((x, iota), (-inf, 0))`` whose reducer's root
  is ``tuple(select(p, a0, b0), select(or(p, and(a0 == b0, a1 < b1)), a1,
  b1))`` with ``p = or(a0 > b0, a0 != a0)`` (either order of each ``or``;
  parameters a0, a1, b0, b1 = 0, 1, 2, 3) -- JAX's ``argmax``, which
  returns the max next to the index; argmin has ``<`` and +inf.

JAX's ``softmax`` beside an ``argmax`` of the same logits (a MoE router)
then reads the argmax's max instead of reducing the logits a second time.
Runs only layout-insensitive, as XLA's (the rule sits after HandleReduce's
layout-sensitive return).
"""

from __future__ import annotations

import math

from ...ir.module import Instruction
from .minmax import extreme, is_all


def _param(x: Instruction, n: int) -> bool:
    return x.opcode == "parameter" and x.parameter_number == n


def _compare(x: Instruction, a: int, b: int, direction: str) -> bool:
    return x.opcode == "compare" and x.attrs.get("direction") == direction and \
        len(x.operands) == 2 and _param(x.operands[0], a) and _param(x.operands[1], b)


def _any_order(x: Instruction, opcode: str, first, second) -> bool:
    if x.opcode != opcode or len(x.operands) != 2:
        return False
    l, r = x.operands
    return (first(l) and second(r)) or (first(r) and second(l))


def _matches_arg_min_max(root: Instruction, is_max: bool) -> bool:
    """``MatchArgMinMax`` on the reducer's root."""
    direction = "GT" if is_max else "LT"

    def value_pred(x: Instruction) -> bool:
        return _any_order(x, "or", lambda y: _compare(y, 0, 2, direction),
                          lambda y: _compare(y, 0, 0, "NE"))

    def tie_break(x: Instruction) -> bool:
        return x.opcode == "and" and len(x.operands) == 2 and \
            _compare(x.operands[0], 0, 2, "EQ") and _compare(x.operands[1], 1, 3, "LT")

    if root.opcode != "tuple" or len(root.operands) != 2:
        return False
    s0, s1 = root.operands
    if s0.opcode != "select" or s1.opcode != "select":
        return False
    if not (value_pred(s0.operands[0]) and _param(s0.operands[1], 0) and
            _param(s0.operands[2], 2)):
        return False
    return _any_order(s1.operands[0], "or", value_pred, tie_break) and \
        _param(s1.operands[1], 1) and _param(s1.operands[2], 3)


def _scalar_constant(x: Instruction, value) -> bool:
    """``IsScalarConstantNegInf`` / ``IsScalarConstantInf`` /
    ``IsScalarConstantZero``: a constant of one element (effective scalar)."""
    return x.opcode == "constant" and x.shape.is_array and \
        math.prod(x.shape.dimensions) == 1 and value is not None and is_all(x, value)


def matches_arg(reduce: Instruction, is_max: bool) -> bool:
    """``MatchArgMax`` (``is_max``) / ``MatchArgMin``."""
    if reduce.opcode != "reduce" or len(reduce.operands) != 4 or not reduce.shape.is_tuple:
        return False
    x, iota, init, zero = reduce.operands
    if iota.opcode != "iota":
        return False
    if not _scalar_constant(init, extreme(init.shape.element_type, lowest=is_max)) or \
            not _scalar_constant(zero, 0):
        return False
    return _matches_arg_min_max(reduce.attrs["to_apply"].root, is_max)


def share_with_arg(v, reduce: Instruction, arg: Instruction, init: Instruction) -> bool:
    """Replace a max (min) reduce by element 0 of an argmax (argmin) of
    ``arg``; True when it did."""
    root = reduce.attrs["to_apply"].root
    for opcode, is_max in (("maximum", True), ("minimum", False)):
        # (the reducer's root first: the cheaper of two pure tests)
        if not _any_order(root, opcode, lambda p: _param(p, 0), lambda p: _param(p, 1)):
            continue
        if not _scalar_constant(init, extreme(init.shape.element_type, lowest=is_max)):
            continue
        for user in arg.users:
            if user is not reduce and user.operands[0] is arg and \
                    matches_arg(user, is_max) and \
                    list(user.dimensions) == list(reduce.dimensions):
                v.replace_with_new(reduce, v.new("get-tuple-element", reduce.shape, [user],
                                                 index="0"))
                return True
    return False


__all__ = ["matches_arg", "share_with_arg"]
