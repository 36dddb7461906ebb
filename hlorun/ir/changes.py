"""What changed in a module since an earlier look.

Checkers, diffs, dumps and ``--check-changed`` all need the same fact after
a pass: which instructions and computations are not as they were.
Printing or verifying a 50k-instruction module again costs far more than
the passes that changed a handful of its instructions, so they ask a
:class:`ModuleTracker` and redo only the parts that changed.

An instruction's *row* is everything the printer and the verifier read
from the instruction itself (name, opcode, shape, parameter number,
literal, ``parent``, the computation it sits in, a copy of ``attrs``, the
operand list, the users and the control predecessors); a computation's
row its own fields (name, ENTRY, execution thread, root, parameters,
instruction sequence).  ``tracker.scan(module)`` compares the module with
the rows as of the previous scan; if anything differs, the generation
``tracker.gen`` goes up by one and the difference is logged (with the old
rows of the changed and removed instructions).
``tracker.changes_since(g)`` merges the log from generation ``g`` on into
one :class:`Changes`.

The tracker keeps no copy of the module (rows were ~450 B per
instruction, ~10% of a big run's memory): it keeps each instruction's
computation and the computation rows, and an instruction's old row is
recorded copy-on-write, by the change itself (below), as its
*pre-image*: its row just before its first change since the last scan.
An instruction with no pre-image is as it was.

Passes may assign ``instr.shape`` or edit ``instr.attrs`` in place
without telling anyone, and a scan still sees it (through the journal
below; shapes are interned and immutable, so comparing them by identity
is exact; attribute values are strings, computations or lists of them).
The log keeps only the steps that consumers with state in
``tracker.cache`` (values with a ``gen``) have not seen yet, at most
``keep``: old steps hold the rows of removed instructions, and through
them whole dead graphs.

``scan(module, token)`` skips the work when ``token`` equals the previous
scan's (the pipeline runner passes the number of passes it has run, so
everybody who looks at one module state shares one scan).

Only what changed is re-read: the change journal
------------------------------------------------

A scan re-reads (builds and compares rows for) only the instructions
stamped since the previous scan (``instr.stamp`` against
:data:`hlorun.ir.module.EPOCH`), found through the computations stamped
since (``comp.stamp``); every other row is kept.  Removed instructions are
the difference between a stamped computation's old and new instruction
sequences.  Only the rows of computations stamped since are compared (a
scan makes each computation it reads a
:class:`~hlorun.ir.journal.TrackedComputation`: a write to its name, root,
ENTRY flag, thread, module, parameter list or instruction sequence stamps
it); the list of computations and the header are compared every time.
What stamps an instruction and its computation:

* the IR's mutation methods (``add_instruction``, ``remove_instruction``,
  ``set_operand``, ``replace_operand_with``, ``replace_operands``,
  ``add_control_dependency_to`` ..., and constructing an instruction,
  which also stamps its operands: their users changed), for every
  instruction whose row they change;
* any direct slot write on an instruction a scan has read
  (``instr.shape = s``, ``instr.operands = [...]``): the scan turns each
  instruction it reads into a :class:`TrackedInstruction`, whose
  ``__setattr__`` stamps (construction, and the instructions a pass builds
  before the next scan, stay at full speed; :mod:`hlorun.ir.journal`);
* any in-place edit of such an instruction's ``attrs``, ``operands`` or
  control lists (``attrs[k] = v``, ``operands[0] = x`` ...): the scan gives
  it :class:`Attrs` / :class:`Links`
  containers, which stamp their owner (a removed instruction's containers
  drop the link, so reference counting still frees it); empty control
  lists become the shared read-only :data:`hlorun.ir.module.NO_LINKS`
  (``add_control_dependency_to`` replaces it).
* users: ``_users`` is a tuple (a dict above a few users) that only
  :func:`hlorun.ir.module.add_user` / ``drop_user`` change, by a slot
  write or after stamping.

Every stamp of a scanned instruction that was last stamped before the
latest scan (of any tracker: ``hlorun.ir.module.SINCE``) first records
its pre-image (``hlorun.ir.module.PENDING``); each scan hands the
pre-images recorded since to every live tracker that followed those
instructions (the oldest one wins), so trackers of one module at
different points all see their own "before".

So the tracker's cost per scan is that of the change plus a few C-level
passes over the stamped computations' instruction sequences, and the
verifier re-runs its rules only on what changed and its neighbours.

``ModuleTracker(verify=True)`` (or ``HLORUN_CHECK_JOURNAL=1``) also keeps
every row, rebuilds them after each scan and raises unless the scan's
changes (instructions, removed ones, old rows) are those of the full
re-read (``tests/ir/test_change_journal.py`` runs whole pipelines so).
"""

