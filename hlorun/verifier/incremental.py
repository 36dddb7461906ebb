"""The HloVerifier rules re-run on what changed.

After a pass changes a few instructions of a 50k-instruction module, the
verifier need not look at the rest again: its findings there are the
ones it had.  :func:`run_changes` keeps the findings of the last run per
instruction and per computation (in the tracker's ``cache``), asks the
:class:`~hlorun.ir.changes.ModuleTracker` what changed since, re-runs the
rules whose inputs may have changed and returns exactly the findings
:func:`hlorun.verifier.module.run` would return, in the same order.

What a rule on instruction ``x`` reads, and so when it is run again:

* ``x`` itself (the tracker's row: name, opcode, shape, attributes,
  operands, users, control predecessors, computation);
* its operands' and control predecessors' own fields (shapes, opcodes,
  computations) and whether its operands list it as a user: every user
  and control successor, old and new, of a removed instruction or of one
  whose own fields changed is rerun; of one whose links alone changed,
  the users that joined or left (no rule reads an instruction's users
  but asynchronous ones, which watch them);
* links that only one side records (an operand that does not list ``x``
  as a user, a user that does not have ``x`` as an operand, a control
  predecessor): ``x`` *watches* what it reads through them (the operands
  of an instruction with findings, the control predecessors, the users of
  an instruction whose rules read users) and is rerun when one changes;
* the computations it calls (signatures, roots, contents, sharding, e.g.
  a fusion's parameters and unused instructions): rerun every caller
  (before and after) of a computation that changed in any way;
* the call graph (callers of a fused computation, whether its computation
  is fused or asynchronous): rebuilt when the call graph may have changed,
  and every instruction of a computation whose role changed is rerun;
* its computation's own fields (thread, ENTRY, root): all its
  instructions are rerun when one changes (the old and new root when the
  root moves); no rule reads a computation's name, but messages print it:
  a rename reruns the instructions with findings and watchers that may
  print it;
* asynchronous chains (start/update/done walk each other and read what the
  start calls): every asynchronous instruction of the module is rerun when
  one of them or a neighbour changes, or a computation one of them called;
* the module header (replica and partition counts, entry, layouts):
  everything is rerun.

Name uniqueness is recomputed for each computation that changed; the
module-level rules (entry layout, aliasing) always run, send/recv
channels and layout-constrained all-reduces when one of their
instructions is involved, buffer rules whenever the module has buffers
and the deadlock rule whenever it is enabled.  Random edits of every kind
(tests/verifier/test_incremental.py) check that the findings equal a full
run's.
"""

from __future__ import annotations

from itertools import chain, filterfalse
from operator import attrgetter
from typing import Any, Iterable, Iterator

from ..ir.changes import (ROW_ATTRS, ROW_CONTAINER, ROW_NAME, ROW_OPCODE, ROW_PARENT, ROW_USERS,
                          Changes, ModuleTracker)
from ..ir.changes import _has_calls as called
from ..ir.module import Computation, Instruction, Module
from . import module_rules
from .incremental_state import (_ALL_REDUCE, _CHANNEL_OPS, RENAMED, _State, _comp_info,
                                _fields_changed, _is_asyncish, _light, _names, _renamed,
                                _set_watch, _unwatch, _update_name_sets)
from .fast_path import instruction_findings
from .incremental_calls import update_calls
from .module import (Finding, _computation, _has_buffer, _instruction, buffer_rules,
                     call_list, context_from, deadlock_rules, reads_users)


def _full(module: Module, opts: Any, gen: int) -> _State:
    st = _State(module, gen)
    st.calls = {c: call_list(c) for c in module.computations}
    ctx = st.ctx = context_from(module, st.calls)
    st.order = tuple(module.computations)
    st.order_set = set(st.order)
    for comp in module.computations:
        st.comp_info[comp] = _comp_info(comp)
        f = list(_computation(comp, ctx))
        if f:
            st.comp_f[comp] = f
        dups = _names(comp, st.names)
        if dups:
            st.dup_f[comp] = dups
        memo = st.memo
        for instr in comp._instructions:
            f = list(_instruction(instr, comp, opts, ctx, memo))
            if f:
                st.inst_f[instr] = f
            if f or instr.control_predecessors or reads_users(instr.opcode):
                _set_watch(st, instr, bool(f))
            op = instr.opcode
            if op in _CHANNEL_OPS:
                st.channel_instrs.add(instr)
            elif op in _ALL_REDUCE:
                st.all_reduces.add(instr)
            elif _is_asyncish(op):
                st.asyncish.add(instr)
                st.async_callees.update(instr.called_computations())
    st.has_buffer = any(_has_buffer(i.shape) for i in module.instructions())
    _module_level(st, module, opts, channels=True, all_reduces=True)
    return st


