"""``tuple-simplifier``: XLA's TupleSimplifier
(xla/hlo/transforms/simplifiers/tuple_simplifier.cc).

Two rewrites, per computation in instruction post order:

* ``tuple(gte(x, 0), gte(x, 1), ..., gte(x, n-1))`` with ``x`` of a shape
  compatible with the tuple becomes ``x``;
* a chain of get-tuple-elements over tuples, ``gte(...gte(tuple(..., op,
  ...), i)..., j)``, becomes the element ``op`` it selects.

Replacements use XLA's ReplaceInstruction (dead tuples and operands go;
control dependencies are relayed).  With ``exclude_entry_computation`` the
entry computation is left alone.

Postcondition: no get-tuple-element reads (directly or through a chain) an
element of a tuple instruction, and no tuple merely re-packs all elements of
another tuple-shaped value in order.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.edit import SideEffects, replace_instruction
from ..ir.module import Instruction, Module, has_opcode
from ..ir.shape import compatible
from .base import Pass


def latest_non_gte_ancestor_and_index(instr: Instruction) -> tuple[Instruction, list[int]]:
    """``LatestNonGteAncestorAndIndex``: the first non-GTE ancestor of a GTE
    chain and the tuple index path from it (outermost first)."""
    index: list[int] = []
    cur = instr
    while cur.opcode == "get-tuple-element":
        index.append(cur.tuple_index)
        cur = cur.operands[0]
    index.reverse()
    return cur, index


_TUPLE_OPS = frozenset({"tuple", "get-tuple-element"})


@dataclass(frozen=True)
class TupleSimplifier(Pass):
    """Forward tuple elements to get-tuple-element users; fold tuple(gte(x,0..n)) to x."""

    name = "tuple-simplifier"
    exclude_entry_computation: bool = False

    def run(self, module: Module) -> bool:
        changed = False
        effects = SideEffects()
        for comp in list(module.computations):
            if self.exclude_entry_computation and comp is module.entry:
                continue
            if not has_opcode(comp, _TUPLE_OPS):
                continue  # every rewrite is of a tuple or a get-tuple-element
            for instr in comp.post_order():
                if instr.parent is not comp:
                    continue  # removed by an earlier replacement
                if instr.opcode == "tuple":
                    top = self._remove_whole_tuple(instr, effects)
                    if top is not None:
                        changed = True
                    continue
                ancestor, index = latest_non_gte_ancestor_and_index(instr)
                if ancestor is instr:
                    continue
                replacement: Instruction | None = ancestor
                for i in index:
                    if replacement.opcode != "tuple":
                        replacement = None
                        break
                    replacement = replacement.operands[i]
                if replacement is not None:
                    name = instr.name
                    if replace_instruction(comp, instr, replacement, preserve_sharding=True,
                                           relay_control_dependency=True, side_effects=effects):
                        self.remark(name, f"forwarded tuple element {replacement.name}",
                                    derived_from=[replacement])
                        changed = True
        return changed

    def _remove_whole_tuple(self, tup: Instruction, effects: SideEffects) -> Instruction | None:
        top: Instruction | None = None
        for i, op in enumerate(tup.operands):
            if op.opcode != "get-tuple-element" or op.tuple_index != i:
                return None
            if top is None:
                top = op.operands[0]
                if not compatible(top.shape, tup.shape):
                    return None
            elif top is not op.operands[0]:
                return None
        if top is None:
            return None
        name = tup.name
        assert tup.parent is not None
        if replace_instruction(tup.parent, tup, top, preserve_sharding=True, side_effects=effects):
            self.remark(name, f"tuple re-packs {top.name}: replaced by it", derived_from=[top])
            return top
        return None
