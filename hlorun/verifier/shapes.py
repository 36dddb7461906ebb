"""The shape half of XLA's HloVerifier (``ShapeVerifier``): every
instruction's declared shape must equal what shape inference gives for its
operands and attributes, plus the opcode-specific shape rules that have no
inference function (broadcast, reshape, bitcast, iota, rng, async ops ...).

:func:`check_shape` returns a list of messages for one instruction (empty
when it is fine); it never raises.
"""

from __future__ import annotations

from typing import Any, Callable

from ..ir import attrs as A
from ..ir.module import Computation, Instruction
from ..ir.shape import Shape
from ..ir.shape_inference import InferenceError, infer_shape, program_shape
from ..ir.shape_inference.common import (compatible, compatible_ignoring_fp, human, is_float,
                                         is_integral, make, same_type_ignoring_fp)
from .base import VerifyError, equal_with_layout, shapes_same
from .collectives import check_collective


#: Opcodes whose result is checked exactly (no f32<->bf16 leeway, layouts
#: compared when layout-sensitive): they reinterpret or move data.
_EXACT = frozenset({
    "bitcast", "call", "conditional", "constant", "copy-done", "copy-start", "custom-call",
    "get-tuple-element", "infeed", "outfeed", "opt-barrier", "parameter", "recv", "recv-done",
    "send", "send-done", "tuple", "while"})

#: Opcodes exempt from the mixed-precision check (data pass-through, tuples).
_MIXED_OK = frozenset({
    "call", "conditional", "constant", "convolution", "dot", "ragged-dot", "scaled-dot",
    "all-reduce", "all-reduce-start", "all-reduce-done", "all-gather", "all-gather-start",
    "all-gather-done", "async-done", "async-update", "async-start", "collective-permute",
    "collective-permute-start", "collective-permute-done", "copy-done", "copy-start",
    "custom-call", "domain", "fusion", "get-tuple-element", "opt-barrier", "infeed", "outfeed",
    "parameter", "recv", "recv-done", "reduce-precision", "reduce-window", "send", "send-done",
    "sort", "tuple", "while"})

#: Opcodes whose shape comes from ``infer_shape`` with the declared element
#: type as the result/preferred type.
_TYPED = frozenset({"convert", "bitcast-convert", "stochastic-convert", "dot", "convolution"})


def _fp_types(shape: Shape, out: set[str]) -> None:
    for _, leaf in shape.leaves():
        if leaf.is_array and is_float(leaf.element_type):
            out.add(leaf.element_type)


def check_result(instr: Instruction, inferred: Shape, opts: Any,
                 minor_to_major_only: bool = False, in_fusion: bool = False) -> None:
    """``ShapeVerifier::CheckShape``: the declared shape against the inferred."""
    op = instr.opcode
    if not opts.allow_mixed_precision and op not in _MIXED_OK:
        types: set[str] = set()
        for o in instr.operands:
            _fp_types(o.shape, types)
        if len(types) > 1:
            raise VerifyError("Seen floating point types of different precisions in "
                              f"{op}, but mixed precision is disallowed.")
    declared = instr.shape
    if op in _EXACT:
        ok = shapes_same(declared, inferred, opts, minor_to_major_only)
    elif op == "dynamic-update-slice":
        ok = shapes_same(declared, inferred, opts, minor_to_major_only)
        if not ok and opts.layout_sensitive and in_fusion:
            # Memory spaces and tiles need not propagate into fusions.
            ok = equal_with_layout(declared, inferred, minor_to_major_only,
                                   ignore_tiles_and_memory_space=True)
    elif op == "copy" and opts.layout_sensitive and _host_copy(declared, inferred):
        ok = _host_copy_ok(declared, inferred)
    elif opts.allow_mixed_precision:
        ok = compatible_ignoring_fp(declared, inferred)
    else:
        ok = compatible(declared, inferred)
    if not ok:
        layout = opts.layout_sensitive
        raise VerifyError(f"Expected instruction to have shape equal to "
                          f"{inferred.to_string(layout)}, actual shape is "
                          f"{declared.to_string(layout)}")


HOST_MEMORY_SPACE = 5  # Layout::kHostMemorySpace


def _host_copy(declared: Shape, inferred: Shape) -> bool:
    """A copy between host and device memory (layouts assigned)."""
    if not declared.is_array or declared.layout is None or inferred.layout is None:
        return False
    a, b = declared.layout.memory_space, inferred.layout.memory_space
    return a != b and HOST_MEMORY_SPACE in (a, b)


