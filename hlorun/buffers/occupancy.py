"""Which registered allocations are busy when (for the assigner's scan
over allocations that may take a buffer)."""

from __future__ import annotations


class Occupancy:
    """Which registered allocations are busy when: a segment tree over
    doubled time whose nodes hold bitmasks (Python ints) of allocations.
    A value [s, e] marks its interior (2s+1 .. 2e-1); a buffer whose closed
    span (2s .. 2e) meets a marked point overlaps that allocation by more
    than a touching end, so it cannot go there.  This prunes XLA's linear
    scan over registered allocations without changing its answer."""

    def __init__(self, end_time: int):
        n = 1
        while n < 2 * end_time + 3:
            n *= 2
        self.n = n
        self.cover = [0] * (2 * n)
        self.any = [0] * (2 * n)

    def mark(self, bit: int, s: int, e: int) -> None:
        lo, hi = 2 * s + 1, 2 * e - 1
        if lo > hi:
            return
        m = 1 << bit
        n = self.n
        cover, anym = self.cover, self.any
        l, r = lo + n, hi + n + 1
        touched = []
        while l < r:
            if l & 1:
                cover[l] |= m
                anym[l] |= m
                touched.append(l)
                l += 1
            if r & 1:
                r -= 1
                cover[r] |= m
                anym[r] |= m
                touched.append(r)
            l >>= 1
            r >>= 1
        for t in touched:
            t >>= 1
            while t >= 1 and not (anym[t] & m):
                anym[t] |= m
                t >>= 1

    def query(self, s: int, e: int) -> int:
        """OR of the allocations marked anywhere in [2s, 2e]."""
        lo, hi = 2 * s, 2 * e
        n = self.n
        cover, anym = self.cover, self.any
        out = 0
        l, r = lo + n, hi + n + 1
        ends = []
        while l < r:
            if l & 1:
                out |= anym[l]
                ends.append(l)
                l += 1
            if r & 1:
                r -= 1
                out |= anym[r]
                ends.append(r)
            l >>= 1
            r >>= 1
        for t in ends:
            t >>= 1
            while t >= 1:
                out |= cover[t]
                t >>= 1
        return out
