"""XLA's graph-editing primitives with XLA's exact semantics.

``Computation.replace_instruction`` / ``remove_instruction`` are the raw
use-def edits.  XLA's passes call richer helpers that also clean up what a
rewrite leaves dead, copy metadata and keep names; their results (and so the
dumps and diffs) depend on those details.  This module mirrors them:

* :func:`has_side_effect` (``HloInstruction::HasSideEffect``),
* :func:`is_dead`, :func:`is_safely_removable`
  (``HloComputation::IsSafelyRemovable``),
* :func:`remove_instruction_and_unused_operands`
  (``HloComputation::RemoveInstructionAndUnusedOperands``),
* :func:`replace_instruction` (``HloComputation::ReplaceInstruction``:
  metadata and sharding carried over, the old name kept when the opcode is the
  same, dead operands removed),
* :class:`CallGraph` (callers of each computation).
"""

from __future__ import annotations

from collections import deque
from typing import Callable, Iterable

from .module import Computation, Instruction, Module, calls_something
from .shape import compatible

_ALWAYS_SIDE_EFFECTING = frozenset({
    "send", "send-done", "recv", "recv-done", "rng", "rng-get-and-update-state",
    "infeed", "outfeed", "all-reduce-start", "all-reduce-done", "all-gather-start",
    "all-gather-done", "collective-broadcast", "collective-permute-start",
    "collective-permute-done",
})
_LAYOUT_CONSTRAINED_COLLECTIVES = frozenset({"all-to-all", "all-gather", "all-reduce",
                                             "reduce-scatter"})


def has_side_effect_no_recurse(instr: Instruction) -> bool:
    """``HloInstruction::HasSideEffectNoRecurse`` (for a module whose config
    is channel-id sensitive, i.e. not SPMD-partitioned, XLA's default)."""
    op = instr.opcode
    if op in _ALWAYS_SIDE_EFFECTING:
        return True
    if op in _LAYOUT_CONSTRAINED_COLLECTIVES or op == "collective-permute":
        if op != "collective-permute" and instr.attrs.get("constrain_layout") == "true":
            return True
        return "channel_id" in instr.attrs
    if op == "custom-call":
        return instr.attrs.get("custom_call_has_side_effect") == "true"
    return False


class SideEffects:
    """Memoised ``HasSideEffect`` over a module (computations are checked
    once).  Create one per pass run: it does not see later edits."""

    def __init__(self) -> None:
        self._comp: dict[Computation, bool] = {}

    def instruction(self, instr: Instruction) -> bool:
        if has_side_effect_no_recurse(instr):
            return True
        if instr.attrs and calls_something(instr):
            for c in instr.called_computations():
                if self.computation(c):
                    return True
        return False

    def computation(self, comp: Computation) -> bool:
        got = self._comp.get(comp)
        if got is None:
            self._comp[comp] = False  # breaks (invalid) call cycles
            got = any(self.instruction(i) for i in comp._instructions)
            self._comp[comp] = got
        return got


def has_side_effect(instr: Instruction) -> bool:
    """``HloInstruction::HasSideEffect``: the instruction or any computation
    it calls (transitively) has a side effect."""
    return SideEffects().instruction(instr)


def is_dead(instr: Instruction) -> bool:
    """``IsDead``: no users and not the root of its computation."""
    return not instr._users and not instr.is_root()


def has_control_dependencies(instr: Instruction) -> bool:
    return bool(instr.control_predecessors or instr.control_successors)


class CallGraph:
    """Callers of every computation (``CallGraph::GetComputationCallers``)."""

    def __init__(self, module: Module):
        self.callers: dict[Computation, list[Instruction]] = {}
        for comp in module.computations:
            for instr in comp._instructions:
                if instr.attrs and calls_something(instr):
                    for callee in instr.called_computations():
                        self.callers.setdefault(callee, []).append(instr)

    def __call__(self, comp: Computation) -> list[Instruction]:
        return self.callers.get(comp, [])


def _fusion_lookup(graph: CallGraph) -> Fusions:
    def lookup(comp: Computation) -> Instruction | None:
        for caller in graph(comp):
            if caller.opcode == "fusion" and caller.parent is not None \
                    and caller.fused_computation is comp:
                return caller
        return None
    return lookup


def fusion_lookup(module: Module) -> Fusions:
    """A FusionInstruction() lookup for every computation of ``module``
    (built once; instructions removed later are skipped)."""
    return _fusion_lookup(CallGraph(module))


