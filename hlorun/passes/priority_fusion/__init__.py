"""priority-fusion: XLA:GPU's PriorityFusion (xla/backends/gpu/transforms/
priority_fusion.cc), with a simplified cost model (:mod:`.model`).

Producers (instructions with users, in post order; not parameters, tuples,
get-tuple-elements or unfusible ops) are ranked by the time fusing them
into *all* their users saves: ``unfused - fused`` where unfused = the
producer's and its users' kernels plus one launch each, fused = one kernel
per user with the producer computed inside it.  The best producer is fused
into every user (each user becomes, or grows, a fusion: the producer is
duplicated into each), the priorities of the new fusion and its operands
are recomputed, and so on until no producer has a positive benefit.
Bitcasts go first (infinite priority); small constants (at most one
element) are fused into their users at the end; a producer whose fusion
would not be beneficial stays a kernel of its own.

A producer is only a candidate if it can be fused into every non-bitcast
user (``CanFuseWithAllNonBitcastUsers``), where ``CanFuse`` refuses: the
computation's root; producers / users that are not fusible (custom calls,
dots, GEMM fusions: "the producer is not fusible" / "the consumer is not
fusible"); a single bitcast as the user; producer and user both containing
a reduction of at least 16 elements; fusing into the output of a
reduction fusion when the result would be a loop fusion; more than 96
parameters or operands; ``ProducerConsumerMergedTooLarge``
(:mod:`.ir_size`: a producer with a reduce, concatenate, pad ... emitted
more than once in the consumer, or more than 10,000 emitted instructions:
"the fusion would result in an overly large code duplication").  A producer with only bitcast users is not fused
("not fusing because there are only bitcast users").  Bitcast users are
not asked CanFuse and are never fused into, but they are costed like any
other user (XLA's EstimateRunTimes gets all of ``producer->users()``): the
producer stays alive for them, so a producer read through a bitcast (a GEMM
operand after hoist-fused-bitcasts) is recomputed in its other users only
when that still pays.  A bitcast alone costs nothing (HloCostAnalysis::
HandleBitcast); the producer fused into a bitcast user costs its reads and
compute, no write, priced with the non-tiled model even for a generic
Triton producer (no CanFuse, so no tiled estimate is cached for the pair):
a Triton normalization re-reads its input per broadcast element there, so
it is not duplicated (gpt_bf16x3_f32_train's layer norms and residual
gradients), while an elementwise producer is.

Fusion kinds follow the emitter the fused computation gets: a real
reduction hero (reduction emitter: row reductions of at least 32 or a
divisor of 32 elements, column reductions of enough rows) gives
``kInput``, a tiled transpose ``kInput``, anything else ``kLoop``; names
are XLA's (``fusion``, ``fused_computation``, ``param_N``); rename_fusions
renames them later.  Every decision is a remark: fused (with the estimated
times), ineligible (with the CanFuse reason), or not beneficial (with the
numbers).  The cost model counts element evaluations through a fusion
the way XLA's ``FusionCalculateUtilizations`` does (:mod:`.utilization`).

The in-place rule (``ShouldFuseInPlaceOp``, :mod:`.in_place`) and the
scatter rules (:mod:`.scatter`) are the last checks of CanFuse.

Not modelled (stated): Triton heroless / multi-output fusion (off by
default in XLA), the tiled (SymbolicTileAnalysis) cost model.

Postcondition: no producer with a positive estimated benefit is left
unfused.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

from ...ir.module import Computation, Instruction, Module
from ..base import Pass
from .analysis import (FusionView, emitter_kind, fusible_computations, fusion_kind_for,
                       is_fusible, is_fusible_bitcast, is_generic_triton_fusion, reduction_dims)
from .fuse import create_fusion, dispose, fuse_into, replace_with_fusion
from .costs import ProducerCosts, exact, first_refusal
from .facts import UnitFacts
from .ir_size import merged_too_large
from .model import device_of
from .in_place import in_place_refusal
from .scatter import scatter_refusal
from .triton import (TRITON_KIND, can_fuse_triton, finish_triton_config, involves_triton,
                     triton_backend_config, triton_config)

MAX_PARAMETERS = 96
INF = float("inf")


def _mib(n: int) -> str:
    return f"{n / 2**20:.2f} MiB" if n >= 2**20 else f"{n / 1024:.1f} KiB" if n >= 1024 else f"{n} B"


#: producers with at most this many users keep no aggregate between
#: priority computations (:meth:`.costs.ProducerCosts.release`)
KEEP_AGGREGATE = 2


@dataclass(frozen=True)
class PriorityFusion(Pass):
    """Producer-consumer fusion ranked by a GPU cost model.

    ``reference: true`` recomputes every re-queued producer's priority from
    scratch (no caches): the straightforward, O(users^2) definition the
    incremental default (:mod:`.costs`) must match exactly."""

    name = "priority-fusion"
    reference: bool = False
    #: ``ProducerConsumerMergedTooLarge`` with the cache-invalidation guard
    #: XLA has since removed (:mod:`.ir_size`); false: today's XLA rule
    cache_invalidation_guard: bool = False

    def run(self, module: Module) -> bool:
        object.__setattr__(self, "_device", device_of(self.target))
        changed = False
        for comp in fusible_computations(module):
            q = _Queue(self, comp)
            changed |= q.run()
            q.release()
        return changed


class _Queue(UnitFacts):
    def __init__(self, owner: PriorityFusion, comp: Computation):
        super().__init__(owner._device, owner.reference)
        self.owner = owner
        self.comp = comp
        self.heap: list[tuple[float, int, Instruction]] = []
        self.prio: dict[Instruction, float] = {}
        self.reported_ineligible: set[tuple[str, str]] = set()
        self.last_estimate: dict[Instruction, tuple[float, float]] = {}
        # producers whose last priority was negative (finite): one
        # "not beneficial" remark each at the end, with the last estimate
        self.rejected: dict[Instruction, None] = {}
        self.costs = ProducerCosts(self.time, self.fused_time, self.can_fuse_pair)
        # Triton fusions' backend configs, written after the last step
        self.triton_bc: dict[Instruction, dict] = {}
        # fused computations this queue built (disposed of when merged away)
        self.created: set[Computation] = set()

    # -- facts (the caches are :class:`.facts.UnitFacts`') ----------------------------------
    def changed(self, instr: Instruction) -> None:
        """``instr`` was rewritten (its body, kind or operands): forget its
        estimates (but for what :meth:`fuse` carried over)."""
        self._forget_facts(instr)
        self.carry_over(instr)
        self.costs.content_changed(instr)

    # -- decisions ----------------------------------------------------------------------
    def can_fuse(self, producer: Instruction, consumer: Instruction) -> str | None:
        if producer is self.comp.root:
            return "not fusing into the output of the root instruction"
        return self.can_fuse_pair(producer, consumer)

    def can_fuse_pair(self, producer: Instruction, consumer: Instruction) -> str | None:
        """CanFuse without the root rule (a function of both instructions' content)."""
        if not is_fusible(producer):
            return "the producer is not fusible"
        if not is_fusible(consumer):
            return "the consumer is not fusible"
        if involves_triton(producer, consumer):  # CanFuseTriton: Triton or nothing
            if self.bodies is None:
                return can_fuse_triton(producer, consumer, self._triton_refusal)
            return can_fuse_triton(producer, consumer, self._triton_refusal, self._members,
                                   self._tiling, self.tiles.refusal)
        if is_fusible_bitcast(consumer):
            return "not fusing into a single bitcast as consumer"
        why = scatter_refusal(producer, consumer)  # CanEmitInputFusedScatter
        if why is not None:
            return why
        p_reduce, p_kind = self._facts(producer)
        if p_reduce and self._facts(consumer)[0]:
            return "both the producer and the consumer contain a reduce"
        if p_kind == "reduction" and \
                emitter_kind(self.pair_view(producer, consumer)) == "loop":
            return "fusion into output of a reduce fusion would create a loop fusion"
        if len(consumer.operands) + len(producer.operands) > MAX_PARAMETERS + 1:
            # (at most this many distinct operands: the consumer reads the producer)
            ops = {o for o in consumer.operands if o is not producer} | set(producer.operands)
            if len(ops) > MAX_PARAMETERS:
                return f"the fusion would have {len(ops)} parameters (more than {MAX_PARAMETERS})"
        if merged_too_large(producer, consumer, self._ir, self.owner.cache_invalidation_guard):
            return "the fusion would result in an overly large code duplication"
        return in_place_refusal(producer, consumer)  # ShouldFuseInPlaceOp

    def priority(self, producer: Instruction) -> float:
        if is_fusible_bitcast(producer):
            return INF
        if producer.opcode == "constant":
            return -INF
        if not producer._users:
            return -INF
        if self.reference:
            return self.reference_priority(producer)
        a = self.costs.aggregate(producer)
        if len(a.terms) <= KEEP_AGGREGATE:
            # a producer with few users: an update would re-evaluate about
            # every term anyway, so its aggregate is not kept (rebuilt from
            # scratch, with the same verdicts and exact sums, when asked)
            self.costs.release(producer)
        if producer is self.comp.root and len(a.terms) > a.bitcasts:
            first = next(u for u in producer._users if u in a.terms and not is_fusible_bitcast(u))
            self.ineligible(producer, "not fusing into the output of the root instruction", first)
            return -INF
        if a.bad:
            if any((producer.name, why) not in self.reported_ineligible for why in a.bad):
                why, user = first_refusal(producer, a)
                self.ineligible(producer, why, user)
            return -INF
        if len(a.terms) == a.bitcasts:
            self.ineligible(producer, "not fusing because there are only bitcast users")
            return -INF
        self.costs.estimates(producer, a)
        unfused, fused = ProducerCosts.totals(len(a.terms), self.time(producer).time_us,
                                              a.sum_t, a.sum_f)
        self.last_estimate[producer] = (unfused, fused)
        return unfused - fused

    def reference_priority(self, producer: Instruction) -> float:
        """From scratch: every user's CanFuse and estimates."""
        non_bitcast = [u for u in producer.users if not is_fusible_bitcast(u)]
        for u in non_bitcast:
            why = self.can_fuse(producer, u)
            if why is not None:
                self.ineligible(producer, why, u)
                return -INF
        if not non_bitcast:
            self.ineligible(producer, "not fusing because there are only bitcast users")
            return -INF
        sum_t = sum_f = 0
        for u in producer.users:  # bitcast users are costed too (EstimateRunTimes(users()))
            sum_t += exact(self.time(u).time_us)
            sum_f += exact(self.fused_time(producer, u).time_us)
        unfused, fused = ProducerCosts.totals(len(producer.users), self.time(producer).time_us,
                                              sum_t, sum_f)
        self.last_estimate[producer] = (unfused, fused)
        return unfused - fused

    def ineligible(self, producer: Instruction, why: str, user: Instruction | None = None) -> None:
        key = (producer.name, why)
        if key in self.reported_ineligible:
            return
        self.reported_ineligible.add(key)
        where = f" (user {user.name})" if user is not None else ""
        self.owner.remark(producer, f"{producer.name} is not fused: {why}{where}", "missed",
                          derived_from=[producer], rule="ineligible", reason=why,
                          user=user.name if user is not None else None)

    # -- queue --------------------------------------------------------------------------
    def push(self, instr: Instruction) -> None:
        pr = self.priority(instr)
        self.prio[instr] = pr
        if pr < 0:
            if pr != -INF and instr in self.last_estimate:
                self.rejected[instr] = None
            else:
                self.rejected.pop(instr, None)
            return
        self.rejected.pop(instr, None)
        heapq.heappush(self.heap, (-pr, -instr.id, instr))

    def _not_beneficial(self, producer: Instruction, unfused: float, fused: float) -> None:
        users = [u for u in producer.users if not is_fusible_bitcast(u)]
        p = self.time(producer)
        a = None if self.reference else self.costs.agg.get(producer)
        extra = []
        for u in users:
            term = a.terms.get(u) if a is not None else None
            f = term[2] if term is not None and term[2] is not None else \
                self.fused_time(producer, u)
            if f.read_bytes > f.read_net_bytes * 2 and f.kind == "reduction":
                extra.append(f"the {f.kind} kernel of {u.name} would read the producer's inputs "
                             f"{f.read_bytes / max(1, f.read_net_bytes):.0f}x over with "
                             f"{f.blocks} block(s)")
        if len(users) > 1:
            extra.append(f"the producer ({_mib(p.write_bytes)}) would be recomputed in each of "
                         f"{len(users)} users")
        names = ", ".join(u.name for u in users)
        self.owner.remark(producer, (
            f"fusion of {producer.name} into {names} rejected: estimated {fused:.3f} us fused vs "
            f"{unfused:.3f} us unfused" + (f" ({'; '.join(extra)})" if extra else "")),
            "missed", derived_from=[producer], rule="not-beneficial",
            us_fused=round(fused, 4), us_unfused=round(unfused, 4), users=[u.name for u in users])

    def run(self) -> bool:
        comp = self.comp
        costs = self.costs
        for instr in comp.post_order():
            costs.watch(instr)
            if instr.opcode in ("parameter", "tuple", "get-tuple-element") or not instr._users:
                continue
            if not is_fusible(instr) and instr.opcode != "constant":
                # unfusible producers are reported once through their users' checks
                self.ineligible(instr, "the producer is not fusible")
                continue
            self.push(instr)
        changed = False
        while self.heap:
            negp, _, producer = heapq.heappop(self.heap)
            if producer.parent is not comp or self.prio.get(producer) != -negp:
                continue
            consumers = [u for u in producer._users if not is_fusible_bitcast(u)]
            if is_fusible_bitcast(producer):
                consumers = [u for u in consumers if self.can_fuse(producer, u) is None]
            if not consumers:
                continue
            touched: dict[Instruction, None] = {}
            affected: dict[Instruction, None] = {producer: None}  # user sets changed
            unfused, fused = self.last_estimate.get(producer, (INF, 0.0))
            new_fusions = []
            for consumer in consumers:
                before = list(consumer.operands)
                fusion = self.fuse(producer, consumer)
                new_fusions.append(fusion)
                touched[fusion] = None
                # only these users of the operands involved can have changed
                moved = (producer, consumer, fusion)
                for o in before:
                    costs.mark(o, moved)
                    affected[o] = None
                for o in fusion.operands:
                    costs.mark(o, moved)
                    affected[o] = None
                    if o is not producer:
                        touched[o] = None
                changed = True
            costs.mark(producer, consumers)
            benefit = "a bitcast (free)" if negp == -INF else \
                f"saves {unfused - fused:.3f} us ({unfused:.3f} -> {fused:.3f} us estimated)"
            hero = FusionView.of(producer, self.members).hero()
            note = None
            if hero.opcode == "reduce":
                from .analysis import unnested_faster_than_elemental
                rd = reduction_dims(hero)
                fast, why = unnested_faster_than_elemental(rd)
                if not fast:
                    note = f"{rd.describe()}: {why}"
            for f in new_fusions:
                self.owner.remark(f, f"{producer.name} fused into {f.name}: {benefit}",
                                  derived_from=[producer], rule="fused", producer=producer.name,
                                  producer_opcode=hero.opcode, fusion_kind=f.fusion_kind,
                                  us_saved=None if negp == -INF else round(unfused - fused, 4),
                                  note=note)
            if not producer._users and producer.parent is comp and producer is not comp.root:
                self._remove(producer)
            for f in new_fusions:
                self.changed(f)
                costs.watch(f)
            for x in affected:
                if x.parent is comp:
                    costs.recheck(x)
            for t in touched:
                if t.parent is comp and t.opcode not in ("parameter", "tuple",
                                                         "get-tuple-element") and t._users:
                    if is_fusible(t) or t.opcode == "constant":
                        self.push(t)
        for f, bc in self.triton_bc.items():
            if f.parent is comp:
                finish_triton_config(f, bc)
        self.triton_bc.clear()
        for p in self.rejected:
            if p.parent is comp and p in self.last_estimate:
                self._not_beneficial(p, *self.last_estimate[p])
        changed |= self.fuse_constants()
        return changed

    def _remove(self, instr: Instruction) -> None:
        comp = self.comp
        body = instr.fused_computation if instr.opcode == "fusion" else None
        self._forget_facts(instr)
        self.triton_bc.pop(instr, None)
        comp.remove_instruction(instr)
        self.costs.forget(instr)
        self._drop(instr)
        if body is not None and comp.module is not None and comp.module.has_computation(body):
            comp.module.remove_computation(body)
            if body in self.created:  # ours alone: nothing else can refer to it
                self.created.discard(body)
                dispose(body)

    def _drop(self, instr: Instruction) -> None:
        """Forget a removed instruction's priority and estimate (kept, a
        removed fusion would keep its body alive until :meth:`release`)."""
        self.prio.pop(instr, None)
        self.last_estimate.pop(instr, None)
        self.rejected.pop(instr, None)

    def release(self) -> None:
        """Drop the queue's state: its caches refer to it through bound
        methods (a cycle) and would otherwise wait for the cyclic collector."""
        self.__dict__.clear()

    def fuse(self, producer: Instruction, consumer: Instruction) -> Instruction:
        kind = fusion_kind_for(emitter_kind(self.pair_view(producer, consumer)))
        # every member of the result is a member of one of the two, with the
        # same opcode, shape, attributes and operand shapes
        members_ok = self.bodies is not None and consumer in self.members_ok and \
            self._members_ok(producer)
        sp, sc = self.triton_sums.get(producer), self.triton_sums.get(consumer)
        if consumer.opcode == "fusion":
            fusion = consumer
            fusion.attrs["kind"] = kind
            if self.tiles is not None:
                self.tiles.fused(producer, consumer, fusion)
        else:
            fusion = create_fusion(consumer, kind)
            self.created.add(fusion.fused_computation)
            if self.tiles is not None:
                self.tiles.fused(producer, consumer, fusion)
            self._forget_facts(consumer)
            replace_with_fusion(consumer, fusion)
            for u in fusion._users:  # their operand changed: summaries name operands
                self.rename_operand(u, consumer, fusion)
            self.costs.forget(consumer)
            self._drop(consumer)
            self.owner.remark(fusion, f"{consumer.name} becomes fusion {fusion.name}",
                              "analysis", derived_from=[consumer], rule="new-fusion")
        fuse_into(fusion, producer, self.members)
        if kind == "kCustom" and involves_triton(producer, fusion):
            if self.bodies is None:
                triton_backend_config(fusion, producer, consumer)
            else:  # the config is written once, for the last body (finish_configs)
                self.triton_bc[fusion] = triton_config(fusion, (producer, consumer),
                                                       self.triton_bc)
                if not is_generic_triton_fusion(fusion):
                    fusion.set_backend_config(TRITON_KIND)
        self._forget_facts(fusion)
        summary = None
        if sp is not None and sc is not None:
            # unit_summary of the result: the members' flops (integers) add
            # up; the reads are both units' less the producer (its clone is
            # a member now), as triton_estimate combines the two
            reads = dict(sp[1])
            reads.update(sc[1])
            reads.pop(producer, None)
            summary = (sp[0] + sc[0], reads)
        self.carry[fusion] = (members_ok and fusion.fused_computation.root.opcode != "tuple",
                              summary)
        return fusion

    def fuse_constants(self) -> bool:
        changed = False
        for c in list(self.comp.instructions):
            if c.opcode != "constant" or c.parent is not self.comp or not c.shape.is_array \
                    or math.prod(c.shape.dimensions) > 1:
                continue
            for user in list(c.users):
                if not is_fusible(user):
                    continue
                if user.opcode == "fusion":
                    fuse_into(user, c)
                else:
                    f = create_fusion(user, fusion_kind_for(emitter_kind(FusionView.of(user))))
                    replace_with_fusion(user, f)
                    fuse_into(f, c)
                changed = True
            # the original stays (dead) as in XLA; DCE removes it
        return changed


__all__ = ["PriorityFusion"]
