"""Per-pass unified diffs (LLVM's ``-print-changed=diff``), computed per
computation so that big modules stay cheap.

:class:`DiffListener` keeps the printed text of every computation as of the
last diff.  After a pass that changed the module (every pass with
``mode="all"``) it prints the computations again, compares them with the
kept texts (string equality: unchanged computations cost one print and one
compare), and diffs only the ones that differ.  Each diff trims the common
head and tail lines before running difflib on what remains, so a local
change in a 50k-line computation is a small diff problem.  Passes filtered
out by ``filter_re`` only mark the snapshot stale; it is refreshed right
before the next pass that will be shown.
"""

from __future__ import annotations

import difflib
import re
from typing import Callable, Iterable

from .ir.module import Module
from .pipeline import Listener, PassEvent
from .printer import PRESETS, print_computation

Sink = Callable[[str, list[str]], None]


def snapshot(module: Module, form: str = "diff") -> dict[str, str]:
    """Computation name -> printed text, in print order."""
    opts = PRESETS[form]
    return {c.name: print_computation(c, opts, scheduled=module.is_scheduled)
            for c in module.print_order()}


def _trimmed_opcodes(a: list[str], b: list[str]):
    """difflib opcodes for a -> b, with the common head and tail handled
    without difflib."""
    n = min(len(a), len(b))
    head = 0
    while head < n and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < n - head and a[len(a) - 1 - tail] == b[len(b) - 1 - tail]:
        tail += 1
    ops = []
    if head:
        ops.append(("equal", 0, head, 0, head))
    am, bm = a[head:len(a) - tail], b[head:len(b) - tail]
    if am or bm:
        sm = difflib.SequenceMatcher(None, am, bm, autojunk=len(am) + len(bm) > 4000)
        for tag, i1, i2, j1, j2 in sm.get_opcodes():
            ops.append((tag, i1 + head, i2 + head, j1 + head, j2 + head))
    if tail:
        ops.append(("equal", len(a) - tail, len(a), len(b) - tail, len(b)))
    return ops


def unified(a: list[str], b: list[str], context: int = 3, label: str = "",
            a_start: int = 1, b_start: int = 1) -> list[str]:
    """Unified-diff hunks (without ---/+++ lines) of two line lists."""
    out: list[str] = []
    ops = _trimmed_opcodes(a, b)
    # Group like difflib.SequenceMatcher.get_grouped_opcodes, on our opcodes.
    groups = []
    group: list = []
    for tag, i1, i2, j1, j2 in ops:
        if tag == "equal":
            if not group:
                continue
            if i2 - i1 > 2 * context:
                group.append((tag, i1, min(i2, i1 + context), j1, min(j2, j1 + context)))
                groups.append(group)
                group = []
                continue
        group.append((tag, i1, i2, j1, j2))
    if group:
        tag, i1, i2, j1, j2 = group[-1]
        if tag == "equal":
            group[-1] = (tag, i1, min(i2, i1 + context), j1, min(j2, j1 + context))
        groups.append(group)
    for g in groups:
        # leading context
        tag, i1, i2, j1, j2 = g[0]
        c1 = max(0, i1 - context)
        d1 = max(0, j1 - context)
        lead = [(" ", a[k]) for k in range(c1, i1)]
        body = []
        for tag, i1, i2, j1, j2 in g:
            if tag == "equal":
                body.extend((" ", a[k]) for k in range(i1, i2))
                continue
            body.extend(("-", a[k]) for k in range(i1, i2))
            body.extend(("+", b[k]) for k in range(j1, j2))
        lines = lead + body
        na = sum(1 for s, _ in lines if s != "+")
        nb = sum(1 for s, _ in lines if s != "-")
        out.append(f"@@ -{a_start + c1},{na} +{b_start + d1},{nb} @@{(' ' + label) if label else ''}")
        out.extend(s + t for s, t in lines)
    return out


def diff_snapshots(before: dict[str, str], after: dict[str, str], context: int = 3) -> list[str]:
    """Hunks for every computation that differs (added and removed
    computations in full)."""
    out: list[str] = []
    line_a = line_b = 3  # header line + blank line, as printed
    names = list(after)
    for name in before:
        if name not in after:
            names.append(name)
    pos_a, pos_b = {}, {}
    for name, text in before.items():
        pos_a[name] = line_a
        line_a += text.count("\n") + 2
    for name, text in after.items():
        pos_b[name] = line_b
        line_b += text.count("\n") + 2
    for name in names:
        a, b = before.get(name), after.get(name)
        if a == b:
            continue
        al = a.split("\n") if a is not None else []
        bl = b.split("\n") if b is not None else []
        out.extend(unified(al, bl, context, name, pos_a.get(name, 1), pos_b.get(name, 1)))
    return out


class DiffListener(Listener):
    """Send a unified diff per shown pass to ``sink(header, lines)``.

    ``mode``: "changed" (passes that reported a change), "all" (every pass;
    unchanged ones get an empty diff), "none".  ``filter_re`` (a regex) is
    searched in the pass path (``pipeline/name``)."""

    def __init__(self, sink: Sink, mode: str = "changed", filter_re: str | None = None,
                 form: str = "diff", context: int = 3):
        self.sink = sink
        self.mode = mode
        self.filter = re.compile(filter_re) if filter_re else None
        self.form = form
        self.context = context
        self._snap: dict[str, str] | None = None
        self._stale = True
        self.shown = 0

    def _selected(self, ev: PassEvent) -> bool:
        if self.mode == "none":
            return False
        if self.filter is not None and not self.filter.search(ev.path):
            return False
        return True

    def on_run_start(self, run, module: Module) -> None:
        self._stale = True

    def on_before_pass(self, ev: PassEvent, module: Module) -> None:
        if self._selected(ev) and self._stale:
            self._snap = snapshot(module, self.form)
            self._stale = False

    def on_after_pass(self, ev: PassEvent, module: Module) -> None:
        if not self._selected(ev):
            if ev.changed:
                self._stale = True
            return
        if not ev.changed and self.mode != "all":
            return
        header = f"--- before #{ev.index} {ev.path}\n+++ after  #{ev.index} {ev.path}"
        if not ev.changed:
            self.sink(header + "  (unchanged)", [])
            self.shown += 1
            return
        after = snapshot(module, self.form)
        lines = diff_snapshots(self._snap or {}, after, self.context)
        self._snap = after
        self.sink(header, lines)
        self.shown += 1

    def on_pass_failure(self, f, module: Module) -> None:
        self._stale = True


def render_lines(lines: Iterable[str]) -> str:
    return "\n".join(lines)
