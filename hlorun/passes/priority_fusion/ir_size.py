"""The code-size guard of XLA:GPU's fusion passes: how often the emitter
emits each instruction of a fusion, and ``ProducerConsumerMergedTooLarge``
(xla/service/gpu/model/gpu_hlo_cost_analysis.cc).

The elemental emitter caches a value per index, so an elementwise op is
emitted once for every distinct *use root* it reaches (the fusion root, or
an operand of a non-elementwise op such as a broadcast, a reduce or a
slice), not once per path; a non-elementwise op makes each operand a use
root of its own, emitted as often as that op is.  A fusion's IR size is
the sum over its instructions; its *basic-block splits* count emissions of
ops that open new basic blocks and so invalidate that cache (concatenate,
dot, dynamic-update-slice, pad, reduce, reduce-window).

Fusing ``producer`` into ``consumer`` emits the producer as often as the
consumer emits the parameter that reads it (its *replication*).  The
merge is refused ("overly large code duplication") when

* the producer contains a cache-invalidating op and would be emitted more
  than once -- replicated, or read by more than one direct user inside
  the consumer (XLA's ``EstimateMaxDirectUsers``, including its guess
  that an op of the consumer with the same name prefix, the first two
  dot-separated parts, is a duplicate CSE will merge); or
* ``size(producer) x replication + size(consumer)`` exceeds 10,000.

The first rule (``guard``) is the one XLA added with
``EstimateMaxDirectUsers`` and has since removed: today's
``ProducerConsumerMergedTooLarge`` (the XLA that JAX 0.11 ships) keeps
only the size limit, since its MLIR emitters do not re-emit a value after
a cache-invalidating op.  ``guard=False`` is that rule; the passes keep
the guard by default (``cache_invalidation_guard``) until the kernel-list
totals allow the switch (see docs/kernel-lists.md).
"""

from __future__ import annotations

from ...ir.module import Instruction
from .utilization import INVALIDATES_CACHE, IrInfo, ir_walk

#: ``GpuHloCostAnalysis::kMaxIRSize``
MAX_IR_SIZE = 10000


def ir_info(instr: Instruction, members=None) -> IrInfo:
    """IR size of ``instr`` (a fusion: of its body, :func:`.utilization.ir_walk`);
    ``emitted`` maps each fusion operand to the emissions of its parameter.
    ``members(body)``: the fused-body cache of priority fusion, if any."""
    if instr.opcode != "fusion":
        return IrInfo(1, int(instr.opcode in INVALIDATES_CACHE), {})
    return ir_walk([instr], instr, members)


def _prefix(name: str) -> tuple[str, str]:
    parts = name.split(".")
    return parts[0], parts[1] if len(parts) > 1 else ""


def _param_reading(consumer: Instruction, producer: Instruction) -> Instruction:
    n = consumer.operands.index(producer)
    return consumer.fused_computation.parameters[n]


def max_direct_users(producer: Instruction, consumer: Instruction) -> int:
    """``EstimateMaxDirectUsers``: the most direct users inside ``consumer``
    any cache-invalidating op of ``producer`` would have."""
    if consumer.opcode != "fusion":
        return 1
    most = 1
    prefixes: set[tuple[str, str]] = set()
    if producer.opcode == "fusion":
        pbody = producer.fused_computation
        if pbody.root.opcode in INVALIDATES_CACHE:
            most = _param_reading(consumer, producer).user_count
        prefixes = {_prefix(h.name) for h in pbody.instructions
                    if h.opcode in INVALIDATES_CACHE}
    else:
        prefixes = {_prefix(producer.name)}
    for h in consumer.fused_computation.instructions:
        if _prefix(h.name) in prefixes:
            most = max(most, 1 + h.user_count)
    return most


def merged_too_large(producer: Instruction, consumer: Instruction, info=ir_info,
                     guard: bool = True) -> bool:
    """``ProducerConsumerMergedTooLarge`` (``info``: a cached :func:`ir_info`;
    ``guard``: also refuse a cache-invalidating producer emitted twice, the
    rule today's XLA no longer has)."""
    replication = 1
    c = info(consumer)
    if consumer.opcode == "fusion":
        replication = c.emitted.get(producer, 0)
    p = info(producer)
    if guard and p.splits >= 1 and \
            (replication > 1 or max_direct_users(producer, consumer) > 1):
        return True
    return p.size * replication + c.size > MAX_IR_SIZE


__all__ = ["INVALIDATES_CACHE", "IrInfo", "MAX_IR_SIZE", "ir_info", "max_direct_users",
           "merged_too_large"]
