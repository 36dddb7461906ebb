"""A simplified version of XLA:GPU's GpuPerformanceModel
(xla/service/gpu/model/gpu_performance_model{,_base}.cc), the cost estimate
priority fusion ranks producers by.

A kernel's time is ``compute + memory - 0.95 * min(compute, memory)``
(``CombineComputeAndMemoryAccessTime``) with

* memory: per input, the first read of each byte from DRAM and re-reads
  (a broadcast reading one element many times) from L1/L2 at 2.5x / 8x the
  DRAM bandwidth when the input fits (``ReadTimeWithDRAMHeuristic``); a
  kernel that is not a transpose kernel and holds a transpose of the minor
  dimension reads every input uncoalesced (``IsReadCoalescedHeuristic``,
  :mod:`.coalescing`: element size / 64-byte transactions of the
  bandwidth); bandwidth is
  capped at ``blocks x clock x 32 transactions`` (``AdjustBandwidth``);
  the output is written once at DRAM bandwidth;
* compute: per element evaluation of an elementwise op, the clock cycles
  XLA measured for that (opcode, element type) on sm_90 (3 when unlisted;
  :mod:`.op_profiles`); a reduce costs its reducer's flops per reduced
  element; at ``min(blocks, SMs) x min(threads, 128) x 2 x clock`` flop/ns;
* launch dimensions of the emitter the fusion would get: loop kernels 128
  threads per block and 4 elements per thread when the size allows; row
  reductions up to 1024 threads along a row, several rows per block; column
  reductions 32x32 threads over 32 (x2 when vectorized) output columns;
* every kernel launch costs 1 us (``kKernelLaunchOverhead``).

Elements are counted through the fusion as XLA's
``FusionCalculateUtilizations`` counts them (:func:`_utilization`): a
value read many times through a broadcast, a reduction or by several
non-elementwise users is computed (and its inputs read) that many times --
this is how duplication in a fusion costs -- but an elementwise value is
computed once per element however many elementwise users read it (the
emitter caches it per index).  Not modelled (stated): the op profiles of
devices other than sm_90, the indexing-map coalescing analysis and the Triton/tiled cost
model; device numbers are the data-sheet values of the target device.
"""

from __future__ import annotations

import math
from functools import reduce
from operator import add
from dataclasses import dataclass, field

from ...ir.module import Instruction
from ...ir.opcode import ELEMENTWISE
from ...ir.shape import bit_width, byte_width
from ..base import Target
from .op_profiles import DEFAULT_FLOPS_PER_ELEMENT, SM90, computation_flops
from .coalescing import has_bad_transpose, is_input_fusible_reduction
from .analysis import FusionView, concatenate_hero, emitter_kind, fused_members, reduction_dims, tiled_transpose

LAUNCH_US = 1.0
MEMORY_COMPUTE_PARALLELISM = 0.95
L2_SPEEDUP, L1_SPEEDUP = 2.5, 8.0
TRANSACTION_BYTES = 64
TRANSACTIONS_PER_CLOCK = 32


@dataclass(frozen=True)
class Device:
    name: str
    bandwidth: float      # bytes / s
    clock_ghz: float
    cores: int
    l2_bytes: int
    l1_bytes_per_core: int = 256 * 1024
    fpus_per_core: int = 128


#: Data-sheet values (the same numbers XLA's DeviceDescription reports).
DEVICES = {
    "H200": Device("H200", 4.814304e12, 1.98, 132, 62914560),
    "H100": Device("H100", 3.35232e12, 1.755, 132, 52428800),
    "A100": Device("A100", 2.039e12, 1.41, 108, 41943040, 192 * 1024),
    "B200": Device("B200", 8.0e12, 1.965, 148, 132120576),
    "MI300X": Device("MI300X", 5.3e12, 2.1, 304, 4194304, 32 * 1024, 128),
}


def device_of(target: Target) -> Device:
    for key, dev in DEVICES.items():
        if target.device.upper().startswith(key):
            return dev
    return DEVICES["H100"]


_ELEMENTS: dict = {}  # shape (interned, hash cached) -> elements


