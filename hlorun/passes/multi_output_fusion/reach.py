"""Reachability for multi-output fusion, the way XLA's ``HloDfsReachability``
answers it: every instruction has a position in a topological order, and
"does ``a`` reach ``b``" is a depth-first search from ``b`` towards its
operands that never enters an instruction ordered before ``a`` (nothing
there can lie on a path from ``a``).  Memory is O(n); a query costs the
part of the graph between the two positions that leads to ``b``.

XLA rebuilds the order (a post order of the whole computation) after every
fusion, O(n) each.  Here the order is repaired instead (Pearce & Kelly,
"A dynamic topological sort algorithm for directed acyclic graphs", 2006):
a merge adds edges into and out of the surviving fusion; for an edge
``x -> y`` that points backwards in the order, only the instructions
reachable from ``y`` and ordered before ``x``, and those reaching ``x`` and
ordered after ``y``, are renumbered, among the positions they already had.

``get-tuple-element``\\ s created by the pass (of a fusion that became
multi-output) get no position of their own: they stand at their operand's,
and searches pass through them.

Edges are operands and control predecessors, as in XLA.
"""

from __future__ import annotations

from ...ir.module import Computation, Instruction


class DfsReach:
    """Topological positions kept valid across multi-output merges, and
    pruned-DFS reachability queries over them."""

    def __init__(self, comp: Computation):
        self.pos: dict[Instruction, int] = {x: i * _GAP for i, x in enumerate(comp.post_order())}
        #: instructions renumbered by order repairs (a cost figure for tests)
        self.moved = 0

    # -- positions --------------------------------------------------------------
    def _at(self, x: Instruction) -> int:
        k = self.pos.get(x)
        while k is None:  # a get-tuple-element the pass created
            x = x.operands[0]
            k = self.pos.get(x)
        return k

    def _resolve(self, x: Instruction) -> Instruction:
        while x not in self.pos:
            x = x.operands[0]
        return x

    def replaced(self, old: Instruction, new: Instruction) -> None:
        """``new`` took ``old``'s place (same operands and users)."""
        self.pos[new] = self.pos.pop(old)

    # -- queries ----------------------------------------------------------------
    def reaches(self, a: Instruction, b: Instruction) -> bool:
        """Is there a path from ``a`` to ``b`` (or ``a is b``)?"""
        if a is b:
            return True
        lo = self._at(a)
        if self._at(b) < lo:
            return False
        pos = self.pos
        seen = {b}
        stack = [b]
        while stack:
            x = stack.pop()
            for o in x.operands:
                if o is a:
                    return True
                if o in seen:
                    continue
                k = pos.get(o)
                if (k if k is not None else self._at(o)) >= lo:
                    seen.add(o)
                    stack.append(o)
            for o in x.control_predecessors:
                if o is a:
                    return True
                if o not in seen and self._at(o) >= lo:
                    seen.add(o)
                    stack.append(o)
        return False

    def connected(self, a: Instruction, b: Instruction) -> bool:
        return self.reaches(a, b) or self.reaches(b, a)

    # -- merges -----------------------------------------------------------------
    def neighbours(self, x: Instruction) -> tuple[list[Instruction], list[Instruction]]:
        """``x``'s positioned predecessors and successors (through the
        pass's get-tuple-elements), taken before ``x`` is merged away."""
        preds = [self._resolve(o) for o in x.operands]
        preds += [self._resolve(p) for p in x.control_predecessors]
        succs: list[Instruction] = []
        stack = list(x.users) + list(x.control_successors)
        while stack:
            s = stack.pop()
            if s in self.pos:
                succs.append(s)
            else:
                stack.extend(s.users)
                stack.extend(s.control_successors)
        return preds, succs

    def merged(self, fusion: Instruction, gone: Instruction,
               before: tuple[list[Instruction], list[Instruction]]) -> None:
        """``gone`` (whose :meth:`neighbours` were ``before``) was fused
        into ``fusion``: its predecessors now feed the fusion and its
        successors read the fusion.  Repairs the order for each such edge
        that points backwards."""
        self.pos.pop(gone, None)
        preds, succs = before
        for p in preds:
            if p is not fusion and p is not gone and p.parent is not None and \
                    self.pos[p] > self.pos[fusion]:
                self._add_edge(p, fusion)
        for s in succs:
            if s is not fusion and s is not gone and s.parent is not None and \
                    self.pos[s] < self.pos[fusion]:
                self._add_edge(fusion, s)

    def _add_edge(self, x: Instruction, y: Instruction) -> None:
        """Make room for the edge ``x -> y`` (``y`` ordered before ``x``):
        either everything that reaches ``x`` from after ``y`` moves just
        before ``y``, or everything ``y`` reaches from before ``x`` moves
        just after ``x``.  Both sides are searched in step and the one
        that is complete first moves (Pearce & Kelly renumber both; moving
        one side needs gaps between positions, hence the spacing)."""
        pos = self.pos
        lb, ub = pos[y], pos[x]
        back = _Side(x, lb, True, pos)
        fwd = _Side(y, ub, False, pos)
        while True:
            if not back.step(y):
                side, lo, hi = back, back.outside, lb
                break
            if not fwd.step(x):
                side, lo, hi = fwd, ub, fwd.outside
                break
        block = sorted(side.members, key=pos.__getitem__)
        n = len(block)
        if lo is None:
            lo = hi - (n + 1) * _GAP
        if hi is None:
            hi = lo + (n + 1) * _GAP
        if hi - lo <= n:
            # No room (or an outside neighbour shares a position with x or y,
            # which the sides' strict comparisons left outside): renumber
            # with fresh gaps and search again, now that positions are distinct.
            self._spread()
            if pos[y] < pos[x]:
                self._add_edge(x, y)
            return
        step = (hi - lo) // (n + 1)
        for i, m in enumerate(block, 1):
            pos[m] = lo + i * step
        self.moved += n

    def _spread(self) -> None:
        """Renumber every position with gaps of ``_GAP`` (order kept)."""
        pos = self.pos
        for i, x in enumerate(sorted(pos, key=pos.__getitem__)):
            pos[x] = i * _GAP


