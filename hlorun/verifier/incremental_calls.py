"""The incremental verifier's call graph: each computation's call list
and the :class:`~hlorun.verifier.module.Context` built from them, brought
up to date from what changed.

:func:`hlorun.verifier.module.context_from` walks every call list of the
module (a 50k-instruction module after fusion has thousands of fusions);
:func:`update_calls` gives the same context (the same callers, in the same
order: by computation in module order, then by position in the
computation's call list) but touches only the callees whose callers came,
went or changed opcode, and reports which callees now differ, as comparing
the old and new contexts in full did.  It falls back to
``context_from`` (and the full comparison) when the surviving
computations were reordered, a computation is listed twice, the state is
not as expected, or most of the call graph changed (priority fusion: a
rebuild is then the cheaper way, and still proportional to the change).
"""

from __future__ import annotations

from itertools import count, filterfalse
from typing import Iterable

from ..ir.changes import Changes
from ..ir.module import Computation, Instruction, Module
from .module import Context, call_list, context_from

_ASYNC = ("async-start", "async-update", "async-done")


def _call_list_update(c: Computation, prev: list, changed: Iterable[Instruction]) -> list:
    """:func:`call_list` of ``c`` from its previous one: ``changed`` are the
    calling instructions that changed, came or went since (the others call
    what they called); order and membership come from ``c``'s sequence."""
    cc_of = dict(prev)
    for i in changed:
        cc = i.called_computations() if i.attrs else None
        if cc:
            cc_of[i] = cc
        else:
            cc_of.pop(i, None)
    return [(i, cc_of[i]) for i in filter(cc_of.__contains__, c._instructions)]


def _differs(old: Context, new: Context, c: Computation) -> bool:
    return (old.callers.get(c) != new.callers.get(c)
            or (c in old.fusion_computations) != (c in new.fusion_computations)
            or (c in old.async_computations) != (c in new.async_computations))


