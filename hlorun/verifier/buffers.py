"""Verifier rules for buffer shapes ``b(...)`` (XLA's ``VerifyBuffers``):
buffers appear only where a custom-call aliases them (Pin, Unpin,
CreateBuffer, or any target with ``output_to_operand_aliasing``),
dynamic-update-slice, tuples, get-tuple-element, while and parameters; each
buffer value has at most one writer."""

from __future__ import annotations

from typing import Any, Iterator

from ..ir import attrs as A
from ..ir.module import Computation, Instruction, Module
from ..ir.opcode import split_async_sugar
from ..ir.shape import Shape
from ..ir.shape_inference.common import compatible
from .base import equal_with_layout

Finding = tuple[Instruction, Computation, str]


def _has_buffer(s: Shape) -> bool:
    if s.is_buffer:
        return True
    return s.is_tuple and any(_has_buffer(t) for t in s.tuple_shapes)


def _buffer_indices(s: Shape, index: tuple[int, ...] = ()) -> Iterator[tuple[int, ...]]:
    if s.is_buffer:
        yield index
    elif s.is_tuple:
        for i, t in enumerate(s.tuple_shapes):
            yield from _buffer_indices(t, index + (i,))


def _aliasing(instr: Instruction) -> list[tuple]:
    text = instr.attrs.get("output_to_operand_aliasing")
    return list(A.parse_output_to_operand_aliasing(text)) if text else []


class _Rules:
    def __init__(self, module: Module, opts: Any, ctx: Any):
        self.opts = opts
        self.ctx = ctx
        self.while_bodies = {c for c, callers in ctx.callers.items()
                             if any(i.opcode == "while" for i in callers)}

    def writers(self, instr: Instruction, index: tuple[int, ...]) -> int:
        total = 0
        for user in instr._users:
            if (user.opcode == "tuple" and instr.parent is not None
                    and instr.parent.root is user):
                total += 1 if instr.parent in self.while_bodies else 0
                continue
            if user.opcode == "tuple":
                total += self.writers(user, (user.operands.index(instr),) + index)
            elif (user.opcode == "get-tuple-element" and index
                  and int(user.attrs.get("index", -1)) == index[0]):
                total += self.writers(user, index[1:])
            elif user.opcode in ("fusion", "call", "custom-call", "while", "conditional",
                                 "dynamic-update-slice"):
                total += 1
        return total

    def unique_writer(self, instr: Instruction, index: tuple[int, ...]) -> str | None:
        if self.writers(instr, index) > 1:
            return (f"an HLO buffer value has more than one writers (or unpins): "
                    f"'{instr.name}' '{{{','.join(map(str, index))}}}'")
        return None

    def unique_writers(self, instr: Instruction) -> str | None:
        for index in _buffer_indices(instr.shape):
            m = self.unique_writer(instr, index)
            if m:
                return m
        return None

    def custom_call(self, instr: Instruction, shape: Shape | None = None) -> str | None:
        """Buffer rules of a custom-call (``shape`` overrides the result shape
        for the call an async sugar op wraps, which has no own instruction)."""
        target = instr.custom_call_target
        aliasing = _aliasing(instr)
        wrapped = shape is not None
        shape = instr.shape if shape is None else shape
        if target in ("Pin", "Unpin"):
            src = instr.operands[0].shape if len(instr.operands) == 1 else None
            if target == "Pin":
                if src is None or not src.is_array:
                    return "custom-call to Pin must have one array non-buffer operand"
                if not shape.is_buffer:
                    return "custom-call to Pin must have one buffer result"
                a, b = src, shape.buffer_of
            else:
                if src is None or not src.is_buffer:
                    return "custom-call to Unpin must have one buffer operand"
                if not shape.is_array:
                    return "custom-call to Unpin must have one array non-buffer result"
                a, b = src.buffer_of, shape
            same = equal_with_layout(a, b) if self.opts.layout_sensitive else compatible(a, b)
            if not same:
                return f"custom-call to {target} must have the same shape as the operand"
            if len(aliasing) != 1:
                return f"custom-call to {target} must have one output-to-operand aliasing"
            return self.unique_writer(instr, ()) if target == "Pin" and not wrapped else None
        if target == "CreateBuffer":
            if instr.operands:
                return "custom-call to CreateBuffer can't have an operand"
            if not shape.is_buffer:
                return "custom-call to CreateBuffer must have one buffer result"
            return None if wrapped else self.unique_writer(instr, ())
        by_operand: dict[tuple, int] = {}
        by_output: dict[tuple, int] = {}
        for out, n, idx in aliasing:
            by_operand[(n, tuple(idx))] = by_operand.get((n, tuple(idx)), 0) + 1
            by_output[tuple(out)] = by_output.get(tuple(out), 0) + 1
        for n, o in enumerate(instr.operands):
            for idx in _buffer_indices(o.shape):
                count = by_operand.get((n, idx), 0)
                if not count:
                    return ("buffer is used in operands but not in results: operand "
                            f"{n} ShapeIndex {{{','.join(map(str, idx))}}}")
                if count > 1:
                    return ("buffer is used in results multiple times: operand "
                            f"{n} ShapeIndex {{{','.join(map(str, idx))}}}")
        results = list(_buffer_indices(shape))
        for idx in results:
            count = by_output.get(idx, 0)
            if not count:
                return ("buffer is used in results but not in operands: "
                        f"{{{','.join(map(str, idx))}}}")
            if count > 1:
                return f"buffer is used in operands multiple times: {{{','.join(map(str, idx))}}}"
        for idx in results:
            m = None if wrapped else self.unique_writer(instr, idx)
            if m:
                return m
        return None


