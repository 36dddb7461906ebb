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
``FusionCalculateUtilizations`` counts them (:func:`.utilization._utilization`): a
value read many times through a broadcast, a reduction or by several
non-elementwise users is computed (and its inputs read) that many times --
this is how duplication in a fusion costs -- but an elementwise value is
computed once per element however many elementwise users read it (the
emitter caches it per index).  Not modelled (stated): the op profiles of
devices other than sm_90, the indexing-map coalescing analysis and the Triton/tiled cost
model; device numbers are the data-sheet values of the target device.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import reduce
from operator import add

from ...ir.module import Instruction
from ...ir.opcode import ELEMENTWISE
from .analysis import FusionView, emitter_kind, fused_members
from .coalescing import has_bad_transpose, is_input_fusible_reduction
from .device import (DEVICES, L1_SPEEDUP, L2_SPEEDUP, LAUNCH_US, MEMORY_COMPUTE_PARALLELISM,
                     TRANSACTION_BYTES, TRANSACTIONS_PER_CLOCK, Device, device_of)
from .flops import concatenate_flops, reduce_flops_per_output, reduce_window_flops_per_output
from .launch import column_vector_size, launch_dims, loop_unroll_factor
from .sizes import _BYTES, _bytes, _shape_bytes
from .utilization import (INVALIDATES_CACHE, IrInfo, Units, _links, _utilization, ext_totals,
                          ir_walk, walk_members)


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


def read_entries(ext_reads: dict, device: Device) -> tuple[list, int, int]:
    """The reads of a kernel, per external operand (in first-reach order;
    a constant operand is read like any other: priority fusion fuses the
    small constants only after its last step, so until then XLA's
    GetSharedOperandBytesAccessed / ReadTimeWithDRAMHeuristic count a
    scalar constant re-read per broadcast element, in the producer and in
    every user it would be fused into): (operand, bytes first read from DRAM,
    bytes re-read, class, element width) -- class 0: the operand fits L1
    (re-reads at 8 x 2.5 x the DRAM bandwidth), 1: L2 (2.5 x), 2: neither
    (re-reads from DRAM, at the uncoalesced rate if it is uncoalesced);
    and the total and net bytes read."""
    l2_bytes = device.l2_bytes
    l1_bytes = device.l1_bytes_per_core * device.cores
    out = []
    total_read = net_read = 0
    for src, reads in ext_reads.items():
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


def _repeated_operand_reads(instr: Instruction, dram: float, unc, bandwidth: float,
                            cap: float) -> float:
    """Seconds an unfused elementwise instruction spends reading an operand
    it names more than once (``multiply(x, x)``) beyond the first slot:
    XLA's EstimateRunTimeForInstruction reads per operand slot, each slot
    the whole operand from DRAM (``operand_bytes_accessed`` of its first
    index), while the utilization walk counts the value once per element."""
    seen: set = set()
    extra = 0.0
    for o in instr.operands:
        if o in seen:
            if unc is not None and o.name in unc:
                got = _BYTES.get(o.shape)
                width = got[1] if got is not None else _shape_bytes(o.shape)[1]
                extra += _bytes(o) / min(bandwidth * width / TRANSACTION_BYTES, cap)
            else:
                extra += _bytes(o) / dram
        seen.add(o)
    return extra


def _written_bytes(root: Instruction) -> int:
    """Bytes a kernel writes: a dynamic-update-slice output (or tuple
    element) only its update (FusionProcessOutputBytesAccessed /
    HandleDynamicUpdateSlice: operand 0 aliases the output)."""
    if root.opcode == "dynamic-update-slice":
        return _bytes(root.operands[1])
    if root.opcode == "tuple":
        return sum(_bytes(o.operands[1]) if o.opcode == "dynamic-update-slice" else _bytes(o)
                   for o in root.operands)
    return _bytes(root)


def estimate(units: list[Instruction], root_unit: Instruction, device: Device,
             members=None, side_output_bytes: int = 0, kind: str | None = None,
             walks=None, writes: bool = True) -> Estimate:
    """The estimate of one kernel made of ``units`` (``root_unit``'s output);
    ``members``: a cache of fused bodies' instructions (:meth:`FusionView.of`);
    ``side_output_bytes``: a producer's value the kernel also writes (a
    multi-output fusion: ``producer_writes_side_output``), written with the
    output before memory and compute time are combined; ``kind``: the
    emitter kind, when the caller knows it (a cache); ``walks``: a
    :class:`.walks.WalkCache` (the walk from cached unit summaries);
    ``writes``: false for a kernel whose output is a bitcast's (XLA's cost
    analysis gives a bitcast no output bytes, ``HandleBitcast``: a producer
    fused into a bitcast user costs its reads and compute only)."""
    if walks is not None:
        return _estimate_walked(units, root_unit, device, members, side_output_bytes, kind,
                                walks, writes)
    u = Units(units, members)
    root = u.root_of(root_unit)
    view = FusionView(u.members, root, None, _links(u))
    view._set = u.member_set
    if kind is None:
        kind = emitter_kind(view) if root_unit.opcode != "fusion" or len(units) > 1 else \
            emitter_kind(FusionView.of(root_unit, members))
    walk = _utilization(u, root, kind)
    entries, total_read, net_read = walk.reads or read_entries(walk.ext_reads, device)
    uncoalesced = walk.uncoalesced
    if kind != "transpose" and any(_bad_transpose(x, members) for x in units) or \
            kind == "reduction" and len(units) == 2 and \
            all(is_input_fusible_reduction(x, members) for x in units):
        uncoalesced = [e[0].name for e in entries]  # IsReadCoalescedHeuristic: all or none
    return _launched(device, kind, view, root, entries, total_read, net_read, walk, uncoalesced,
                     units, root_unit, writes, side_output_bytes)


