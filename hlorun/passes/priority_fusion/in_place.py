"""The in-place rule of priority fusion: XLA's
``InstructionFusion::ShouldFuseInPlaceOp`` (xla/hlo/transforms/simplifiers/
instruction_fusion.cc), the last check of ``CanFuse``.

A consumer that updates a buffer in place (a dynamic-update-slice or a
scatter, or a fusion whose root -- through tuples -- is one, fed through at
most one bitcast by a fusion parameter: ``GetInPlaceInputOutputPairs``)
must not read that buffer anywhere else, or the update would clobber what
the other read sees.  So, for each in-place operand of the consumer:

* another operand of the consumer is the same instruction: refused;
* the producer *is* the in-place operand, or reads it: the producer's
  non-elementwise ops (ignoring bitcasts, parameters and nested fusions)
  decide -- more than one: refused; none: allowed, unless the consumer is a
  fusion in which the producer's parameter reaches a non-elementwise op
  other than the in-place root; one, and the consumer has no
  dynamic-update-slice: allowed; more than one DUS: refused; a slice (or a
  dynamic-slice) of the DUS's update shape at the DUS's own (constant /
  identical) start indices: allowed if, in a consumer fusion, the
  producer's parameter feeds nothing non-elementwise but the DUS; any
  other op (a transpose, a copy of the buffer ...): refused ("unrecognized
  inplace update non-elementwise output pair").

This is why XLA keeps the transpose that brings a KV cache into the
layout a dot wants as its own kernel: it cannot be fused into the cache
update (the DUS) that writes over its result.
"""

from __future__ import annotations

import numpy as np

from ...ir.attrs import parse_slice
from ...ir.module import Instruction
from ...ir.opcode import ELEMENTWISE
from ...ir.shape import bit_width

_IN_PLACE_OPS = ("dynamic-update-slice", "scatter")


def _elementwise(instr: Instruction) -> bool:
    """``HloInstruction::IsElementwise()`` (no operand index: a DUS is not)."""
    op = instr.opcode
    if op == "bitcast-convert":
        a, b = instr.shape, instr.operands[0].shape
        return bit_width(a.element_type) == bit_width(b.element_type)
    return op in ELEMENTWISE


def _op_pairs(instr: Instruction) -> list[tuple[int, tuple]]:
    """(operand number, output index) of an unfused in-place op."""
    if instr.opcode == "dynamic-update-slice":
        return [(0, ())]
    if instr.opcode == "scatter":
        k = len(instr.shape.tuple_shapes) if instr.shape.is_tuple else 1
        return [(0, ())] if k == 1 else [(i, (i,)) for i in range(k)]
    return []


def _follow_tuple(instr: Instruction, index: tuple) -> tuple[Instruction, tuple]:
    """``FollowTupleIndirection``."""
    while True:
        if instr.opcode == "tuple" and index:
            instr, index = instr.operands[index[0]], index[1:]
        elif instr.opcode == "get-tuple-element":
            index = (int(instr.attrs.get("index", 0)),) + index
            instr = instr.operands[0]
        else:
            return instr, index


def in_place_pairs(instr: Instruction) -> list[tuple[int, tuple]]:
    """``GetInPlaceInputOutputPairs`` for the ops priority fusion meets."""
    if instr.opcode != "fusion":
        return _op_pairs(instr)
    body = instr.fused_computation
    if body is None or body.root is None:
        return []
    out: list[tuple[int, tuple]] = []
    leaves = [(i,) for i in range(len(instr.shape.tuple_shapes))] if instr.shape.is_tuple else [()]
    for index in leaves:
        src, src_index = _follow_tuple(body.root, index)
        source = None
        for n, out_index in _op_pairs(src):
            if out_index == src_index:
                source, _ = _follow_tuple(src.operands[n], ())
        if source is not None and source.opcode == "bitcast":
            source = source.operands[0]
        if source is not None and source.opcode == "parameter" and source.parameter_number is not None:
            out.append((source.parameter_number, index))
    return out


def _members(instr: Instruction) -> list[Instruction]:
    """``ExtractInstructions`` candidates: the instruction, or a fusion's body."""
    if instr.opcode == "fusion" and instr.fused_computation is not None:
        return list(instr.fused_computation.instructions)
    return [instr]


def _nonelementwise(instr: Instruction) -> bool:
    return instr.opcode not in ("fusion", "bitcast", "parameter") and not _elementwise(instr)


