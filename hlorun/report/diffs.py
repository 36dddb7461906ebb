"""Per-pass unified diffs (LLVM's ``-print-changed=diff``), computed per
computation so that big modules stay cheap.

:class:`DiffListener` keeps the printed text of every computation as of the
last diff.  After a pass that changed the module (every pass with
``mode="all"``) it takes a new snapshot (:class:`~hlorun.pipeline.snapshots.SnapshotCache`
reprints only the instructions that changed), compares the texts
computation by computation (one string compare for an unchanged one) and
diffs only the ones that differ.  A diff trims the common head and tail
lines; a long middle is cut at lines unique to both sides (patience diff)
before difflib sees it, so no diff is quadratic in a 50k-line computation.
Passes filtered out by ``filter_re`` only mark the snapshot stale; it is
refreshed right before the next pass that will be shown.
"""

from __future__ import annotations

import difflib
import re
from typing import Callable, Iterable

from ..ir.module import Module
from ..pipeline.run import Listener, PassEvent
from ..text.printer import PRESETS, print_computation
from ..pipeline.snapshots import SnapshotCache

Sink = Callable[[str, list[str]], None]


def snapshot(module: Module, form: str = "diff", cache: "SnapshotCache | None" = None,
             state=None) -> dict[str, str]:
    """Computation name -> printed text, in print order (reprinting only
    changed computations when a :class:`SnapshotCache` is given)."""
    if cache is not None:
        return cache.texts(module, form, state)
    opts = PRESETS[form]
    return {c.name: print_computation(c, opts, scheduled=module.is_scheduled)
            for c in module.print_order()}


#: Middle sections (after trimming the common head and tail) up to this
#: many lines go to difflib; longer ones are first cut at lines that occur
#: exactly once on each side (patience diff), so huge changed computations
#: stay near-linear.
DIFFLIB_LIMIT = 2000


def _lis(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Longest chain of pairs increasing in both coordinates (pairs sorted
    by the first), O(n log n)."""
    import bisect
    tails: list[int] = []
    tail_idx: list[int] = []
    prev = [-1] * len(pairs)
    for k, (_, j) in enumerate(pairs):
        pos = bisect.bisect_left(tails, j)
        if pos == len(tails):
            tails.append(j)
            tail_idx.append(k)
        else:
            tails[pos] = j
            tail_idx[pos] = k
        prev[k] = tail_idx[pos - 1] if pos else -1
    out = []
    k = tail_idx[-1] if tail_idx else -1
    while k >= 0:
        out.append(pairs[k])
        k = prev[k]
    out.reverse()
    return out


def _opcodes(a: list[str], b: list[str], a0: int, b0: int, out: list) -> None:
    """Append difflib-style opcodes for a -> b (offsets a0, b0)."""
    n = min(len(a), len(b))
    head = 0
    while head < n and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < n - head and a[len(a) - 1 - tail] == b[len(b) - 1 - tail]:
        tail += 1
    if head:
        out.append(("equal", a0, a0 + head, b0, b0 + head))
    am, bm = a[head:len(a) - tail], b[head:len(b) - tail]
    ma, mb = a0 + head, b0 + head
    if am and bm and len(am) + len(bm) > DIFFLIB_LIMIT:
        count: dict[str, list[int]] = {}
        for i, ln in enumerate(am):
            c = count.get(ln)
            if c is None:
                count[ln] = [1, 0, i, -1]
            else:
                c[0] += 1
        for j, ln in enumerate(bm):
            c = count.get(ln)
            if c is not None:
                c[1] += 1
                c[3] = j
        pairs = sorted((c[2], c[3]) for c in count.values() if c[0] == 1 and c[1] == 1)
        anchors = _lis(pairs)
        if anchors:
            pi = pj = 0
            for i, j in anchors:
                # Most anchors follow each other: only gaps with lines on
                # both sides need a diff of their own.
                if i > pi and j > pj:
                    _opcodes(am[pi:i], bm[pj:j], ma + pi, mb + pj, out)
                elif i > pi:
                    out.append(("delete", ma + pi, ma + i, mb + pj, mb + pj))
                elif j > pj:
                    out.append(("insert", ma + pi, ma + pi, mb + pj, mb + j))
                out.append(("equal", ma + i, ma + i + 1, mb + j, mb + j + 1))
                pi, pj = i + 1, j + 1
            _opcodes(am[pi:], bm[pj:], ma + pi, mb + pj, out)
        else:
            out.append(("replace", ma, ma + len(am), mb, mb + len(bm)))
    elif am or bm:
        sm = difflib.SequenceMatcher(None, am, bm, autojunk=False)
        for tag, i1, i2, j1, j2 in sm.get_opcodes():
            out.append((tag, i1 + ma, i2 + ma, j1 + mb, j2 + mb))
    if tail:
        out.append(("equal", a0 + len(a) - tail, a0 + len(a), b0 + len(b) - tail, b0 + len(b)))


def _trimmed_opcodes(a: list[str], b: list[str]):
    """Opcodes for a -> b with adjacent equal runs merged."""
    raw: list = []
    _opcodes(a, b, 0, 0, raw)
    ops: list = []
    for op in raw:
        if ops and op[0] == "equal" and ops[-1][0] == "equal" and ops[-1][2] == op[1]:
            last = ops[-1]
            ops[-1] = ("equal", last[1], op[2], last[3], op[4])
        elif op[1] != op[2] or op[3] != op[4]:
            ops.append(op)
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
                 form: str = "diff", context: int = 3, cache: SnapshotCache | None = None):
        self.sink = sink
        self.cache = cache or SnapshotCache()
        self._run = None
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

    def _state(self):
        return getattr(self._run, "state", None)

    def on_run_start(self, run, module: Module) -> None:
        self._run = run
        self.cache.attach(run)
        self._stale = True

    def on_before_pass(self, ev: PassEvent, module: Module) -> None:
        if self._selected(ev) and self._stale:
            self._snap = snapshot(module, self.form, self.cache, self._state())
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
        after = snapshot(module, self.form, self.cache, self._state())
        lines = diff_snapshots(self._snap or {}, after, self.context)
        self._snap = after
        self.sink(header, lines)
        self.shown += 1

    def on_pass_failure(self, f, module: Module) -> None:
        self._stale = True


def render_lines(lines: Iterable[str]) -> str:
    return "\n".join(lines)
