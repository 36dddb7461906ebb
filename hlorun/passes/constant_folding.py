"""``constant-folding``: XLA's HloConstantFolding
(xla/hlo/transforms/simplifiers/hlo_constant_folding.cc).

Per non-fusion computation, in post order, an instruction is evaluated and
replaced by a constant holding its value when

* at least one operand is a constant and every operand is a constant or a
  broadcast of a constant (XLA does not fold ``op(broadcast(c), ...)`` alone:
  algsimp moves such elementwise ops before the broadcast, and folding the
  broadcast would only grow constants);
* it is not a parameter, constant, tuple, broadcast or iota (folding a
  broadcast or an iota grows constants), not an FFT (slow to evaluate), and
  neither it nor a computation it calls has a side effect or an rng;
* neither its result nor its array operands together have more than
  45,000,000 elements (``kMaximumConstantSizeElements``).

A value is computed with hlorun's evaluator (:mod:`hlorun.evaluate`); an
instruction it cannot evaluate is left alone (XLA's evaluator failing is
likewise not an error).  Folding runs in one post-order sweep, so a chain
of foldable scalars (``compare(16384 - convert(0), 0)``, the degrees of
freedom of ``jnp.var``) becomes one constant.

Postcondition: no instruction matching the rules above is left.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..ir.edit import SideEffects, replace_instruction
from ..ir.literal import Literal
from ..ir.module import Computation, Instruction, Module, has_opcode
from .base import Pass
from .dfs_rewrite import nonfusion_computations

MAX_CONSTANT_ELEMENTS = 45 * 1000 * 1000

#: never folded themselves (XLA's early exits)
_NOT_FOLDED = frozenset({"parameter", "constant", "tuple", "broadcast", "iota", "fft"})
#: not folded when they appear, even inside a called computation
#: (``IsOrContainsIllegalInstr``: rng, after-all; plus what XLA cannot evaluate)
_ILLEGAL = frozenset({"rng", "rng-bit-generator", "rng-get-and-update-state", "after-all",
                      "custom-call", "infeed", "outfeed", "send", "recv", "send-done",
                      "recv-done", "while", "conditional", "call", "async-start",
                      "async-update", "async-done", "partition-id", "replica-id"})


def _is_constant_like(op: Instruction) -> bool:
    return op.opcode == "constant" or (
        op.opcode == "broadcast" and op.operands[0].opcode == "constant")


def _contains_illegal(instr: Instruction, memo: dict) -> bool:
    if instr.opcode in _ILLEGAL:
        return True
    for comp in instr.called_computations():
        got = memo.get(comp)
        if got is None:
            memo[comp] = False  # recursion guard
            got = memo[comp] = any(_contains_illegal(i, memo) for i in comp.instructions)
        if got:
            return True
    return False


def _elements(shape) -> int:
    return math.prod(shape.dimensions) if shape.is_array else 0


def foldable(instr: Instruction, effects: SideEffects, memo: dict) -> bool:
    """XLA's conditions for folding ``instr`` (evaluation aside)."""
    ops = instr.operands
    if not ops or not any(o.opcode == "constant" for o in ops):
        return False
    if not all(_is_constant_like(o) for o in ops):
        return False
    if instr.opcode in _NOT_FOLDED or _contains_illegal(instr, memo):
        return False
    if effects.instruction(instr):
        return False
    if instr.shape.is_array:
        in_operands = sum(_elements(o.shape) for o in ops)
        if max(_elements(instr.shape), in_operands) > MAX_CONSTANT_ELEMENTS:
            return False
    return True


_CONSTANT = frozenset({"constant"})


@dataclass(frozen=True)
class ConstantFolding(Pass):
    """Evaluate instructions whose operands are all constants; replace them by constants."""

    name = "constant-folding"

    def run(self, module: Module) -> bool:
        ev = None  # the evaluator is imported and built only when something folds
        effects = SideEffects()
        memo: dict = {}
        changed = False
        for comp in nonfusion_computations(module):
            if not has_opcode(comp, _CONSTANT):
                continue  # foldable needs a constant operand (folding only adds them)
            for instr in comp.post_order():
                if instr.parent is not comp or not instr._users and instr is not comp.root:
                    continue  # removed, or dead (XLA skips dead code)
                if not foldable(instr, effects, memo):
                    continue
                if ev is None:
                    from ..evaluate import EvaluationError
                    from ..evaluate.core import Evaluator
                    ev = Evaluator(module, max_bytes=None, tune_malloc=False)
                try:
                    ops = [ev._eval(o, []) if o.opcode == "constant" else
                           ev._eval(o, [ev._eval(o.operands[0], [])]) for o in instr.operands]
                    value = ev._eval(instr, ops)
                except (EvaluationError, ValueError, TypeError, ArithmeticError,
                        FloatingPointError, IndexError, KeyError, NotImplementedError):
                    continue
                if not self._replace(comp, instr, value):
                    continue
                changed = True
        return changed

    def _replace(self, comp: Computation, instr: Instruction, value) -> bool:
        if isinstance(value, tuple) or not instr.shape.is_array:
            return False  # tuple constants are not folded (algsimp would expand them)
        new = Instruction("constant", instr.shape, [], "", {})
        new.literal = Literal.from_array(np.asarray(value), instr.shape)
        meta = instr.attrs.get("metadata")
        if meta is not None:
            new.attrs["metadata"] = meta
        name = instr.name
        if not replace_instruction(comp, instr, new, relay_control_dependency=True):
            return False
        self.remark(name, f"{name} ({instr.opcode}) folded to a constant",
                    derived_from=[name])
        return True


__all__ = ["ConstantFolding", "foldable"]
