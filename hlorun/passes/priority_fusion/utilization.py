"""Element counts through a kernel: XLA's
``GpuHloCostAnalysis::FusionCalculateUtilizations`` (:func:`_utilization`,
the hottest loop of priority fusion, :func:`walk_members`) over the
members of a set of units (:class:`Units`: instructions and fusions, whose
bodies are looked through), and the IR size the emitter would produce
(:class:`IrInfo`, :func:`ir_walk`)."""

from __future__ import annotations

import math
from functools import reduce
from operator import add
from dataclasses import dataclass

from ...ir.module import Instruction
from ...ir.opcode import ELEMENTWISE
from .analysis import fused_members, tiled_transpose
from .flops import (_window_elements, concatenate_flops, reduce_flops_per_output,
                    reduce_window_flops_per_output)
from .op_profiles import DEFAULT_FLOPS_PER_ELEMENT, SM90
from .sizes import _ELEMENTS, _elements


class Units:
    """Resolve operands across fusion boundaries for a set of top-level
    instructions (fusions are looked through)."""

    def __init__(self, units: list[Instruction], members=None):
        self.units = units
        self.unit_set = set(units)
        self.members: list[Instruction] = []
        self.param_of: dict[Instruction, Instruction] = {}  # body parameter -> fusion operand
        for u in units:
            if u.opcode == "fusion":
                body = u.fused_computation
                for p in body.parameters:
                    if p is not None:
                        self.param_of[p] = u.operands[p.parameter_number]
                self.members += members(body) if members is not None else fused_members(body)
            else:
                self.members.append(u)
        self.member_set = set(self.members)

    def root_of(self, unit: Instruction) -> Instruction:
        return unit.fused_computation.root if unit.opcode == "fusion" else unit

    def resolve(self, operand: Instruction) -> Instruction:
        """A member (inside the view) or an external instruction."""
        while operand.opcode == "parameter" and operand in self.param_of:
            operand = self.param_of[operand]
        if operand in self.unit_set:
            return self.root_of(operand)
        return operand


def _links(u: "Units") -> dict:
    links: dict = dict(u.param_of)
    for unit in u.units:
        if unit.opcode == "fusion":
            links[unit] = unit.fused_computation.root
    return links



#: ``ElementalIrEmitter::OpInvalidatesCache``: ops that open basic blocks
INVALIDATES_CACHE = frozenset({"concatenate", "dot", "dynamic-update-slice", "pad", "reduce",
                               "reduce-window"})



@dataclass(slots=True)
class IrInfo:
    """How often the emitter emits a fusion's instructions: ``size`` (all
    emissions), ``splits`` (emissions of cache-invalidating ops) and
    ``emitted``: per fusion operand, the emissions of its parameter."""

    size: int
    splits: int
    emitted: dict


@dataclass(slots=True)
class _Walk:
    ext_reads: dict | None
    flops: float
    uncoalesced: list
    ir: IrInfo | None
    reads: tuple | None = None  # read_entries(ext_reads), when known


def _utilization(u: "Units", root: Instruction, kind: str) -> _Walk:
    """Element reads per external operand, flops, uncoalesced reads and IR
    size of one kernel: XLA's
    ``GpuHloCostAnalysis::FusionCalculateUtilizations``.

    The emitter computes an elementwise op once per element it is asked for,
    however many elementwise users ask (values are cached per index), so
    elementwise ops (and tuples) only pass their *use roots* on: an operand
    is evaluated as often as the roots it reaches elementwise ask for, not
    once per path (a threefry round DAG reads each value twice; counting
    paths doubles the count per round).  A non-elementwise op (broadcast,
    reduce, slice, concatenate, bitcast ...) makes each operand a root of
    its own.  Utilizations are relative (1 = every element once) as in XLA,
    so the outputs of a multi-output fusion share their common values; an
    instruction is *emitted* once per root too (the IR size).

    (The hottest loop of priority fusion: operand resolution and the reads
    per evaluation are written out inline.)"""
    roots: dict[Instruction, frozenset] = {root: frozenset((root,))}
    util: dict[Instruction, float] = {root: 1.0}
    size: dict[Instruction, int] = {root: 1}
    ext_roots: dict[Instruction, frozenset] = {}
    totals: dict[int, tuple[float, int]] = {}
    terms: list[float] = []
    unc: list[Instruction] | None = [] if kind != "transpose" else None
    ir_size, splits = walk_members(reversed(u.members), u.member_set, u.param_of, u.unit_set,
                                   roots, util, size, ext_roots, totals, terms.append, unc,
                                   kernel_roots(root))
    ext_reads, emitted, ext_size = ext_totals(ext_roots, util, size, totals)
    return _Walk(ext_reads, reduce(add, terms, 0.0), [s.name for s in unc] if unc else [],
                 IrInfo(ir_size + ext_size, splits, emitted))


