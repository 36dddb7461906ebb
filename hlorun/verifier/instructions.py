"""The per-instruction structural half of XLA's HloVerifier
(``InstructionVerifier``): no implicit broadcasts in elementwise ops,
comparison types, broadcast/transpose dimensions, called-computation arity
for while/conditional, fusion computations, reshape-is-bitcast (optional),
custom-call contracts.

:func:`check_instruction` returns messages for one instruction.
"""

from __future__ import annotations

import re
from typing import Any

from ..ir.module import Computation, Instruction
from ..ir.opcode import ELEMENTWISE_BINARY, ELEMENTWISE_UNARY
from ..ir.shape import reshape_is_bitcast
from ..ir.shape_inference.common import compatible_ignoring_element_type, human, is_float, kind
from .base import layouts_equal

#: Unary elementwise opcodes that accept ``result_accuracy``.
_RESULT_ACCURACY_OK = frozenset({
    "acos", "acosh", "asin", "asinh", "atanh", "exponential-minus-one", "log", "log-plus-one",
    "logistic", "sqrt", "cbrt", "rsqrt", "tanh", "erf", "sine", "sinh", "cosine", "cosh",
    "tan", "exponential"})

#: HloVerifier visits these through HandleElementwiseUnary/Binary
#: (convert, bitcast-convert, copy and reduce-precision have own handlers).
_UNARY = ELEMENTWISE_UNARY - {"convert", "bitcast-convert", "copy", "reduce-precision"}
_BINARY = ELEMENTWISE_BINARY - {"stochastic-convert"}


def _default_comparison_type(t: str) -> str:
    k = kind(t)
    if k in ("f", "c"):
        return "FLOAT"
    return "SIGNED" if k == "s" else "UNSIGNED"


def _elementwise(instr: Instruction) -> list[str]:
    """``CheckElementwiseInstruction``: operands shaped like the result."""
    out = []
    for o in instr.operands:
        if not compatible_ignoring_element_type(o.shape, instr.shape):
            out.append(f"Implicit broadcast is not allowed in HLO. Found different shapes for "
                       f"instruction {instr.opcode}. output: {human(instr.shape)} operand: "
                       f"{human(o.shape)}")
            return out
    if instr.opcode == "compare" and len(instr.operands) == 2:
        t = instr.operands[1].shape.element_type
        given = instr.attrs.get("type")
        if given is not None and instr.operands[1].shape.is_array:
            if is_float(t):
                if given not in ("FLOAT", "TOTALORDER"):
                    out.append(f"Expected comparison type FLOAT or TOTALORDER. actual: {given} "
                               f"operand: {human(instr.operands[1].shape)}")
            elif given != _default_comparison_type(t):
                out.append(f"Expected comparison type {_default_comparison_type(t)}. actual: "
                           f"{given} operand: {human(instr.operands[1].shape)}")
    return out


def _fusion(instr: Instruction, callers: dict[Computation, list[Instruction]]) -> list[str]:
    """``CheckFusionInstruction``: the fused computation belongs to this
    fusion alone, its root has no users, every other instruction is used,
    parameters are numbered 0..n-1 and match the operands."""
    comp = instr.fused_computation
    if comp is None:
        return ["Fusion has a non-unary number of called computations"]
    out = []
    others = [c for c in callers.get(comp, ()) if c is not instr]
    if others:
        out.append(f"Fused computation {comp.name} is also called by {others[0].name}")
    root = comp.root
    if root is None or root.parent is not comp:
        return out + [f"Root not found in computation of {instr.name}."]
    if root.user_count:
        out.append(f"Root of {instr.name} may not have users.")
    for i in comp._instructions:
        if i is root:
            continue
        if not i.user_count and not _has_side_effect(i):
            out.append(f"Non-root instruction {i.name} in {instr.name} must have users.")
            break
    if any(p is None for p in comp.parameters):
        missing = next(n for n, p in enumerate(comp.parameters) if p is None)
        out.append(f"Did not see parameter number {missing} in {instr.name}.")
    return out


