"""Strategies that cut the graph: drop root tuple outputs, replace
instructions by entry parameters or by zeros, forward an operand, inline
calls and fusions."""

from __future__ import annotations

from typing import Callable, Hashable, Sequence

from ...ir.module import Computation, Instruction, Module
from ...ir.shape import Shape, compatible
from ..edit import add_entry_parameter, entry_layout, index, zeros
from .base import Strategy, key

#: Opcodes never replaced: they are already leaves, or replacing them
#: would not make the module smaller.
_LEAVES = frozenset({"parameter", "constant", "iota", "after-all", "partition-id", "replica-id"})


def _is_scalar_zero_constant(i: Instruction) -> bool:
    return i.opcode == "constant" and not i.shape.dimensions and i.literal is not None \
        and i.literal.text in ("0", "false", "0.0", "-0")


def _is_zero(i: Instruction) -> bool:
    if _is_scalar_zero_constant(i):
        return True
    return i.opcode == "broadcast" and len(i.operands) == 1 and _is_scalar_zero_constant(i.operands[0])


class DropOutputs(Strategy):
    name = "outputs"
    description = "drop outputs of the entry's root tuple (and unwrap a 1-tuple)"

    def units(self, module: Module) -> list[Hashable]:
        root = module.entry.root if module.entry else None
        if root is None or root.opcode != "tuple":
            return []
        if len(root.operands) == 1:
            return ["untuple"]
        return list(range(len(root.operands)))

    def apply(self, module: Module, units: Sequence[Hashable]) -> bool:
        entry = module.entry
        root = entry.root
        old_layout = entry_layout(module)
        if units == ["untuple"]:
            entry.root = root.operands[0]
            module.input_output_alias = [((), n, pi, k) for o, n, pi, k in module.input_output_alias
                                         if o[:1] == (0,) and len(o) == 1]
            if old_layout is not None and old_layout[1].is_tuple:
                module.set_entry_computation_layout(old_layout[0], old_layout[1].tuple_shapes[0])
            return True
        drop = set(units)
        keep = [i for i in range(len(root.operands)) if i not in drop]
        if not keep or len(keep) == len(root.operands):
            return False
        new = Instruction("tuple", Shape.tuple(root.operands[i].shape for i in keep),
                          [root.operands[i] for i in keep], root.name, {})
        root.name = root.name + ".old"
        entry.add_instruction(new)
        entry.root = new
        pos = {old: k for k, old in enumerate(keep)}
        module.input_output_alias = [((pos[o[0]],) + tuple(o[1:]), n, pi, k)
                                     for o, n, pi, k in module.input_output_alias
                                     if o and o[0] in pos]
        if old_layout is not None and old_layout[1].is_tuple \
                and len(old_layout[1].tuple_shapes) == len(root.operands):
            module.set_entry_computation_layout(
                old_layout[0], Shape.tuple(old_layout[1].tuple_shapes[i] for i in keep))
        return True


def _replaceable(i: Instruction) -> bool:
    s = i.shape
    return i.opcode not in _LEAVES and not s.is_token and not _has_token(s)


def _has_token(s: Shape) -> bool:
    if s.is_tuple:
        return any(_has_token(x) for x in s.tuple_shapes)
    return s.is_token


def _free_name(i: Instruction) -> str:
    """Give ``i`` a throwaway name and return its old one (for the
    replacement, so conditions and readers keep their bearings)."""
    old = i.name
    comp = i.parent
    if comp is not None and comp._names is not None:
        comp._names.pop(old, None)
    i.name = old + ".replaced"
    if comp is not None and comp.module is not None:
        comp.module.reserve_name(i.name)
    return old


def _substitute(old: Instruction, new: Instruction) -> None:
    comp = old.parent
    old.replace_all_uses_with(new)
    if comp is not None and comp.root is old:
        comp.root = new
    old.drop_all_control_deps()


def _replace_each(module: Module, units: Sequence[Hashable],
                  make: Callable[[Instruction], Instruction | None]) -> bool:
    """Replace every live unit (users before operands) by ``make(i)``; a
    unit ``make`` declines (None) is kept."""
    idx = index(module)
    done = False
    for k in reversed(list(units)):
        i = idx.get(k)  # type: ignore[arg-type]
        if i is None or i.parent is None or (not i._users and not i.is_root()):
            continue
        new = make(i)
        if new is None:
            continue
        _substitute(i, new)
        done = True
    return done


class DropDead(Strategy):
    name = "dead"
    description = "remove unused instructions that dead-code elimination keeps (side effects: collectives with channels, outfeeds, loops around them)"

    def units(self, module: Module) -> list[Hashable]:
        out: list[Hashable] = []
        for comp in module.computation_post_order():
            out.extend(key(i) for i in comp.post_order()
                       if not i._users and not i.is_root() and i.opcode != "parameter")
        return out

    def apply(self, module: Module, units: Sequence[Hashable]) -> bool:
        idx = index(module)
        done = False
        for k in units:
            i = idx.get(k)  # type: ignore[arg-type]
            if i is None or i.parent is None or i._users or i.is_root():
                continue
            for s in list(i.control_successors):
                i.control_successors.remove(s)
                s.control_predecessors.remove(i)
            i.parent.remove_instruction(i)
            done = True
        return done


