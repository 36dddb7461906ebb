"""Priority fusion's symbolic-tile check of Triton pairs
(:func:`..triton_indexing.fused_pair_refusal`), split into parts that are
cached until a unit changes.

The walk of a producer fused into a consumer visits, from the consumer's
root: the consumer's own members (the same indices whatever the producer),
the consumer's operands (checked, not walked through), and from each index
that reaches the producer, the producer's members and operands.  Every
visited (instruction, index) is checked, and the pair is refused if any
check fails.  So the pair passes exactly when

* the consumer's *part* passes: every check of its members, and of every
  operand reached other than the producer (:func:`unit_part`, per consumer,
  until it changes: on average a consumer is asked with about three
  producers), and
* the producer's walk from each index reaching it passes
  (:func:`producer_walk_ok`, per producer and index until the producer
  changes: users of one shape reach it with the same index).

Index variables carry their range (:func:`..triton_indexing.root_index`),
so a producer's walk from an index depends on nothing else.  Only whether
the pair passes is cached: a refused pair walks again with
:func:`..triton_indexing.fused_pair_refusal` for its first refusal, the
reason priority fusion reports.
"""

from __future__ import annotations

from ...ir.module import Instruction
from ..triton_indexing import (_REGROUP_CHAIN, _dim_ok, fresh, fused_pair_refusal,
                               operand_indices, root_index)


def _walk(unit: Instruction, start: tuple, reach: dict) -> bool:
    """Walk ``unit`` (a fusion or one instruction) from its root at index
    ``start``: False if a check of a member fails.  The indices reaching
    each operand (checked, not walked through) are added to ``reach``
    (operand -> set of :func:`canonical` indices)."""
    if unit.opcode == "fusion":
        body = unit.fused_computation
        root = body.root
        operands = unit.operands
    else:
        body = None
        root = unit
        operands = None
    seen = set()
    stack = [(root, start)]
    while stack:
        instr, index = stack.pop()
        key = (id(instr), index)
        if key in seen:
            continue
        seen.add(key)
        if (instr.parent is not body) if body is not None else (instr is not unit):
            index = canonical(index)
            got = reach.get(instr)
            if got is None:
                reach[instr] = {index}
            else:
                got.add(index)
            continue
        if instr.opcode not in _REGROUP_CHAIN:
            for pieces in index:
                if not _dim_ok(pieces):
                    return False
        if instr.opcode == "parameter":
            if operands is not None:
                stack.append((operands[instr.parameter_number], index))
            continue
        got = operand_indices(instr, index, fresh)
        if got is None:
            continue
        for o, idx in zip(instr.operands, got):
            if idx is not None and o.shape.is_array and len(idx) == len(o.shape.dimensions):
                stack.append((o, idx))
    return True


def canonical(index: tuple) -> tuple:
    """``index`` with its variables renamed in order of appearance (kind and
    range kept).  A walk from it passes exactly when a walk from ``index``
    does: a walk's checks depend on which digits share a variable, and on
    each variable's kind and range, not on how variables compare.  (Sorting
    by variable only groups a variable's digits; every other order is by
    multiplier, and the digits of one dimension index never share one: they
    start as one digit per dimension, and reshapes place digits at disjoint
    places of the linear index.)  Renamed variables cannot equal the range
    variables a walk makes (``("s", id, d, n)`` with ``id`` positive)."""
    names: dict = {}
    out = []
    for pieces in index:
        dim = []
        for p in pieces:
            v = p[0]
            w = names.get(v)
            if w is None:
                r = len(names)
                w = names[v] = ("d", r, v[-1]) if v[0] == "d" else ("s", -1 - r, 0, v[-1])
            dim.append((w, p[1], p[2], p[3]))
        out.append(tuple(dim))
    return tuple(out)


def _part(unit: Instruction, start: tuple) -> tuple[bool, dict, frozenset]:
    """``(members pass, operand -> indices reaching it, operands whose
    checks fail)`` of ``unit`` walked from its root at ``start`` (each
    index :func:`canonical`; when a member fails, the rest is incomplete)."""
    reach: dict = {}
    ok = _walk(unit, start, reach)
    bad = frozenset(o for o, idxs in reach.items()
                    if not all(_dim_ok(pieces) for index in idxs for pieces in index))
    return ok, reach, bad


def unit_part(unit: Instruction) -> tuple[bool, dict, frozenset]:
    """:func:`_part` of a consumer ``unit`` from its root's own index."""
    return _part(unit, root_index(_root(unit)))


def _root(unit: Instruction) -> Instruction:
    return unit.fused_computation.root if unit.opcode == "fusion" else unit