def _estimate_walked(units, root_unit, device, members, side_output_bytes, kind, walks,
                     writes) -> Estimate:
    """:func:`estimate` from the unit walks of ``walks`` (the same numbers)."""
    ws = [walks.unit(x) for x in units]
    view = walks.view_of(ws)
    root = view.root
    if kind is None:
        kind = emitter_kind(view) if root_unit.opcode != "fusion" or len(units) > 1 else \
            emitter_kind(FusionView.of(root_unit, members))
    walk = walks.walk_of(units, ws, kind)
    if walk is None:
        walk = _utilization(Units(units, members), root, kind)
    entries, total_read, net_read = walk.reads or read_entries(walk.ext_reads, device)
    uncoalesced = walk.uncoalesced
    bad = False
    if kind != "transpose":
        for w in ws:
            if w.bad_transpose:
                bad = True
                break
    if not bad and kind == "reduction" and len(ws) == 2:
        bad = walks.input_fusible(ws[0]) and walks.input_fusible(ws[1])
    if bad:
        uncoalesced = [e[0].name for e in entries]  # IsReadCoalescedHeuristic: all or none
    return _launched(device, kind, view, root, entries, total_read, net_read, walk, uncoalesced,
                     units, root_unit, writes, side_output_bytes)


def _launched(device, kind, view, root, entries, total_read, net_read, walk, uncoalesced,
              units, root_unit, writes, side_output_bytes) -> Estimate:
    """:func:`_timed` with the kernel's launch dimensions (both estimate paths)."""
    blocks, threads = launch_dims(kind, view, root, device)
    single = len(units) == 1
    return _timed(device, kind, root, entries, total_read, net_read, walk.flops, uncoalesced,
                  blocks, threads, writes, side_output_bytes,
                  walk.ir if single else None, root_unit if single else None)


#: the ``uncoalesced`` of most estimates (shared: nothing edits an estimate's list;
#: a fresh empty list was 72 B of each cached estimate's ~200)
_NO_NAMES: list = []


def _timed(device: Device, kind: str, root: Instruction, entries: list, total_read: int,
           net_read: int, flops: float, uncoalesced: list, blocks: int, threads: int,
           writes: bool, side_output_bytes: int, ir, single: Instruction | None = None) -> Estimate:
    """The kernel's time from its reads, flops and launch dimensions."""
    cap = blocks * device.clock_ghz * 1e9 * TRANSACTIONS_PER_CLOCK
    read_s = 0.0
    bandwidth = device.bandwidth
    # a coalesced read's DRAM bandwidth, and its re-read bandwidth per class
    dram = min(bandwidth, cap)
    rest = (min(bandwidth * L2_SPEEDUP * L1_SPEEDUP, cap), min(bandwidth * L2_SPEEDUP, cap),
            min(bandwidth, cap))
    unc = set(uncoalesced) if uncoalesced else None
    if unc is None:  # the same terms, added in the same order
        read_s = reduce(add, [net / dram + again / rest[cls] for _, net, again, cls, _ in entries],
                        0.0)
    else:
        for src, net, again, cls, width in entries:
            if src.name in unc:
                rate = width / TRANSACTION_BYTES
                slow = min(bandwidth * rate, cap)  # DRAM at the transaction rate
                read_s += net / slow + again / (rest[cls] if cls < 2 else slow)
            else:
                read_s += net / dram + again / rest[cls]
    if single is not None and single.opcode in ELEMENTWISE:
        read_s += _repeated_operand_reads(single, dram, unc, bandwidth, cap)
    write_bytes = _written_bytes(root) if writes else 0
    write_s = (write_bytes + side_output_bytes) / device.bandwidth
    fpus = min(blocks, device.cores) * min(threads, device.fpus_per_core) * device.clock_ghz * 2
    compute_s = flops / fpus * 1e-9 if fpus else 0.0
    mem = read_s + write_s
    t = compute_s + mem - min(compute_s, mem) * MEMORY_COMPUTE_PARALLELISM
    return Estimate(t * 1e6, total_read, net_read, write_bytes, int(flops), blocks, threads, kind,
                    uncoalesced or _NO_NAMES, ir)


__all__ = ["DEVICES", "Device", "Estimate", "INVALIDATES_CACHE", "IrInfo", "LAUNCH_US", "Units",
           "column_vector_size", "concatenate_flops", "device_of", "estimate", "ext_totals",
           "ir_walk", "launch_dims", "loop_unroll_factor", "read_entries",
           "reduce_flops_per_output", "reduce_window_flops_per_output", "walk_members"]