def _real(owner: Instruction, operand: Instruction) -> Instruction:
    if owner.opcode == "fusion" and operand.opcode == "parameter" and \
            operand.parameter_number is not None and operand.parent is owner.fused_computation:
        return owner.operands[operand.parameter_number]
    return operand


def _constant_int(instr: Instruction) -> int | None:
    if instr.opcode != "constant" or instr.literal is None:
        return None
    try:
        v = np.asarray(instr.literal.value).reshape(-1)
        return int(v[0]) if v.size else None
    except (ValueError, TypeError):
        return None


def _reaches(start: Instruction, targets: set[Instruction]) -> bool:
    seen: set[Instruction] = set()
    stack = [start]
    while stack:
        x = stack.pop()
        if x in targets:
            return True
        if x in seen:
            continue
        seen.add(x)
        stack.extend(x._users)
    return False


def _safe_slice_into_dus(producer: Instruction, consumer: Instruction, dus: Instruction) -> bool:
    """``IsSafeToFuseSliceIntoDusFusion``."""
    memo: dict[Instruction, bool] = {}

    def bad(x: Instruction) -> bool:
        got = memo.get(x)
        if got is None:
            if x is not dus and not _elementwise(x) and x.opcode != "parameter":
                got = True
            else:
                got = any(bad(u) for u in x._users)
            memo[x] = got
        return got
    body = consumer.fused_computation
    return not any(op is producer and bad(body.parameters[i])
                   for i, op in enumerate(consumer.operands))


def in_place_refusal(producer: Instruction, consumer: Instruction) -> str | None:
    """Why ``producer`` must not fuse into ``consumer`` (None: it may)."""
    for n, out_index in in_place_pairs(consumer):
        buffer = consumer.operands[n]
        if any(i != n and op is buffer for i, op in enumerate(consumer.operands)):
            return ("The consumer is an in-place operation that has an additional operand "
                    "that has the same value as the in-place buffer")
        if buffer is not producer and buffer not in producer.operands:
            continue
        p_ops = [i for i in _members(producer) if _nonelementwise(i)]
        if len(p_ops) > 1:
            return "Producer fusion has multiple non-elementwise ops, bailing."
        if not p_ops:
            if consumer.opcode != "fusion":
                return None
            body = consumer.fused_computation
            root, _ = _follow_tuple(body.root, out_index)
            c_ops = {i for i in body.instructions if _nonelementwise(i) and i is not root}
            param = body.parameters[consumer.operands.index(producer)]
            if c_ops and _reaches(param, c_ops):
                return "Non-elementwise ops in consumer lead to inplace conflict after fusion."
            return None
        dus_ops = [i for i in _members(consumer) if i.opcode == "dynamic-update-slice"]
        if not dus_ops:
            return None
        if len(dus_ops) > 1:
            return "multiple dus ops, bailing."
        dus, p_op = dus_ops[0], p_ops[0]
        rank = dus.shape.rank
        if p_op.opcode == "slice":
            if p_op.shape != dus.operands[1].shape:
                return ("Slice op has a different shape than the update shape of the dus op, "
                        "bailing.")
            ranges = parse_slice(p_op.attrs["slice"])
            for d in range(rank):
                c = _constant_int(_real(consumer, dus.operands[2 + d]))
                start, _, stride = ranges[d]
                if c is None or c != start or stride != 1:
                    return "DUS and slice index mismatch"
            if consumer.opcode == "fusion" and not _safe_slice_into_dus(producer, consumer, dus):
                return ("Fusing slice into DUS will also fuse another non-elementwise op with "
                        "shared operand as DUS.")
            return None
        if p_op.opcode == "dynamic-slice":
            if p_op.shape != dus.operands[1].shape:
                return ("Dynamic slice op has a different shape than the update shape of the "
                        "dus op, bailing.")
            for d in range(rank):
                a = _real(producer, p_op.operands[1 + d])
                b = _real(consumer, dus.operands[2 + d])
                ca, cb = _constant_int(a), _constant_int(b)
                if ca != cb or (ca is None and a is not b):
                    return "DUS and DS index mismatch"
            if consumer.opcode == "fusion" and not _safe_slice_into_dus(producer, consumer, dus):
                return ("Fusing DS into DUS will also fuse another non-elementwise op with "
                        "shared operand as DUS.")
            return None
        return "unrecognized inplace update non-elementwise output pair"
    return None


__all__ = ["in_place_pairs", "in_place_refusal"]
