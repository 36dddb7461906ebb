"""The per-unit facts one priority-fusion queue (:mod:`hlorun.passes.
priority_fusion`) asks for again and again, cached until the unit (an
instruction or a fusion) is rewritten: its estimate as a kernel alone and
with a producer (:mod:`.model`, from :mod:`.walks`' per-unit summaries),
its fused body's members, the CanFuse facts (significant reduce, emitter
kind, IR size), and the Triton facts (:mod:`.triton`: refusal, tiling,
unit summary).  ``reference`` mode keeps none of them (everything is
recomputed, the definition the caches must match).

:meth:`UnitFacts.carry_over` restores what the queue's ``fuse`` knew of a
grown fusion without walking it again (its members pass the Triton
emitter's per-instruction test; its Triton unit summary)."""

from __future__ import annotations

import math

from ...ir.module import Computation, Instruction
from .analysis import (FusionView, emitter_kind, fused_members, fusion_backend_kind,
                       is_fusible_bitcast, is_generic_triton_fusion)
from .ir_size import ir_info
from .model import Device, Estimate, estimate
from .triton import (involves_triton, members_refusal, tiling_refusal, triton_estimate,
                     unit_refusal, unit_summary)
from .tiles import TileCache
from .walks import WalkCache


def _significant_reduce(x: Instruction, members=None, view: FusionView | None = None) -> bool:
    if view is None:
        view = FusionView.of(x, members)
    for m in view.members:
        if m.opcode == "reduce" and m.shape.is_array:
            if math.prod(m.operands[0].shape.dimensions) // max(1, math.prod(m.shape.dimensions)) >= 16:
                return True
    return False


