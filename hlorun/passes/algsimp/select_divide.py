"""algsimp's HandleSelect and the first rule of HandleDivide
(xla/hlo/transforms/simplifiers/algebraic_simplifier.cc).

* select: ``select(p, y, y)`` -> y; ``select(true, a, b)`` -> a;
  ``select(false, a, b)`` -> b (the predicate a constant, or a broadcast
  of one, of all-equal elements: ``IsAll``) -- ``jnp.var``'s
  ``where(n - ddof > 0, ..., nan)`` once constant folding has decided it;
* divide: ``A / 1`` -> A.

Not implemented (stated): XLA's ``A / C`` -> ``A * (1 / C)`` for floating
constants C (it turns batch-norm means into multiplies; with it
resnet_bn_train_bf16's scalar rsqrt kernels fuse differently from XLA's
under hlorun's cost model, 2 kernels fewer than XLA), the exp / pow /
sqrt-denominator rules, nested divides, ``select(not(p), a, b)``.
"""

from __future__ import annotations

from ...ir.module import Instruction
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


__all__ = ["handle_divide", "handle_select"]