#: spacing between positions, so a side can move into a gap
_GAP = 1 << 32


class PlainReach:
    """The reference for :class:`DfsReach` (``multi_output_fusion:
    {reference: true}``): the same queries by an unpruned search of the
    current graph, no order kept."""

    def __init__(self, comp: Computation):
        self.moved = 0

    def replaced(self, old: Instruction, new: Instruction) -> None:
        pass

    def neighbours(self, x: Instruction) -> None:
        return None

    def merged(self, fusion: Instruction, gone: Instruction, before: None) -> None:
        pass

    def reaches(self, a: Instruction, b: Instruction) -> bool:
        seen = {b}
        stack = [b]
        while stack:
            x = stack.pop()
            if x is a:
                return True
            for o in x.operands + x.control_predecessors:
                if o not in seen:
                    seen.add(o)
                    stack.append(o)
        return False

    def connected(self, a: Instruction, b: Instruction) -> bool:
        return self.reaches(a, b) or self.reaches(b, a)


class _Side:
    """One side of an order repair, searched one instruction at a time:
    backwards (operands) from ``x`` over positions above ``bound``, or
    forwards (users) from ``y`` over positions below ``bound``.
    ``outside`` is the nearest position of a neighbour left out (the
    highest predecessor / lowest successor), None if none."""

    __slots__ = ("members", "seen", "stack", "bound", "back", "pos", "outside")

    def __init__(self, start: Instruction, bound: int, back: bool, pos: dict):
        self.members = [start]
        self.seen = {start}
        self.stack = [start]
        self.bound = bound
        self.back = back
        self.pos = pos
        self.outside: int | None = None

    def step(self, target: Instruction) -> bool:
        """Expand one instruction; False once the side is complete."""
        if not self.stack:
            return False
        n = self.stack.pop()
        if self.back:
            nxt = n.operands + n.control_predecessors
        else:
            nxt = list(n.users)
            nxt.extend(n.control_successors)
        pos, seen, bound = self.pos, self.seen, self.bound
        for m in nxt:
            if m in seen:
                continue
            if m is target:
                raise ValueError(f"merging makes a cycle through {target.name}")
            seen.add(m)
            k = pos.get(m)
            if k is None:  # a get-tuple-element the pass made: at its operand's position
                self.stack.append(m)
            elif (k > bound) if self.back else (k < bound):
                self.members.append(m)
                self.stack.append(m)
            elif self.outside is None or ((k > self.outside) if self.back else (k < self.outside)):
                self.outside = k
        return True



__all__ = ["DfsReach", "PlainReach"]
