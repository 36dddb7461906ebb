"""Priority fusion's utilization walks (:func:`.utilization._utilization`) from
per-unit summaries, so that a big fusion is not walked again for every
estimate it takes part in.

The walk of a would-be fusion of ``producer`` into ``consumer`` visits the
consumer's members (users before operands), then the producer's.  Its
first half is exactly the walk of the consumer alone, except that the
producer is a member instead of an external operand; the second half
depends on the consumer only through the producer root's use-root set
``R`` -- every set the producer's members get is ``R`` itself, a set of
producer members and external operands, or a union of both -- and through
the external operands both read.  So:

* :class:`UnitWalk` -- a unit's walk alone (its estimate as a kernel of its
  own): flops, element reads and emissions per external operand, IR size,
  the external operands read through a tiled transpose;
* :class:`ProducerPart` -- the producer's half of a pair walk, computed
  with ``R`` standing for a set whose totals (summed utilization and
  emissions) are given, memoised per producer on those totals;
* :meth:`WalkCache.walk` joins them: the consumer's walk less the producer
  plus the producer part, flops folded in the same order.

The result is the full walk's, bit for bit: a float is never summed in
another order.  Where that cannot be guaranteed the caller walks in full:
a union of ``R`` with other roots is summed in the producer's half (its
sum depends on the members of ``R`` and their iteration order), an
external operand is read by both halves (its root sets merge), or the
consumer does not read the producer at all.

The summaries name instructions (external operands), so a unit's walk is
forgotten when it changes or when one of its operands is replaced
(:meth:`WalkCache.forget`)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce
from operator import add
from types import MappingProxyType
from typing import Mapping

from ...ir.module import Instruction
from .analysis import FusionView
from .coalescing import has_bad_transpose, is_input_fusible_reduction
from .device import Device
from .model import read_entries
from .utilization import IrInfo, Units, _Walk, _links, ext_totals, kernel_roots, walk_members


@dataclass(slots=True)
class UnitWalk:
    """One unit (an instruction or a fusion): its members, and its walk as a
    kernel alone."""

    unit: Instruction
    members: list          # fused members in post order (the instruction itself)
    member_set: set
    ops: frozenset         # the members' opcodes
    param_of: Mapping      # body parameter -> operand
    links: Mapping         # param_of and fusion -> its root
    root: Instruction
    flops: float
    totals: dict           # external operand -> (summed utilization, emissions) of its roots
    ir: IrInfo
    unc: list | tuple      # external operands read through a tiled transpose
    reads: tuple           # read_entries of its element reads per external operand
    index: dict | None     # external operand -> its position in reads[0] (None: scan, few)
    bad_transpose: bool    # coalescing.has_bad_transpose of the members
    input_fusible: bool | None = None  # coalescing.is_input_fusible_reduction (lazy)

    def as_walk(self, kind: str) -> _Walk:
        unc = [s.name for s in self.unc] if kind != "transpose" else []
        return _Walk(None, self.flops, unc, self.ir, self.reads)


@dataclass(slots=True)
class ProducerPart:
    """The producer's half of a pair walk, for given totals of its root's set."""

    terms: list            # flops terms, in walk order
    flops: float           # their fold from 0.0 (the pair's flops when the consumer has none)
    ext_reads: dict        # the producer's external operands -> element reads
    unc: list | tuple
    reads: tuple           # read_entries(ext_reads)


class _Outside:
    """Stands for the consumer's roots in a producer part (no utilization
    of its own: summing it with other roots raises KeyError)."""

    __slots__ = ()


class _PairMembers:
    """The member set of a pair view, for ``in`` (all a view's hero searches
    ask of it): the two units' sets, not united (a union of two big
    fusions' sets for every pair estimate was ~2% of priority fusion)."""

    __slots__ = ("p", "c")

    def __init__(self, p: set, c: set):
        self.p, self.c = p, c

    def __contains__(self, x) -> bool:
        return x in self.c or x in self.p