def update_calls(st, module: Module, ch: Changes, touched: set[Computation],
                 calling: set, cand: dict, where: dict
                 ) -> tuple[dict[Computation, list[Instruction]], set[Computation]]:
    """Bring ``st.calls`` and ``st.ctx`` up to date; returns the old callers
    lists of the callees whose lists changed (the others are as they were)
    and the callees whose callers, fusion or asynchronous role changed."""
    calls: dict = st.calls
    entries: list[tuple[Computation, list | None, list | None]] = []  # (comp, old, new)
    for c in ch.removed_computations:
        entries.append((c, calls.pop(c, None), None))
    for c in touched:
        if c.module is module and (c in calling or c not in calls):
            prev = calls.get(c)
            now = calls[c] = call_list(c) if prev is None else \
                _call_list_update(c, prev, cand.get(c, ()))
            entries.append((c, prev, now))
    comps = module.computations
    for c in filterfalse(calls.__contains__, comps):
        now = calls[c] = call_list(c)
        entries.append((c, None, now))
    order = tuple(comps)
    old_set = new_set = st.order_set
    if order != st.order:
        new_set = set(order)
        if len(new_set) != len(order) or len(old_set) != len(st.order) or list(
                filter(new_set.__contains__, st.order)) != list(
                filter(old_set.__contains__, order)):
            return _rebuild(st, module, order)
        seen = {e[0] for e in entries}
        for c in old_set.symmetric_difference(new_set):
            if c in calls and c not in seen:
                entries.append((c, calls[c], calls[c]))
    # Entries (instruction, callees) that left or came, per callee.
    gone: dict[Computation, list[Instruction]] = {}
    came: dict[Computation, list[Instruction]] = {}
    sources: dict[Computation, list[Computation]] = {}  # callee -> computations adding it
    for c, prev, now in entries:
        old_map = dict(prev) if prev and c in old_set else {}
        new_map = dict(now) if now and c in new_set else {}
        if old_map and new_map and prev is not now and list(
                filter(new_map.__contains__, old_map)) == list(
                filter(old_map.__contains__, new_map)):
            # the others call what they called, in the same order
            redo = set(cand.get(c, ()))
            redo.update(old_map.keys() - new_map.keys())
            redo.update(new_map.keys() - old_map.keys())
        else:  # reordered: all of them
            redo = old_map.keys() | new_map.keys()
        for i in redo:
            for x in old_map.get(i, ()):
                gone.setdefault(x, []).append(i)
            for x in new_map.get(i, ()):
                came.setdefault(x, []).append(i)
                sources.setdefault(x, []).append(c)
    callers = st.ctx.callers
    if sum(map(len, gone.values())) + sum(map(len, came.values())) > len(callers) // 4 + 64:
        # most of the call graph changed (e.g. priority fusion): a rebuild
        # in C-friendly loops costs less than updating callee by callee
        return _rebuild(st, module, order)
    # Decide first (nothing changed yet if the state is not as expected).
    plan: list[tuple[Computation, list, list | None]] = []  # (callee, old, new or None)
    rebuild: dict[Computation, set[Computation]] = {}  # source -> callees to collect
    wget = where.get
    for x in gone.keys() | came.keys():
        old = callers.get(x, [])
        left = old
        for i in gone.get(x, ()):
            if left is old:
                left = list(old)
            if i not in left:
                return _rebuild(st, module, order)
            left.remove(i)
        add = came.get(x, ())
        if len(left) + len(add) <= 1:
            plan.append((x, old, left + list(add) if add else left))
            continue
        srcs = set(map(wget, left))
        if None in srcs or not srcs <= new_set:
            return _rebuild(st, module, order)
        srcs.update(sources[x] if add else ())
        for s in srcs:
            rebuild.setdefault(s, set()).add(x)
        plan.append((x, old, None))
    st.order, st.order_set = order, new_set
    if rebuild:  # callers from several places: in module order, as context_from
        pos = dict(zip(comps, count()))
        got: dict[Computation, list[tuple[int, list[Instruction]]]] = {}
        for s, want in rebuild.items():
            per: dict[Computation, list[Instruction]] = {x: [] for x in want}
            for i, cc in calls[s]:
                for x in cc:
                    lst = per.get(x)
                    if lst is not None:
                        lst.append(i)
            for x, lst in per.items():
                if lst:
                    got.setdefault(x, []).append((pos[s], lst))
    fusion, asyncs = st.ctx.fusion_computations, st.ctx.async_computations
    old_of: dict[Computation, list[Instruction]] = {}
    flipped: set[Computation] = set()
    for x, old, new in plan:
        if new is None:
            new = [i for _, lst in sorted(got.get(x, ()), key=_FIRST) for i in lst]
        _set(x, old, new, callers, fusion, asyncs, old_of, flipped)
    return old_of, flipped


def _first(p: tuple) -> int:
    return p[0]


_FIRST = _first


def _set(x: Computation, old: list, new: list, callers: dict, fusion: set, asyncs: set,
         old_of: dict, flipped: set) -> None:
    """Make ``new`` the callers of ``x`` (recording the old list and
    whether anything a rule reads changed)."""
    was_f, was_a = x in fusion, x in asyncs
    if new:
        callers[x] = new
    else:
        callers.pop(x, None)
    is_f = is_a = False
    for i in new:
        op = i.opcode
        if op == "fusion":
            is_f = True
        elif op in _ASYNC:
            is_a = True
    if is_f:
        fusion.add(x)
    else:
        fusion.discard(x)
    if is_a:
        asyncs.add(x)
    else:
        asyncs.discard(x)
    if new != old or is_f != was_f or is_a != was_a:
        old_of[x] = old
        flipped.add(x)


def _rebuild(st, module: Module, order: tuple) -> tuple[dict, set]:
    """``context_from`` in full, and the callees whose role changed."""
    old = st.ctx
    new = st.ctx = context_from(module, st.calls)
    st.order, st.order_set = order, set(order)
    keys = set(old.callers) | set(new.callers) | old.fusion_computations \
        | new.fusion_computations | old.async_computations | new.async_computations
    flipped = {c for c in keys if _differs(old, new, c)}
    return {c: old.callers.get(c, []) for c in flipped}, flipped


__all__ = ["update_calls"]
