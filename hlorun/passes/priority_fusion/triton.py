"""Priority fusion with generic Triton fusions (XLA's
``PriorityFusionQueue::CanFuseTriton`` path).

When the producer or the consumer is a generic Triton fusion (``__triton``,
e.g. a ``triton_softmax`` from softmax-rewriter-triton), they may fuse only
if the result is a Triton fusion too: every instruction of both must be
supported by the Triton emitter, and XLA's SymbolicTileAnalysis must tile
the result (of that, hlorun checks the reshape constraints on reduced
dimensions, :mod:`hlorun.passes.triton_tiling`, within each unit, and the
symbolic tile of every instruction of the fused pair,
:mod:`hlorun.passes.triton_indexing`).  The native-emitter rules (reduce into reduce, reduction
epilogues turning into loop fusions) do not apply.  The result keeps the
``__triton`` backend kind with a block-level config for the new body.

Estimates: a Triton fusion is a tiled kernel -- each input element is read
once and the output written once, whatever broadcasts and reductions sit
inside -- so :func:`triton_estimate` charges the distinct bytes read and
written at DRAM bandwidth, plus the flops XLA's tiled cost model
(``GpuIndexingPerformanceModel::FlopsPerElement``) counts: per element of
each elementwise op its sm_90 op-profile cost (:mod:`.op_profiles`), per
output element of a reduce ``(reduced elements - 1) x`` its reducer's
flops (a simplification of XLA's indexing-based tiled cost model: no
tiling, no per-tile padding).
"""

from __future__ import annotations

import math

from ...ir.module import Instruction
from ...ir.opcode import ELEMENTWISE
from ...ir.shape import byte_width
from .analysis import is_generic_triton_fusion
from .device import Device
from .model import Estimate
from .utilization import Units
from .op_profiles import DEFAULT_FLOPS_PER_ELEMENT, computation_flops
from .op_profiles import flops_per_element as profile_flops


def involves_triton(producer: Instruction, consumer: Instruction) -> bool:
    return is_generic_triton_fusion(producer) or is_generic_triton_fusion(consumer)


def _members(instr: Instruction) -> list[Instruction]:
    if instr.opcode == "fusion":
        return [i for i in instr.fused_computation.instructions if i.opcode != "parameter"]
    return [instr]


def unit_refusal(unit: Instruction, order=None) -> str | None:
    """Why ``unit`` (an instruction or a fusion) cannot be part of a Triton
    fusion, or None (``order``: priority fusion's cache of a fused body's
    instructions in post order, parameters left out)."""
    return members_refusal(unit) or tiling_refusal(unit, order)


def members_refusal(unit: Instruction) -> str | None:
    """The part of :func:`unit_refusal` each member decides on its own (a
    tuple root, an instruction the emitter does not support).  It depends
    only on the members' opcodes, shapes, attributes and operand shapes, so
    a fusion of two units that pass passes too (priority fusion keeps that
    fact across fusion steps)."""
    from ..triton_support import unsupported_instruction
    if unit.opcode == "fusion" and unit.fused_computation.root.opcode == "tuple":
        return "multi-output fusions are not supported by the Triton emitter"
    for m in _members(unit):
        why = unsupported_instruction(m)
        if why:
            return why
    return None


def tiling_refusal(unit: Instruction, order=None) -> str | None:
    """The rest of :func:`unit_refusal`: reshapes and reductions the tiling
    cannot handle (:func:`..triton_tiling.untileable`); only a unit with a
    reduce can fail."""
    from ..triton_tiling import untileable
    if unit.opcode != "fusion":
        return untileable([unit]) if unit.opcode == "reduce" else None
    body = unit.fused_computation
    members = order(body) if order is not None else body.post_order()
    for m in members:
        if m.opcode == "reduce":
            return untileable(members)
    return None


def can_fuse_triton(producer: Instruction, consumer: Instruction,
                    refusal=unit_refusal, members=None, facts=None,
                    pair_refusal=None) -> str | None:
    """None if producer + consumer can be one Triton fusion, else why not
    (``refusal``: :func:`unit_refusal` or a cache of it; ``members`` and
    ``facts``: caches for :func:`..triton_tiling.consumer_refuses`;
    ``pair_refusal``: :func:`..triton_indexing.fused_pair_refusal` or a
    cache of it, :class:`.tiles.TileCache`)."""
    for unit in (producer, consumer):
        why = refusal(unit)
        if why:
            return why
    if producer.shape.is_tuple or consumer.shape.is_tuple:
        return "tuple-shaped values are not supported by the Triton emitter"
    from ..triton_tiling import consumer_refuses
    if pair_refusal is None:
        from ..triton_indexing import fused_pair_refusal as pair_refusal
    return consumer_refuses(producer, consumer, members, facts) or \
        pair_refusal(producer, consumer)