from __future__ import annotations

import gc
import os
import time
import weakref
from itertools import chain, compress, filterfalse, repeat
from operator import attrgetter, ge, is_, ne, not_, or_
from typing import Hashable, Iterable

from . import module as _ir
from .journal import adopt as _adopt
from .journal import adopt_computations as _adopt_computations
from .module import Computation, Instruction, Module
from .rows import (COMP, INSTRS, PARAMS, ROW_ATTRS, ROW_CONTAINER, ROW_CPRED,
                   ROW_LITERAL, ROW_NAME, ROW_OPCODE, ROW_OPERANDS, ROW_PARAMETER_NUMBER,
                   ROW_PARENT, ROW_SHAPE, ROW_USERS, full_rows, same_constant, verify_scan)

_STAMP = attrgetter("stamp")


def _gen_of(consumer: object) -> object:
    return getattr(consumer, "gen", None)


#: attrs' index in a pre-image (a row without the container)
_PRE_ATTRS = ROW_ATTRS - 1
#: every live tracker (a scan hands pre-images to all of them)
_TRACKERS: "weakref.WeakSet[ModuleTracker]" = weakref.WeakSet()


class Changes:
    """The difference between two scans of one module.

    ``full``: there is no earlier scan to compare with (everything counts
    as new).  ``instructions``: added or modified instructions that are in
    the module now; ``removed``: instructions that were and are not;
    ``computations``: added computations and those whose own fields or
    instruction sequence changed; ``removed_computations``; ``header``: the
    module's own fields (name, schedule, header attributes, aliasing,
    entry, stack frames); ``order``: the list of computations changed
    (added, removed or moved); ``calls``: the call graph may have changed
    (``order``, or a changed, added or removed instruction calls
    computations, or one that calls computations was removed and added
    again: ``call_order``).
    """

    __slots__ = ("full", "instructions", "removed", "computations", "removed_computations",
                 "header", "order", "calls", "old_rows", "_containers", "call_order")

    def __init__(self, full: bool = False) -> None:
        self.full = full
        self.instructions: set[Instruction] = set()
        self.removed: set[Instruction] = set()
        self.computations: set[Computation] = set()
        self.removed_computations: set[Computation] = set()
        self.header = False
        self.order = False
        self.calls = False
        #: changed or removed instruction -> its row at the start (None
        #: for instructions added since)
        self.old_rows: dict[Instruction, tuple] = {}
        #: removed instruction -> the computation it was last seen in
        self._containers: dict[Instruction, Computation] = {}
        #: computations where an instruction that calls computations was
        #: removed and added again unchanged (the order of their calling
        #: instructions may have changed)
        self.call_order: set[Computation] = set()

    def __bool__(self) -> bool:
        return bool(self.full or self.instructions or self.removed or self.computations
                    or self.removed_computations or self.header or self.order)

    def __repr__(self) -> str:
        if self.full:
            return "<Changes: everything>"
        return (f"<Changes: {len(self.instructions)} instructions, {len(self.removed)} removed, "
                f"{len(self.computations)} computations, {len(self.removed_computations)} "
                f"removed computations{', header' if self.header else ''}"
                f"{', calls' if self.calls else ''}>")

    def merge(self, other: "Changes") -> None:
        """Fold ``other`` (a later step) into this one."""
        old, mine = self.old_rows, self.instructions
        for i, r in other.old_rows.items():
            # the earliest row wins; an instruction added by this step has none
            if i not in old and i not in mine:
                old[i] = r
        self.full |= other.full
        self.header |= other.header
        self.order |= other.order
        self.calls |= other.calls
        self.instructions |= other.instructions
        self.removed |= other.removed
        self.computations |= other.computations
        self.removed_computations |= other.removed_computations
        self._containers.update(other._containers)
        self.call_order |= other.call_order


def _has_calls(attrs: dict) -> bool:
    for v in attrs.values():
        if isinstance(v, (Computation, list)):
            return True
    return False