def kernel_roots(root: Instruction) -> tuple:
    """The kernel's outputs (a tuple root's operands)."""
    return (root,) + tuple(root.operands) if root.opcode == "tuple" else (root,)


def walk_members(order, member_set, param_of, unit_set, roots, util, size, ext_roots, totals,
                 fl, unc, kroots=()) -> tuple[int, int]:
    """The loop of :func:`_utilization` over ``order`` (members, users before
    operands) from a given state: ``roots`` / ``ext_roots`` map members /
    external operands to their use-root sets, ``util`` / ``size`` the roots'
    relative utilizations / emissions, ``totals`` a root set's (by id)
    summed (util, size), fixed once its first member is reached (its roots
    are users, all visited before).  Root sets are shared along elementwise
    chains and merged copy-on-write.  ``fl(x)`` receives each flops term in
    order (the caller folds them); ``unc`` (None: not wanted) the external
    operands read through a tiled transpose; ``kroots`` the kernel's outputs
    (:func:`kernel_roots`; empty for a producer's half of a pair walk).
    Returns the members' (IR size, splits).

    (The hottest loop of priority fusion: operand resolution and the reads
    per evaluation are written out inline.)"""
    elements = _ELEMENTS
    elementwise = ELEMENTWISE
    invalidates = INVALIDATES_CACHE
    profile = SM90
    ir_size = splits = 0
    for m in order:
        rs = roots.get(m)
        if rs is None:  # not reached from the root (e.g. a dead member)
            rs = roots[m] = frozenset((m,))
            util[m], size[m] = 1.0, 0
        t = totals.get(id(rs))
        if t is None:
            t = _root_set_totals(rs, util, size, totals)
        um, times = t
        e_m = elements.get(m.shape)
        n = um * (e_m if e_m is not None else _elements(m))
        ir_size += times
        op_m = m.opcode
        if op_m in invalidates:
            splits += times
        if op_m in elementwise:
            if op_m != "copy":
                # flops_per_element(op_m, ...): every elementwise op but copy is priced
                fl(n * profile.get((op_m, m.shape.element_type), DEFAULT_FLOPS_PER_ELEMENT))
            passes = True
        else:
            if op_m == "concatenate":
                fl(n * concatenate_flops(m))
            elif op_m == "reduce":
                fl(n * reduce_flops_per_output(m))
            elif op_m == "reduce-window":
                fl(n * reduce_window_flops_per_output(m))
            passes = op_m == "tuple" or op_m == "get-tuple-element"
        if passes:
            for op in m.operands:
                if op in member_set:
                    src, target = op, roots
                else:
                    src = op
                    while src.opcode == "parameter" and src in param_of:
                        src = param_of[src]
                    if src in unit_set:
                        src = src.fused_computation.root if src.opcode == "fusion" else src
                    target = roots if src in member_set else ext_roots
                got = target.get(src)
                if got is None:
                    target[src] = rs
                elif got is not rs and not rs <= got:
                    target[src] = got | rs
            continue
        n_ops = len(m.operands)
        for i, op in enumerate(m.operands):
            if op in member_set:
                src, target = op, roots
            else:
                src = op
                while src.opcode == "parameter" and src in param_of:
                    src = param_of[src]
                if src in unit_set:
                    src = src.fused_computation.root if src.opcode == "fusion" else src
                if src in member_set:
                    target = roots
                else:
                    target = ext_roots
                    if op_m == "transpose" and unc is not None and tiled_transpose(m):
                        unc.append(src)
            got = target.get(src)
            # elements of operand i one evaluation of one element of m reads: an
            # input of a reduce (or a concatenate's operand) its share, a
            # reduce-window input a whole window per output element
            # (HloCostAnalysis::HandleReduceWindow), anything else one
            if op_m == "reduce" and i < n_ops // 2:
                reads = n * (_elements(op) / max(1, _elements(m)))
            elif op_m == "dynamic-update-slice" and i == 0:
                # the buffer a DUS updates: only the part the update does not
                # overwrite (HandleDynamicUpdateSlice), and nothing when the
                # DUS is the kernel's output (it aliases the output buffer:
                # FusionProcessOutputBytesAccessed sets its utilization to 0)
                reads = 0.0 if m in kroots else \
                    n * ((_elements(m) - _elements(m.operands[1])) / max(1, _elements(m)))
            elif op_m == "concatenate" or op_m == "pad" or op_m == "scatter" or \
                    (op_m == "gather" and i == 1) or (op_m == "dynamic-slice" and i) or \
                    (op_m == "dynamic-update-slice") or \
                    (i >= n_ops // 2 and (op_m == "reduce" or op_m == "reduce-window")):
                # a pad's operand (and its padding value), a scatter's
                # operands, a gather's indices, the start indices of a
                # dynamic-(update-)slice and the init values of a reduce(-window)
                # keep HloCostAnalysis's default operand utilization 1.0
                # (HandlePad, HandleScatter, HandleGather, HandleDynamicSlice,
                # HandleDynamicUpdateSlice, HandleReduce and HandleReduceWindow
                # set none for them): each of their elements is read once per
                # evaluation of m, not once per element of m (an interior pad
                # doubling its operand does not evaluate it twice)
                reads = n * (_elements(op) / max(1, _elements(m)))
            elif op_m == "reduce-window" and i < n_ops // 2:
                reads = n * float(_window_elements(m))
            else:
                reads = n * 1.0
            if got is None:
                target[src] = frozenset((src,))
            elif src not in got:
                target[src] = got | {src}
            e_src = elements.get(src.shape)
            if e_src is None:
                e_src = _elements(src)
            util[src] = util.get(src, 0.0) + (math.ceil(reads) / e_src if e_src else 0.0)
            size[src] = size.get(src, 0) + times
    return ir_size, splits


def _root_set_totals(rs, util, size, totals) -> tuple[float, int]:
    """A use-root set's (utilization, emissions) totals, summed in the set's
    iteration order and memoised in ``totals`` by the set's identity."""
    if len(rs) == 1:
        (r,) = rs
        t = (util[r], size[r])
    else:
        t = (sum(util[r] for r in rs), sum(size[r] for r in rs))
    totals[id(rs)] = t
    return t


def ext_totals(ext_roots, util, size, totals) -> tuple[dict, dict, int]:
    """Per external operand (in first-reach order): element reads and
    emissions, from its root set's totals; and the emissions' sum."""
    ext_reads: dict[Instruction, float] = {}
    emitted: dict[Instruction, int] = {}
    ir_size = 0
    for src, rs in ext_roots.items():
        t = totals.get(id(rs))
        if t is None:
            t = _root_set_totals(rs, util, size, totals)
        us, times = t
        ext_reads[src] = us * _elements(src)
        emitted[src] = times
        ir_size += times
    return ext_reads, emitted, ir_size


def ir_walk(units: list[Instruction], root_unit: Instruction, members=None) -> IrInfo:
    """The IR size part of :func:`_utilization` for ``units``."""
    u = Units(units, members)
    return _utilization(u, u.root_of(root_unit), "loop").ir


__all__ = ["INVALIDATES_CACHE", "IrInfo", "Units", "ext_totals", "ir_walk", "walk_members"]
