"""``dce``: XLA's HloDCE (xla/hlo/transforms/simplifiers/hlo_dce.cc).

Removes instructions that nothing uses (and the operands that become dead
with them), computations that nothing calls, and unused outputs of
multi-output fusions.  Computations are visited callers before callees,
starting at the entry, so that dead get-tuple-elements of a multi-output
fusion are gone before its fused computation is cleaned up.

Instructions with side effects stay (collectives may go with
``remove_cross_partition_collective_ops``; a while loop goes when its body
and condition have no side effects).  Parameters are only removed with
``use_call_analysis`` (callers are then fixed up), entry parameters only with
``remove_dead_parameters_from_entry_computation`` as well.

Postcondition: every instruction other than a root, a parameter or a
side-effecting instruction has a user; every computation is reachable from
the entry.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.attrs import parse_frontend_attributes
from ..ir.edit import (CallGraph, SideEffects, fusion_lookup, is_dead, is_safely_removable,
                       remove_instruction_and_unused_operands, replace_instruction)
from ..ir.module import Computation, Instruction, Module, calls_something
from ..ir.shape import Shape
from .base import Pass

_COLLECTIVES = frozenset({"all-gather", "all-gather-start", "all-reduce", "all-reduce-start",
                          "reduce-scatter", "all-to-all", "ragged-all-to-all",
                          "collective-broadcast"})
_DCE_SIDE_EFFECT_ATTR = "xla_allow_dce_side_effecting_op"


@dataclass(frozen=True)
class HloDCE(Pass):
    """Remove dead instructions, unused multi-output fusion outputs and uncalled computations."""

    name = "dce"
    remove_cross_partition_collective_ops: bool = False
    use_call_analysis: bool = False
    remove_dead_parameters_from_entry_computation: bool = False

    def run(self, module: Module) -> bool:
        if module.entry is None:
            return False
        call_graph = CallGraph(module) if self.use_call_analysis else None
        fusions = fusion_lookup(module)
        effects = SideEffects()
        changed = False
        to_remove = {c: None for c in module.computations if c is not module.entry}
        agenda = [module.entry]
        while agenda:
            comp = agenda.pop()
            changed |= self._run_on_computation(comp, call_graph, fusions, effects)
            for instr in list(comp._instructions):
                if instr.attrs and calls_something(instr):
                    for callee in instr.called_computations():
                        if callee in to_remove:
                            del to_remove[callee]
                            agenda.append(callee)
        if self.use_call_analysis:
            graph = CallGraph(module)
            for comp in module.computations:
                if not comp.is_entry and not graph(comp):
                    to_remove[comp] = None
        for comp in list(module.computations):
            if comp in to_remove:
                module.remove_computation(comp)
                changed = True
        return changed

    # -- one computation --------------------------------------------------------------
    def _run_on_computation(self, comp: Computation, call_graph: CallGraph | None,
                            fusions, effects: SideEffects) -> bool:
        object.__setattr__(self, "_fusions", fusions)  # per-run state (frozen dataclass)
        changed = self._remove_multi_output_fusion_unused_outputs(comp, fusions, effects)
        changed |= self._remove_dead_roots(comp, call_graph, effects)
        changed |= self._remove_dead_parameters(comp, call_graph, effects)
        return changed

    def _can_remove(self, instr: Instruction, call_graph: CallGraph | None,
                    effects: SideEffects) -> bool:
        if not is_dead(instr) or not is_safely_removable(instr, False, call_graph, False,
                                                         self._fusions):
            return False
        if instr.opcode == "parameter":
            return False
        if instr.opcode == "custom-call" and instr.custom_call_target == "Sharding":
            op = instr.operands[0]
            if op.is_root() or op.opcode == "parameter" or op.user_count != 1:
                return False
        if effects.instruction(instr):
            allow_collective = (self.remove_cross_partition_collective_ops
                                and instr.opcode in _COLLECTIVES
                                and instr.attrs.get("constrain_layout") != "true")
            allow_while = self._is_removable_while(instr, effects)
            allow_custom_call = False
            if instr.opcode == "custom-call" and instr.custom_call_target == "tpu_custom_call":
                fa = instr.attrs.get("frontend_attributes")
                allow_custom_call = bool(fa) and parse_frontend_attributes(fa).get(
                    _DCE_SIDE_EFFECT_ATTR) == "true"
            if not (allow_collective or allow_while or allow_custom_call):
                return False
        return True

    def _is_removable_while(self, instr: Instruction, effects: SideEffects) -> bool:
        if instr.opcode != "while":
            return False
        for callee in instr.called_computations():
            for i in callee._instructions:
                if effects.instruction(i) and (
                        not self.remove_cross_partition_collective_ops
                        or i.opcode not in _COLLECTIVES
                        or i.attrs.get("constrain_layout") == "true"):
                    return False
        return True

    def _remove_dead_roots(self, comp: Computation, call_graph: CallGraph | None,
                           effects: SideEffects) -> bool:
        root = comp.root
        # (_can_remove starts with is_dead: test that inline first)
        dead = [i for i in comp._instructions if not i._users and i is not root
                and self._can_remove(i, call_graph, effects)]
        changed = False
        for instr in dead:
            if instr.parent is not comp:
                continue
            remove_instruction_and_unused_operands(comp, instr, False, call_graph, effects,
                                                   fusions=self._fusions)
            self.remark(instr, "removed dead instruction", opcode=instr.opcode)
            changed = True
        return changed

    def _remove_dead_parameters(self, comp: Computation, call_graph: CallGraph | None,
                                effects: SideEffects) -> bool:
        from_entry = self.remove_dead_parameters_from_entry_computation
        update_layout = comp.is_entry and from_entry
        module = comp.module
        layout = module.entry_computation_layout() if update_layout and module else None
        dead_numbers: list[int] = []
        changed = False
        for param in reversed([p for p in comp.parameters if p is not None]):
            if param.parent is not comp or not is_dead(param):
                continue
            if not is_safely_removable(param, False, call_graph, from_entry, self._fusions):
                continue
            before = comp.num_parameters
            number = param.parameter_number
            remove_instruction_and_unused_operands(comp, param, False, call_graph, effects,
                                                   remove_dead_param_from_entry=from_entry,
                                                   fusions=self._fusions)
            if comp.num_parameters < before:
                changed = True
                self.remark(param, "removed dead parameter", parameter_number=number)
                if update_layout and number is not None:
                    dead_numbers.append(number)
        if layout is not None and dead_numbers and module is not None:
            params, result = layout
            keep = [p for i, p in enumerate(params) if i not in dead_numbers]
            module.set_entry_computation_layout(keep, result)
        return changed

    def _remove_multi_output_fusion_unused_outputs(self, comp: Computation, fusions,
                                                   effects: SideEffects) -> bool:
        fusion = fusions(comp)
        if fusion is None:
            return False
        root = comp.root
        if root is None or root.opcode != "tuple" or "sharding" in root.attrs \
                or "output_to_operand_aliasing" in fusion.attrs \
                or fusion.control_predecessors or fusion.control_successors \
                or fusion.attrs.get("kind") == "kCustom" or fusion.is_root():
            return False
        users = fusion.users
        if not users or any(u.opcode != "get-tuple-element" for u in users):
            return False
        used = {u.tuple_index for u in users}
        for i, op in enumerate(root.operands):
            if i not in used and effects.instruction(op):
                used.add(i)
        if len(used) == len(root.operands):
            return False
        order = sorted(used)
        shapes = [fusion.shape.tuple_shapes[i] for i in order]
        fusion.shape = shapes[0] if len(shapes) == 1 else Shape.tuple(shapes)
        if len(shapes) > 1:
            rank = {old: new for new, old in enumerate(order)}
            for gte in users:
                gte.attrs["index"] = str(rank[gte.tuple_index])
        else:
            for gte in users:
                if gte.parent is not None:
                    replace_instruction(gte.parent, gte, fusion, preserve_sharding=True,
                                        relay_control_dependency=True, side_effects=effects)
        if len(shapes) > 1:
            new_root = Instruction("tuple", fusion.shape, [root.operands[i] for i in order])
            comp.add_instruction(new_root, "tuple")
            replace_instruction(comp, root, new_root, check_shape=False, side_effects=effects)
        else:
            root.replace_all_uses_with(root.operands[order[0]])
        self.remark(fusion, f"removed {len(root.operands) - len(order)} unused fusion outputs",
                    kept=order)
        return True
