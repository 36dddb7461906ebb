"""XLA:GPU's read-coalescing heuristic for the fusion cost model
(``IsReadCoalescedHeuristic``, xla/service/gpu/model/coalescing_analysis.cc,
with ``TransposesMinorDimension`` from gpu_fusible.cc).

``GpuPerformanceModel`` builds its ``CoalescingAnalysis`` from the heuristic
alone, and the heuristic gives one answer for the whole kernel: unless the
kernel gets the transpose emitter, every input read is uncoalesced when
the producer or the consumer holds an op that transposes the minor
dimension (a transpose, or a layout-changing copy) of something other than
a broadcast or iota (followed through bitcasts and one-operand elementwise
ops, inside that unit only); and a reduction kernel made of two input-
fusible reductions (``IsInputFusibleReduction`` both) reads uncoalesced.  A kernel read this way pays the transaction
rate of DRAM for all its inputs, so fusing a transpose-emitter producer
into a consumer that is not a transpose kernel costs it dearly.
"""

from __future__ import annotations

from ...ir.module import Instruction
from ...ir.opcode import ELEMENTWISE
from .analysis import find_hero, is_real_reduction_hero, is_reduction_from_or_to_contiguous


def _most_minor_nontrivial(shape) -> tuple[int, int]:
    """``MostMinorNonTrivialDimension``: (dimension, its position in
    minor_to_major); (-1, rank) when every dimension has size 1."""
    pos = 0
    for d in shape.minor_to_major:
        if shape.dimensions[d] > 1:
            return d, pos
        pos += 1
    return -1, pos


def transposes_minor_dimension(instr: Instruction) -> bool:
    """``TransposesMinorDimension`` of one (non-fusion) instruction."""
    op = instr.opcode
    if op == "copy":
        src = instr.operands[0].shape
        if not src.is_array or not instr.shape.is_array:
            return False
        return _most_minor_nontrivial(src)[0] != _most_minor_nontrivial(instr.shape)[0]
    if op != "transpose":
        return False
    src = instr.operands[0].shape
    position = {d: i for i, d in enumerate(src.minor_to_major)}
    first = _most_minor_nontrivial(src)[1]
    dims = instr.dimensions
    for out_dim in instr.shape.minor_to_major:
        if instr.shape.dimensions[out_dim] == 1:
            continue
        return position[dims[out_dim]] > first
    return False


def _is_broadcast(x: Instruction) -> bool:
    """The heuristic's ``is_broadcast``: a broadcast or iota, reached through
    bitcasts and one-operand elementwise ops."""
    while True:
        if x.opcode in ("broadcast", "iota"):
            return True
        if len(x.operands) != 1:
            return False
        if x.opcode != "bitcast" and x.opcode not in ELEMENTWISE:
            return False
        x = x.operands[0]


def has_bad_transpose(members) -> bool:
    """``is_bad_transpose`` of one unit (``members``: a fusion's body
    instructions, or the instruction itself)."""
    for m in members:
        if m.opcode in ("transpose", "copy") and transposes_minor_dimension(m) and \
                not _is_broadcast(m.operands[0]):
            return True
    return False


def is_input_fusible_reduction(unit: Instruction, members=None, member_set=None) -> bool:
    """``IsInputFusibleReduction``: a reduce to or from contiguous
    dimensions, or a fusion with a root whose hero is a real reduction
    (``member_set``: the fusion's body instructions, when known)."""
    if unit.opcode != "fusion":
        return is_reduction_from_or_to_contiguous(unit)
    body = unit.fused_computation
    root = body.root
    roots = root.operands if root.opcode == "tuple" else (root,)
    ms = member_set if member_set is not None else \
        set(members(body)) if members is not None else None
    return any(is_real_reduction_hero(r, find_hero(r, ms)) for r in roots)


__all__ = ["has_bad_transpose", "is_input_fusible_reduction", "transposes_minor_dimension"]