def _elements(instr: Instruction) -> int:
    s = instr.shape
    n = _ELEMENTS.get(s)
    if n is None:
        if s.is_tuple:
            n = sum(math.prod(t.dimensions) for t in s.tuple_shapes if not t.is_tuple)
        else:
            n = math.prod(s.dimensions)
        _ELEMENTS[s] = n
    return n


_BYTES: dict = {}  # shape -> (bytes, bytes per element as the read model charges)


def _shape_bytes(s) -> tuple[int, int]:
    got = _BYTES.get(s)
    if got is None:
        if s.is_tuple:
            n = sum(math.prod(t.dimensions) * byte_width(t.element_type)
                    for t in s.tuple_shapes if not t.is_tuple)
            got = (n, 4)
        else:
            got = (math.prod(s.dimensions) * byte_width(s.element_type), byte_width(s.element_type))
        _BYTES[s] = got
    return got


def _bytes(instr: Instruction) -> int:
    return _shape_bytes(instr.shape)[0]


_FREE = frozenset({"bitcast", "reshape", "broadcast", "transpose", "copy", "slice", "pad",
                   "concatenate", "constant", "iota", "parameter", "get-tuple-element",
                   "dynamic-slice", "reverse", "tuple"})


@dataclass(slots=True)
class Estimate:
    """One kernel's estimate (times in microseconds)."""

    time_us: float
    read_bytes: int
    read_net_bytes: int
    write_bytes: int
    flops: int
    blocks: int
    threads: int
    kind: str
    uncoalesced: list[str] = field(default_factory=list)
    ir: "IrInfo | None" = None


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


def _window_elements(rw: Instruction) -> int:
    from ...ir.attrs import parse_window
    n = 1
    for w in parse_window(rw.attrs.get("window", "{}")):
        n *= w.size
    return n


#: ``ElementalIrEmitter::OpInvalidatesCache``: ops that open basic blocks
INVALIDATES_CACHE = frozenset({"concatenate", "dot", "dynamic-update-slice", "pad", "reduce",
                               "reduce-window"})


#: ``GpuHloCostAnalysis::HandleConcatenate``: a concatenate is a compare
#: and branch per element; when a warp can straddle two operands (a
#: concatenation along a non-major dimension whose first operand's size
#: there is not a multiple of 32) both branches run, which XLA prices high
#: enough that such a concatenate is not duplicated into compute-bound users
CONCAT_FLOPS, CONCAT_DIVERGENT_FLOPS = 6, 400


def reduce_flops_per_output(reduce: Instruction) -> float:
    """``HloCostAnalysis::HandleReduce``: the reducer's flops per reduced
    element (input elements less output elements), per output element."""
    n_in = math.prod(reduce.operands[0].shape.dimensions)
    shape = reduce.shape.tuple_shapes[0] if reduce.shape.is_tuple else reduce.shape
    n_out = max(1, math.prod(shape.dimensions))
    comp = reduce.to_apply
    per = computation_flops(comp) if comp is not None else DEFAULT_FLOPS_PER_ELEMENT
    return (n_in - n_out) * per / n_out


def reduce_window_flops_per_output(rw: Instruction) -> float:
    """``HloCostAnalysis::HandleReduceWindow``: the reducer's flops times
    ``(window elements - 1) x outputs``, per output element; a window along
    one dimension padded symmetrically by the output size - 1 on each side
    (a whole-dimension window) counts ``outputs / window + window - 1``."""
    from ...ir.attrs import parse_window
    dims = parse_window(rw.attrs.get("window", "{}"))
    shape = rw.shape.tuple_shapes[0] if rw.shape.is_tuple else rw.shape
    n_out = max(1, math.prod(shape.dimensions))
    window = math.prod(d.size for d in dims) if dims else 1
    count = (window - 1) * n_out
    if sum(1 for d in dims if d.size != 1) == 1 and \
            sum(1 for d in dims if d.padding_low or d.padding_high) == 1:
        for i, d in enumerate(dims):
            if d.size != 1 and d.padding_low and d.padding_high and \
                    d.padding_low == d.padding_high and d.size == 2 * d.padding_low + 1:
                if d.padding_low == shape.dimensions[i] - 1:
                    window = shape.dimensions[i]
                    count = n_out // window + window - 1
                break
    comp = rw.to_apply
    per = computation_flops(comp) if comp is not None else DEFAULT_FLOPS_PER_ELEMENT
    return count * per / n_out


