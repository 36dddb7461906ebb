"""Instruction and computation *rows* (:mod:`hlorun.ir.changes`): what the
printer and the verifier read from one instruction, read afresh, and the
full re-read that ``ModuleTracker(verify=True)`` compares each scan with."""

from __future__ import annotations

from itertools import chain, repeat
from operator import attrgetter
from typing import Iterable

from .module import Computation, Instruction, Module

INSTRS = attrgetter("_instructions")
FIELDS = tuple(map(attrgetter, ("name", "opcode", "shape", "parameter_number", "literal",
                                 "parent")))
_ATTRS = attrgetter("attrs")
_OPERANDS = attrgetter("operands")
_USERS = attrgetter("_users")
_CPRED = attrgetter("control_predecessors")
COMP = attrgetter("name", "is_entry", "execution_thread", "root", "module")
PARAMS = attrgetter("parameters")

#: Row layout (indices into an instruction's row, one flat tuple): its own
#: fields, the computation holding it, a copy of attrs, operands, users,
#: control predecessors.  (:func:`hlorun.ir.module.pre_image` is a row
#: without the computation.)
(ROW_NAME, ROW_OPCODE, ROW_SHAPE, ROW_PARAMETER_NUMBER, ROW_LITERAL, ROW_PARENT,
 ROW_CONTAINER, ROW_ATTRS, ROW_OPERANDS, ROW_USERS, ROW_CPRED) = range(11)


def same_constant(old: tuple | None, new: tuple) -> bool:
    """Rows that differ only in a literal object with the same text and
    shape (a pass that rebuilt a constant's literal changed nothing)."""
    if old is None:
        return False
    a, b = old[ROW_LITERAL], new[ROW_LITERAL]
    if a is b or a is None or b is None or a.text != b.text or a.shape != b.shape:
        return False
    return old[:ROW_LITERAL] == new[:ROW_LITERAL] and old[ROW_PARENT:] == new[ROW_PARENT:]


def rows_of(instrs: list[Instruction], containers: Iterable[Computation]) -> list:
    """The rows of ``instrs`` (in ``containers``), read afresh (column-wise:
    ``map`` with ``attrgetter`` runs in C)."""
    return list(zip(*[map(f, instrs) for f in FIELDS], containers,
                    map(dict.copy, map(_ATTRS, instrs)), map(tuple, map(_OPERANDS, instrs)),
                    map(tuple, map(_USERS, instrs)), map(tuple, map(_CPRED, instrs))))


def full_rows(module: Module) -> dict[Instruction, tuple]:
    """Every instruction's row."""
    comps = module.computations
    seqs = list(map(tuple, map(INSTRS, comps)))
    instrs = list(chain.from_iterable(seqs))
    return dict(zip(instrs, rows_of(instrs, chain.from_iterable(
        map(repeat, comps, map(len, seqs))))))


def verify_scan(module: Module, rows: dict, prev: dict | None, ch,
                where: dict, comp_rows: dict) -> None:
    """Raise unless a scan's changes ``ch`` are those of a full re-read:
    the rows now (``rows``) against the rows of the previous scan
    (``prev``), and the tracker's view of the module (``where``: the
    computation of each instruction, ``comp_rows``)."""
    missed: list[Instruction] = []
    extra: list[Instruction] = []
    if prev is not None and not ch.full:
        get = prev.get
        ref = {i for i, r in rows.items() if get(i) != r and not same_constant(get(i), r)}
        missed = [i for i in rows if (i in ref) != (i in ch.instructions)
                  or (i in ch.old_rows and ch.old_rows[i] != get(i))]
        gone = prev.keys() - rows.keys()
        extra = [i for i in prev if (i in gone) != (i in ch.removed)
                 or (i in gone and ch.old_rows.get(i) != prev[i])]
    missed += [i for i, r in rows.items() if where.get(i) is not r[ROW_CONTAINER]]
    extra += [i for i in where if i not in rows]
    comps = module.computations
    crows = list(zip(map(COMP, comps), map(tuple, map(PARAMS, comps)),
                     map(tuple, map(INSTRS, comps))))
    bad_comps = [c.name for c, r in zip(comps, crows) if comp_rows.get(c) != r]
    if missed or extra or bad_comps:
        names = ", ".join(f"{i.name} ({i.parent.name if i.parent else None})"
                          for i in missed[:10])
        raise AssertionError(
            f"change journal missed {len(missed)} changed instructions [{names}], "
            f"{len(extra)} removed ones, computations {bad_comps[:10]}")


__all__ = ["ROW_ATTRS", "ROW_CONTAINER", "ROW_CPRED", "ROW_LITERAL", "ROW_NAME", "ROW_OPCODE",
           "ROW_OPERANDS", "ROW_PARAMETER_NUMBER", "ROW_PARENT", "ROW_SHAPE", "ROW_USERS",
           "full_rows", "rows_of", "same_constant", "verify_scan"]
