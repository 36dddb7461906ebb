"""Scatter rules of priority fusion (XLA's ``CanEmitInputFusedScatter``,
xla/service/gpu/gpu_fusible.cc): scatter has no elemental implementation, so

* nothing fuses into the output of a scatter (a scatter, or a scatter
  fusion, is never a producer);
* nothing fuses into a scatter's in-place operand (operand 0: the buffer it
  updates), nor a producer that reads that operand.
"""

from __future__ import annotations

from ...ir.module import Instruction


def _scatter_root(instr: Instruction) -> Instruction | None:
    if instr.opcode == "scatter":
        return instr
    if instr.opcode == "fusion" and instr.fused_computation is not None and \
            instr.fused_computation.root.opcode == "scatter":
        return instr.fused_computation.root
    return None


def scatter_refusal(producer: Instruction, consumer: Instruction) -> str | None:
    if _scatter_root(producer) is not None:
        return "do not fuse into the output of scatter"
    scatter = _scatter_root(consumer)
    if scatter is None:
        return None
    if consumer.opcode == "fusion":
        target = scatter.operands[0]
        if target.opcode != "parameter":
            return None
        inplace = consumer.operands[target.parameter_number]
    else:
        inplace = consumer.operands[0]
    if inplace is producer:
        return "do not fuse into the in-place operand of scatter"
    if inplace in producer.operands:
        return "Producer uses the in-place operand of a scatter"
    return None


__all__ = ["scatter_refusal"]
