"""Verifier rules for asynchronous ops (XLA's ``CheckAsyncOp``):
async-start/update carry ``((operands...), result, context...)``, prefixes of
the wrapped computation's parameters and result; async-update binds the
next parameters; async-done needs every parameter bound and has the
computation's result shape; thread names and the start's aliasing agree.

The sugar forms (``custom-call-start`` ...) wrap one instruction whose
operands are the start's operands and whose shape is the start's result
element, as XLA's parser builds them.
"""

from __future__ import annotations

from typing import Any

from ..ir import attrs as A
from ..ir.module import Computation, Instruction
from ..ir.opcode import split_async_sugar
from ..ir.shape import Shape
from ..ir.shape_inference.common import compatible
from .base import equal_with_layout, shapes_same


def _kind(op: str) -> str | None:
    if op.startswith("async-"):
        return op[5:]
    sugar = split_async_sugar(op)
    return sugar[1] if sugar else None


def chain_start(instr: Instruction) -> Instruction | None:
    cur, steps = instr, 0
    while cur is not None and _kind(cur.opcode) in ("-update", "-done") and steps < 256:
        cur = cur.operands[0] if cur.operands else None
        steps += 1
    return cur if cur is not None and _kind(cur.opcode) == "-start" else None


def program(instr: Instruction) -> tuple[list[Shape], Shape, str] | None:
    """(parameter shapes, result shape, thread) of what ``instr`` wraps."""
    start = chain_start(instr)
    comp = instr.attrs.get("calls")
    if not isinstance(comp, Computation) and start is not None:
        comp = start.attrs.get("calls")
    if isinstance(comp, Computation):
        if comp.root is None or any(p is None for p in comp.parameters):
            return None
        return [p.shape for p in comp.parameters], comp.root.shape, comp.execution_thread or "main"
    if start is None or not start.shape.is_tuple or len(start.shape.tuple_shapes) < 2:
        return None
    # Sugar: the wrapped instruction takes every operand bound along the
    # chain and has the done's shape (outputs may be bound late too).
    done = chain_done(start)
    last = done.operands[0] if done is not None else instr
    if not last.shape.is_tuple or len(last.shape.tuple_shapes) < (1 if done else 2) \
            or not last.shape.tuple_shapes[0].is_tuple:
        return None  # (an incomplete chain: two dones of one start, fuzz case 54293)
    params = list(last.shape.tuple_shapes[0].tuple_shapes)
    result = done.shape if done is not None else last.shape.tuple_shapes[1]
    thread = A.unquote(start.attrs.get("async_execution_thread", '"main"'))
    return params, result, thread


def chain_done(start: Instruction) -> Instruction | None:
    """The async-done that ends ``start``'s chain (None if incomplete)."""
    cur, steps = start, 0
    while steps < 256:
        nxt = [u for u in cur._users if _kind(u.opcode) in ("-update", "-done")
               and u.operands and u.operands[0] is cur]
        if len(nxt) != 1:
            return None
        cur = nxt[0]
        if _kind(cur.opcode) == "-done":
            return cur
        steps += 1
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
    kind = _kind(instr.opcode)
    shape = instr.shape
    name = f"{instr.name} (opcode: {instr.opcode})"
    if kind in ("-start", "-update"):
        if not shape.is_tuple or len(shape.tuple_shapes) < 2 or not shape.tuple_shapes[0].is_tuple:
            return [f"{name} expects the async shape to be in the form of ((op0_shape, "
                    f"op1_shape, ...), output_shape, ...), found {shape}."]
    prog = program(instr)
    if prog is None:
        return [f"{name} is not part of a complete async chain with a wrapped computation"]
    params, result, thread = prog
    param_tuple = Shape.tuple(params)
    if kind in ("-start", "-update"):
        if not is_shape_prefix(shape.tuple_shapes[0], param_tuple, opts):
            return [f"{name} expects the async shape at index {{0}} to be a tuple with shapes "
                    f"that match the prefix of the async computation parameter shape: "
                    f"`{shape.tuple_shapes[0]}` vs `{param_tuple}`."]
        if not is_shape_prefix(shape.tuple_shapes[1], result, opts):
            return [f"{name} expects the async shape at index {{1}} to be a tuple with shapes "
                    f"that match the prefix of the async computation result shape "
                    f"({shape.tuple_shapes[1]} vs {result})."]
    elif not shapes_same(shape, result, opts):
        return [f"{name} expects its shape to match the async computation result shape "
                f"({shape} vs {result})."]
    mine = A.unquote(instr.attrs.get("async_execution_thread", '"main"'))
    if instr.attrs.get("async_execution_thread") is not None or kind == "-start":
        if mine != thread:
            return [f"{instr.opcode} expects same async thread name as wrapped computation's "
                    f"thread name ({mine} vs {thread})."]
    if kind == "-start":
        # A sugar start's attributes (aliasing included) are the wrapped op's.
        return _start_operands(instr, name, opts) or (
            _alias_config(instr, params, result, opts) if instr.opcode == "async-start" else [])
    if kind == "-update":
        return _update_operands(instr, name, opts)
    return _done_operands(instr, name, param_tuple)


