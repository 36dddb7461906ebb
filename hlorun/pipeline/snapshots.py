"""Printing a module again after a pass, reprinting only what changed.

Diffs and dumps need the module's text after every pass that changed it.
Printing a 50k-instruction module takes a few tenths of a second, but a
pass usually touches few instructions.  :class:`SnapshotCache` keeps, per
print form, every instruction's printed line and every computation's
text, and asks a :class:`~hlorun.ir.changes.ModuleTracker` what changed
since it last printed: the lines of changed instructions and of their
users (which print their names) are printed again, the computations that
hold them are put together again from the lines (in a fresh post order),
and everything else is reused.

``state`` tokens let several listeners share one module state (the
runner's ``state``: passes that reported a change so far): asked again
with the token it printed for, a form is returned as it was.  Attached to
a pipeline run (:meth:`SnapshotCache.attach`), the cache uses the runner's
tracker, so diffs, dumps, checkers and ``--check-changed`` share one scan
per module state.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Hashable

from ..ir.changes import ModuleTracker
from ..ir.module import Computation, Instruction, Module
from ..text.printer import PRESETS, _header, _stack_frames, print_computation


class _Form:
    """What one print form has printed so far."""

    def __init__(self) -> None:
        self.module: Module | None = None
        self.tracker: ModuleTracker | None = None
        self.gen = -1
        self.state: Any = object()
        self.lines: dict[Instruction, str] = {}
        self.comps: dict[Computation, str] = {}
        self.names: dict[Computation, str] = {}
        self.order: list[Computation] = []
        self.out: dict[str, str] = {}


class SnapshotCache:
    def __init__(self, tracker: ModuleTracker | None = None) -> None:
        self._tracker = tracker or ModuleTracker()
        self._run: Any = None
        self._forms: dict[tuple, _Form] = {}
        self._order_memo: tuple | None = None
        self.printed = 0  # computations put together again (statistics)
        self.reused = 0  # computations reused
        self.lines_printed = 0  # instruction lines printed

    def attach(self, run: Any) -> None:
        """Share ``run``'s tracker (a :class:`hlorun.pipeline.run.PipelineRunner`)."""
        self._run = run

    def _scan(self, module: Module) -> ModuleTracker:
        run = self._run
        tracker = getattr(run, "tracker", None)
        if tracker is not None:
            tracker.scan(module, run.scan_token)
            return tracker
        self._tracker.scan(module)
        return self._tracker

    def texts(self, module: Module, form: str = "diff",
              state: Hashable | None = None) -> dict[str, str]:
        """Computation name -> printed text (``form``: a printer preset), in
        print order.  The dict returned is never changed afterwards."""
        key = (form, module.is_scheduled, module.compact_gte)
        f = self._forms.get(key)
        if f is None:
            f = self._forms[key] = _Form()
        if state is not None and f.module is module and f.state == state:
            return f.out
        tracker = self._scan(module)
        if f.module is not module or f.tracker is not tracker:
            f.__init__()
            f.module, f.tracker = module, tracker
        elif f.gen == tracker.gen:
            f.state = state if state is not None else object()
            self.reused += len(f.comps)
            return f.out
        self._update(f, module, form, tracker)
        f.gen = tracker.gen
        tracker.cache[("snapshot-form", id(f))] = f  # keeps the log from f.gen on
        f.state = state if state is not None else object()
        return f.out

    def _print_order(self, module: Module, tracker: ModuleTracker) -> list[Computation]:
        """``module.print_order()``, computed once per module state for
        all forms (the tracker has just scanned ``module``)."""
        memo = self._order_memo
        if memo is not None and memo[0] is module and memo[1] is tracker \
                and memo[2] == tracker.gen:
            return memo[3]
        order = module.print_order()
        self._order_memo = (module, tracker, tracker.gen, order)
        return order

    def _update(self, f: _Form, module: Module, form: str, tracker: ModuleTracker) -> None:
        opts = PRESETS[form]
        if opts.canonical_names:
            raise ValueError("SnapshotCache does not cache canonical-name prints")
        comps = module.computations
        dirty: set[Computation]
        if f.gen < 0:
            ch = None
            dirty = set(comps)
        else:
            ch = tracker.changes_since(f.gen)
            if ch.full:
                f.lines.clear()
                f.comps.clear()
                dirty = set(comps)
            else:
                dirty = tracker.touched(ch)
                lines = f.lines
                stale: set[Instruction] = set(ch.instructions)
                stale.update(ch.removed)
                for i in ch.instructions:
                    stale.update(i._users)  # they print its name
                    stale.update(i.control_successors)
                if module.compact_gte:
                    # users print get-tuple-element chains as %x#0#1
                    todo = [i for i in stale if i.opcode == "get-tuple-element"]
                    while todo:
                        g = todo.pop()
                        for u in g._users:
                            if u not in stale:
                                stale.add(u)
                                if u.opcode == "get-tuple-element":
                                    todo.append(u)
                for i in stale:
                    if lines.pop(i, None) is not None or i in ch.instructions:
                        c = tracker.container(i)
                        if c is not None:
                            dirty.add(c)
                renamed = [c for c in ch.computations if f.names.get(c, c.name) != c.name]
                if renamed:  # callers print callee names
                    lines.clear()
                    dirty = set(comps)
        if ch is None or ch.full or ch.calls or ch.header:
            f.order = self._print_order(module, tracker)
        scheduled = module.is_scheduled
        cache = f.comps
        for c in dirty:
            cache.pop(c, None)
        out: dict[str, str] = {}
        names: dict[Computation, str] = {}
        for c in f.order:
            text = cache.get(c)
            if text is None:
                before = len(f.lines)
                text = cache[c] = print_computation(c, opts, scheduled=scheduled, lines=f.lines)
                self.lines_printed += len(f.lines) - before
                self.printed += 1
            else:
                self.reused += 1
            out[c.name] = text
            names[c] = c.name
        if len(cache) > len(names):
            for c in [c for c in cache if c not in names]:
                del cache[c]
                for i in c._instructions:
                    f.lines.pop(i, None)
        f.names = names
        f.out = out

    def module_text(self, module: Module, state: Hashable | None = None, form: str = "full") -> str:
        """The whole module as ``print_module(module, form=form)`` prints it."""
        opts = PRESETS[form]
        if opts.compact_gte is None:
            opts = replace(opts, compact_gte=module.compact_gte)
        out = [_header(module, opts)]
        if opts.stack_frames and opts.metadata and module.stack_frames:
            out.append(_stack_frames(module))
        out.append("\n\n")
        for text in self.texts(module, form, state).values():
            out.append(text)
            out.append("\n\n")
        return "".join(out)