class ReplaceWithParameters(Strategy):
    name = "parameters"
    description = "replace entry instructions by new entry parameters of the same shape"

    def units(self, module: Module) -> list[Hashable]:
        entry = module.entry
        return [key(i) for i in entry.post_order() if _replaceable(i)]

    def apply(self, module: Module, units: Sequence[Hashable]) -> bool:
        return _replace_each(module, units,
                             lambda i: add_entry_parameter(module, i.shape, _free_name(i)))


class ReplaceWithZeros(Strategy):
    name = "zeros"
    description = "replace instructions (and big constants) by zeros: constant(0) or its broadcast"

    def units(self, module: Module) -> list[Hashable]:
        out: list[Hashable] = []
        for comp in module.computation_post_order():
            for i in comp.post_order():
                s = i.shape
                if not s.is_array or i.opcode == "parameter" or _is_zero(i):
                    continue
                if i.opcode == "constant" and not s.dimensions:
                    continue
                out.append(key(i))
        return out

    def apply(self, module: Module, units: Sequence[Hashable]) -> bool:
        return _replace_each(module, units, lambda i: zeros(i.parent, i.shape, _free_name(i)))


def _forwardable(i: Instruction) -> Instruction | None:
    if i.opcode == "parameter" or not i.operands:
        return None
    for op in i.operands:
        if compatible(op.shape, i.shape) and not _has_token(op.shape):
            return op
    return None


class ForwardOperand(Strategy):
    name = "forward"
    description = "replace an instruction by one of its operands of the same shape"

    def units(self, module: Module) -> list[Hashable]:
        out: list[Hashable] = []
        for comp in module.computation_post_order():
            out.extend(key(i) for i in comp.post_order() if _forwardable(i) is not None)
        return out

    def apply(self, module: Module, units: Sequence[Hashable]) -> bool:
        return _replace_each(module, units, _forwardable)


class ReRoot(Strategy):
    """Make an inner instruction the entry's result: everything that only
    fed the old root goes.  One unit per candidate (a chunk of several is
    not a candidate), so it is only offered on small entries."""

    name = "reroot"
    description = "make an inner instruction the entry's root (what only fed the old root goes)"
    #: Entries larger than this offer no units (other strategies go first).
    max_entry = 400

    def units(self, module: Module) -> list[Hashable]:
        entry = module.entry
        if entry is None or len(entry) > self.max_entry:
            return []
        order = entry.post_order()
        return [key(i) for i in reversed(order) if i is not entry.root
                and i.opcode != "parameter" and not _has_token(i.shape)]

    def apply(self, module: Module, units: Sequence[Hashable]) -> bool:
        if len(units) != 1:
            return False
        i = index(module).get(units[0])  # type: ignore[arg-type]
        if i is None:
            return False
        entry = module.entry
        old = entry_layout(module)
        entry.root = i
        module.input_output_alias = []
        if old is not None:
            module.set_entry_computation_layout(old[0], i.shape)
        return True


class InlineCalls(Strategy):
    name = "inline"
    description = "inline calls and fusions into their caller"
    preserves_semantics = True

    def units(self, module: Module) -> list[Hashable]:
        out: list[Hashable] = []
        for comp in module.computation_post_order():
            for i in comp.post_order():
                callee = i.to_apply if i.opcode == "call" else (
                    i.fused_computation if i.opcode == "fusion" else None)
                if callee is not None and callee.root is not None and callee is not comp:
                    out.append(key(i))
        return out

    def apply(self, module: Module, units: Sequence[Hashable]) -> bool:
        idx = index(module)
        done = False
        for k in units:
            i = idx.get(k)  # type: ignore[arg-type]
            if i is None or i.parent is None:
                continue
            callee = i.to_apply if i.opcode == "call" else i.fused_computation
            if callee is None or callee.num_parameters != len(i.operands):
                continue
            inline_call(i, callee)
            done = True
        return done


def inline_call(call: Instruction, callee: Computation) -> Instruction:
    """Copy ``callee``'s instructions into the caller, parameters replaced by
    the call's operands; the call's users then use the copied root."""
    comp = call.parent
    assert comp is not None and comp.module is not None
    mapping: dict[Instruction, Instruction] = {}
    for n, p in enumerate(callee.parameters):
        if p is not None:
            mapping[p] = call.operands[n]
    for old in callee.post_order():
        if old in mapping:
            continue
        new = Instruction(old.opcode, old.shape, [mapping[o] for o in old.operands], "",
                          dict(old.attrs))
        new.literal = old.literal
        comp.add_instruction(new, old.name)
        mapping[old] = new
    for old, new in mapping.items():
        for s in old.control_successors:
            if s in mapping and old.opcode != "parameter":
                new.add_control_dependency_to(mapping[s])
    root = mapping[callee.root]  # type: ignore[index]
    _substitute(call, root)
    return root


__all__ = ["DropDead", "DropOutputs", "ForwardOperand", "InlineCalls", "ReRoot", "ReplaceWithParameters",
           "ReplaceWithZeros", "inline_call"]
