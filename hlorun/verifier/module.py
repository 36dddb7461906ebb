"""The module-level half of XLA's HloVerifier and the driver that runs all
rules: structure (operands in the same computation, use-def links, unique
names), asynchronous pairs, send/recv channels, async and fusion
computations, the entry computation layout, input/output aliasing and
buffer donors.

:func:`run` yields ``(instruction or None, computation or None, message)``
for every finding; it never raises.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Iterator

from ..ir.module import Computation, Instruction, Module
from ..ir.opcode import OPCODES, VARIADIC, split_async_sugar
from ..ir.shape import UNBOUNDED_SIZE, Shape
from ..ir.shape_inference.common import compatible, human
from .instructions import check_instruction
from .shapes import check_shape

Finding = tuple["Instruction | None", "Computation | None", str]


@dataclass
class Context:
    """Facts about the module that several rules need."""

    callers: dict[Computation, list[Instruction]] = field(default_factory=dict)
    fusion_computations: set[Computation] = field(default_factory=set)
    async_computations: set[Computation] = field(default_factory=set)


def _context(module: Module) -> Context:
    ctx = Context()
    for comp in module.computations:
        for instr in comp._instructions:
            if not instr.attrs:
                continue
            for callee in instr.called_computations():
                ctx.callers.setdefault(callee, []).append(instr)
                if instr.opcode == "fusion":
                    ctx.fusion_computations.add(callee)
                elif instr.opcode in ("async-start", "async-update", "async-done"):
                    ctx.async_computations.add(callee)
    return ctx


def run(module: Module, opts: Any) -> Iterator[Finding]:
    """Every finding of the HloVerifier rules on ``module``."""
    entry = module.entry
    if entry is None:
        yield None, None, "module has no entry computation"
        return
    ctx = _context(module)
    if entry in ctx.fusion_computations:
        yield None, entry, "Module entry computation cannot be a fusion computation"
    for comp in module.computations:
        yield from _computation(comp, ctx)
        names: set[str] = set()
        for instr in comp._instructions:
            # XLA's parser scopes names per computation and uniquifies them
            # module-wide when it builds the module; text keeps them as
            # written, so uniqueness is checked per computation.
            if instr.name in names:
                yield instr, comp, (f"HLO has name that is not unique within computation "
                                    f"{comp.name}: {instr.name}")
            names.add(instr.name)
            yield from _instruction(instr, comp, opts, ctx)
    if any(_has_buffer(i.shape) for i in module.instructions()):
        from .buffers import check_buffers
        yield from check_buffers(module, opts, ctx)
    yield from _channels(module)
    if opts.verify_no_collective_deadlocks:
        from .deadlocks import check_deadlocks
        m = check_deadlocks(module, ctx)
        if m:
            yield None, entry, m
    yield from _entry_layout(module, opts)
    yield from _aliasing(module, opts)
    yield from _layout_constrained_all_reduce(module)


def _computation(comp: Computation, ctx: Context) -> Iterator[Finding]:
    if comp.root is None:
        yield None, comp, f"computation {comp.name} has no root"
    elif comp.root.parent is not comp:
        yield comp.root, comp, f"root {comp.root.name} is not in computation {comp.name}"
    for i, p in enumerate(comp.parameters):
        if p is None:
            yield None, comp, f"computation {comp.name} has no parameter {i}"
        elif p.parent is not comp or p.parameter_number != i:
            yield p, comp, f"parameter {p.name} is not parameter {i} of {comp.name}"
    if comp in ctx.async_computations and comp.execution_thread in (None, "main"):
        if not _async_computation_ok(comp):
            yield None, comp, (f"Asynchronous computation {comp.name} expected to contain only "
                               "the root and parameter instructions.")


def _async_computation_ok(comp: Computation) -> bool:
    """Only the root and parameters, or a group of send/recv, or a barrier
    made of get-tuple-elements."""
    rest = [i for i in comp._instructions if i is not comp.root and i.opcode != "parameter"]
    if not rest:
        return True
    if all(i.opcode in ("send", "recv", "tuple", "get-tuple-element") for i in rest):
        return True
    return all(i.opcode == "get-tuple-element" for i in rest)


def _instruction(instr: Instruction, comp: Computation, opts: Any,
                 ctx: Context) -> Iterator[Finding]:
    op = instr.opcode
    for i, o in enumerate(instr.operands):
        if o.parent is not comp:
            yield instr, comp, (f"Operand {i} ({o.name}) of instruction {instr.name} is in a "
                                f"different computation: "
                                f"{o.parent.name if o.parent else '(null)'} vs {comp.name}")
            return
        if instr not in o._users:
            yield instr, comp, f"use-def broken: {o.name} does not list {instr.name} as a user"
    for p in instr.control_predecessors:
        if p.parent is not comp:
            yield instr, comp, (f"control predecessor {p.name} of {instr.name} is in another "
                                "computation")
    base = op
    if op not in OPCODES:
        sugar = split_async_sugar(op)
        if sugar is None:
            yield instr, comp, f"unknown opcode {op}"
        else:
            for m in _async_op(instr, opts):
                yield instr, comp, m
            yield from _async_pairs(instr, comp, ctx)
        return
    arity = OPCODES[base]
    if arity != VARIADIC and len(instr.operands) != arity:
        yield instr, comp, (f"Expected {arity} operands for {op} instruction, has "
                            f"{len(instr.operands)}")
        return
    if not opts.allow_unbounded_dynamism and _unbounded(instr.shape):
        yield instr, comp, f"Unbounded dynamism is disabled for instruction: {instr.name}"
    if op in ("async-start", "async-update", "async-done"):
        for m in _async_op(instr, opts):
            yield instr, comp, m
    else:
        for m in check_shape(instr, opts, ctx):
            yield instr, comp, m
    for m in check_instruction(instr, opts, ctx):
        yield instr, comp, m
    yield from _async_pairs(instr, comp, ctx)
    yield from _thread_names(instr, comp, opts)
    if "origin" in instr.attrs:
        m = _original_value(instr)
        if m:
            yield instr, comp, m


def _has_buffer(s: Shape) -> bool:
    if s.buffer_of is not None:
        return True
    return s.tuple_shapes is not None and any(_has_buffer(t) for t in s.tuple_shapes)


def _unbounded(s: Shape) -> bool:
    if s.tuple_shapes is not None:
        return any(_unbounded(t) for t in s.tuple_shapes)
    return s.dynamic is not None and UNBOUNDED_SIZE in s.dimensions


@lru_cache(maxsize=None)
def _is_async(op: str, kinds: tuple[str, ...]) -> bool:
    """Is ``op`` an async-start/update/done (generic or sugar, e.g.
    ``custom-call-start``) of one of ``kinds`` ('-start', ...)?"""
    if op in tuple("async" + k for k in kinds):
        return True
    sugar = split_async_sugar(op)
    return sugar is not None and sugar[1] in kinds


#: start -> the consumers it may have (``VerifySingleUser``); done -> the
#: operand it may have (``VerifySingleOperand``).
_SINGLE_USER = {
    "all-reduce-start": ("all-reduce-done",), "all-gather-start": ("all-gather-done",),
    "copy-start": ("copy-done",), "collective-permute-start": ("collective-permute-done",),
    "send": ("send-done", "tuple"), "recv": ("recv-done", "tuple")}
_SINGLE_OPERAND = {
    "all-reduce-done": ("all-reduce-start",), "all-gather-done": ("all-gather-start",),
    "copy-done": ("copy-start",), "collective-permute-done": ("collective-permute-start",),
    "send-done": ("send", "get-tuple-element"), "recv-done": ("recv", "get-tuple-element")}


def _generic(op: str) -> str:
    """XLA's opcode for an async sugar op (``custom-call-start`` is an
    async-start)."""
    for kind in ("-start", "-update", "-done"):
        if _is_async(op, (kind,)):
            return "async" + kind
    return op


def _async_pairs(instr: Instruction, comp: Computation, ctx: Context) -> Iterator[Finding]:
    """``VerifyAsynchronousInstructionPairs``."""
    op = instr.opcode
    for i, o in enumerate(instr.operands):
        if _is_async(o.opcode, ("-start", "-update")) and (
                i != 0 or not _is_async(op, ("-update", "-done"))):
            yield instr, comp, (f"Async instruction {o.name} used as operand {i} of "
                                f"{instr.name}. Async instructions can only be used as the first "
                                "operand of async-update or async-done.")
    generic = _generic(op)
    if generic in ("async-start", "async-update"):
        allowed: tuple[str, ...] | None = ("async-update", "async-done")
    else:
        allowed = _SINGLE_USER.get(op)
        if op in ("send", "recv") and comp.root is instr and comp in ctx.async_computations:
            allowed = None
    if allowed is not None:
        users = [u for u in instr._users
                 if not (u.opcode == "custom-call" and u.custom_call_target == "control_dep")]
        if len(users) != 1:
            yield instr, comp, (f"The {generic} instruction requires one consumer, found "
                                f"{len(users)}")
        elif _generic(users[0].opcode) not in allowed:
            yield instr, comp, (f"The consumer of a {generic} instruction needs to be one of "
                                f"({', '.join(allowed)}), found {_generic(users[0].opcode)}")
    if generic == "async-update" and (
            not instr.operands or _generic(instr.operands[0].opcode) not in (
                "async-start", "async-update")):
        found = _generic(instr.operands[0].opcode) if instr.operands else "none"
        yield instr, comp, (f"The first operand of a {generic} instruction needs to be "
                            f"AsyncStart or AsyncUpdate, found {found}")
    expected = ("async-start", "async-update") if generic == "async-done" else \
        _SINGLE_OPERAND.get(op)
    if expected is not None:
        if len(instr.operands) != 1:
            yield instr, comp, (f"The {generic} instruction requires one operand, found "
                                f"{len(instr.operands)}")
        elif _generic(instr.operands[0].opcode) not in expected:
            yield instr, comp, (f"The operand of a {generic} instruction needs to be "
                                f"{' or '.join(expected)}, found "
                                f"{_generic(instr.operands[0].opcode)}")


def _async_op(instr: Instruction, opts: Any) -> list[str]:
    """``CheckAsyncOp`` for the generic async-start/update/done form."""
    from .async_ops import check_async_op
    return check_async_op(instr, opts)


def _thread_names(instr: Instruction, comp: Computation, opts: Any) -> Iterator[Finding]:
    """``CheckCallableInstructionThreadName`` for fusion, while and
    conditional (and every caller with the thread-name option)."""
    op = instr.opcode
    mine = comp.execution_thread or "main"
    to_apply = instr.attrs.get("to_apply")
    if opts.verify_call_nested_computation_thread_name and isinstance(to_apply, Computation):
        theirs = to_apply.execution_thread or "main"
        if theirs != mine:
            yield instr, comp, (f"{instr.name} to_apply computation execution thread does not "
                                f"match ({theirs} vs {mine})")
            return
    if op not in ("fusion", "while", "conditional") and not (
            opts.verify_call_nested_computation_thread_name and instr.attrs):
        return
    for callee in instr.called_computations():
        theirs = callee.execution_thread or "main"
        if theirs != mine and op not in ("async-start", "async-update", "async-done"):
            yield instr, comp, (f"Callable instruction {instr.name} expects parent computation "
                                f"thread name same as called computation's thread name "
                                f"({mine} vs {theirs}).")


def _entry_layout(module: Module, opts: Any) -> Iterator[Finding]:
    """``VerifyEntryComputationLayout``."""
    layout = module.entry_computation_layout()
    entry = module.entry
    if layout is None or entry.root is None:
        return
    params, result = layout
    if not _layout_compatible(entry.root.shape, result, opts):
        yield entry.root, entry, (
            f"Shape of the root instruction of entry computation ({human(entry.root.shape)}) "
            f"should be compatible to one specified in module's entry computation layout "
            f"({human(result)})")
    if len(params) != entry.num_parameters:
        yield None, entry, (f"Number of parameters in entry computation layout ({len(params)}) "
                            f"must be same as number of parameters of entry computation "
                            f"({entry.num_parameters})")
        return
    for i, (want, p) in enumerate(zip(params, entry.parameters)):
        if p is not None and not _layout_compatible(p.shape, want, opts):
            yield p, entry, (f"Shape of the entry computation parameter {i} is "
                             f"{human(p.shape)} should be compatible to the one specified in "
                             f"module's entry computation layout {human(want)}")
    # A must-alias pair shares one buffer: same shape, layout and memory space.
    for out_index, pnum, pindex, kind in module.input_output_alias:
        if kind != "must-alias" or not 0 <= pnum < len(params):
            continue
        try:
            rs, ps = result.subshape(out_index), params[pnum].subshape(pindex)
        except IndexError:
            continue
        if rs != ps:
            yield None, entry, (f"Shape and memory space of the result at index "
                                f"{{{','.join(map(str, out_index))}}} ({rs}) must be the same "
                                f"as the shape and memory space of aliased parameter {pnum} at "
                                f"index {{{','.join(map(str, pindex))}}} ({ps})")


def _layout_compatible(a: Shape, b: Shape, opts: Any) -> bool:
    """Equal ignoring tiles, tail padding and memory space when
    layout-sensitive; compatible otherwise."""
    if not compatible(a, b):
        return False
    if not opts.layout_sensitive:
        return True
    for (_, x), (_, y) in zip(a.leaves(), b.leaves()):
        if x.layout is not None and y.layout is not None and x.is_array and (
                x.layout.minor_to_major != y.layout.minor_to_major
                or x.layout.element_size_in_bits != y.layout.element_size_in_bits):
            return False
    return True


def _aliasing(module: Module, opts: Any) -> Iterator[Finding]:
    """``HloInputOutputAliasConfig::Verify`` and ``HloBufferDonorConfig::Verify``."""
    entry = module.entry
    layout = module.entry_computation_layout()
    if layout is None:
        params = [p.shape if p is not None else Shape.tuple(()) for p in entry.parameters]
        result = entry.root.shape if entry.root is not None else Shape.tuple(())
    else:
        params, result = layout
    seen: set[tuple[int, tuple[int, ...]]] = set()
    for out_index, pnum, pindex, _kind in module.input_output_alias:
        where = f"input_output_alias {{{','.join(map(str, out_index))}}}: ({pnum}, ...)"
        if not 0 <= pnum < min(entry.num_parameters, len(params)):
            yield None, entry, f"{where}: parameter {pnum} does not exist"
            continue
        try:
            ps = params[pnum].subshape(pindex)
            rs = result.subshape(out_index)
        except IndexError as e:
            yield None, entry, f"{where}: {e}"
            continue
        if not ps.is_array or not rs.is_array:
            yield None, entry, f"{where}: aliased buffers must be arrays"
            continue
        if opts.layout_sensitive and ps.byte_size() != rs.byte_size():
            yield None, entry, (f"Expected aliased input {pnum} at index {list(pindex)} and "
                                f"output at index {list(out_index)} to have the same size. "
                                f"Input sub-shape is {ps} with size {ps.byte_size()}, output "
                                f"sub-shape is {rs} with size {rs.byte_size()}")
        if (pnum, tuple(pindex)) in seen:
            yield None, entry, f"{where}: parameter {pnum} {list(pindex)} is aliased twice"
        seen.add((pnum, tuple(pindex)))
    for pnum, pindex in module.buffer_donor:
        if not 0 <= pnum < min(entry.num_parameters, len(params)):
            yield None, entry, f"buffer_donor: parameter {pnum} does not exist"
            continue
        try:
            ps = params[pnum].subshape(pindex)
        except IndexError as e:
            yield None, entry, f"buffer_donor: {e}"
            continue
        if not ps.is_array:
            yield None, entry, f"buffer_donor: parameter {pnum} {list(pindex)} is not an array"
        if (pnum, tuple(pindex)) in seen:
            yield None, entry, (f"Input {pnum} at index {list(pindex)} is registered as a buffer "
                                "donor. However, it is also in the input output alias config.")


def _channels(module: Module) -> Iterator[Finding]:
    """``VerifyChannels``: a send/recv with a channel has one user; its
    done shares the channel and host-transfer flag; host-transfer
    send/recvs on one channel are identical up to operands."""
    by_channel: dict[str, list[Instruction]] = {}
    for comp in module.computations:
        for instr in comp._instructions:
            op = instr.opcode
            if op not in ("send", "recv") or "channel_id" not in instr.attrs:
                continue
            host = instr.attrs.get("is_host_transfer") == "true"
            if host:
                by_channel.setdefault(instr.attrs["channel_id"], []).append(instr)
            users = instr.users
            if len(users) != 1:
                continue  # reported with the asynchronous pairs
            done = users[0]
            if done.opcode == op + "-done":
                if done.attrs.get("channel_id") != instr.attrs.get("channel_id"):
                    yield done, comp, ("Expected to have the same channel id, actual channel "
                                       f"ids are: {instr.name} ({instr.attrs.get('channel_id')}), "
                                       f"{done.name} ({done.attrs.get('channel_id', -1)})")
                elif (done.attrs.get("is_host_transfer") == "true") != host:
                    yield done, comp, ("Expected instructions to have the same "
                                       f"is-host-transfer property: {instr.name}, {done.name}")
    for channel, instrs in by_channel.items():
        ref = instrs[0]
        for other in instrs[1:]:
            if (other.opcode != ref.opcode or other.shape != ref.shape
                    or [o.shape for o in other.operands] != [o.shape for o in ref.operands]
                    or _core_attrs(other) != _core_attrs(ref)):
                yield other, other.parent, (
                    "Host-transfer send/recv instructions that use the same channel must be "
                    f"identical up to having different operands. Found different instructions "
                    f"with the same channel ID {channel}: {ref.name} vs {other.name}.")
                break


def _core_attrs(instr: Instruction) -> dict:
    return {k: v for k, v in instr.attrs.items()
            if k not in ("metadata", "control-predecessors", "backend_config")}


def _layout_constrained_all_reduce(module: Module) -> Iterator[Finding]:
    first: bool | None = None
    for instr in module.instructions():
        if instr.opcode in ("all-reduce", "all-reduce-start"):
            c = instr.attrs.get("constrain_layout") == "true"
            if first is None:
                first = c
            elif c != first:
                yield instr, instr.parent, ("HloModule has a mix of layout constrained and "
                                            "unconstrained AllReduce instructions.")
                return


def _original_value(instr: Instruction) -> str | None:
    """``VerifyOriginalValue``: ``origin={...}`` has the tuple structure of
    the shape (one ``{...}`` leaf per array leaf)."""
    text = instr.attrs["origin"].strip()
    if "synthetic_call" in text or not (text.startswith("{") and text.endswith("}")):
        return None
    body = text[1:-1].strip()
    leaves: set[tuple[int, ...]] = set()
    pos = 0

    def value(index: tuple[int, ...]) -> None:
        nonlocal pos
        while pos < len(body) and body[pos] == " ":
            pos += 1
        if pos < len(body) and body[pos] == "(":
            pos += 1
            k = 0
            while True:
                while pos < len(body) and body[pos] in " ,":
                    pos += 1
                if pos >= len(body) or body[pos] == ")":
                    pos += 1
                    return
                value(index + (k,))
                k += 1
        depth = 0
        while pos < len(body):
            ch = body[pos]
            pos += 1
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    break
            elif ch == '"':
                while pos < len(body) and body[pos] != '"':
                    pos += 2 if body[pos] == "\\" else 1
                pos += 1
        leaves.add(index)

    value(())
    shape_leaves = {index for index, _ in instr.shape.leaves()}
    if leaves != shape_leaves:
        only_shape = sorted(shape_leaves - leaves)
        only_ov = sorted(leaves - shape_leaves)
        return ("Mismatched tuple structure in shape and original value. Shape indices in shape "
                f"only: {only_shape} Shape indices in original value only: {only_ov}")
    return None
