"""Verifier rules for the generic asynchronous ops (XLA's ``CheckAsyncOp``):
async-start/update carry ``((operands...), result, context...)``, prefixes of
the wrapped computation's parameters and result; async-done has the
computation's result shape; the thread names agree."""

from __future__ import annotations

from typing import Any

from ..ir.attrs import unquote
from ..ir.module import Computation, Instruction
from ..ir.shape import Shape
from .base import shapes_same


def wrapped_computation(instr: Instruction) -> Computation | None:
    """The computation an async op wraps (``calls``, or its start's)."""
    seen = 0
    cur: Instruction | None = instr
    while cur is not None and seen < 64:
        comp = cur.attrs.get("calls")
        if isinstance(comp, Computation):
            return comp
        cur = cur.operands[0] if cur.operands else None
        seen += 1
    return None


def is_shape_prefix(a: Shape, b: Shape, opts: Any) -> bool:
    """``IsShapePrefix``: ``a`` equals ``b`` or is a tuple prefix of it."""
    if shapes_same(a, b, opts):
        return True
    if a.is_tuple and not a.tuple_shapes:
        return True
    if a.is_tuple and b.is_tuple and len(a.tuple_shapes) <= len(b.tuple_shapes):
        return all(shapes_same(x, y, opts) or is_shape_prefix(x, y, opts)
                   for x, y in zip(a.tuple_shapes, b.tuple_shapes))
    return False


def check_async_op(instr: Instruction, opts: Any) -> list[str]:
    op = instr.opcode
    shape = instr.shape
    name = f"{instr.name} (opcode: {op})"
    if op in ("async-start", "async-update"):
        if not shape.is_tuple or len(shape.tuple_shapes) < 2 or not shape.tuple_shapes[0].is_tuple:
            return [f"{name} expects the async shape to be in the form of ((op0_shape, "
                    f"op1_shape, ...), output_shape, ...), found {shape}."]
    comp = wrapped_computation(instr)
    if comp is None or comp.root is None or any(p is None for p in comp.parameters):
        return [f"{name} has no complete wrapped computation"]
    params = Shape.tuple([p.shape for p in comp.parameters])
    result = comp.root.shape
    if op in ("async-start", "async-update"):
        if not is_shape_prefix(shape.tuple_shapes[0], params, opts):
            return [f"{name} expects the async shape at index {{0}} to be a tuple with shapes "
                    f"that match the prefix of the async computation parameter shape: "
                    f"`{shape.tuple_shapes[0]}` vs `{params}`."]
        if not is_shape_prefix(shape.tuple_shapes[1], result, opts):
            return [f"{name} expects the async shape at index {{1}} to be a tuple with shapes "
                    f"that match the prefix of the async computation result shape "
                    f"({shape.tuple_shapes[1]} vs {result})."]
    elif not shapes_same(shape, result, opts):
        return [f"{name} expects its shape to match the async computation result shape "
                f"({shape} vs {result})."]
    thread = unquote(instr.attrs.get("async_execution_thread", '"main"'))
    if thread != (comp.execution_thread or "main"):
        return [f"{op} expects same async thread name as wrapped computation's thread name "
                f"({thread} vs {comp.execution_thread or 'main'})."]
    if op == "async-start":
        bound = shape.tuple_shapes[0].tuple_shapes
        if len(instr.operands) != len(bound):
            return [f"{name} expects {len(bound)} operands, found {len(instr.operands)}."]
        for i, (o, want) in enumerate(zip(instr.operands, bound)):
            if not shapes_same(want, o.shape, opts):
                return [f"{name} expects the shape of operand {i} to match the async shape at "
                        f"index {{0, {i}}} ({o.shape} vs {want})."]
    return []