_FAILED = object()
#: the empty ``param_of`` / ``links`` of a unit that is not a fusion (read-only)
_EMPTY: Mapping = MappingProxyType({})
#: interned opcode sets of unit walks (a handful of distinct ones)
_OPS: dict[frozenset, frozenset] = {}
#: up to this many external operands, walk_of finds the producer's read by a scan
_SCAN = 4
_TRANSPOSING = frozenset({"transpose", "copy"})  # what has_bad_transpose looks for


def unit_walk(unit: Instruction, device: Device, members=None) -> UnitWalk:
    u = Units([unit], members)
    root = u.root_of(unit)
    roots = {root: frozenset((root,))}
    util = {root: 1.0}
    size = {root: 1}
    ext_roots: dict = {}
    totals: dict = {}
    terms: list = []
    unc: list = []
    ir_size, splits = walk_members(reversed(u.members), u.member_set, u.param_of, u.unit_set,
                                   roots, util, size, ext_roots, totals, terms.append, unc,
                                   kernel_roots(root))
    ext_reads, emitted, ext_size = ext_totals(ext_roots, util, size, totals)
    sums = {src: totals[id(rs)] for src, rs in ext_roots.items()}
    reads = read_entries(ext_reads, device)
    ops = frozenset([m.opcode for m in u.members])
    ops = _OPS.setdefault(ops, ops)
    # (a walk is kept for every costed unit: shared empties and interned
    # opcode sets were ~500 B of its ~2.4 KB at the queue's peak)
    return UnitWalk(unit, u.members, u.member_set, ops, u.param_of or _EMPTY,
                    _links(u) or _EMPTY, root,
                    reduce(add, terms, 0.0), sums,
                    IrInfo(ir_size + ext_size, splits, emitted), unc or (), reads,
                    {e[0]: i for i, e in enumerate(reads[0])} if len(reads[0]) > _SCAN else None,
                    bool(ops & _TRANSPOSING) and has_bad_transpose(u.members))


def producer_part(pw: UnitWalk, device: Device, outside: tuple[float, int]) -> ProducerPart | None:
    """The producer's half of a pair walk whose root set has totals
    ``outside`` (``pw``: the producer's unit walk); None when the result
    would depend on more than that."""
    mark = frozenset((_Outside(),))
    roots = {pw.root: mark}
    util: dict = {}
    size: dict = {}
    ext_roots: dict = {}
    totals = {id(mark): outside}
    terms: list = []
    unc: list = []
    try:
        walk_members(reversed(pw.members), pw.member_set, pw.param_of, (pw.unit,),
                     roots, util, size, ext_roots, totals, terms.append, unc)
        ext_reads = ext_totals(ext_roots, util, size, totals)[0]
    except KeyError:  # a union with the consumer's roots was summed
        return None
    return ProducerPart(terms, reduce(add, terms, 0.0), ext_reads, unc or (),
                        read_entries(ext_reads, device))