def fusion_instruction(comp: Computation, call_graph: CallGraph | None = None) -> Instruction | None:
    """The fusion instruction calling ``comp`` (``FusionInstruction()``), or None."""
    if call_graph is None and comp.module is not None:
        call_graph = CallGraph(comp.module)
    for caller in (call_graph(comp) if call_graph else ()):
        if caller.opcode == "fusion" and caller.fused_computation is comp:
            return caller
    return None


Fusions = Callable[[Computation], "Instruction | None"]


def is_safely_removable(instr: Instruction, ignore_control_dependency: bool = False,
                        callers: Callable[[Computation], list[Instruction]] | None = None,
                        remove_dead_param_from_entry: bool = False,
                        fusions: Fusions | None = None) -> bool:
    """``HloComputation::IsSafelyRemovable``.  ``fusions`` maps a
    computation to the fusion instruction calling it (XLA's back pointer);
    without it one is looked up when needed (a module scan)."""
    if not ignore_control_dependency and has_control_dependencies(instr):
        return False
    if instr.opcode == "parameter":
        comp = instr.parent
        if comp is None:
            return True
        if comp.is_entry and not remove_dead_param_from_entry:
            return False
        fusion = fusions(comp) if fusions is not None else fusion_instruction(comp)
        if fusion is not None:
            return True
        if callers is None:
            return False
        calling = callers(comp)
        if not calling and not comp.is_entry:
            return False
        for c in calling:
            if c.opcode not in ("fusion", "call", "async-start"):
                return False
    return True


def remove_instruction_and_unused_operands(
        comp: Computation, instr: Instruction, ignore_control_dependencies: bool = False,
        callers: Callable[[Computation], list[Instruction]] | None = None,
        side_effects: SideEffects | None = None,
        on_remove: Callable[[Instruction], None] | None = None,
        remove_dead_param_from_entry: bool = False, fusions: Fusions | None = None) -> None:
    """Remove the dead ``instr`` and every operand (transitively) that
    becomes dead and is safely removable and free of side effects.

    Parameters are only removed when ``callers`` can fix up the callers (as
    in XLA, where the call graph is optional)."""
    if instr is comp.root:
        raise ValueError(f"cannot remove the root {instr.name}")
    if instr._users:
        raise ValueError(f"cannot remove {instr.name}: it still has users")
    effects = side_effects or SideEffects()
    if instr.opcode == "after-all":
        for op in instr.operands:
            src = op.operands[0] if op.opcode == "get-tuple-element" else op
            if effects.instruction(src):
                return
    if fusions is None and comp.module is not None:
        graph = CallGraph(comp.module) if instr.opcode == "parameter" else None
        fusions = _fusion_lookup(graph) if graph is not None else None
    if not is_safely_removable(instr, ignore_control_dependencies, callers,
                               remove_dead_param_from_entry, fusions):
        raise ValueError(f"cannot remove instruction {instr.name}")
    removed: set[Instruction] = set()
    params: list[Instruction] = []
    work: deque[Instruction] = deque([instr])
    while work:
        item = work.popleft()
        if item in removed or item._users or item is comp.root \
                or not is_safely_removable(item, ignore_control_dependencies, callers,
                                           remove_dead_param_from_entry, fusions) \
                or (item is not instr and effects.instruction(item)):
            continue
        if ignore_control_dependencies:
            item.drop_all_control_deps()
        elif has_control_dependencies(item):
            continue
        work.extend(item.operands)
        if on_remove is not None:
            on_remove(item)
        if item.opcode == "parameter":
            params.append(item)
        else:
            comp.remove_instruction(item)
        removed.add(item)
    if not params:
        return
    params.sort(key=lambda p: -(p.parameter_number or 0))
    calling = list(callers(comp)) if callers is not None else []
    if not calling and comp.module is not None:
        fusion = fusions(comp) if fusions is not None else fusion_instruction(comp)
        if fusion is not None:
            calling = [fusion]
    if not calling and not comp.is_entry:
        return
    for param in params:
        n = param.parameter_number
        remove_parameter(comp, param)
        for caller in calling:
            if is_dead(caller) or caller.parent is None:
                continue
            operand = caller.operands[n]
            new_ops = caller.operands[:n] + caller.operands[n + 1:]
            caller.replace_operands(new_ops)
            if is_dead(operand) and operand.parent is not None and is_safely_removable(
                    operand, ignore_control_dependencies, callers, False, fusions):
                remove_instruction_and_unused_operands(
                    operand.parent, operand, ignore_control_dependencies, callers, effects, on_remove,
                    fusions=fusions)


