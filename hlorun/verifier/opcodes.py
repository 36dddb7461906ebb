"""Verifier shape rules of opcodes that have no (or more than a)
shape-inference function in XLA: broadcast, reshape, bitcast, iota, rng,
sort, scan, scaled-dot, infeed/outfeed, send/recv and copy-done."""

from __future__ import annotations

from typing import Any

from ..ir import attrs as A
from ..ir.module import Instruction
from ..ir.shape import Shape
from ..ir.shape_inference import infer_shape, program_shape
from ..ir.shape_inference.common import (compatible, compatible_ignoring_fp, human, is_float,
                                         is_integral, make, same_type_ignoring_fp)
from .base import VerifyError, shapes_same
from .calls import callee, param_count


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
    comp = callee(instr, "to_apply")
    params, result = program_shape(comp)
    if not compatible(result, make("pred", [])):
        raise VerifyError("The Sort compare computation shape does not lead to a scalar "
                          f"predicate shape: {human(result)}")
    param_count(instr, comp, 2 * len(instr.operands))
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


#: opcode -> rule returning the shape to compare the declared one with (or
#: None when the rule did all the checking).
HANDLERS = {
    "broadcast": _broadcast, "reshape": _reshape, "dynamic-reshape": _dynamic_reshape,
    "bitcast": _bitcast, "iota": _iota, "rng": _rng, "rng-bit-generator": _rng_bit_generator,
    "rng-get-and-update-state": _rng_state, "sort": _sort, "scan": _scan,
    "scaled-dot": _scaled_dot, "infeed": _infeed, "outfeed": _outfeed, "send": _send,
    "recv": _recv, "recv-done": _recv_done, "copy-done": _copy_done,
    "add-dependency": lambda i, opts: (_token(i, 1), i.operands[0].shape)[1],
    "after-all": lambda i, opts: Shape.token(),
    "partition-id": lambda i, opts: make("u32", []),
    "replica-id": lambda i, opts: make("u32", []),
    "send-done": lambda i, opts: Shape.token(),
    # Their shapes are given: parameters, constants (checked by the parser
    # against the literal) and ragged dots (no rule here yet).
    "parameter": lambda i, opts: None,
    "constant": lambda i, opts: None,
    "ragged-dot": lambda i, opts: None,
}