def _host_copy_ok(declared: Shape, inferred: Shape) -> bool:
    """Host offloading copies may not change the type; host<->device copies
    may not transpose either (a host->host copy before memory-space
    propagation may)."""
    if declared.layout.memory_space == HOST_MEMORY_SPACE:
        return declared.element_type == inferred.element_type
    return equal_with_layout(declared, inferred, ignore_tiles_and_memory_space=False,
                             ignore_memory_space=True)


def _ints(instr: Instruction, key: str) -> tuple[int, ...]:
    v = instr.attrs.get(key)
    return A.parse_int_list(v) if v is not None else ()


def _token(instr: Instruction, i: int) -> None:
    s = instr.operands[i].shape
    if not s.is_token:
        raise VerifyError(f"Expected operand {i} to be token-shaped, actual shape is {human(s)}")


def _broadcast(instr: Instruction, opts: Any) -> None:
    """No inference rule: the dimensions map operand dims onto equal result dims."""
    operand = instr.operands[0].shape
    shape = instr.shape
    dims = _ints(instr, "dimensions")
    if not operand.is_array or not shape.is_array:
        raise VerifyError(f"broadcast operand and result must be arrays: {human(operand)} -> "
                          f"{human(shape)}")
    if operand.element_type != shape.element_type:
        raise VerifyError(f"broadcast changes the element type: {human(operand)} -> "
                          f"{human(shape)}")
    if len(dims) != operand.rank:
        raise VerifyError(f"broadcast has {len(dims)} dimensions for an operand of rank "
                          f"{operand.rank}: {human(operand)}")
    for i, d in enumerate(dims):
        if not (0 <= d < shape.rank) or shape.dimensions[d] != operand.dimensions[i]:
            raise VerifyError(f"broadcast operand dimension {i} (size {operand.dimensions[i]}) "
                              f"maps to result dimension {d} of {human(shape)}")


def _reshape(instr: Instruction, opts: Any) -> None:
    a, b = instr.operands[0].shape, instr.shape
    if not a.is_array or not b.is_array:
        raise VerifyError(f"reshape operand and result must be arrays: {human(a)} -> {human(b)}")
    if a.element_type != b.element_type:
        raise VerifyError(f"reshape changes the element type: {human(a)} -> {human(b)}")
    if a.element_count != b.element_count:
        raise VerifyError(f"reshape changes the element count: {human(a)} ({a.element_count}) "
                          f"-> {human(b)} ({b.element_count})")


def _dynamic_reshape(instr: Instruction, opts: Any) -> None:
    _reshape(instr, opts)
    if instr.shape.rank + 1 != len(instr.operands):
        raise VerifyError(f"dynamic-reshape to rank {instr.shape.rank} needs "
                          f"{instr.shape.rank + 1} operands, has {len(instr.operands)}")
    for o in instr.operands[1:]:
        if o.shape.element_type != "s32":
            raise VerifyError(f"dynamic-reshape size operand {o.name} must be S32")


def _bitcast(instr: Instruction, opts: Any) -> None:
    """Same byte size (XLA checks it layout-sensitively; sizes do not depend
    on the layout's dimension order, so it holds in any phase)."""
    a, b = instr.operands[0].shape, instr.shape
    if a.is_array and b.is_array:
        sa, sb = a.byte_size(), b.byte_size()
        if sa != sb:
            raise VerifyError(f"Bitcast cannot have different shape sizes of output ({sb}) and "
                              f"operand ({sa}) ({b}) ({a})")
        if opts.layout_sensitive and a.layout is not None and b.layout is not None:
            src = instr.operands[0]
            while src.opcode == "copy":
                src = src.operands[0]
            host = 5  # Layout::kHostMemorySpace
            if src.opcode != "constant" and ((a.layout.memory_space == host)
                                             != (b.layout.memory_space == host)):
                raise VerifyError("Bitcast cannot have different memory spaces of output "
                                  f"({b.layout.memory_space}) and operand "
                                  f"({a.layout.memory_space})")