def remove_parameter(comp: Computation, param: Instruction) -> None:
    """``HloComputation::RemoveParameter``: remove a dead parameter; each
    later parameter is replaced by a new one numbered one lower and named
    ``param_N`` (as XLA does), keeping its attributes."""
    n = param.parameter_number
    assert n is not None
    later = [p for p in comp.parameters[n + 1:] if p is not None]
    comp.remove_instruction(param)
    del comp.parameters[n:]
    for i, old in enumerate(later, start=n):
        new = Instruction("parameter", old.shape, (), "", dict(old.attrs))
        new.parameter_number = i
        comp.add_instruction(new, f"param_{i}")
        old.replace_all_uses_with(new)
        old.parameter_number = None  # so removing it leaves the new one in place
        comp.remove_instruction(old)


def _has_sharding(instr: Instruction) -> bool:
    return "sharding" in instr.attrs


def _op_name(instr: Instruction) -> str | None:
    text = instr.attrs.get("metadata")
    if not text or "op_name" not in text:
        return None
    return instr.metadata.get("op_name") or None


def replace_instruction(comp: Computation, old: Instruction, new: Instruction,
                        preserve_sharding: bool = False, relay_control_dependency: bool = False,
                        remove_unused_operands: bool = True, check_shape: bool = True,
                        side_effects: SideEffects | None = None) -> bool:
    """``HloComputation::ReplaceInstruction`` (and ``...WithDifferentShape``
    when ``check_shape`` is False).  ``new`` is added to ``comp`` when it has
    no parent.  Returns False when the replacement was skipped (incompatible
    sharding, or control dependencies that may not be relayed)."""
    if check_shape and not compatible(old.shape, new.shape):
        raise ValueError(f'"{old.name}" ({old.shape}) vs "{new.name}" ({new.shape})')
    if preserve_sharding and _has_sharding(new) and _has_sharding(old) \
            and new.attrs["sharding"] != old.attrs["sharding"]:
        return False
    if new.parent is None:
        comp.add_instruction(new, new.name or None)
    if relay_control_dependency:
        for p in list(old.control_predecessors):
            if p is not new:
                p.add_control_dependency_to(new)
        for s in list(old.control_successors):
            if s is not new:
                new.add_control_dependency_to(s)
        old.drop_all_control_deps()
    elif has_control_dependencies(old):
        return False
    old_meta = old.attrs.get("metadata")
    if old_meta is not None:
        if _op_name(new) is None and _op_name(old) is not None:
            new.attrs["metadata"] = old_meta
        elif "metadata" not in new.attrs:
            pass  # metadata payloads (profiles) are not modelled separately
    if "sharding" not in new.attrs and "sharding" in old.attrs:
        new.attrs["sharding"] = old.attrs["sharding"]
    old.replace_all_uses_with(new)
    if old.opcode == new.opcode and (old.opcode != "custom-call"
                                     or old.custom_call_target == new.custom_call_target):
        rename(new, old.name)
    if remove_unused_operands:
        remove_instruction_and_unused_operands(comp, old, relay_control_dependency,
                                               side_effects=side_effects)
    else:
        comp.remove_instruction(old)
    return True


def rename(instr: Instruction, name: str) -> None:
    """Give ``instr`` the name ``name`` (XLA's ``SetAndSanitizeName``; the
    name of a removed instruction may be reused)."""
    comp = instr.parent
    if instr.name == name:
        return
    if comp is not None and comp._names is not None:
        comp._names.pop(instr.name, None)
    instr.name = name
    if comp is not None:
        if comp._names is not None:
            comp._names[name] = instr
        if comp.module is not None:
            comp.module.reserve_name(name)


def remove_dead(comp: Computation, instrs: Iterable[Instruction]) -> bool:
    """Remove each dead, side-effect-free instruction of ``instrs`` and its
    dead operands; True if anything was removed."""
    effects = SideEffects()
    changed = False
    for i in list(instrs):
        if i.parent is comp and is_dead(i) and not effects.instruction(i) \
                and is_safely_removable(i):
            remove_instruction_and_unused_operands(comp, i, side_effects=effects)
            changed = True
    return changed


__all__ = ["CallGraph", "SideEffects", "fusion_instruction", "fusion_lookup", "has_control_dependencies",
           "has_side_effect", "has_side_effect_no_recurse", "is_dead", "is_safely_removable",
           "remove_dead", "remove_instruction_and_unused_operands", "remove_parameter",
           "rename", "replace_instruction"]