def regroups(unit: Instruction) -> bool:
    """Whether ``unit`` has a bitcast or reshape member.  Without one, a
    walk from an index that passes its checks passes: the other ops (the
    elementwise ones, convert, copy, broadcast, transpose, slice, reduce)
    give their operands dimension indices of their own index (permuted,
    selected, strided alike) or new whole range variables."""
    if unit.opcode == "fusion":
        return any(m.opcode in ("bitcast", "reshape") for m in unit.fused_computation.instructions)
    return unit.opcode in ("bitcast", "reshape")


#: the key of a unit's own part (walked from its root's index) among its parts
ROOT = None


class TileCache:
    """The parts of one priority-fusion queue (see module doc).

    ``parts[unit]``: the unit's :func:`_part` walked from its root
    (:data:`ROOT`, as a consumer) and from each index that reached it (as a
    producer), until the unit changes.  A fusion that priority fusion
    builds or grows keeps the parts the consumer had, extended through the
    producer (:meth:`fused`): its body is the consumer's with the
    producer's members where the producer's parameter was, so a walk of it
    is the consumer's, continued into the producer from each index that
    reached the producer."""

    def __init__(self):
        self.parts: dict[Instruction, dict] = {}
        self.regroups: dict[Instruction, bool] = {}
        # what fused() worked out for fusions being built (restored by restore)
        self.carried: dict[Instruction, tuple[dict, bool | None]] = {}

    def forget(self, instr: Instruction) -> None:
        self.parts.pop(instr, None)
        self.regroups.pop(instr, None)

    def restore(self, instr: Instruction) -> None:
        """After ``forget``: what :meth:`fused` worked out."""
        got = self.carried.pop(instr, None)
        if got is not None:
            parts, rg = got
            if parts:
                self.parts[instr] = parts
            if rg is not None:
                self.regroups[instr] = rg

    def rename(self, instr: Instruction, old: Instruction, new: Instruction) -> None:
        """``instr`` reads ``new`` where it read ``old``."""
        parts = self.parts.get(instr)
        if parts is None:
            got = self.carried.get(instr)
            parts = got[0] if got is not None else None
        if parts:
            for key, (ok, reach, bad) in parts.items():
                if old in reach:
                    reach = {new if k is old else k: v for k, v in reach.items()}
                    if old in bad:
                        bad = frozenset(new if k is old else k for k in bad)
                    parts[key] = (ok, reach, bad)

    def _part(self, unit: Instruction, key) -> tuple[bool, dict, frozenset]:
        parts = self.parts.get(unit)
        if parts is None:
            parts = self.parts[unit] = {}
        got = parts.get(key, False)
        if got is False:
            got = parts[key] = unit_part(unit) if key is ROOT else _part(unit, key)
        return got

    def _regroups(self, unit: Instruction) -> bool:
        rg = self.regroups.get(unit)
        if rg is None:
            rg = self.regroups[unit] = regroups(unit)
        return rg

    def fused(self, producer: Instruction, consumer: Instruction, fusion: Instruction) -> None:
        """``producer`` is about to be fused into ``consumer`` (becoming or
        growing ``fusion``): extend the consumer's parts through the
        producer as it is now."""
        rg = self.regroups.get(consumer)
        if rg is not None:
            rg = rg or self._regroups(producer)
        parts = self.parts.get(consumer)
        out = {}
        for key, part in (parts or {}).items():
            out[key] = self._extend(part, producer)
        self.carried[fusion] = (out, rg)

    def _extend(self, part: tuple, producer: Instruction) -> tuple:
        ok, reach, bad = part
        if not ok:
            return part
        out = {k: v for k, v in reach.items() if k is not producer}
        new_bad = set(bad)
        new_bad.discard(producer)
        for index in reach.get(producer, ()):
            p_ok, p_reach, p_bad = self._part(producer, index)
            if not p_ok:
                return _FAILED
            new_bad |= p_bad
            for o, idxs in p_reach.items():
                got = out.get(o)
                out[o] = idxs if got is None else got | idxs
        return True, out, frozenset(new_bad)

    def refusal(self, producer: Instruction, consumer: Instruction) -> str | None:
        """:func:`..triton_indexing.fused_pair_refusal` (the same result)."""
        if consumer.shape.is_tuple or producer.shape.is_tuple:
            return None
        ok, reach, bad = self._part(consumer, ROOT)
        if ok and (not bad or bad == {producer}):
            idxs = reach.get(producer)
            if not idxs:
                return None
            # every index reaching the producer passes, and no regroup in it
            if not bad and not self._regroups(producer):
                return None
            for index in idxs:
                p_ok, _, p_bad = self._part(producer, index)
                if not p_ok or p_bad:
                    break
            else:
                return None
        return fused_pair_refusal(producer, consumer)


_FAILED = (False, {}, frozenset())


__all__ = ["ROOT", "TileCache", "canonical", "regroups", "unit_part"]
