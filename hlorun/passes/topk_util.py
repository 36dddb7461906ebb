"""Shared pieces of the top-k passes (topk-rewriter, topk-decomposer,
topk-splitter, topk-specializer; XLA's topk_rewriter.cc, topk_splitter.cc,
topk_specializer.cc).

* ``derived(src, ...)``: an instruction added the way
  ``HloInstruction::AddInstruction`` adds one (XLA's
  ``SetupDerivedInstruction``: the new instruction takes ``src``'s
  metadata) -- the decomposed sort of a ``top_k`` keeps ``op_name=".../top_k"``
  as in XLA's dumps; ``src=None`` is ``HloComputation::AddInstruction``
  (no metadata: TopkSpecializer's ``__gpu$TopK`` call has none).
* the ``TopK`` custom call's operand, result and comparator accessors.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..ir.attrs import format_int_list, format_slice
from ..ir.module import Computation, Instruction
from ..ir.shape import Shape

#: the custom call TopkRewriter creates (XLA: "TopK")
TOPK_TARGET = "TopK"
#: the custom call TopkSpecializer creates (XLA: kTopKCustomCallTarget)
GPU_TOPK_TARGET = "__gpu$TopK"


def derived(src: Instruction | None, comp: Computation, opcode: str, shape: Shape,
            operands: Sequence[Instruction] = (), name: str | None = None,
            **attrs: Any) -> Instruction:
    instr = Instruction(opcode, shape, list(operands), "", dict(attrs))
    if src is not None and "metadata" in src.attrs:
        instr.attrs["metadata"] = src.attrs["metadata"]
    comp.add_instruction(instr, name or opcode)
    return instr


def gte(src: Instruction | None, tup: Instruction, index: int) -> Instruction:
    return derived(src, tup.parent, "get-tuple-element", tup.shape.tuple_shapes[index], [tup],
                   index=str(index))


def slice_prefix(src: Instruction | None, operand: Instruction, shape: Shape) -> Instruction:
    """``slice(operand)`` from 0 with stride 1 to ``shape``'s dimensions."""
    ranges = [(0, d, 1) for d in shape.dimensions]
    return derived(src, operand.parent, "slice", shape, [operand], slice=format_slice(ranges))


def make_sort(src: Instruction | None, comp: Computation, shape: Shape,
              operands: Sequence[Instruction], dimension: int, comparator: Computation,
              is_stable: bool) -> Instruction:
    attrs: dict[str, Any] = {"dimensions": format_int_list([dimension])}
    if is_stable:
        attrs["is_stable"] = "true"
    attrs["to_apply"] = comparator
    return derived(src, comp, "sort", shape, operands, **attrs)


def is_topk_call(instr: Instruction, target: str = TOPK_TARGET) -> bool:
    return instr.opcode == "custom-call" and instr.custom_call_target == target


def comparator_of(call: Instruction) -> Computation | None:
    """The custom call's comparator (``to_apply`` / ``called_computations``)."""
    if call.to_apply is not None:
        return call.to_apply
    called = call.called_computations()
    return called[0] if called else None


def make_topk_call(src: Instruction | None, comp: Computation, shape: Shape,
                   operand: Instruction, comparator: Computation, target: str,
                   backend_config: str | None = None, typed_ffi: bool = False) -> Instruction:
    from ..ir.attrs import quote
    attrs: dict[str, Any] = {"custom_call_target": quote(target)}
    if typed_ffi:
        attrs["api_version"] = "API_VERSION_TYPED_FFI"
    attrs["called_computations"] = [comparator]
    if backend_config:
        attrs["backend_config"] = backend_config
    return derived(src, comp, "custom-call", shape, [operand], name="custom-call", **attrs)


def topk_sizes(call: Instruction) -> tuple[int, int, int]:
    """(batch, n, k) of a TopK call on ``[n]`` or ``[batch, n]``."""
    data = call.operands[0].shape
    has_batch = data.rank == 2
    batch = data.dimensions[0] if has_batch else 0
    n = data.dimensions[-1]
    k = call.shape.tuple_shapes[0].dimensions[-1]
    return batch, n, k


__all__ = ["GPU_TOPK_TARGET", "TOPK_TARGET", "comparator_of", "derived", "gte", "is_topk_call",
           "make_sort", "make_topk_call", "slice_prefix", "topk_sizes"]