def _has_side_effect(i: Instruction) -> bool:
    """``HasSideEffectNoRecurse``."""
    op = i.opcode
    if op in ("send", "send-done", "recv", "recv-done", "rng", "rng-get-and-update-state",
              "infeed", "outfeed", "all-reduce-start", "all-reduce-done", "all-gather-start",
              "all-gather-done", "collective-permute-start", "collective-permute-done",
              "after-all", "add-dependency"):
        return True
    if op == "custom-call":
        return i.attrs.get("custom_call_has_side_effect") == "true"
    if op in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all"):
        return i.attrs.get("constrain_layout") == "true"
    return False


def check_instruction(instr: Instruction, opts: Any, ctx: Any) -> list[str]:
    """Messages for the InstructionVerifier rules ``instr`` breaks; ``ctx``
    knows each computation's callers (:class:`hlorun.verifier.module.Context`)."""
    op = instr.opcode
    bad_layout = _layout_in_shape(instr.shape)
    if bad_layout:
        return [bad_layout]  # the other rules would misread the shape
    try:
        extra = _sharding_rank(instr)
        if opts.verify_layout_changes and opts.layout_sensitive:
            extra += _layout_change(instr)
        return extra + _instruction_rules(instr, opts, ctx)
    except (KeyError, IndexError, ValueError, TypeError, AttributeError) as e:
        return [f"malformed {op}: {type(e).__name__}: {e}"]


def _layout_in_shape(shape) -> str | None:
    """``LayoutUtil::ValidateLayoutInShape`` (ShapeVerifier::Preprocess's
    ValidateShapeWithOptionalLayout): each array's minor_to_major is a
    permutation of its dimensions (a pass that writes a layout of another
    rank is caught here, on the instruction, not later as an IndexError)."""
    stack = [shape]
    while stack:
        s = stack.pop()
        if s.tuple_shapes is not None:
            stack.extend(s.tuple_shapes)
            continue
        if s.buffer_of is not None:
            stack.append(s.buffer_of)
            continue
        if not s.is_array or s.layout is None:
            continue
        m2m, rank = list(s.layout.minor_to_major), len(s.dimensions)
        joined = ", ".join(map(str, m2m))
        if len(m2m) != rank:
            return (f"layout minor_to_major field contains {len(m2m)} elements, but shape is rank "
                    f"{rank}: {{{joined}}}; shape: {s}")
        if any(d < 0 or d >= rank for d in m2m):
            return f"layout minor_to_major field has out-of-bounds value: {{{joined}}}; shape: {s}"
        if len(set(m2m)) != rank:
            return f"layout minor_to_major field has duplicate values: {{{joined}}}; shape: {s}"
    return None


def _instruction_rules(instr: Instruction, opts: Any, ctx: Any) -> list[str]:
    op = instr.opcode
    if op in _UNARY or op in _BINARY:
        out = []
        if "result_accuracy" in instr.attrs and op not in _RESULT_ACCURACY_OK:
            out.append(f"Unary op with result accuracy is not supported for {op}")
        return out + _elementwise(instr)
    if op == "broadcast":
        dims = instr.int_list("dimensions")
        rank = instr.operands[0].shape.rank
        if len(dims) != rank:
            return [f"Broadcast HLO has invalid number of dimensions: {len(dims)} != {rank}"]
        if opts.verify_broadcast_dimensions_order and list(dims) != sorted(dims):
            return [f"Broadcast dimensions should be ordered, got: {list(dims)}"]
    elif op == "transpose":
        dims = instr.int_list("dimensions")
        s, o = instr.shape, instr.operands[0].shape
        if not (s.rank == len(dims) == o.rank
                and sorted(dims) == list(range(o.rank))
                and list(s.dimensions) == [o.dimensions[d] for d in dims]):
            return [f"transpose {human(o)} -> {human(s)} does not permute the dimensions "
                    f"by {list(dims)}"]
    elif op == "get-tuple-element":
        if not instr.operands[0].shape.is_tuple:
            return [f"get-tuple-element operand {instr.operands[0].name} is not a tuple: "
                    f"{human(instr.operands[0].shape)}"]
    elif op == "while":
        return _while(instr)
    elif op == "conditional":
        return _conditional(instr)
    elif op == "fusion":
        return _fusion(instr, ctx.callers)
    elif op == "call":
        if instr.attrs.get("output_to_operand_aliasing"):
            return [f"Call instruction {instr.name} may not have an output-to-operand "
                    "aliasing set."]
    elif op == "reshape":
        if (opts.verify_reshape_is_bitcast and instr.parent not in ctx.fusion_computations
                and not reshape_is_bitcast(instr.operands[0].shape, instr.shape)):
            return [f"Reshape should be a physical bitcast, got: {instr.operands[0].shape} "
                    f"-> {instr.shape}"]
    elif op == "custom-call":
        return _custom_call(instr)
    elif op == "scatter":
        rank = instr.operands[0].shape.rank
        for d in instr.int_list("scatter_dims_to_operand_dims"):
            if d > rank:
                return ["The provided scatter_dims_to_operand_dim was out of range. "
                        f"(operand_dim: {d}, rank: {rank})"]
    return []


