"""The heap simulator: XLA's ``HeapSimulator::RunComputation`` (replay of
define/free events over the flattened schedule, with reuse of dying operand
buffers) and ``GlobalDecreasingSizeBestFitHeap`` (best fit in decreasing
size -- spatial -- or decreasing live-range length -- temporal -- order;
the smaller heap wins, spatial on a tie).

Times inside the best-fit heap are event counters (every alloc, share and
free is one tick), as in XLA, so a buffer freed at a step never overlaps one
allocated later in the same step but does overlap one allocated earlier.

Overlap queries are output-sensitive: a segment tree over event time holds
each committed interval on its canonical nodes (a point query at the start
finds every interval containing it), and a flat array indexed by start time
finds the intervals that start inside the query.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

import numpy as np

INT64_MAX = (1 << 63) - 1


@dataclass
class Interval:
    key: object  # the HloValue
    size: int
    start: int
    end: int = -1
    colocations: list = field(default_factory=list)
    need_allocation: bool = True


@dataclass
class HeapResult:
    chunks: dict  # value -> (offset, size)
    heap_size: int
    events: list  # (kind, value, share_with) in order: "alloc" | "free" | "share"


class _OverlapIndex:
    def __init__(self, horizon: int):
        n = 1
        while n < max(1, horizon):
            n *= 2
        self.n = n
        self.nodes: list[list[int] | None] = [None] * (2 * n)
        self.starting = np.full(n + 1, -1, dtype=np.int64)  # start time -> interval slot
        self.offsets: list[int] = []
        self.ends: list[int] = []  # chunk end (offset + size)
        self.np_offsets = np.zeros(max(16, horizon), dtype=np.int64)
        self.np_ends = np.zeros(max(16, horizon), dtype=np.int64)

    def add(self, start: int, end: int, offset: int, size: int) -> None:
        slot = len(self.offsets)
        self.offsets.append(offset)
        self.ends.append(offset + size)
        if slot >= len(self.np_offsets):
            self.np_offsets = np.concatenate([self.np_offsets, np.zeros_like(self.np_offsets)])
            self.np_ends = np.concatenate([self.np_ends, np.zeros_like(self.np_ends)])
        self.np_offsets[slot] = offset
        self.np_ends[slot] = offset + size
        self.starting[start] = slot  # event times are unique per interval
        lo, hi = start + self.n, end + self.n + 1
        nodes = self.nodes
        while lo < hi:
            if lo & 1:
                lst = nodes[lo]
                if lst is None:
                    nodes[lo] = [slot]
                else:
                    lst.append(slot)
                lo += 1
            if hi & 1:
                hi -= 1
                lst = nodes[hi]
                if lst is None:
                    nodes[hi] = [slot]
                else:
                    lst.append(slot)
            lo >>= 1
            hi >>= 1

    def query(self, start: int, end: int, out: list[int]) -> None:
        """Append the slots of every interval overlapping [start, end]."""
        i = start + self.n
        nodes = self.nodes
        while i >= 1:
            lst = nodes[i]
            if lst is not None:
                out.extend(lst)
            i >>= 1
        if end > start:
            seg = self.starting[start + 1:end + 1]
            hits = seg[seg >= 0]
            if hits.size:
                out.extend(hits.tolist())


class BestFitHeap:
    """``GlobalDecreasingSizeBestFitHeap`` for one packing strategy."""

    def __init__(self, alignment: int, strategy: str):
        self.alignment = alignment
        self.strategy = strategy

    def run(self, intervals: dict, zero_chunks: dict, horizon: int) -> tuple[dict, int]:
        align = self.alignment
        items = list(intervals.values())
        coloc: dict[int, list[Interval]] = {}
        for iv in items:
            coloc[id(iv)] = _transitive(iv, intervals)
        if self.strategy == "spatial":
            def sort_key(iv: Interval):
                return (-iv.size, iv.start - iv.end, iv.key.id)
        else:
            def sort_key(iv: Interval):
                lo, hi = iv.start, iv.end
                for c in coloc[id(iv)]:
                    lo = min(lo, c.start)
                    hi = max(hi, c.end)
                return (lo - hi, -iv.size, iv.key.id)
        items.sort(key=sort_key)
        index = _OverlapIndex(horizon + 2)
        offsets, ends = index.offsets, index.ends
        chunks: dict = dict(zero_chunks)
        heap_size = 0
        used: list[int] = []
        for iv in items:
            if not iv.need_allocation:
                continue
            cols = coloc[id(iv)]
            max_size = iv.size
            for c in cols:
                if c.size > max_size:
                    max_size = c.size
            used.clear()
            index.query(iv.start, iv.end, used)
            for c in cols:
                index.query(c.start, c.end, used)
            if len(used) > 40:
                offset = _best_fit_np(used, index, iv.size, max_size, align)
            else:
                offset = _best_fit(used, offsets, ends, iv.size, max_size, align)
            end = offset + max_size
            if end > heap_size:
                heap_size = end
            chunks[iv.key] = (offset, max_size)
            index.add(iv.start, iv.end, offset, max_size)
            for c in cols:
                chunks[c.key] = (offset, max_size)
                index.add(c.start, c.end, offset, max_size)
        return chunks, heap_size


def _align_up(x: int, a: int) -> int:
    return (x + a - 1) // a * a if a > 1 else x


def _best_fit(used: list[int], offsets: list[int], ends: list[int], size: int,
              max_size: int, align: int) -> int:
    """MakeFreeChunks + SlicedAllocationFinder::Find for one slice."""
    if not used:
        return 0
    if len(used) > 1:
        used = sorted(set(used), key=offsets.__getitem__)
    free: list[tuple[int, int]] = []  # (offset, end)
    free_start = 0
    cur_off = offsets[used[0]]
    cur_end = ends[used[0]]
    for slot in used[1:]:
        o = offsets[slot]
        if o < cur_end:
            e = ends[slot]
            if e > cur_end:
                cur_end = e
        else:
            if cur_off - free_start >= size:
                free.append((free_start, cur_off))
            a = _align_up(cur_end, align)
            if a > free_start:
                free_start = a
            cur_off, cur_end = o, ends[slot]
    if cur_off - free_start >= size:
        free.append((free_start, cur_off))
    a = _align_up(cur_end, align)
    if a > free_start:
        free_start = a
    best: tuple[int, int] | None = None
    for o, e in free:
        if e - o == 0:
            continue
        first = _align_up(o, align)
        if first + max_size <= e:
            key = (e - o, o)
            if best is None or key < best:
                best = key
    if best is not None:
        return _align_up(best[1], align)
    return _align_up(free_start, align)


def _best_fit_np(used: list[int], index: _OverlapIndex, size: int, max_size: int,
                 align: int) -> int:
    """The same as :func:`_best_fit`, vectorised for many used chunks."""
    u = np.fromiter(used, dtype=np.int64, count=len(used))
    o = index.np_offsets[u]
    e = index.np_ends[u]
    order = np.argsort(o, kind="stable")
    o = o[order]
    e = e[order]
    runmax = np.maximum.accumulate(e)
    # A new group of overlapping used chunks starts where a chunk begins at
    # or after everything before it has ended.
    starts = np.concatenate(([0], np.flatnonzero(o[1:] >= runmax[:-1]) + 1))
    group_begin = o[starts]
    prev_end = np.concatenate(([0], runmax[starts[1:] - 1]))
    if align > 1:
        prev_end = (prev_end + align - 1) // align * align
    free_start = np.maximum.accumulate(prev_end)
    ok = group_begin - free_start >= size
    fs = free_start[ok]
    fe = group_begin[ok]
    last = int(runmax[-1])
    last = (last + align - 1) // align * align if align > 1 else last
    last = max(last, int(free_start[-1]))
    if fs.size:
        first = (fs + align - 1) // align * align if align > 1 else fs
        fit = (fe - fs > 0) & (first + max_size <= fe)
        if fit.any():
            fs, fe = fs[fit], fe[fit]
            sizes = fe - fs
            m = sizes.min()
            best = int(fs[sizes == m].min())
            return (best + align - 1) // align * align if align > 1 else best
    return last


def _transitive(iv: Interval, intervals: dict) -> list[Interval]:
    if not iv.colocations:
        return []
    out: list[Interval] = []
    seen: set[int] = set()
    work = [iv]
    while work:
        cur = work.pop()
        for k in cur.colocations:
            c = intervals[k]
            if id(c) not in seen:
                seen.add(id(c))
                out.append(c)
                work.append(c)
    return out


class HeapSimulation:
    """Replays the schedule for the values to assign and runs the best-fit
    heaps (spatial and temporal; the smaller one wins)."""

    def __init__(self, values: list, ranges: dict, buffer_of: Callable, size_of: Callable,
                 can_share: Callable, alignment: int):
        self.values = values
        self.ranges = ranges  # value id -> LiveRange (copied; sharing mutates ends)
        self.buffer_of = buffer_of
        self.size_of = size_of
        self.can_share = can_share
        self.alignment = alignment

    def run(self, operand_values: Callable[[object], Iterable]) -> HeapResult:
        ranges = {v.id: [self.ranges[v.id].start, self.ranges[v.id].end] for v in self.values}
        order = sorted(self.values, key=lambda v: (ranges[v.id][0], ranges[v.id][1], v.id))
        assign = {v.id for v in self.values}
        horizon = max((r[1] for r in ranges.values()), default=0) + 1
        defined: list[list] = [[] for _ in range(horizon + 1)]
        freed: list[list] = [[] for _ in range(horizon + 1)]
        for v in order:
            s, e = ranges[v.id]
            defined[s].append(v)
            freed[e].append(v)
        group: dict[int, int] = {}
        for v in self.values:
            b = self.buffer_of(v)
            sz = max(self.size_of(x) for x in b.values)
            group[v.id] = sz
        first_alloc: dict[int, object] = {}
        intervals: dict = {}
        zero: dict = {}
        events: list = []
        t = 0

        def alloc(v) -> None:
            nonlocal t
            sz = group[v.id]
            events.append(("alloc", v, None))
            if sz == 0:
                zero[v] = (0, 0)
                return
            intervals[v] = Interval(v, sz, t)
            t += 1

        def share(v, other) -> None:
            nonlocal t
            sz = max(group[v.id], group[other.id])
            group[v.id] = group[other.id] = sz
            events.append(("share", v, other))
            if sz == 0:
                zero[v] = (0, 0)
                return
            intervals[other].colocations.append(v)
            intervals[v] = Interval(v, sz, t, need_allocation=False)
            t += 1

        def free(v) -> None:
            nonlocal t
            events.append(("free", v, None))
            iv = intervals.get(v)
            if iv is None or iv.end != -1:
                return
            iv.end = t
            t += 1

        for step in range(horizon + 1):
            for v in defined[step]:
                buf = self.buffer_of(v)
                if buf.id in first_alloc:
                    share(v, first_alloc[buf.id])
                    continue
                shared = False
                if len(buf.values) == 1:
                    for ov in operand_values(v):
                        if len(self.buffer_of(ov).values) > 1 or ov.id not in assign:
                            continue
                        orange = ranges.get(ov.id)
                        if orange is None or orange[1] != step:
                            continue
                        fl = freed[step]
                        if ov not in fl:
                            continue
                        if v.instruction.opcode != "copy" and self.can_share(ov, v):
                            free(ov)
                            fl.remove(ov)
                            share(v, ov)
                            orange[1] = ranges[v.id][1]
                            shared = True
                            break
                if not shared:
                    alloc(v)
                    first_alloc[buf.id] = v
            for v in freed[step]:
                free(v)
        best_chunks, best_size = None, None
        for strategy in ("spatial", "temporal"):
            chunks, size = BestFitHeap(self.alignment, strategy).run(intervals, zero, t)
            if best_size is None or size < best_size:
                best_chunks, best_size = chunks, size
        return HeapResult(best_chunks or {}, best_size or 0, events)
