"""The shape half of XLA's HloVerifier (``ShapeVerifier``): every
instruction's declared shape must equal what shape inference gives for its
operands and attributes (``hlorun.ir.shape_inference``), or what the
opcode's own rule says (``opcodes``, ``calls``, ``collectives``).

:func:`check_shape` returns a list of messages for one instruction (empty
when it is fine); it never raises.
"""

from __future__ import annotations

from typing import Any, Callable

from ..ir.module import Instruction
from ..ir.shape import Shape
from ..ir.shape_inference import InferenceError, infer_shape
from . import calls, opcodes as o
from .base import VerifyError, check_result
from .collectives import check_collective

#: Opcodes whose shape comes from ``infer_shape`` with the declared element
#: type as the result/preferred type.
_TYPED = frozenset({"convert", "bitcast-convert", "stochastic-convert", "dot", "convolution"})

#: opcode -> handler(instr, opts) returning an inferred Shape to compare,
#: or None when the handler did all the checking.
_HANDLERS: dict[str, Callable[[Instruction, Any], Shape | None]] = {
    **o.HANDLERS,
    "call": calls.call,
    "while": calls.while_,
    "conditional": calls.conditional,
    "custom-call": calls.custom_call,
}

_COLLECTIVES = frozenset({
    "all-gather", "all-gather-start", "all-gather-done", "all-reduce", "all-reduce-start",
    "all-reduce-done", "reduce-scatter", "all-to-all", "ragged-all-to-all",
    "collective-broadcast", "collective-permute", "collective-permute-start",
    "collective-permute-done"})

_M2M_ONLY = frozenset({"constant", "infeed", "copy-start", "send", "recv"})


def check_shape(instr: Instruction, opts: Any, ctx: Any = None) -> list[str]:
    """Messages for the shape rules ``instr`` breaks (at most one); ``ctx``
    (:class:`hlorun.verifier.module.Context`) tells fused computations."""
    op = instr.opcode
    in_fusion = ctx is not None and instr.parent in ctx.fusion_computations
    try:
        handler = _HANDLERS.get(op)
        if op == "fusion":
            inferred = calls.fusion(instr, opts, in_fusion)
        elif handler is not None:
            inferred = handler(instr, opts)
        elif op in _COLLECTIVES:
            inferred = check_collective(instr, opts)
        else:
            inferred = infer_shape(op, instr.operands, instr.attrs,
                                   instr.shape.element_type if op in _TYPED else None)
        if inferred is not None:
            check_result(instr, inferred, opts, op in _M2M_ONLY, in_fusion)
    except (VerifyError, InferenceError) as e:
        return [str(e)]
    except (KeyError, IndexError, ValueError, TypeError, AttributeError) as e:
        return [f"malformed {op}: {type(e).__name__}: {e}"]
    return []


__all__ = ["check_shape"]
