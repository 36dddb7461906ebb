"""The incremental verifier's state between runs (:mod:`hlorun.verifier.
incremental`): findings per instruction and computation, the watch lists,
and the small rules for what a change makes stale."""

from __future__ import annotations

from functools import lru_cache
from itertools import chain, compress, repeat
from operator import attrgetter, is_
from typing import Iterable

from ..ir.changes import (ROW_ATTRS, ROW_CONTAINER, ROW_CPRED, ROW_LITERAL, ROW_NAME,
                          ROW_OPCODE, ROW_OPERANDS, ROW_PARAMETER_NUMBER, ROW_PARENT, ROW_SHAPE)
from ..ir.module import Computation, Instruction, Module
from ..ir.opcode import split_async_sugar
from .module import _UNREAD_ATTRS, Context, Finding, reads_users

_CHANNEL_OPS = frozenset({"send", "recv", "send-done", "recv-done"})
_ALL_REDUCE = frozenset({"all-reduce", "all-reduce-start"})
_GENERIC_ASYNC = frozenset({"async-start", "async-update", "async-done"})


@lru_cache(maxsize=None)
def _is_asyncish(op: str) -> bool:
    return op in _GENERIC_ASYNC or split_async_sugar(op) is not None


def _fields_changed(r: tuple, i: Instruction, container: Computation | None) -> bool:
    """Does ``i`` differ from its old row ``r`` in more than its links
    (operands, users, control predecessors)?"""
    return (r[ROW_OPCODE] != i.opcode or r[ROW_SHAPE] is not i.shape or r[ROW_NAME] != i.name
            or r[ROW_PARENT] is not i.parent or r[ROW_CONTAINER] is not container
            or r[ROW_PARAMETER_NUMBER] != i.parameter_number or r[ROW_LITERAL] is not i.literal
            or r[ROW_ATTRS] != i.attrs)


#: :func:`_light` verdicts
LIGHT, RENAMED = 1, 2


def _light(r: tuple, i: Instruction, container: Computation | None) -> int | None:
    """``LIGHT`` when ``i`` differs from its old row ``r`` only in its users
    or in attributes no rule reads (e.g. ``backend_config``), ``RENAMED``
    when also in its name, None otherwise.  No rule on ``i`` can have a
    new verdict then: the rules read an instruction's users only for
    opcodes that ``reads_users``, and its name only for uniqueness and in
    messages; its operands, control predecessors, other fields and called
    computations are as they were."""
    if (r[ROW_OPCODE] != i.opcode or r[ROW_SHAPE] is not i.shape
            or r[ROW_PARENT] is not i.parent or r[ROW_CONTAINER] is not container
            or r[ROW_PARAMETER_NUMBER] != i.parameter_number or r[ROW_LITERAL] is not i.literal
            or r[ROW_OPERANDS] != tuple(i.operands)
            or r[ROW_CPRED] != tuple(i.control_predecessors)):
        return None
    a0, a1 = r[ROW_ATTRS], i.attrs
    if a0 != a1:
        # the same read attributes, in the same order (called computations
        # are listed in attribute order)
        if [k for k in a0 if k not in _UNREAD_ATTRS] != [k for k in a1 if k not in _UNREAD_ATTRS]:
            return None
        for k, v in a1.items():
            if k not in _UNREAD_ATTRS and a0[k] != v:
                return None
    return RENAMED if r[ROW_NAME] != i.name else LIGHT


def _comp_info(c: Computation) -> tuple:
    return (c.name, c.is_entry, c.execution_thread, c.module, c.root)


class _State:
    """The findings of the last run, split so that parts can be redone."""

    def __init__(self, module: Module, gen: int) -> None:
        self.module = module
        self.gen = gen
        self.ctx = Context()
        #: computation -> its call_list (the context is built from these)
        self.calls: dict[Computation, list] = {}
        #: the module's computations when the context was last brought up
        #: to date (:mod:`hlorun.verifier.incremental_calls`), and as a set
        self.order: tuple = ()
        self.order_set: set[Computation] = set()
        self.comp_info: dict[Computation, tuple] = {}
        self.comp_f: dict[Computation, list[Finding]] = {}
        self.dup_f: dict[Computation, dict[Instruction, Finding]] = {}
        self.inst_f: dict[Instruction, list[Finding]] = {}
        self.channel_instrs: set[Instruction] = set()
        #: asynchronous instructions in the module, and every computation
        #: one of them (ever) called
        self.asyncish: set[Instruction] = set()
        self.async_callees: set[Computation] = set()
        self.all_reduces: set[Instruction] = set()
        #: x -> instructions whose rules read x though x may not list them
        #: as users (operands of instructions with findings: broken use-def
        #: links; control predecessors)
        self.watch: dict[Instruction, set[Instruction]] = {}
        self.watching: dict[Instruction, tuple] = {}
        self.has_buffer = False
        #: computation -> its instructions' names, for the big computations
        #: whose names are unique (:data:`NAME_SET_MIN`)
        self.names: dict[Computation, set[str]] = {}
        #: rule results by content (:func:`hlorun.verifier.module._memo_key`)
        self.memo: dict = {}
        self.buffers_f: list[Finding] = []
        self.channels_f: list[Finding] = []
        self.lcar_f: list[Finding] = []