def _module_level(st: _State, module: Module, opts: Any, channels: bool,
                  all_reduces: bool) -> None:
    st.buffers_f = list(buffer_rules(module, opts, st.ctx)) if st.has_buffer else []
    if channels:
        st.channels_f = list(module_rules.channels(module))
    if all_reduces:
        st.lcar_f = list(module_rules.layout_constrained_all_reduce(module))


_USERS = attrgetter("_users")
_ASYNCISH, _READS_USERS, _CHANNEL, _ALLRED = 1, 2, 4, 8
#: opcode -> the bits above
_KINDS: dict[str, int] = {}


def _kind(op: str) -> int:
    k = _KINDS[op] = ((_ASYNCISH if _is_asyncish(op) else 0)
                      | (_READS_USERS if reads_users(op) else 0)
                      | (_CHANNEL if op in _CHANNEL_OPS else 0)
                      | (_ALLRED if op in _ALL_REDUCE else 0))
    return k


def _update(st: _State, module: Module, opts: Any, ch: Changes, tracker: ModuleTracker) -> None:
    touched = tracker.touched(ch) | ch.removed_computations
    old_rows = ch.old_rows
    # Computations where a name may now be duplicated: an instruction was
    # added, renamed or moved in.
    # And where the call list may differ: a calling instruction was added,
    # removed, changed, or removed and added again.
    named: set[Computation | None] = set()
    calling: set[Computation | None] = set(ch.call_order)
    #: computation -> its instructions that call or called computations and
    #: changed, came or went (their entries of the call list are redone)
    cand: dict[Computation | None, list[Instruction]] = {}
    # Users read an operand's own fields and whether it lists them: all
    # users are rerun when its fields changed, only those that joined or
    # left when just its links did.  (No rule reads its users' state but
    # asynchronous ones, which watch them.)  A changed parent reruns the
    # old and new parents' own rules (their parameters' parents).
    # A changed instruction whose rules cannot have a new verdict (only
    # its users, its name or unread attributes changed: ``_light``) is
    # rerun only when its findings print its new name.
    redo: set[Instruction] = set()
    redo_update = redo.update
    redo_add = redo.add
    moved: set[Computation] = set()
    watch = st.watch
    inst_f = st.inst_f
    wget = tracker.where.get
    rget = old_rows.get
    watch_get = watch.get
    kinds = _KINDS
    # New instructions (no old row): rerun, with their users; their
    # computations may have a duplicate name now.
    new = list(filterfalse(rget, ch.instructions))
    redo_update(new)
    redo_update(chain.from_iterable(map(_USERS, new)))
    named.update(map(wget, new))
    for i in new:
        a = i.attrs
        if a and called(a):
            c = wget(i)
            calling.add(c)
            cand.setdefault(c, []).append(i)
        if i.control_successors:
            redo_update(i.control_successors)
        if watch:
            w = watch_get(i)
            if w:
                redo_update(w)
    moved_names: list[Instruction] = []  # renamed or moved to another computation
    for i in ch.instructions:
        r = rget(i)
        if r is None:
            continue
        c = wget(i)
        users = i._users
        op = i.opcode
        kind = kinds.get(op)
        if kind is None:
            kind = _kind(op)
        light = _light(r, i, c) if kind == 0 else None
        if light is not None:
            if light == RENAMED:
                named.add(c)
                moved_names.append(i)
                if i in inst_f:
                    redo_add(i)
            if r[ROW_USERS] != tuple(users):
                redo_update(set(r[ROW_USERS]).symmetric_difference(users))
            if i.control_successors:
                redo_update(i.control_successors)
            if watch:
                w = watch_get(i)
                if w:
                    redo_update(w)
            continue
        redo_add(i)
        if r[ROW_NAME] != i.name or r[ROW_CONTAINER] is not c:
            named.add(c)
            moved_names.append(i)
        if called(i.attrs) or called(r[ROW_ATTRS]):
            calling.add(c)
            calling.add(r[ROW_CONTAINER])
            cand.setdefault(c, []).append(i)
            if r[ROW_CONTAINER] is not c:
                cand.setdefault(r[ROW_CONTAINER], []).append(i)
        if _fields_changed(r, i, c):
            redo_update(users)
            redo_update(r[ROW_USERS])
            if r[ROW_PARENT] is not i.parent:
                moved.add(r[ROW_PARENT])
                moved.add(i.parent)
        elif r[ROW_USERS] != tuple(users):
            redo_update(set(r[ROW_USERS]).symmetric_difference(users))
        if i.control_successors:
            redo_update(i.control_successors)
        if watch:  # readers through links the users lists may not show
            w = watch_get(i)
            if w:
                redo_update(w)
    for i in ch.removed:
        if called(old_rows[i][ROW_ATTRS]):
            calling.add(old_rows[i][ROW_CONTAINER])
            cand.setdefault(old_rows[i][ROW_CONTAINER], []).append(i)
        redo_update(i._users)
        redo_update(i.control_successors)
        redo_update(old_rows[i][ROW_USERS])
        if watch:
            w = watch_get(i)
            if w:
                redo_update(w)
    # (The call graph is as it was when only light changes touched calling
    # instructions: no computation came, went or moved, and no calling
    # instruction came, went or changed what it calls.)
    recall = ch.calls and bool(calling or ch.removed_computations or ch.order or any(
        c not in st.calls for c in ch.computations))
    old_of: dict[Computation, list[Instruction]] = {}
    flipped: set[Computation] = set()
    if recall:  # the changed call lists read again, their callees' callers redone
        old_of, flipped = update_calls(st, module, ch, touched, calling, cand, tracker.where)
    ctx = st.ctx
    whole: set[Computation] = set()  # computations to redo entirely
    for c in ch.computations:
        info = _comp_info(c)
        old = st.comp_info.get(c)
        st.comp_info[c] = info
        if old is not None and old[1:4] == info[1:4] and old[0] != info[0]:
            # Renamed only: no rule reads a computation's name, but messages
            # name it (its instructions', their users' and callers').
            _renamed(st, c, redo)
            if old[4] is not info[4]:
                redo.update(r for r in (old[4], info[4]) if r is not None)
        elif old is None or old[:4] != info[:4]:
            whole.add(c)
        elif old[4] is not info[4]:
            for r in (old[4], info[4]):
                if r is not None:
                    redo.add(r)
    for c in ch.removed_computations:
        st.comp_info.pop(c, None)
        st.comp_f.pop(c, None)
        st.dup_f.pop(c, None)
        st.names.pop(c, None)
    # (callees whose callers, fusion or asynchronous role changed)
    touched.update(flipped)
    whole.update(flipped)
    # Callers see their callees' signatures and contents.
    cget = ctx.callers.get
    for c in touched:
        old = old_of.get(c)
        if old:
            redo.update(old)
        callers = cget(c)
        if callers:
            redo.update(callers)
    for c in whole:
        if c.module is module:
            redo.update(c._instructions)
    # Asynchronous chains read each other and what their starts call.
    if st.asyncish and (not touched.isdisjoint(st.async_callees) or any(
            _is_asyncish(i.opcode) for i in chain(redo, ch.removed))
            or any(_is_asyncish(r[ROW_OPCODE]) for r in ch.old_rows.values())):
        redo.update(st.asyncish)
    # Per-instruction rules.
    channel = all_reduce = False
    for i in ch.removed:
        inst_f.pop(i, None)
        st.asyncish.discard(i)
        if i in st.watching:
            _unwatch(st, i)
        if i in st.channel_instrs:
            st.channel_instrs.discard(i)
            channel = True
        if i in st.all_reduces:
            st.all_reduces.discard(i)
            all_reduce = True
    memo = st.memo
    asyncish, channel_instrs, all_reduces = st.asyncish, st.channel_instrs, st.all_reduces
    watching = st.watching
    inst_f_pop = inst_f.pop
    todo: Iterable[Instruction] = redo
    if not (inst_f or watching or asyncish or channel_instrs or all_reduces):
        # The usual state, nothing found or watched: only an instruction
        # with findings or of a special kind needs the bookkeeping below
        # (each instruction is visited once, so none is in those sets yet).
        rest: list[Instruction] = []
        for i in redo:
            comp = wget(i)
            if comp is None:
                continue
            op = i.opcode
            kind = _KINDS.get(op)
            if kind is None:
                kind = _kind(op)
            if kind or i.control_predecessors:
                rest.append(i)
                continue
            f = instruction_findings(i, comp, opts, ctx, memo)
            if f:
                inst_f[i] = f
                _set_watch(st, i, True)
        todo = rest
    for i in todo:
        comp = wget(i)
        if comp is None:  # not in the module (a stale neighbour)
            inst_f_pop(i, None)
            _unwatch(st, i)
            asyncish.discard(i)
            continue
        f = instruction_findings(i, comp, opts, ctx, memo)
        if f:
            inst_f[i] = f
        elif inst_f:
            inst_f_pop(i, None)
        op = i.opcode
        kind = _KINDS.get(op)
        if kind is None:
            kind = _kind(op)
        if f or i.control_predecessors or kind & _READS_USERS or (watching and i in watching):
            _set_watch(st, i, bool(f))
        if kind & _ASYNCISH:
            asyncish.add(i)
            st.async_callees.update(i.called_computations())
        elif asyncish:
            asyncish.discard(i)
        if kind & _CHANNEL or (channel_instrs and i in channel_instrs):
            channel = True
            if kind & _CHANNEL:
                channel_instrs.add(i)
            else:
                channel_instrs.discard(i)
        if kind & _ALLRED or (all_reduces and i in all_reduces):
            all_reduce = True
            if kind & _ALLRED:
                all_reduces.add(i)
            else:
                all_reduces.discard(i)
    # Per-computation rules and names.
    # (A computation's own rules read its fields, its parameters' parents
    # and numbers, and whether it is asynchronous: ``whole`` has those
    # whose role changed.)
    moved.discard(None)
    for c in touched | whole | moved:
        if c.module is not module or c not in st.comp_info:
            continue
        f = list(_computation(c, ctx))
        if f:
            st.comp_f[c] = f
        else:
            st.comp_f.pop(c, None)
    name_sets = st.names
    if name_sets:
        _update_name_sets(name_sets, ch.removed, new + moved_names, moved_names,
                          tracker.where, old_rows)
    for c in touched | whole:
        if c.module is not module or c not in st.comp_info:
            continue
        if c not in named and c not in whole and c not in st.dup_f:
            continue  # names only left: no new duplicate
        if c in name_sets:
            continue  # its names are still unique (its set saw every change)
        dups = _names(c, name_sets)
        if dups:
            st.dup_f[c] = dups
        else:
            st.dup_f.pop(c, None)
    if st.has_buffer:
        st.has_buffer = any(_has_buffer(i.shape) for i in module.instructions())
    else:
        st.has_buffer = any(_has_buffer(i.shape) for i in ch.instructions)
    _module_level(st, module, opts, channel, all_reduce)