def _start_operands(instr: Instruction, name: str, opts: Any) -> list[str]:
    bound = instr.shape.tuple_shapes[0].tuple_shapes
    if len(instr.operands) != len(bound):
        return [f"{name} expects {len(bound)} operands, found {len(instr.operands)}."]
    for i, (o, want) in enumerate(zip(instr.operands, bound)):
        if not shapes_same(want, o.shape, opts):
            return [f"{name} expects the shape of operand {i} to match the async shape at "
                    f"index {{0, {i}}} ({o.shape} vs {want})."]
    return []


def _update_operands(instr: Instruction, name: str, opts: Any) -> list[str]:
    """``CheckAsyncUpdateOperands``: the next parameters bound by new operands."""
    if not instr.operands:
        return [f"{name} expects at least one operand, found 0."]
    prev = instr.operands[0]
    if _kind(prev.opcode) not in ("-start", "-update"):
        return [f"{name} expects the operand to be async-start or async-update, found "
                f"{prev.opcode}."]
    s0, s1 = prev.shape, instr.shape
    if not s0.is_tuple or len(s0.tuple_shapes) < 2 or not s0.tuple_shapes[0].is_tuple:
        return []
    if not is_shape_prefix(s0.tuple_shapes[0], s1.tuple_shapes[0], opts):
        return [f"{name} expects the parameter shape of operand to be a prefix of the output "
                f"parameter shape ({s0.tuple_shapes[0]} vs {s1.tuple_shapes[0]})."]
    if not is_shape_prefix(s0.tuple_shapes[1], s1.tuple_shapes[1], opts):
        return [f"{name} expects the result shape of operand to be a prefix of the output "
                f"result shape ({s0.tuple_shapes[1]} vs {s1.tuple_shapes[1]})."]
    new = len(instr.operands) - 1
    before = len(s0.tuple_shapes[0].tuple_shapes)
    now = len(s1.tuple_shapes[0].tuple_shapes)
    if new != now - before:
        return [f"{name} has {new} new operands, but the shape indicates {now - before} new "
                "bound parameters."]
    for i in range(new):
        want = s1.tuple_shapes[0].tuple_shapes[before + i]
        got = instr.operands[1 + i].shape
        if not shapes_same(want, got, opts):
            return [f"{name} expects the shape of operand {1 + i} to match the async shape at "
                    f"index {{0, {before + i}}} ({got} vs {want})."]
    return []


def _done_operands(instr: Instruction, name: str, params: Shape) -> list[str]:
    """``CheckAsyncDoneOperands``: the chain has bound every parameter."""
    if len(instr.operands) != 1:
        return [f"{name} expects a single operand, found {len(instr.operands)}."]
    prev = instr.operands[0]
    if _kind(prev.opcode) not in ("-start", "-update"):
        return [f"{name} expects the operand to be async-start or async-update, found "
                f"{prev.opcode}."]
    bound = prev.shape.tuple_shapes[0] if prev.shape.is_tuple and prev.shape.tuple_shapes else None
    if bound is None or not compatible(bound, params):
        return [f"{name} expects the operands of the previous async instruction to be fully "
                "bound."]
    return []


def _alias_config(instr: Instruction, params: list[Shape], result: Shape,
                  opts: Any) -> list[str]:
    """``CheckAsyncOpAliasConfig`` on async-start."""
    text = instr.attrs.get("output_to_operand_aliasing")
    if not text:
        return []
    async_shape = Shape.tuple([Shape.tuple(params), result]
                              + list(instr.shape.tuple_shapes[2:]))
    for out_index, number, operand_index in A.parse_output_to_operand_aliasing(text):
        if number < 0:
            return ["Negative operand number in aliasing config."]
        if number >= len(params):
            return [f"Operand number {number} in aliasing config is out of bounds."]
        try:
            a = params[number].subshape(operand_index)
        except IndexError:
            return ["Invalid aliasing operand shape index."]
        if not out_index:
            return ["Output index should not be empty."]
        try:
            b = async_shape.subshape(out_index)
        except IndexError:
            return ["Invalid aliasing output shape index."]
        a = a.buffer_of if a.is_buffer else a
        b = b.buffer_of if b.is_buffer else b
        same = equal_with_layout(a, b) if opts.layout_sensitive else compatible(a, b)
        if not same:
            return [f"Different aliasing shapes: {a} vs {b}"]
    return []