class WalkCache:
    """Unit walks and producer parts of one priority-fusion queue, valid
    until the instruction is rewritten or an operand of it is replaced."""

    def __init__(self, members, device: Device):
        self.members = members
        self.device = device
        self.units: dict[Instruction, UnitWalk] = {}
        self.parts: dict[Instruction, dict] = {}

    def forget(self, instr: Instruction) -> None:
        self.units.pop(instr, None)
        self.parts.pop(instr, None)

    def rename(self, unit: Instruction, old: Instruction, new: Instruction) -> None:
        """``unit``'s operand ``old`` (neither a parameter nor a constant) was
        replaced by ``new`` of the same shape (a consumer by its fusion): the
        walk is the same but for that name, so it is renamed, not redone."""
        self.parts.pop(unit, None)
        w = self.units.get(unit)
        if w is None:
            return

        def keys(d: dict) -> dict:
            return {new if k is old else k: v for k, v in d.items()}

        def values(d: dict) -> dict:
            return {k: new if v is old else v for k, v in d.items()}
        entries, total, net = w.reads
        self.units[unit] = UnitWalk(
            unit, w.members, w.member_set, w.ops, values(w.param_of) or _EMPTY,
            values(w.links) or _EMPTY, w.root,
            w.flops, keys(w.totals), IrInfo(w.ir.size, w.ir.splits, keys(w.ir.emitted)),
            [new if x is old else x for x in w.unc] or (),
            ([(new, *e[1:]) if e[0] is old else e for e in entries], total, net),
            None if w.index is None else keys(w.index), w.bad_transpose, w.input_fusible)

    def unit(self, instr: Instruction) -> UnitWalk:
        got = self.units.get(instr)
        if got is None:
            got = self.units[instr] = unit_walk(instr, self.device, self.members)
        return got

    @staticmethod
    def input_fusible(w: UnitWalk) -> bool:
        """:func:`.coalescing.is_input_fusible_reduction` of a unit (cached in its walk)."""
        got = w.input_fusible
        if got is None:
            got = w.input_fusible = is_input_fusible_reduction(w.unit, member_set=w.member_set)
        return got

    def part(self, producer: Instruction, outside: tuple[float, int]) -> ProducerPart | None:
        memo = self.parts.get(producer)
        if memo is None:
            memo = self.parts[producer] = {}
        got = memo.get(outside)
        if got is None:
            got = producer_part(self.unit(producer), self.device, outside)
            memo[outside] = _FAILED if got is None else got
            return got
        return None if got is _FAILED else got

    def view(self, units: list[Instruction]) -> FusionView:
        """The :class:`.analysis.FusionView` of ``units`` (one unit, or
        producer and consumer) as :func:`.model.estimate` makes it."""
        return self.view_of([self.unit(x) for x in units])

    @staticmethod
    def view_of(ws: list[UnitWalk]) -> FusionView:
        """:meth:`view` from the units' walks."""
        if len(ws) == 1:
            w = ws[0]
            view = FusionView(w.members, w.root, None, w.links)
            view._set, view._ops = w.member_set, w.ops
            return view
        p, c = ws
        view = FusionView(p.members + c.members, c.root, None, p.links | c.links)
        view._set, view._ops = _PairMembers(p.member_set, c.member_set), p.ops | c.ops
        return view

    def walk(self, units: list[Instruction], kind: str) -> _Walk | None:
        """The walk of ``units`` (one unit, or producer and consumer) for an
        emitter ``kind``; None where it must be done in full."""
        return self.walk_of(units, [self.unit(x) for x in units], kind)

    def walk_of(self, units: list[Instruction], ws: list[UnitWalk], kind: str) -> _Walk | None:
        """:meth:`walk` given the units' walks ``ws``."""
        if len(ws) == 1:
            return ws[0].as_walk(kind)
        producer = units[0]
        cw = ws[1]
        outside = cw.totals.get(producer)
        if outside is None:
            return None
        memo = self.parts.get(producer)
        if memo is None:
            memo = self.parts[producer] = {}
        part = memo.get(outside)
        if part is None:
            part = producer_part(ws[0], self.device, outside)
            memo[outside] = _FAILED if part is None else part
        if part is None or part is _FAILED:
            return None
        c_reads = cw.totals  # the consumer's external operands
        if not c_reads.keys().isdisjoint(part.ext_reads):
            return None  # read by both: their root sets merge
        if kind != "transpose":
            unc = [s.name for s in cw.unc if s is not producer] if cw.unc else []
            if part.unc:
                unc += [s.name for s in part.unc]
        else:
            unc = []
        entries, total, net = cw.reads
        p_entries, p_total, p_net = part.reads
        index = cw.index
        if index is None:
            i = next((k for k, e in enumerate(entries) if e[0] is producer), None)
        else:
            i = index.get(producer)
        if i is None:  # the producer is not read
            entries = entries + p_entries
        else:
            _, p_first, p_again, _, _ = entries[i]
            total -= p_first + p_again
            net -= p_first
            entries = entries[:i] + entries[i + 1:] + p_entries
        flops = reduce(add, part.terms, cw.flops) if cw.flops else part.flops
        return _Walk(None, flops, unc, None,
                     (entries, total + p_total, net + p_net))