#: Opcodes LayoutAssignment::InstructionCanChangeLayout says keep their
#: operands' layouts (the result layout equals every same-rank operand's).
KEEPS_LAYOUT = frozenset({
    "abs", "acos", "acosh", "asin", "asinh", "add", "add-dependency", "and", "atan2", "atanh",
    "bitcast-convert", "ceil", "clamp", "count-leading-zeros", "compare", "complex",
    "concatenate", "convert", "cosine", "cosh", "all-gather", "all-gather-start",
    "all-gather-done", "all-to-all", "collective-broadcast", "collective-permute", "divide",
    "dynamic-slice", "dynamic-update-slice", "erf", "exponential", "exponential-minus-one",
    "fft", "floor", "imag", "is-finite", "log", "log-plus-one", "logistic", "map", "maximum",
    "minimum", "multiply", "mulhi", "negate", "not", "opt-barrier", "or", "xor", "pad",
    "power", "real", "reduce-precision", "reduce-window", "remainder", "reverse",
    "round-nearest-afz", "round-nearest-even", "rsqrt", "scatter", "select",
    "select-and-scatter", "shift-left", "shift-right-arithmetic", "shift-right-logical",
    "sign", "sine", "sinh", "slice", "sort", "topk", "sqrt", "cbrt", "subtract",
    "stochastic-convert", "tan", "tanh", "popcnt", "triangular-solve", "cholesky", "while",
    "set-dimension-size", "all-reduce", "reduce-scatter", "all-reduce-start",
    "all-reduce-done", "ragged-all-to-all", "scan"})

_FAST, _HOST, _DEFAULT = 1, 5, 0  # Layout::kGenericFastMemorySpace, kHostMemorySpace, ...


def _layout_change(instr: Instruction) -> list[str]:
    """InstructionVerifier::Postprocess with LayoutAssignment's predicate:
    an op that cannot change layouts has its operands' layout (tiles and
    memory space aside)."""
    op = instr.opcode
    if op not in KEEPS_LAYOUT and not (op == "custom-call"
                                       and instr.custom_call_target == "LayoutConstraint"):
        return []
    s = instr.shape
    if not s.is_array or s.layout is None:
        return []
    for o in instr.operands:
        os = o.shape
        if not os.is_array or os.rank != s.rank or os.layout is None:
            continue
        ignore_size = op in ("convert", "compare", "is-finite", "scatter") or (
            op == "select" and os.element_type == "pred")
        if op in ("dynamic-slice", "dynamic-update-slice", "copy"):
            a, b = os.layout.memory_space, s.layout.memory_space
            if a == _FAST and b != _FAST:
                return [f"Instruction shouldn't change layout memory space between generic fast "
                        f"memory space and others for instruction: {instr.name}"]
            if op == "dynamic-slice" and a == _DEFAULT and b == _HOST:
                return ["DynamicSlice instruction shouldn't change layout memory space from "
                        f"device to host: {instr.name}"]
            if op == "dynamic-update-slice" and a == _HOST and b == _DEFAULT:
                return ["DynamicUpdateSlice instruction shouldn't change layout memory space "
                        f"from host to device: {instr.name}"]
        if not layouts_equal(s.layout, os.layout, ignore_tiles=True, ignore_memory_space=True,
                             ignore_element_size=ignore_size):
            return [f"Instruction shouldn't change layouts {instr.name} From {s} To {os}"]
    return []