class ModuleTracker:
    """Per-instruction change detection for one module at a time (see the
    module docstring).  ``seconds`` accumulates the time spent scanning."""

    #: Check every journal-driven scan against a full one (tests).
    verify_default = os.environ.get("HLORUN_CHECK_JOURNAL", "") not in ("", "0")

    def __init__(self, verify: bool | None = None) -> None:
        self.verify = self.verify_default if verify is None else verify
        self.gen = 0
        self.seconds = 0.0
        self.scans = 0
        self._module: Module | None = None
        self._token: Hashable | None = None
        #: instruction -> the computation whose sequence held it at the last scan
        self._where: dict[Instruction, Computation] = {}
        #: pre-images (:func:`hlorun.ir.module.pre_image`) of instructions
        #: changed since the last scan, handed over by other trackers' scans
        self._pre: dict[Instruction, tuple] = {}
        self._comp_rows: dict[Computation, tuple] = {}
        self._header: tuple | None = None
        self._order: tuple = ()
        #: EPOCH when the last scan ended: computations stamped since changed
        self._since = 0
        #: _log[k] is the change from generation _base + k to _base + k + 1
        self._log: list[Changes] = []
        self._base = 0
        #: every row as of the last scan (``verify`` only)
        self._check: dict[Instruction, tuple] | None = None
        #: How many steps of the change log are kept (consumers asking for
        #: changes since an older generation get ``Changes(full=True)``).
        self.keep = 8
        #: Consumers' incremental state (e.g. the verifier's findings),
        #: keyed by consumer; it lives as long as the tracker.  A value
        #: with an int ``gen`` (the generation it is up to date with) keeps
        #: the change log from that generation on.
        self.cache: dict = {}
        #: the last ``changes_since`` answer (several consumers ask for the
        #: same generation after one scan)
        self._since_memo: tuple | None = None
        _TRACKERS.add(self)

    @property
    def module(self) -> Module | None:
        return self._module

    def row(self, instr: Instruction) -> tuple | None:
        """``instr``'s row as of the last scan (None if it was not in the
        module then)."""
        c = self._where.get(instr)
        if c is None:
            return None
        p = self._pre.get(instr) or _ir.PENDING.get(instr) or _ir.pre_image(instr)
        return p[:ROW_CONTAINER] + (c,) + p[ROW_CONTAINER:]

    @property
    def where(self) -> dict[Instruction, Computation]:
        """instruction -> :meth:`container`, for every instruction of the
        last scan (read it, never change it)."""
        return self._where

    def container(self, instr: Instruction) -> Computation | None:
        """The computation whose instruction set held ``instr`` at the last
        scan (``instr.parent`` unless something broke the IR)."""
        return self._where.get(instr)

    # -- scanning ----------------------------------------------------------------
    def scan(self, module: Module, token: Hashable | None = None) -> int:
        """Bring the tracker up to date with ``module``; returns the
        generation.  With a ``token`` equal to the previous scan's (and the
        same module) nothing is scanned."""
        if token is not None and module is self._module and token == self._token:
            return self.gen
        t = time.process_time()
        # The pre-images are small containers that live until the next
        # scan: keep the cyclic GC from walking them (they hold no cycles).
        enabled = gc.isenabled()
        gc.disable()
        try:
            prev = self._check if self.verify and module is self._module else None
            ch = self._scan(module)
            if self.verify:
                self._verify(module, prev, ch)
            else:
                self._check = None
        finally:
            if enabled:
                gc.enable()
        self._token = token
        self.scans += 1
        self.seconds += time.process_time() - t
        return self.gen

    def _drain(self) -> None:
        """Hand the pre-images recorded since the last scan (of any
        tracker) to every tracker that followed their instructions then,
        and start a new interval."""
        pend = _ir.PENDING
        if pend:
            _ir.PENDING = {}
            for t in list(_TRACKERS):
                where = t._where
                if not where:
                    continue
                mine = t._pre
                if not mine:
                    t._pre = {i: r for i, r in pend.items() if i in where}
                else:
                    setdefault = mine.setdefault  # an older pre-image wins
                    for i, r in pend.items():
                        if i in where:
                            setdefault(i, r)
        _ir.EPOCH[0] += 1
        _ir.SINCE[0] = _ir.EPOCH[0]

    def _scan(self, module: Module) -> Changes:
        self._since_memo = None
        comps = module.computations
        sf = module.stack_frames
        header = (module.name, module.is_scheduled, tuple(module.header_attrs.items()),
                  tuple(module.input_output_alias), tuple(module.buffer_donor), module.entry,
                  module.compact_gte,
                  None if sf is None else tuple((k, tuple(v)) for k, v in sf.items()))
        order = tuple(comps)
        since = self._since
        # Stamps from now on are newer than this scan.
        self._drain()
        self._since = _ir.EPOCH[0]
        pre, self._pre = self._pre, {}
        if module is not self._module:
            seqs = list(map(tuple, map(INSTRS, comps)))
            instrs = list(chain.from_iterable(seqs))
            _adopt(instrs)
            _adopt_computations(comps)
            self.cache.clear()
            self._module = module
            self._where = dict(zip(instrs, chain.from_iterable(
                map(repeat, comps, map(len, seqs)))))
            self._comp_rows = dict(zip(comps, zip(map(COMP, comps),
                                                  map(tuple, map(PARAMS, comps)), seqs)))
            self._header = header
            self._order = order
            self._log = []
            self.gen += 1
            self._base = self.gen
            return Changes(full=True)
        comp_rows = self._comp_rows
        cget = comp_rows.get
        where = self._where
        # Re-read the computations stamped since the last scan (a write to
        # a scanned computation's own fields stamps it too:
        # ``TrackedComputation``), all of a new computation's instructions
        # and the stamped ones of the others.
        same_order = order == self._order
        if same_order:  # the same computations: none came or went
            dirty = list(compress(comps, map(ge, map(_STAMP, comps), repeat(since))))
            new_comps: list[Computation] = []
            gone_comps: Iterable[Computation] = ()
        else:
            dirty = list(compress(comps, map(or_, map(ge, map(_STAMP, comps), repeat(since)),
                                             map(not_, map(comp_rows.__contains__, comps)))))
            new_comps = list(filterfalse(comp_rows.__contains__, dirty))
            gone_comps = comp_rows.keys() - set(order)
        _adopt_computations(dirty)
        seqs = list(map(tuple, map(INSTRS, dirty)))
        instrs: list[Instruction] = []
        containers: list[Computation] = []
        gone: set[Instruction] = set()
        for c, seq in zip(dirty, seqs):
            was = cget(c)
            got = seq if was is None else \
                list(compress(seq, map(ge, map(_STAMP, seq), repeat(since))))
            instrs.extend(got)
            containers.extend(repeat(c, len(got)))
            if was is not None and was[2] != seq:
                gone.update(filterfalse(c._instructions.__contains__, was[2]))
        rows = list(zip(map(COMP, dirty), map(tuple, map(PARAMS, dirty)), seqs))
        changed_comps = set(compress(dirty, map(ne, map(cget, dirty), rows)))
        for c in gone_comps:
            gone.update(comp_rows.pop(c)[2])
        comp_rows.update(zip(dirty, rows))
        _adopt(instrs)
        ch = Changes()
        old_rows = ch.old_rows
        wget = where.get
        pget = pre.get
        now = dict(zip(instrs, containers))
        # Added: not in the module at the last scan.  Changed: recorded a
        # pre-image (every change does; moving needs a ``parent`` write)
        # and differs from it now.
        changed = list(compress(instrs, map(is_, map(wget, instrs), repeat(None))))
        nget = now.get
        for i, p in pre.items():
            c = nget(i)
            c0 = wget(i)
            if c is None or c0 is None:  # removed, or not followed
                continue
            q = _ir.pre_image(i)
            if c is c0 and p == q:  # (the rows without their equal containers)
                if _has_calls(q[_PRE_ATTRS]):
                    ch.call_order.add(c)
                continue
            old = p[:ROW_CONTAINER] + (c0,) + p[ROW_CONTAINER:]
            new = q[:ROW_CONTAINER] + (c,) + q[ROW_CONTAINER:]
            if not same_constant(old, new):
                changed.append(i)
                old_rows[i] = old
            elif _has_calls(new[ROW_ATTRS]):
                ch.call_order.add(c)
        removed = [i for i in gone if i not in now and i in where]
        ch.instructions = set(changed)
        ch.removed = set(removed)
        for i in removed:
            p = pget(i) or _ir.pre_image(i)
            c0 = ch._containers[i] = where.pop(i)
            old_rows[i] = p[:ROW_CONTAINER] + (c0,) + p[ROW_CONTAINER:]
        where.update(now)
        ch.computations = changed_comps
        ch.removed_computations = set(gone_comps)
        ch.header = header != self._header
        ch.order = not same_order
        if ch.removed_computations or ch.order or ch.call_order or new_comps:
            ch.calls = True
        else:
            oget = old_rows.get
            for i in changed:
                r = oget(i)
                if _has_calls(i.attrs) or (r is not None and _has_calls(r[ROW_ATTRS])):
                    ch.calls = True
                    break
            else:
                ch.calls = any(_has_calls(old_rows[i][ROW_ATTRS]) for i in removed)
        self._header = header
        self._order = order
        if ch:
            self._log.append(ch)
            self.gen += 1
            self.trim()
        return ch

    def trim(self) -> None:
        """Drop the change-log steps that every consumer with state in
        ``cache`` (objects with a ``gen``) has seen, and any beyond
        ``keep``: they hold the old rows of removed instructions, and
        through them whole dead graphs.  A consumer further behind gets
        ``full`` (correct, just not incremental)."""
        need = min((g for g in map(_gen_of, self.cache.values()) if type(g) is int),
                   default=self._base)
        drop = max(len(self._log) - self.keep, need - self._base)
        if drop > 0:
            self._since_memo = None  # (holds removed instructions' rows)
            del self._log[:drop]
            self._base += drop

    def _verify(self, module: Module, prev: dict | None, ch: Changes) -> None:
        """Raise unless this scan's changes are those of a full re-read
        (:func:`hlorun.ir.rows.verify_scan`); keep the rows for the next."""
        rows = self._check = full_rows(module)
        verify_scan(module, rows, prev, ch, self._where, self._comp_rows)

    # -- queries ---------------------------------------------------------------------
    def changes_since(self, gen: int | None) -> Changes:
        """Everything that changed from generation ``gen`` to now (``full``
        when ``gen`` is None or older than the module the tracker follows).
        The answer may be shared with other callers: read it, never change
        it."""
        if gen is None or gen < self._base or gen > self.gen:
            return Changes(full=True)
        key = (gen, self.gen, self._base, self.scans, self._module)
        got = self._since_memo
        if got is not None and got[0] == key:
            return got[1]  # (consumers read it, never change it)
        out = self._changes_since(gen)
        self._since_memo = (key, out)
        return out

    def _changes_since(self, gen: int) -> Changes:
        out = Changes()
        for ch in self._log[gen - self._base:]:
            out.merge(ch)
        live = self._where
        comps = self._comp_rows
        gone = {i for i in out.instructions if i not in live}
        back = {i for i in out.removed if i in live}
        if gone or back:
            out.removed = (out.removed - back) | gone
            out.instructions = (out.instructions - gone) | back
        if out.removed:
            # Added after ``gen`` and removed again: never in the module
            # the consumer saw (no old row), so neither changed nor removed.
            old = out.old_rows
            ghosts = [i for i in out.removed if i not in old]
            if ghosts:
                out.removed.difference_update(ghosts)
        out.removed_computations = {c for c in out.removed_computations if c not in comps}
        out.computations = {c for c in out.computations if c in comps}
        out.call_order = {c for c in out.call_order if c in comps}
        out._containers = {i: c for i, c in out._containers.items() if i in out.removed}
        return out

    def touched(self, changes: Changes) -> set[Computation]:
        """Computations that contain or contained a changed or removed
        instruction, or changed themselves (``changes`` from this tracker)."""
        where = self._where
        out = set(changes.computations)
        out.update(where[i] for i in changes.instructions if i in where)
        out.update(changes._containers.values())
        return out

    def instructions(self) -> Iterable[Instruction]:
        """The instructions of the last scan."""
        return self._where.keys()


__all__ = ["Changes", "ModuleTracker", "ROW_ATTRS", "ROW_CONTAINER", "ROW_CPRED", "ROW_LITERAL",
           "ROW_NAME", "ROW_OPCODE", "ROW_OPERANDS", "ROW_PARAMETER_NUMBER", "ROW_PARENT",
           "ROW_SHAPE", "ROW_USERS"]
