"""The driver of XLA's HloVerifier rules and the structural ones:
operands in the same computation, use-def links, unique names, operand
counts, asynchronous start/done pairs and async computations, thread
names; it runs the shape rules (``shapes``), the instruction rules
(``instructions``), buffers, the module-level rules (``module_rules``) and
the optional deadlock check.

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
from . import module_rules
from .instructions import check_instruction, original_value
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


def call_list(comp: Computation) -> list[tuple[Instruction, list[Computation]]]:
    """``comp``'s calling instructions with what they call, in order."""
    return [(i, cc) for i in comp._instructions if i.attrs
            for cc in (i.called_computations(),) if cc]


def context_from(module: Module, calls: dict[Computation, list]) -> Context:
    """:func:`_context` from every computation's :func:`call_list`."""
    ctx = Context()
    setdefault = ctx.callers.setdefault
    for comp in module.computations:
        for instr, cc in calls[comp]:
            for callee in cc:
                setdefault(callee, []).append(instr)
                if instr.opcode == "fusion":
                    ctx.fusion_computations.add(callee)
                elif instr.opcode in ("async-start", "async-update", "async-done"):
                    ctx.async_computations.add(callee)
    return ctx


def run(module: Module, opts: Any, memo: bool = True) -> Iterator[Finding]:
    """Every finding of the HloVerifier rules on ``module`` (``memo``: skip
    the shape and instruction rules for content seen to pass already)."""
    entry = module.entry
    if entry is None:
        yield None, None, "module has no entry computation"
        return
    ctx = _context(module)
    if entry in ctx.fusion_computations:
        yield None, entry, "Module entry computation cannot be a fusion computation"
    seen: dict | None = {} if memo else None
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
            yield from _instruction(instr, comp, opts, ctx, seen)
    if any(_has_buffer(i.shape) for i in module.instructions()):
        yield from buffer_rules(module, opts, ctx)
    yield from module_rules.channels(module)
    yield from deadlock_rules(module, opts, ctx)
    yield from module_rules.entry_layout(module, opts)
    yield from module_rules.aliasing(module, opts)
    yield from module_rules.layout_constrained_all_reduce(module)


def buffer_rules(module: Module, opts: Any, ctx: Context) -> Iterator[Finding]:
    from .buffers import check_buffers
    yield from check_buffers(module, opts, ctx)


def deadlock_rules(module: Module, opts: Any, ctx: Context) -> Iterator[Finding]:
    if opts.verify_no_collective_deadlocks:
        from .deadlocks import check_deadlocks
        m = check_deadlocks(module, ctx)
        if m:
            yield None, module.entry, m


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


#: Attributes no shape or instruction rule reads.
_UNREAD_ATTRS = frozenset({"metadata", "backend_config"})

#: Collectives read the module's replica and partition counts.
_NO_MEMO = frozenset({
    "all-gather", "all-gather-start", "all-gather-done", "all-reduce", "all-reduce-start",
    "all-reduce-done", "reduce-scatter", "all-to-all", "ragged-all-to-all",
    "collective-broadcast", "collective-permute", "collective-permute-start",
    "collective-permute-done"})


def _memo_key(instr: Instruction, ctx: Context) -> tuple | None:
    """What the shape and instruction rules read from ``instr`` (opcode,
    shapes of it and its operands, attributes, whether it is fused), or
    None when they read more (called computations, the module header).
    Rules that passed for one key pass for every instruction with it."""
    op = instr.opcode
    if op in _NO_MEMO:
        return None
    attrs = instr.attrs
    items = []
    for kv in attrs.items():
        if type(kv[1]) is not str:
            return None
        if kv[0] not in _UNREAD_ATTRS:
            items.append(kv)
    return (op, id(instr.shape), tuple([id(o.shape) for o in instr.operands]), tuple(items),
            instr.parent in ctx.fusion_computations)


def _instruction(instr: Instruction, comp: Computation, opts: Any,
                 ctx: Context, memo: dict | None = None) -> Iterator[Finding]:
    """The per-instruction rules.  ``memo`` (a dict kept across calls with
    the same ``opts``) remembers attribute and shape combinations that
    passed the shape and instruction rules, which then are not run again."""
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
        for m in check_instruction(instr, opts, ctx):
            yield instr, comp, m
    else:
        key = _memo_key(instr, ctx) if memo is not None else None
        if key is None or key not in memo:
            found = False
            for m in check_shape(instr, opts, ctx):
                found = True
                yield instr, comp, m
            for m in check_instruction(instr, opts, ctx):
                found = True
                yield instr, comp, m
            if key is not None and not found:
                # the value keeps the shapes alive, so their ids stay theirs
                memo[key] = (instr.shape, [o.shape for o in instr.operands])
    if _pairs_apply(instr):
        yield from _async_pairs(instr, comp, ctx)
    if op in _CALLERS or opts.verify_call_nested_computation_thread_name:
        yield from _thread_names(instr, comp, opts)
    if "origin" in instr.attrs:
        m = original_value(instr)
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
    return _GENERIC.get(op) or _generic_of(op)


_GENERIC: dict[str, str] = {}


def _generic_of(op: str) -> str:
    """XLA's opcode for an async sugar op (``custom-call-start`` is an
    async-start)."""
    for kind in ("-start", "-update", "-done"):
        if _is_async(op, (kind,)):
            _GENERIC[op] = "async" + kind
            return "async" + kind
    _GENERIC[op] = op
    return op


_PLAIN: dict[str, bool] = {}
_START_UPDATE: dict[str, bool] = {}


def reads_users(op: str) -> bool:
    """Do the rules on an ``op`` instruction read its users (asynchronous
    pairs, send/recv channels)?"""
    plain = _PLAIN.get(op)
    if plain is None:
        plain = _PLAIN[op] = (_generic(op) == op and op not in _SINGLE_USER
                              and op not in _SINGLE_OPERAND)
    return not plain or op in ("send", "recv")


def _pairs_apply(instr: Instruction) -> bool:
    """Has ``_async_pairs`` anything to check on ``instr``: is it (or an
    operand) part of an asynchronous pair?"""
    op = instr.opcode
    plain = _PLAIN.get(op)
    if plain is None:
        plain = _PLAIN[op] = (_generic(op) == op and op not in _SINGLE_USER
                              and op not in _SINGLE_OPERAND)
    if not plain:
        return True
    for o in instr.operands:
        su = _START_UPDATE.get(o.opcode)
        if su is None:
            su = _START_UPDATE[o.opcode] = _is_async(o.opcode, ("-start", "-update"))
        if su:
            return True
    return False


#: Opcodes ``_thread_names`` checks without the thread-name option.
_CALLERS = frozenset({"fusion", "while", "conditional"})


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