def _set_watch(st: _State, y: Instruction, findings: bool) -> None:
    """Record what ``y``'s rules read through links that may be one-sided:
    its operands when it has findings (a use-def link may be broken), its
    control predecessors, and its users when its rules read them (a user
    may not list ``y`` as an operand)."""
    old = st.watching.pop(y, None)
    if old:
        for x in old:
            s = st.watch.get(x)
            if s is not None:
                s.discard(y)
    targets = tuple(y.control_predecessors)
    if findings:
        targets += tuple(y.operands)
    if reads_users(y.opcode):
        targets += tuple(y._users)
    if targets:
        st.watching[y] = targets
        for x in targets:
            s = st.watch.get(x)
            if s is None:
                s = st.watch[x] = set()
            s.add(y)


def _unwatch(st: _State, y: Instruction) -> None:
    for x in st.watching.pop(y, ()):
        s = st.watch.get(x)
        if s is not None:
            s.discard(y)


_NAME = attrgetter("name")


#: Computations with at least this many instructions keep the set of their
#: names in the state (``_State.names``) while their names are unique, so
#: that a change checks only the names it adds instead of them all.
NAME_SET_MIN = 2048


def _names(comp: Computation, sets: dict[Computation, set[str]] | None = None
           ) -> dict[Instruction, Finding]:
    """The duplicate-name findings of ``comp``; with ``sets``, also keeps
    (or drops) ``comp``'s name set there (:data:`NAME_SET_MIN`)."""
    names_ = list(map(_NAME, comp._instructions))
    got = set(names_)
    if len(got) == len(names_):  # the usual case, checked in C
        if sets is not None:
            if len(names_) >= NAME_SET_MIN:
                sets[comp] = got
            else:
                sets.pop(comp, None)
        return {}
    if sets is not None:
        sets.pop(comp, None)
    out: dict[Instruction, Finding] = {}
    names: set[str] = set()
    for instr in comp._instructions:
        if instr.name in names:
            out[instr] = (instr, comp, (f"HLO has name that is not unique within computation "
                                        f"{comp.name}: {instr.name}"))
        names.add(instr.name)
    return out


def _update_name_sets(sets: dict[Computation, set[str]], removed: Iterable[Instruction],
                      came: list[Instruction], moved: list[Instruction], where: dict,
                      old_rows: dict) -> None:
    """Bring the name sets of computations whose names were unique up to
    date: the names that left (``removed`` instructions', and the old names
    of ``moved``, i.e. renamed or moved, ones) first, then those that came
    (``came``: new and moved instructions, in the computations that hold
    them now); a computation where a name comes that is already there (or
    twice) has a duplicate now, and loses its set (its names are checked
    in full)."""
    for i in chain(removed, moved):
        r = old_rows[i]
        s = sets.get(r[ROW_CONTAINER])
        if s is not None:
            s.discard(r[ROW_NAME])
    if not came:
        return
    conts = list(map(where.get, came))
    for c in list(sets):
        names = list(compress(map(_NAME, came), map(is_, conts, repeat(c))))
        if names:
            s = sets[c]
            if s.isdisjoint(names) and len(set(names)) == len(names):
                s.update(names)
            else:
                del sets[c]


def _renamed(st: _State, c: Computation, redo: set[Instruction]) -> None:
    """Rerun what may print ``c``'s name: its instructions and their users
    with findings, their watchers, its channel instructions and
    all-reduces (module-level rules)."""
    inst_f, watch = st.inst_f, st.watch
    special = st.channel_instrs | st.all_reduces
    for i in c._instructions:
        if i in inst_f or i in special:
            redo.add(i)
        for u in i._users:
            if u in inst_f:
                redo.add(u)
        w = watch.get(i)
        if w:
            redo.update(w)