def concatenate_flops(concat: Instruction) -> int:
    """Flops per output element of ``concat``."""
    dim = concat.dimensions[0]
    if dim > 0 and concat.operands[0].shape.dimensions[dim] % 32:
        return CONCAT_DIVERGENT_FLOPS
    return CONCAT_FLOPS


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
                                   roots, util, size, ext_roots, totals, terms.append, unc)
    ext_reads, emitted, ext_size = ext_totals(ext_roots, util, size, totals)
    return _Walk(ext_reads, reduce(add, terms, 0.0), [s.name for s in unc] if unc else [],
                 IrInfo(ir_size + ext_size, splits, emitted))


def walk_members(order, member_set, param_of, unit_set, roots, util, size, ext_roots, totals,
                 fl, unc) -> tuple[int, int]:
    """The loop of :func:`_utilization` over ``order`` (members, users before
    operands) from a given state: ``roots`` / ``ext_roots`` map members /
    external operands to their use-root sets, ``util`` / ``size`` the roots'
    relative utilizations / emissions, ``totals`` a root set's (by id)
    summed (util, size), fixed once its first member is reached (its roots
    are users, all visited before).  Root sets are shared along elementwise
    chains and merged copy-on-write.  ``fl(x)`` receives each flops term in
    order (the caller folds them); ``unc`` (None: not wanted) the external
    operands read through a tiled transpose.  Returns the members' (IR size,
    splits).

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
            elif op_m == "concatenate" or op_m == "pad" or op_m == "scatter" or \
                    (op_m == "gather" and i == 1):
                # a pad's operand (and its padding value), a scatter's
                # operands and a gather's indices keep HloCostAnalysis's
                # default operand utilization 1.0 (HandlePad, HandleScatter and
                # HandleGather set none for them): each of their elements is
                # read once per evaluation of m, not once per element of m (an
                # interior pad doubling its operand does not evaluate it twice)
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


def read_entries(ext_reads: dict, device: Device) -> tuple[list, int, int]:
    """The reads of a kernel, per external operand (in first-reach order;
    a one-element constant is free): (operand, bytes first read from DRAM,
    bytes re-read, class, element width) -- class 0: the operand fits L1
    (re-reads at 8 x 2.5 x the DRAM bandwidth), 1: L2 (2.5 x), 2: neither
    (re-reads from DRAM, at the uncoalesced rate if it is uncoalesced);
    and the total and net bytes read."""
    l2_bytes = device.l2_bytes
    l1_bytes = device.l1_bytes_per_core * device.cores
    out = []
    total_read = net_read = 0
    for src, reads in ext_reads.items():
        if src.opcode == "constant" and _elements(src) <= 1:
            continue
        s = src.shape
        got = _BYTES.get(s)
        nbytes, width = got if got is not None else _shape_bytes(s)
        total = int(reads * width)
        net = nbytes if nbytes < total else total
        total_read += total
        net_read += net
        out.append((src, net, total - net, 2 if net >= l2_bytes else 0 if net < l1_bytes else 1,
                    width))
    return out, total_read, net_read


def _bad_transpose(unit: Instruction, members=None) -> bool:
    """The heuristic's ``is_bad_transpose`` of one unit (:mod:`.coalescing`)."""
    if unit.opcode != "fusion":
        return has_bad_transpose((unit,))
    body = unit.fused_computation
    return has_bad_transpose(members(body) if members is not None else fused_members(body))