class UnitFacts:
    """The caches (a base of the queue)."""

    def __init__(self, device: Device, reference: bool):
        self.device = device
        self.reference = reference
        self.cache: dict[Instruction, Estimate] = {}
        # per-instruction facts, valid until the instruction is rewritten
        # (``forget_facts``); None in reference mode (everything recomputed)
        self.bodies: dict[Computation, list[Instruction]] | None = None if reference else {}
        self.facts: dict[Instruction, tuple[bool, str]] = {}
        self.triton_facts: dict[Instruction, str | None] = {}
        # units whose members_refusal is None (see _triton_refusal)
        self.members_ok: set[Instruction] = set()
        # what fuse() knows of a fusion it built or grew without a walk:
        # (members_refusal is None, Triton unit summary or None), restored
        # by carry_over
        self.carry: dict[Instruction, tuple[bool, tuple | None]] = {}
        self.ir_infos: dict = {}
        self.tilings: dict[Instruction, tuple[bool, bool]] = {}
        self.triton_sums: dict[Instruction, tuple[int, dict]] = {}
        # utilization walks from per-unit summaries (None in reference mode)
        self.walks = None if reference else WalkCache(self._members, device)
        # the symbolic-tile check's parts (None in reference mode)
        self.tiles = None if reference else TileCache()

    def pair_view(self, producer: Instruction, consumer: Instruction) -> FusionView:
        """``FusionView.of_pair`` for the emitter kind, from the units' cached
        walks when both have one and neither has a backend kind (the same
        members, root and links: no member set or links built again)."""
        walks = self.walks
        if walks is not None and fusion_backend_kind(producer) is None and \
                fusion_backend_kind(consumer) is None:
            p, c = walks.units.get(producer), walks.units.get(consumer)
            if p is not None and c is not None:
                return walks.view_of([p, c])
        return FusionView.of_pair(producer, consumer, self.members)

    # -- costs --------------------------------------------------------------------------
    def time(self, instr: Instruction) -> Estimate:
        if self.reference:
            return self._estimate_alone(instr)
        got = self.cache.get(instr)
        if got is None:
            got = self.cache[instr] = self._estimate_alone(instr)
        return got

    def _estimate_alone(self, instr: Instruction) -> Estimate:
        if instr.opcode == "bitcast":
            # HloCostAnalysis::HandleBitcast: no flops, no bytes accessed (and
            # the indexing model: "stand-alone bitcast is always no-op")
            return Estimate(0.0, 0, 0, 0, 0, 1, 1, "loop")
        if is_generic_triton_fusion(instr):
            return triton_estimate([instr], instr, self.device, self.members, self.summary)
        if self.bodies is None:
            return estimate([instr], instr, self.device)
        return estimate([instr], instr, self.device, self._members, kind=self._facts(instr)[1],
                        walks=self.walks)

    def fused_time(self, producer: Instruction, consumer: Instruction) -> Estimate:
        if is_fusible_bitcast(consumer):
            # A bitcast user is never asked CanFuse, so no tiled (Triton)
            # estimate is cached for the pair: XLA's
            # EstimateRunTimeForFusionUncached prices it with the non-tiled
            # model, a Triton producer included (its reductions re-read per
            # broadcast element), and the bitcast writes nothing.
            return estimate([producer, consumer], consumer, self.device, self.members,
                            walks=self.walks, writes=False)
        if involves_triton(producer, consumer):
            return triton_estimate([producer, consumer], consumer, self.device, self.members,
                                   self.summary)
        return estimate([producer, consumer], consumer, self.device, self.members,
                        walks=self.walks)

    @property
    def summary(self):
        """The Triton unit-summary cache for triton_estimate (None: no cache)."""
        return None if self.bodies is None else self._summary

    def _summary(self, unit: Instruction) -> tuple[int, dict]:
        got = self.triton_sums.get(unit)
        if got is None:
            got = self.triton_sums[unit] = unit_summary(unit, self._members)
        return got

    @property
    def members(self):
        """The fused-body cache for FusionView/estimate (None: no cache)."""
        return None if self.bodies is None else self._members

    def _members(self, body: Computation) -> list[Instruction]:
        got = self.bodies.get(body)
        if got is None:
            got = self.bodies[body] = fused_members(body)
        return got

    def _facts(self, x: Instruction) -> tuple[bool, str]:
        """(contains a significant reduce, emitter kind) of ``x`` alone."""
        if self.bodies is None:
            return _significant_reduce(x), emitter_kind(FusionView.of(x))
        got = self.facts.get(x)
        if got is None:
            view = FusionView.of(x, self._members)
            got = self.facts[x] = (_significant_reduce(x, view=view), emitter_kind(view))
        return got

    def _triton_refusal(self, x: Instruction) -> str | None:
        """:func:`.triton.unit_refusal` of ``x``, cached until ``x`` changes;
        its members part is known without a walk when ``x`` is a fusion
        :meth:`fuse` grew from units that passed it (``members_ok``)."""
        if self.bodies is None:
            return unit_refusal(x)
        got = self.triton_facts.get(x, False)
        if got is False:
            got = None if self._members_ok(x) else members_refusal(x)
            if got is None:
                got = tiling_refusal(x, self._members)
            self.triton_facts[x] = got
        return got

    def _members_ok(self, x: Instruction) -> bool:
        """Whether :func:`.triton.members_refusal` of ``x`` is None (cached)."""
        if x in self.members_ok:
            return True
        if members_refusal(x) is None:
            self.members_ok.add(x)
            return True
        return False

    def _tiling(self, x: Instruction) -> tuple[bool, bool]:
        """:func:`..triton_tiling.tiling_facts` of ``x``, cached until ``x`` changes."""
        got = self.tilings.get(x)
        if got is None:
            if x.opcode != "reduce" and (x.opcode != "fusion" or not any(
                    m.opcode == "reduce" for m in self._members(x.fused_computation))):
                got = (False, False)  # both facts are about reductions
            else:
                from ..triton_tiling import tiling_facts  # (it imports .analysis)
                got = tiling_facts(x, self._members)
            self.tilings[x] = got
        return got

    def _ir(self, x: Instruction):
        """:func:`.ir_size.ir_info` of ``x``, cached until ``x`` changes."""
        if x.opcode == "fusion":
            got = self.time(x).ir  # computed with the estimate of x alone
            if got is not None:
                return got
        if self.bodies is None:
            return ir_info(x)
        got = self.ir_infos.get(x)
        if got is None:
            got = self.ir_infos[x] = ir_info(x, self._members)
        return got

    def _forget_facts(self, instr: Instruction) -> None:
        self.cache.pop(instr, None)
        self.facts.pop(instr, None)
        self.triton_facts.pop(instr, None)
        self.members_ok.discard(instr)
        self.ir_infos.pop(instr, None)
        self.tilings.pop(instr, None)
        self.triton_sums.pop(instr, None)
        if self.walks is not None:
            self.walks.forget(instr)
            self.tiles.forget(instr)
        if self.bodies is not None and instr.opcode == "fusion":
            self.bodies.pop(instr.fused_computation, None)

    def rename_operand(self, instr: Instruction, old: Instruction, new: Instruction) -> None:
        """``instr`` reads ``new`` where it read ``old`` (a consumer replaced by
        its fusion, same shape): the summaries that name operands follow."""
        got = self.triton_sums.pop(instr, None)
        if got is not None and self.bodies is not None:
            flops, reads = got
            self.triton_sums[instr] = (flops, {new if k is old else k: v
                                               for k, v in reads.items()})
        if self.walks is not None:
            self.walks.rename(instr, old, new)
            self.tiles.rename(instr, old, new)

    def carry_over(self, instr: Instruction) -> None:
        """Restore what ``fuse`` carried over for ``instr`` (after
        ``_forget_facts``)."""
        if self.tiles is not None:
            self.tiles.restore(instr)
        carry = self.carry.pop(instr, None)
        if carry is not None:
            ok, summary = carry
            if ok:
                self.members_ok.add(instr)
            if summary is not None:
                self.triton_sums[instr] = summary


__all__ = ["UnitFacts"]