def _bytes(shape) -> int:
    return math.prod(shape.dimensions) * byte_width(shape.element_type) if shape.is_array else 0


def _flops_and_reads(u: Units) -> tuple[int, dict[Instruction, int]]:
    """The flops of ``u``'s members and the bytes of each value they read
    from outside (constants excluded)."""
    reads: dict[Instruction, int] = {}
    flops = 0
    for m in u.members:
        if m.opcode in ELEMENTWISE and m.shape.is_array:
            flops += math.prod(m.shape.dimensions) * profile_flops(
                "convert" if m.opcode == "copy" else m.opcode, m.shape.element_type)
        if m.opcode == "reduce":
            out = m.shape.tuple_shapes[0] if m.shape.is_tuple else m.shape
            n_out = max(1, math.prod(out.dimensions))
            factor = math.prod(m.operands[0].shape.dimensions) // n_out
            comp = m.to_apply
            per = computation_flops(comp) if comp is not None else DEFAULT_FLOPS_PER_ELEMENT
            flops += (factor - 1) * per * n_out
        for op in m.operands:
            src = u.resolve(op)
            if src not in u.member_set and not (src.opcode == "constant"):
                reads[src] = _bytes(src.shape)
    return flops, reads


def unit_summary(unit: Instruction, members=None) -> tuple[int, dict[Instruction, int]]:
    """``(flops, reads)`` of one unit alone.  A set of units sums the flops
    and unites the reads, less the units themselves (a unit reading another
    reads it inside the fusion): :func:`triton_estimate`'s ``summary``.  The
    reads name the unit's operands, so a summary is stale once they change."""
    return _flops_and_reads(Units([unit], members))


def triton_estimate(units: list[Instruction], root_unit: Instruction, device: Device,
                    members=None, summary=None) -> Estimate:
    """``summary``: :func:`unit_summary` or a cache of it (same result)."""
    root = root_unit.fused_computation.root if root_unit.opcode == "fusion" else root_unit
    if summary is None:
        flops, reads = _flops_and_reads(Units(units, members))
    elif len(units) == 1:
        flops, reads = summary(units[0])
    else:
        flops, reads = 0, {}
        for unit in units:
            f, r = summary(unit)
            flops += f
            reads.update(r)
        for unit in units:
            reads.pop(unit, None)
    read = sum(reads.values())
    write = _bytes(root.shape)
    mem_s = (read + write) / device.bandwidth
    compute_s = flops / (device.cores * device.fpus_per_core * device.clock_ghz * 2) * 1e-9
    t = max(mem_s, compute_s) + min(mem_s, compute_s) * 0.05
    out = max(1, math.prod(root.shape.dimensions))
    return Estimate(t * 1e6, read, read, write, int(flops), max(1, out // 1024), 128, "triton")


def triton_backend_config(fusion: Instruction, *sources: Instruction) -> None:
    """Give ``fusion`` the ``__triton`` backend kind (the first Triton
    source's config, with a block-level config for the new body)."""
    bc = triton_config(fusion, sources)
    finish_triton_config(fusion, bc)


def triton_config(fusion: Instruction, sources, known=None) -> dict:
    """The backend config :func:`triton_backend_config` gives ``fusion``, as a
    dict, its block-level config (when it gets one) still to be filled in by
    :func:`finish_triton_config`; ``known``: sources' configs not yet
    written (priority fusion writes them once, after its last step)."""
    base = None
    for s in sources:
        if is_generic_triton_fusion(s):
            base = known[s] if known is not None and s in known else s.backend_config
            break
    bc = dict(base) if isinstance(base, dict) else {}
    fbc = dict(bc.get("fusion_backend_config") or {})
    fbc["kind"] = "__triton"
    if fusion.fused_computation.root.shape.is_array:
        fbc["block_level_fusion_config"] = None  # (its place among the keys)
    bc["fusion_backend_config"] = fbc
    return bc


def finish_triton_config(fusion: Instruction, bc: dict) -> None:
    """Fill in the block-level config of :func:`triton_config`'s ``bc`` for
    ``fusion``'s body as it is now and write it."""
    from ..triton_support import block_level_config_for
    fbc = bc["fusion_backend_config"]
    if "block_level_fusion_config" in fbc and fusion.fused_computation.root.shape.is_array:
        fbc["block_level_fusion_config"] = block_level_config_for(fusion)
    fusion.set_backend_config(bc)


#: what a fusion :func:`triton_config` is building says until it is written
#: (all priority fusion reads of it before then: ``fusion_backend_kind``)
TRITON_KIND = {"fusion_backend_config": {"kind": "__triton"}}


__all__ = ["TRITON_KIND", "can_fuse_triton", "finish_triton_config", "involves_triton",
           "members_refusal", "tiling_refusal", "triton_backend_config", "triton_config",
           "triton_estimate", "unit_refusal", "unit_summary"]