def _iota(instr: Instruction, opts: Any) -> None:
    s = instr.shape
    if not s.is_array:
        raise VerifyError("Iota does not support non-array result.")
    if s.rank == 0:
        raise VerifyError("Iota does not support scalars.")
    d = int(instr.attrs.get("iota_dimension", -1))
    if not 0 <= d < s.rank:
        raise VerifyError("The iota dimension cannot go beyond the operation rank or be "
                          "negative.")
    t = s.element_type
    if not (is_integral(t) or is_float(t) or t in ("c64", "c128")):
        raise VerifyError("Only support iota of integral, floating point or complex primitive "
                          f"types, got {t.upper()}")


def _rng(instr: Instruction, opts: Any) -> None:
    if len(instr.operands) != 2:
        raise VerifyError(f"Expected 2 operands for rng instruction, has {len(instr.operands)}")
    a, b = instr.operands[0].shape, instr.operands[1].shape
    if not a.is_scalar or not b.is_scalar:
        raise VerifyError("Expected scalar types for the two operands of Rng instruction")
    r = instr.shape.element_type
    if not (a.element_type == b.element_type and (
            a.element_type == r or (opts.allow_mixed_precision
                                    and same_type_ignoring_fp(a.element_type, r)))):
        raise VerifyError("Expected compatible element types for the result and the two "
                          "operands of Rng instruction")
    t = a.element_type
    dist = instr.attrs.get("distribution")
    if dist == "rng_uniform" and not (is_float(t) or is_integral(t) or t == "pred"):
        raise VerifyError("Element type not supported. Expected element to be of floating "
                          "point type, integral type or predicate type for RngUniform")
    if dist == "rng_normal" and not is_float(t):
        raise VerifyError("Element type not supported. Expected element to be "
                          "FloatingPointType for RngNormal")


def _rng_bit_generator(instr: Instruction, opts: Any) -> None:
    s = instr.shape
    if not s.is_tuple:
        return
    if len(s.tuple_shapes) != 2:
        raise VerifyError(f"Expected tuple shape with 2 elements for RngBitGenerator. Got: {s}")
    if not compatible(instr.operands[0].shape, s.tuple_shapes[0]):
        raise VerifyError("Expected state shape to match between input and output for "
                          f"RngBitGenerator. Got {instr.operands[0].shape} vs. "
                          f"{s.tuple_shapes[0]}")


def _rng_state(instr: Instruction, opts: Any) -> None:
    if not compatible(instr.shape, make("u64", [2])):
        raise VerifyError(f"Invalid RngGetAndUpdateState, expect result to have shape u64[2], "
                          f"got {human(instr.shape)}")