def estimate(units: list[Instruction], root_unit: Instruction, device: Device,
             members=None, side_output_bytes: int = 0, kind: str | None = None,
             walks=None) -> Estimate:
    """The estimate of one kernel made of ``units`` (``root_unit``'s output);
    ``members``: a cache of fused bodies' instructions (:meth:`FusionView.of`);
    ``side_output_bytes``: a producer's value the kernel also writes (a
    multi-output fusion: ``producer_writes_side_output``), written with the
    output before memory and compute time are combined; ``kind``: the
    emitter kind, when the caller knows it (a cache); ``walks``: a
    :class:`.walks.WalkCache` (the walk from cached unit summaries)."""
    got = walks.view(units) if walks is not None else None
    if got is None:
        u = Units(units, members)
        root = u.root_of(root_unit)
        view = FusionView(u.members, root, None, _links(u))
        view._set = u.member_set
    else:
        view = got
        root = view.root
    if kind is None:
        kind = emitter_kind(view) if root_unit.opcode != "fusion" or len(units) > 1 else \
            emitter_kind(FusionView.of(root_unit, members))
    walk = walks.walk(units, kind) if walks is not None else None
    if walk is None:
        if got is not None:
            u = Units(units, members)
        walk = _utilization(u, root, kind)
    flops, uncoalesced = walk.flops, walk.uncoalesced
    entries, total_read, net_read = walk.reads or read_entries(walk.ext_reads, device)
    if kind != "transpose" and any(walks.unit(x).bad_transpose if walks is not None else
                                   _bad_transpose(x, members) for x in units) or \
            kind == "reduction" and len(units) == 2 and \
            all(is_input_fusible_reduction(x, members) for x in units):
        uncoalesced = [e[0].name for e in entries]  # IsReadCoalescedHeuristic: all or none
    blocks, threads = launch_dims(kind, view, root, device)
    cap = blocks * device.clock_ghz * 1e9 * TRANSACTIONS_PER_CLOCK
    read_s = 0.0
    bandwidth = device.bandwidth
    # a coalesced read's DRAM bandwidth, and its re-read bandwidth per class
    dram = min(bandwidth, cap)
    rest = (min(bandwidth * L2_SPEEDUP * L1_SPEEDUP, cap), min(bandwidth * L2_SPEEDUP, cap),
            min(bandwidth, cap))
    unc = set(uncoalesced) if uncoalesced else None
    for src, net, again, cls, width in entries:
        if unc is not None and src.name in unc:
            rate = width / TRANSACTION_BYTES
            slow = min(bandwidth * rate, cap)  # DRAM at the transaction rate
            read_s += net / slow + again / (rest[cls] if cls < 2 else slow)
        else:
            read_s += net / dram + again / rest[cls]
    write_bytes = _bytes(root)
    write_s = (write_bytes + side_output_bytes) / device.bandwidth
    fpus = min(blocks, device.cores) * min(threads, device.fpus_per_core) * device.clock_ghz * 2
    compute_s = flops / fpus * 1e-9 if fpus else 0.0
    mem = read_s + write_s
    t = compute_s + mem - min(compute_s, mem) * MEMORY_COMPUTE_PARALLELISM
    return Estimate(t * 1e6, total_read, net_read, write_bytes, int(flops), blocks, threads, kind,
                    uncoalesced, walk.ir if len(units) == 1 else None)


def column_vector_size(elem_bytes: int, minor: int) -> int:
    """``GetVectorSizeForMlir`` for a column reduction (32 threads along the
    kept minor dimension): no vectorization for an odd minor dimension or
    one under 2 x 32; 2 for 4-byte (or wider) inputs; narrower inputs 4
    when the minor dimension has 4 x 32 elements and divides by 4, else 2."""
    if minor % 2 != 0 or 2 * 32 > minor:
        return 1
    if elem_bytes >= 4:
        return 2
    if 4 * 32 > minor:
        return 2
    return 4 if minor % 4 == 0 else 2


