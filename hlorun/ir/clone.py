"""Deep copies of modules (``clone_module``), much cheaper than print+parse.

Shapes, layouts and literals are immutable values and are shared; every
Instruction and Computation is new, with operands, users, control edges,
called-computation references and parameters remapped.  Names, order,
header attributes and the source text (for diagnostics) are kept, so
``print_module(clone_module(m)) == print_module(m)``.
"""

from __future__ import annotations

import copy
import gc

from .module import Computation, Instruction, Module, add_user


def clone_module(module: Module) -> Module:
    was = gc.isenabled()
    gc.disable()  # many small objects, no cycles to collect (see DESIGN: speed notes)
    try:
        return _clone(module)
    finally:
        if was:
            gc.enable()


def _clone(module: Module) -> Module:
    new = Module(module.name)
    new.is_scheduled = module.is_scheduled
    new.header_attrs = dict(module.header_attrs)
    new.input_output_alias = list(module.input_output_alias)
    new.buffer_donor = list(module.buffer_donor)
    new.stack_frames = copy.deepcopy(module.stack_frames) if module.stack_frames else module.stack_frames
    new.filename = module.filename
    new.source = module.source
    new.compact_gte = module.compact_gte
    cmap: dict[Computation, Computation] = {}
    for comp in module.computations:
        c = Computation(comp.name)
        c.execution_thread = comp.execution_thread
        c.pos = comp.pos
        cmap[comp] = c
    imap: dict[Instruction, Instruction] = {}
    for comp in module.computations:
        c = cmap[comp]
        c.module = new
        instrs = c._instructions
        for old in comp._instructions:
            attrs = old.attrs
            if attrs:
                attrs = dict(attrs)
                for k, v in attrs.items():
                    if isinstance(v, Computation):
                        attrs[k] = cmap.get(v, v)
                    elif isinstance(v, list) and v and isinstance(v[0], Computation):
                        attrs[k] = [cmap.get(x, x) for x in v]
            else:
                attrs = {}
            ni = Instruction(old.opcode, old.shape, (), old.name, attrs)
            ni.parameter_number = old.parameter_number
            ni.literal = old.literal
            ni.pos = old.pos
            ni.parent = c
            imap[old] = ni
            instrs[ni] = None
        c.parameters = [imap[p] if p is not None else None for p in comp.parameters]
        c.root = imap.get(comp.root) if comp.root is not None else None
        c.is_entry = comp.is_entry
    for old, ni in imap.items():
        if old.operands:
            ops = [imap[o] for o in old.operands]
            ni.operands = ops
            for o in ops:
                add_user(o, ni)
        if old.control_successors:
            ni.control_successors = [imap[s] for s in old.control_successors]
        if old.control_predecessors:
            ni.control_predecessors = [imap[p] for p in old.control_predecessors]
    new.computations = [cmap[c] for c in module.computations]
    if module.entry is not None:
        new.entry = cmap[module.entry]
    return new


__all__ = ["clone_module"]