def _sort(instr: Instruction, opts: Any) -> Shape:
    if not instr.operands:
        raise VerifyError("Expected at least 1 operand for sort instruction")
    comp = _callee(instr, "to_apply")
    params, result = program_shape(comp)
    if not compatible(result, make("pred", [])):
        raise VerifyError("The Sort compare computation shape does not lead to a scalar "
                          f"predicate shape: {human(result)}")
    _param_count(instr, comp, 2 * len(instr.operands))
    for i, p in enumerate(params):
        want = make(instr.operands[i // 2].shape.element_type, [])
        if not compatible_ignoring_fp(want, p):
            raise VerifyError(f"Expected the {i}-th parameter of the compare computation of "
                              f"sort to have shape {human(want)}, but got {human(p)}")
    dim = _ints(instr, "dimensions")
    rank = instr.operands[0].shape.rank
    if dim and dim[0] >= rank:
        raise VerifyError(f"Expected the sort_dimension {dim[0]} of sort to be smaller than the "
                          f"rank {rank} of the operand(s).")
    return infer_shape("sort", instr.operands, instr.attrs)


def _callee(instr: Instruction, key: str) -> Computation:
    comp = instr.attrs.get(key)
    if not isinstance(comp, Computation):
        raise VerifyError(f"{instr.opcode} has no {key} computation")
    return comp


def _param_count(instr: Instruction, comp: Computation, expected: int) -> None:
    """``CheckParameterCount``."""
    if comp.num_parameters != expected:
        raise VerifyError(f"Expected computation {comp.name} called from {instr.name} to have "
                          f"{expected} parameters, has {comp.num_parameters}")


def _operand_and_parameter(instr: Instruction, i: int, comp: Computation, p: int,
                           opts: Any) -> None:
    """``CheckOperandAndParameter``."""
    param = comp.parameters[p] if p < len(comp.parameters) else None
    if param is None:
        raise VerifyError(f"computation {comp.name} has no parameter {p}")
    if not shapes_same(instr.operands[i].shape, param.shape, opts):
        raise VerifyError(f"Operand {instr.operands[i].name} ({human(instr.operands[i].shape)}) "
                          f"shape does not match parameter's {param.name} "
                          f"({human(param.shape)}) in {comp.name}")


def _root(comp: Computation) -> Shape:
    if comp.root is None:
        raise VerifyError(f"computation {comp.name} has no root")
    return comp.root.shape


def _call(instr: Instruction, opts: Any) -> Shape:
    comp = _callee(instr, "to_apply")
    _param_count(instr, comp, len(instr.operands))
    for i in range(comp.num_parameters):
        _operand_and_parameter(instr, i, comp, i, opts)
    if instr.attrs.get("is_composite") == "true":
        _composite(instr)
    return _root(comp)


def _composite(instr: Instruction) -> None:
    """A composite call names itself in its frontend attributes."""
    text = instr.attrs.get("frontend_attributes")
    if not text:
        raise VerifyError("A composite call op must have frontend attributes")
    fa = A.parse_frontend_attributes(text)
    if not fa.get("composite.name"):
        raise VerifyError("A composite call op must have frontend attributes with key "
                          "composite.name whose value is non-empty")
    if "composite.attributes" in fa and not fa["composite.attributes"]:
        raise VerifyError("A composite call op must have frontend attributes with key "
                          "composite.attributes whose value is default: {} or non-empty")
    version = fa.get("composite.version")
    if version is not None and not version.strip().isdigit():
        raise VerifyError("A composite call op must have frontend attributes with a "
                          "composite.version whose value is a non-negative integer but got: "
                          f"{version}")


def _while(instr: Instruction, opts: Any) -> Shape:
    body, cond = _callee(instr, "body"), _callee(instr, "condition")
    _param_count(instr, body, 1)
    _param_count(instr, cond, 1)
    _operand_and_parameter(instr, 0, body, 0, opts)
    _operand_and_parameter(instr, 0, cond, 0, opts)
    if not compatible(_root(cond), make("pred", [])):
        raise VerifyError("Conditional computation shape does not lead to a scalar predicate "
                          f"shape: {human(_root(cond))}")
    return _root(body)


def _conditional(instr: Instruction, opts: Any) -> None:
    index = instr.operands[0].shape if instr.operands else None
    if index is None or not index.is_scalar:
        raise VerifyError("The first operand of conditional must be a scalar. Got "
                          f"{human(index) if index else 'nothing'}")
    branches = instr.attrs.get("branch_computations")
    if branches is None:
        branches = [_callee(instr, "true_computation"), _callee(instr, "false_computation")]
    if index.element_type == "pred":
        if len(branches) != 2:
            raise VerifyError(f"a PRED conditional has 2 branches, got {len(branches)}")
    elif index.element_type != "s32":
        raise VerifyError("The first operand of indexed conditional must be a scalar of S32. "
                          f"Got type {index.element_type.upper()}.")
    elif not branches:
        raise VerifyError("conditional has no branch computations")
    if len(instr.operands) != len(branches) + 1:
        raise VerifyError(f"Expected {len(branches) + 1} operands for conditional instruction, "
                          f"has {len(instr.operands)}")
    for j, comp in enumerate(branches):
        _param_count(instr, comp, 1)
        _operand_and_parameter(instr, j + 1, comp, 0, opts)
        check_result(instr, _root(comp), opts)


def _fusion(instr: Instruction, opts: Any) -> None:
    comps = instr.called_computations()
    if len(comps) != 1:
        raise VerifyError("Fusion has a non-unary number of called computations")
    comp = comps[0]
    root = _root(comp)
    if not shapes_same(instr.shape, root, opts):
        raise VerifyError(f"Fused computation shape ({root}) is not equal to the fusion shape "
                          f"({instr.shape})")
    if comp.num_parameters > len(instr.operands):
        raise VerifyError(f"Fused parameter count ({comp.num_parameters}) is greater than the "
                          f"number of operands ({len(instr.operands)}) passed to the fusion")
    for n, p in enumerate(comp.parameters):
        if p is not None and not shapes_same(p.shape, instr.operands[n].shape, opts):
            raise VerifyError(f"Shape mismatch between parameter number {n} and its operand in "
                              f"{instr.name}. ({p.shape} != {instr.operands[n].shape})")
    _check_aliasing(instr, opts)


def _check_aliasing(instr: Instruction, opts: Any, in_fusion: bool = False) -> None:
    text = instr.attrs.get("output_to_operand_aliasing")
    if not text:
        return
    for out_index, operand, operand_index in A.parse_output_to_operand_aliasing(text):
        if not 0 <= operand < len(instr.operands):
            raise VerifyError("Invalid aliasing operand index.")
        try:
            a = instr.operands[operand].shape.subshape(operand_index)
        except IndexError:
            raise VerifyError("Invalid aliasing operand shape index.") from None
        try:
            b = instr.shape.subshape(out_index)
        except IndexError:
            raise VerifyError("Invalid aliasing output shape index.") from None
        if instr.opcode == "custom-call" and "xla_skip_custom_call_alias_shape_check" in (
                instr.attrs.get("frontend_attributes") or ""):
            return
        if a.is_buffer:
            a = a.buffer_of
        if b.is_buffer:
            b = b.buffer_of
        if opts.layout_sensitive:
            # A scalar custom-call operand may live in another memory space;
            # fusions inside fusions may differ in tiles and memory spaces.
            relax = (instr.opcode == "custom-call" and a.is_array and a.element_count == 1) \
                or (instr.opcode == "fusion" and in_fusion)
            same = equal_with_layout(a, b, ignore_memory_space=relax,
                                     ignore_tiles_and_memory_space=relax
                                     and instr.opcode == "fusion")
        else:
            same = compatible(a, b)
        if not same:
            raise VerifyError(f"Different aliasing shapes: {a} vs {b}")


def _custom_call(instr: Instruction, opts: Any) -> None:
    """No inference; layout constraints and aliasing must be consistent."""
    olc = instr.attrs.get("operand_layout_constraints")
    target = instr.custom_call_target
    if olc is not None and target not in ("LayoutConstraint", "control_dep"):
        shapes = [A.parse_shape_text(p) for p in A.split_top_level(olc.strip()[1:-1])
                  if p.strip()]
        if len(shapes) != len(instr.operands):
            raise VerifyError(f"custom-call has {len(instr.operands)} operands but "
                              f"{len(shapes)} operand layout constraints")
        for o, s in zip(instr.operands, shapes):
            if not compatible(o.shape, s):
                raise VerifyError(f"{o.shape} operand {s}")
    _check_aliasing(instr, opts)


#: opcode -> handler(instr, opts) returning an inferred Shape to compare,
#: or None when the handler did all the checking.
_HANDLERS: dict[str, Callable[[Instruction, Any], Shape | None]] = {
    "broadcast": _broadcast,
    "reshape": _reshape,
    "dynamic-reshape": _dynamic_reshape,
    "bitcast": _bitcast,
    "iota": _iota,
    "rng": _rng,
    "rng-bit-generator": _rng_bit_generator,
    "rng-get-and-update-state": _rng_state,
    "sort": _sort,
    "call": _call,
    "while": _while,
    "conditional": _conditional,
    "fusion": _fusion,
    "custom-call": _custom_call,
    "parameter": lambda i, o: None,
    "constant": lambda i, o: None,
    "scan": lambda i, o: _scan(i, o),
    "scaled-dot": lambda i, o: _scaled_dot(i, o),
    "ragged-dot": lambda i, o: None,
    "add-dependency": lambda i, o: (_token(i, 1), i.operands[0].shape)[1],
    "after-all": lambda i, o: Shape.token(),
    "partition-id": lambda i, o: make("u32", []),
    "replica-id": lambda i, o: make("u32", []),
    "send-done": lambda i, o: Shape.token(),
}


def _scan(instr: Instruction, opts: Any) -> None:
    """Only associative scans may reach a layout-sensitive verifier."""
    if len(_ints(instr, "dimensions")) != 1:
        raise VerifyError(f"Scan instruction has {len(_ints(instr, 'dimensions'))} dimensions, "
                          "expected exactly one.")
    if opts.layout_sensitive and instr.attrs.get("is_associative") != "true":
        raise VerifyError("Non-associative scan reached layout-sensitive HloVerifier; it should "
                          "have been expanded to a while loop by ScanExpander")


def _scaled_dot(instr: Instruction, opts: Any) -> Shape:
    """Scales have the operand's rank and divide its dimensions (unless they
    are the no-op bf16 scale); at least one scale is not a scalar."""
    lc, rc = _ints(instr, "lhs_contracting_dims"), _ints(instr, "rhs_contracting_dims")
    for operand, scale, contracting in ((0, 2, lc), (1, 3, rc)):
        x, sc = instr.operands[operand].shape, instr.operands[scale].shape
        if (sc.element_type == x.element_type == "bf16"
                and all(d == 1 for d in sc.dimensions) and any(d != 1 for d in x.dimensions)):
            continue
        if sc.rank != x.rank:
            raise VerifyError(f"Scale operand {instr.operands[scale].name} has a different "
                              f"number of dimensions than operand {instr.operands[operand].name}")
        if len(contracting) != 1:
            raise VerifyError("Contracting dimensions must have exactly one dimension")
        for i, (a, b) in enumerate(zip(x.dimensions, sc.dimensions)):
            if b == 0 or a % b:
                raise VerifyError(f"Dimension {i} of operand {human(x)} should be a multiple of "
                                  f"dimension {i} of scale operand {human(sc)}")
    if instr.operands[2].shape.is_scalar and instr.operands[3].shape.is_scalar:
        raise VerifyError("At least one of the scales should be not a scalar")
    return infer_shape("scaled-dot", instr.operands, instr.attrs, instr.shape.element_type)


def _infeed(instr: Instruction, opts: Any) -> Shape:
    _token(instr, 0)
    s = instr.shape
    if not s.is_tuple or len(s.tuple_shapes) != 2 or not s.tuple_shapes[1].is_token:
        raise VerifyError(f"infeed shape must be (data, token), got {human(s)}")
    return s


def _outfeed(instr: Instruction, opts: Any) -> Shape:
    _token(instr, 1)
    want = instr.attrs.get("outfeed_shape")
    if want is not None and not shapes_same(A.parse_shape_text(want), instr.operands[0].shape,
                                            opts):
        raise VerifyError(f"Expected outfeed shape to be equal to operand's shape "
                          f"{human(instr.operands[0].shape)}, actual shape is {want}")
    return Shape.token()


def _send(instr: Instruction, opts: Any) -> Shape:
    return Shape.tuple([instr.operands[0].shape, make("u32", []), Shape.token()])


def _recv(instr: Instruction, opts: Any) -> Shape:
    s = instr.shape
    if not s.is_tuple or not s.tuple_shapes:
        raise VerifyError(f"recv shape must be a tuple, got {human(s)}")
    return Shape.tuple([s.tuple_shapes[0], make("u32", []), Shape.token()])


def _recv_done(instr: Instruction, opts: Any) -> Shape:
    s = instr.operands[0].shape
    if not s.is_tuple or not s.tuple_shapes:
        raise VerifyError(f"recv-done operand must be a tuple, got {human(s)}")
    return Shape.tuple([s.tuple_shapes[0], Shape.token()])


def _copy_done(instr: Instruction, opts: Any) -> Shape:
    s = instr.operands[0].shape
    if not s.is_tuple or len(s.tuple_shapes) < 2:
        raise VerifyError(f"copy-done operand must be a (dest, src, context) tuple, got "
                          f"{human(s)}")
    if not compatible(s.tuple_shapes[0], s.tuple_shapes[1]):
        raise VerifyError("Source and destination buffers in CopyDone arguments need to be the "
                          f"same shape found {human(s.tuple_shapes[0])} and "
                          f"{human(s.tuple_shapes[1])}")
    return s.tuple_shapes[0]


_HANDLERS.update({"infeed": _infeed, "outfeed": _outfeed, "send": _send, "recv": _recv,
                  "recv-done": _recv_done, "copy-done": _copy_done})

_M2M_ONLY = frozenset({"constant", "infeed", "copy-start", "send", "recv"})


def check_shape(instr: Instruction, opts: Any, ctx: Any = None) -> list[str]:
    """Messages for the shape rules ``instr`` breaks (at most one); ``ctx``
    (:class:`hlorun.verifier.module.Context`) tells fused computations."""
    op = instr.opcode
    in_fusion = ctx is not None and instr.parent in ctx.fusion_computations
    try:
        handler = _HANDLERS.get(op)
        if handler is not None:
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


_COLLECTIVES = frozenset({
    "all-gather", "all-gather-start", "all-gather-done", "all-reduce", "all-reduce-start",
    "all-reduce-done", "reduce-scatter", "all-to-all", "ragged-all-to-all",
    "collective-broadcast", "collective-permute", "collective-permute-start",
    "collective-permute-done"})

__all__ = ["check_shape", "check_result", "shapes_same", "VerifyError"]