def launch_dims(kind: str, view: FusionView, root: Instruction,
                device: "Device | None" = None) -> tuple[int, int]:
    """(blocks, threads per block) of the emitter ``kind``."""
    if kind == "reduction":
        hero = view.hero()
        r = reduction_dims(hero)
        elem = byte_width(hero.operands[0].shape.element_type)
        if r.is_row:
            batch, kept, row = r.dims
            vec = 2 if elem <= 2 and row % 2 == 0 else 1
            tx = min(1024, max(32, -(-(row // vec) // 32) * 32))
            rows_per_block = max(1, 1024 // tx) if row <= 512 else 1
            return max(1, batch * -(-kept // rows_per_block)), tx * rows_per_block
        batch, _, minor = r.dims
        return max(1, batch * -(-minor // (32 * column_vector_size(elem, minor)))), 1024
    n = max(1, _elements(root))
    if kind == "concatenate":  # ConcatenateFusion: one thread per element of the largest operand
        hero = concatenate_hero(view)
        if hero is not None:
            n = max(1, max(_elements(o) for o in hero.operands))
    if kind == "transpose":
        return max(1, -(-n // 1024)), 128
    if kind == "loop":
        n = _element_shape_elements(root)
        unroll = loop_unroll_factor(view, root, n, device)
        n = -(-n // unroll)
        return max(1, -(-n // 128)), max(1, min(128, n))
    unroll = 4 if n % 4 == 0 and n >= 4 * 128 else 1
    return max(1, -(-n // (128 * unroll))), min(128, n)


#: ``DeviceDescription::threads_per_core_limit`` (resident threads per SM)
THREADS_PER_CORE = 2048
#: ``MayPreventVectorization``: concatenates with more operands are not unrolled
MAX_CONCAT_ARGUMENTS_FOR_UNROLLING = 10


def _element_shape_elements(root: Instruction) -> int:
    """Elements of ``GetElementShape``: the root's shape, the first leaf of a tuple."""
    got = _LEAF_ELEMENTS.get(root.shape)
    if got is None:
        s = root.shape
        while s.is_tuple:
            s = s.tuple_shapes[0]
        got = _LEAF_ELEMENTS[root.shape] = max(1, math.prod(s.dimensions))
    return got


_LEAF_ELEMENTS: dict = {}  # shape -> _element_shape_elements


_BITS: dict = {}  # shape -> _output_bits


def _output_bits(root: Instruction) -> int:
    got = _BITS.get(root.shape)
    if got is None:
        got = _BITS[root.shape] = _shape_output_bits(root.shape)
    return got


def _shape_output_bits(shape) -> int:
    shapes = [shape]
    bits = []
    while shapes:
        s = shapes.pop()
        if s.is_tuple:
            shapes += s.tuple_shapes
        elif s.is_array:
            bits.append(bit_width(s.element_type))
    return min(bits) if bits else 8


_MAY_PREVENT = frozenset({"dot", "sort", "concatenate", "reduce"})  # what the test below looks at


def loop_unroll_factor(view: FusionView, root: Instruction, n: int,
                       device: "Device | None" = None) -> int:
    """XLA's ``ComputeLoopFusionConfig``: a loop kernel unrolls (4, else 2 when
    that divides the elements) only when it has at least as many elements as
    the GPU has resident threads (``threads_per_core_limit x core_count``) and
    nothing in it prevents vectorization (a dot, a sort, a concatenate of more
    than 10 operands, a variadic reduce) -- smaller kernels run one thread per
    element; sub-byte outputs are unrolled so one thread writes whole bytes."""
    cores = (device or DEVICES["H100"]).cores
    unroll = 1
    if n >= THREADS_PER_CORE * cores and not (_MAY_PREVENT & view.opcodes() and any(
            m.opcode in ("dot", "sort")
            or (m.opcode == "concatenate" and len(m.operands) > MAX_CONCAT_ARGUMENTS_FOR_UNROLLING)
            or (m.opcode == "reduce" and m.shape.is_tuple)
            for m in view.members)):
        unroll = 4 if n % 4 == 0 else 2 if n % 2 == 0 else 1
    bits = _output_bits(root)
    return max(unroll, -(-8 // bits) if bits else 1)


__all__ = ["DEVICES", "Device", "Estimate", "LAUNCH_US", "device_of", "estimate", "launch_dims"]
