"""Module fingerprints for ``--check-changed``.

``fingerprint(module)`` hashes everything the full printer shows: per
computation (in module order) its name, root, execution thread and
instructions; per instruction the name, opcode, shape, operands,
attributes, literal text, parameter number and control predecessors; plus
the module header (name, schedule flag, header attributes, aliasing).  Two
modules that print differently get different fingerprints (up to hash
collisions); renames and metadata edits count as changes, as they do for
XLA's ``changed`` contract.  Operands, control predecessors and called
computations count by identity (a pass that swaps in an equal copy has
changed the module), so fingerprints compare states of one module object.

The work is column-wise over all instructions at once (``map`` with
``attrgetter`` runs in C), about 5x cheaper than printing the module, so
the pipeline can afford it around every pass of a 50k-instruction module.
"""

from __future__ import annotations

from itertools import chain, compress
from operator import attrgetter

from ..ir.module import Computation, Module

_NAME = attrgetter("name")
_OPCODE = attrgetter("opcode")
_PARAM = attrgetter("parameter_number")
_SHAPE = attrgetter("shape")
_OPERANDS = attrgetter("operands")
_ATTRS = attrgetter("attrs")
_CONTROL = attrgetter("control_predecessors")
_INSTRS = attrgetter("_instructions")


def _freeze(v):
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    return v


def _hashable_items(items: tuple) -> tuple:
    try:
        hash(items)
        return items
    except TypeError:  # a list of called computations
        return tuple((key, _freeze(val)) for key, val in items)


def _attr_column(instrs: list) -> tuple:
    items = tuple(map(tuple, map(dict.items, map(_ATTRS, instrs))))
    try:
        hash(items)
        return items
    except TypeError:
        return tuple(map(_hashable_items, items))


def fingerprint(module: Module) -> int:
    comps = module.computations
    instrs = list(chain.from_iterable(map(_INSTRS, comps)))
    attrs = _attr_column(instrs)
    header = (module.name, module.is_scheduled, tuple(module.header_attrs.items()),
              tuple(module.input_output_alias), tuple(module.buffer_donor))
    layout = tuple((c.name, len(c._instructions), c.root.name if c.root is not None else None,
                    c.execution_thread, c.is_entry) for c in comps)
    return hash((header, layout, attrs, tuple(map(_NAME, instrs)), tuple(map(_OPCODE, instrs)),
                 tuple(map(_PARAM, instrs)), tuple(map(str, map(_SHAPE, instrs))),
                 tuple(map(tuple, map(_OPERANDS, instrs))),
                 tuple([i.literal.text for i in instrs if i.literal is not None]),
                 _control_column(instrs)))


def _control_column(instrs: list) -> tuple:
    """Control predecessors: the count per instruction, and the lists that
    are not empty (rare), in order."""
    lists = list(map(_CONTROL, instrs))
    return tuple(map(len, lists)), tuple(map(tuple, compress(lists, lists)))


def computation_fingerprint(comp: Computation) -> int:
    """The fingerprint of one computation: everything its printed text
    depends on (name, ENTRY, execution thread, root, and the instruction
    columns of :func:`fingerprint`)."""
    instrs = list(comp._instructions)
    return hash((comp.name, comp.is_entry, comp.execution_thread,
                 comp.root.name if comp.root is not None else None,
                 _attr_column(instrs), tuple(map(_NAME, instrs)), tuple(map(_OPCODE, instrs)),
                 tuple(map(_PARAM, instrs)), tuple(map(str, map(_SHAPE, instrs))),
                 tuple(map(tuple, map(_OPERANDS, instrs))),
                 tuple([i.literal.text for i in instrs if i.literal is not None]),
                 _control_column(instrs)))