def _findings(st: _State, module: Module, opts: Any) -> Iterator[Finding]:
    """Everything, in the order of :func:`hlorun.verifier.module.run`."""
    entry = module.entry
    if entry in st.ctx.fusion_computations:
        yield None, entry, "Module entry computation cannot be a fusion computation"
    if st.comp_f or st.dup_f or st.inst_f:
        comp_f, dup_f, inst_f = st.comp_f, st.dup_f, st.inst_f
        for comp in module.computations:
            yield from comp_f.get(comp, ())
            dups = dup_f.get(comp)
            if dups is None and not inst_f:
                continue
            for instr in comp._instructions:
                if dups is not None:
                    d = dups.get(instr)
                    if d is not None:
                        yield d
                f = inst_f.get(instr)
                if f is not None:
                    yield from f
    yield from st.buffers_f
    yield from st.channels_f
    yield from deadlock_rules(module, opts, st.ctx)
    yield from module_rules.entry_layout(module, opts)
    yield from module_rules.aliasing(module, opts)
    yield from st.lcar_f


def run_changes(module: Module, opts: Any, tracker: ModuleTracker) -> Iterable[Finding]:
    """The findings of :func:`hlorun.verifier.module.run` on ``module``,
    which ``tracker`` has just scanned, re-running only what changed since
    the last call with the same ``opts`` and tracker."""
    if module.entry is None:
        tracker.cache.pop(("hlo-verifier", opts), None)
        return [(None, None, "module has no entry computation")]
    key = ("hlo-verifier", opts)
    if tracker.module is not module:  # not following this module: no state to keep
        return list(_findings(_full(module, opts, 0), module, opts))
    st: _State | None = tracker.cache.get(key)
    gen = tracker.gen
    if st is None or st.module is not module:
        st = None
    elif st.gen != gen:
        ch = tracker.changes_since(st.gen)
        if ch.full or ch.header:
            st = None
        else:
            tracker.cache.pop(key, None)  # half-updated state must not survive an exception
            _update(st, module, opts, ch, tracker)
            st.gen = gen
    if st is None:
        tracker.cache.pop(key, None)
        st = _full(module, opts, gen)
    tracker.cache[key] = st
    return list(_findings(st, module, opts))


__all__ = ["run_changes"]