def _sharding(instr: Instruction) -> str | None:
    text = instr.attrs.get("sharding")
    return "".join(text.split()) if text else None


def _consistent_sharding(instr: Instruction, others: list[Instruction | None]) -> list[str]:
    """``VerifyConsistentSharding``: the instructions that carry a sharding
    carry the same one."""
    seen = None
    for i in [instr] + others:
        s = _sharding(i) if i is not None else None
        if s is None:
            continue
        if seen is None:
            seen = (i, s)
        elif s != seen[1]:
            return [f"Inconsistent {instr.opcode} sharding among instructions: {seen[0].name} "
                    f"has {seen[1]}, {i.name} has {s}"]
    return []


def _sharding_rank(instr: Instruction) -> list[str]:
    """Tiled shardings have one tile dimension per array dimension (plus
    the replication/subgroup dimensions)."""
    text = _sharding(instr)
    s = instr.shape
    if text is None or not s.is_array or text.startswith("{{"):
        return []
    m = re.search(r"devices=\[([\d,]+)\]", text)
    if not m:
        return []
    dims = len(m.group(1).split(","))
    if "last_tile_dim_replicate" in text:
        dims -= 1
    sub = re.search(r"last_tile_dims=\{([^}]*)\}", text)
    if sub:
        dims -= len([x for x in sub.group(1).split(",") if x.strip()])
    if dims != s.rank:
        return [f"Invalid sharding for instruction: {instr.name}: Number of tile assignment "
                "dimensions (excluding subgroups) is different than the input rank. sharding="
                f"{text}, input_shape={human(s)}"]
    return []


def _while(instr: Instruction) -> list[str]:
    out = []
    for key, what in (("condition", "While condition"), ("body", "While body")):
        comp = instr.attrs.get(key)
        if isinstance(comp, Computation) and comp.num_parameters != 1:
            out.append(f"{what} must have exactly 1 parameter; had {comp.num_parameters}")
    if len(instr.operands) != 1:
        out.append(f"While loop must have exactly one operand; had {len(instr.operands)}")
    body, cond = instr.attrs.get("body"), instr.attrs.get("condition")
    if isinstance(body, Computation) and isinstance(cond, Computation):
        out += _consistent_sharding(instr, [body.root, body.parameters[0] if body.parameters
                                            else None,
                                            cond.parameters[0] if cond.parameters else None])
    return out


def _conditional(instr: Instruction) -> list[str]:
    branches = instr.attrs.get("branch_computations")
    if branches is None:
        branches = [instr.attrs.get("true_computation"), instr.attrs.get("false_computation")]
    out = _consistent_sharding(instr, [c.root for c in branches
                                       if isinstance(c, Computation)])
    for comp in branches:
        if isinstance(comp, Computation) and comp.num_parameters != 1:
            out.append(f"Branch computation {comp.name} of {instr.name} must have 1 parameter "
                       f"instead of {comp.num_parameters}")
    return out


def _custom_call(instr: Instruction) -> list[str]:
    if instr.custom_call_target == "GetRngSeed":
        if instr.operands:
            return [f"GetRngSeed custom call must have 0 operands, but has "
                    f"{len(instr.operands)}"]
        if instr.shape.element_type != "u64":
            return [f"GetRngSeed custom call must return U64 type, but got "
                    f"{human(instr.shape)}"]
        if not instr.shape.is_scalar:
            return [f"GetRngSeed custom call must return a scalar, but got "
                    f"{human(instr.shape)}"]
    return []


__all__ = ["check_instruction"]


def original_value(instr: Instruction) -> str | None:
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
