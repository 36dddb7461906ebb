"""Embed one module's entry computation inside another's (test and
benchmark inputs: a known bug hidden in a large realistic module).

``embed(host, guest)``: the guest's computations are copied in (renamed
where they clash), the guest entry's instructions are added to the host
entry with the guest's parameters appended as new host parameters, and
the guest's result becomes one more output of the host's root tuple.  The
host's entry layout is extended with the guest's parameter and result
layouts."""

from __future__ import annotations

from ..ir.clone import clone_module
from ..ir.module import Instruction, Module
from ..ir.shape import Shape


def embed(host: Module, guest: Module, where: str = "end") -> Module:
    """A new module: ``host`` with ``guest`` inside (inputs are not changed).
    ``where``: "end" appends the guest's output to the root tuple, "start"
    puts it first."""
    host = clone_module(host)
    guest = clone_module(guest)
    entry = host.entry
    gentry = guest.entry
    assert entry is not None and gentry is not None
    old_ecl = host.entry_computation_layout()
    g_ecl = guest.entry_computation_layout()
    for comp in guest.computations:
        if comp is gentry:
            continue
        if host.get_computation(comp.name) is not None or comp.name in host._all_names():
            comp.name = host.unique_name(comp.name)
        host.reserve_name(comp.name)
        comp.module = None
        host.add_computation(comp)
    mapping: dict[Instruction, Instruction] = {}
    n0 = entry.num_parameters
    for old in gentry.post_order():
        new = Instruction(old.opcode, old.shape, [mapping[o] for o in old.operands], "",
                          dict(old.attrs))
        new.literal = old.literal
        if old.opcode == "parameter":
            new.parameter_number = n0 + (old.parameter_number or 0)
        entry.add_instruction(new, old.name)
        mapping[old] = new
    root = entry.root
    out = mapping[gentry.root]  # type: ignore[index]
    outs = list(root.operands) if root.opcode == "tuple" else [root]
    outs = outs + [out] if where == "end" else [out] + outs
    tup = Instruction("tuple", Shape.tuple(o.shape for o in outs), outs, "")
    entry.add_instruction(tup, "tuple")
    entry.root = tup
    if root.opcode == "tuple" and not root._users:
        entry.remove_instruction(root)
    if where != "end":
        host.input_output_alias = [((o[0] + 1,) + tuple(o[1:]) if o else o, n, pi, k)
                                   for o, n, pi, k in host.input_output_alias]
    if old_ecl is not None:
        params, result = old_ecl
        gparams = g_ecl[0] if g_ecl is not None else [p.shape for p in gentry.parameters]
        gresult = g_ecl[1] if g_ecl is not None else gentry.root.shape  # type: ignore[union-attr]
        results = list(result.tuple_shapes) if root.opcode == "tuple" and result.is_tuple else [result]
        results = results + [gresult] if where == "end" else [gresult] + results
        host.set_entry_computation_layout(list(params) + list(gparams), Shape.tuple(results))
    return host


__all__ = ["embed"]