def _no_buffers(instr: Instruction) -> str | None:
    if _has_buffer(instr.shape) or any(_has_buffer(o.shape) for o in instr.operands):
        return f"Seen buffers while buffers aren't allowed in this context: {instr.name}"
    return None


def _is_async(instr: Instruction) -> bool:
    op = instr.opcode
    return op in ("async-start", "async-update", "async-done") or (
        split_async_sugar(op) is not None)


def check_buffers(module: Module, opts: Any, ctx: Any) -> Iterator[Finding]:
    rules = _Rules(module, opts, ctx)
    for comp in module.computations:
        if comp in ctx.async_computations:
            root = comp.root
            if root is not None and root.opcode == "custom-call":
                m = rules.custom_call(root)
                if m:
                    yield root, comp, m
            continue
        for instr in comp._instructions:
            op = instr.opcode
            fa = instr.attrs.get("frontend_attributes") or ""
            if op == "custom-call-start":
                # The sugar form wraps a custom-call with the start's operands
                # and the done's shape.
                from .async_ops import chain_done
                done = chain_done(instr)
                m = rules.custom_call(instr, done.shape) if done is not None else None
                if m:
                    yield instr, comp, m
                continue
            if _is_async(instr) or (op == "call" and "_xla_stream_annotation" in fa):
                continue
            if op == "custom-call":
                m = rules.custom_call(instr)
            elif op == "while":
                m = rules.unique_writers(instr)
            elif op == "parameter":
                m = (_no_buffers(instr) if comp is module.entry else None) \
                    or rules.unique_writers(instr)
            elif op == "dynamic-update-slice":
                if instr.operands and instr.operands[0].shape.is_buffer:
                    m = rules.unique_writers(instr)
                    if m is None and any(_has_buffer(o.shape) for o in instr.operands[1:]):
                        m = ("Seen buffers while buffers aren't allowed in this context: "
                             f"{instr.name}")
                    if m is None and not instr.shape.is_buffer:
                        m = ("DynamicUpdateSlice result must be a buffer if operand 0 is a "
                             "buffer")
                else:
                    m = _no_buffers(instr)
            elif op not in ("get-tuple-element", "tuple"):
                m = _no_buffers(instr)
            else:
                m = None
            if m:
                yield instr, comp, m
