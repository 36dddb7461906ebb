"""Shape inference for calls (call, while, conditional) and collectives
(all-gather, all-reduce, reduce-scatter, all-to-all, collective-permute,
collective-broadcast and their start/done halves)."""

from __future__ import annotations

from typing import Sequence

from ..shape import UNBOUNDED_SIZE, Shape
from .common import InferenceError, compatible, dynamic_flags, expect_array, human, make, signature


def infer_call(args: Sequence[Shape], params: Sequence[Shape], result: Shape) -> Shape:
    """``InferCallShape``: arguments compatible with the parameters."""
    if len(args) != len(params):
        raise InferenceError(f"Call applied function arity must match number of arguments; got: "
                             f"arity: {len(params)}, arguments: {len(args)}; computation "
                             f"signature: {signature(params, result)}; argument shapes: ["
                             + ", ".join(human(a) for a in args) + "].")
    for i, (a, p) in enumerate(zip(args, params)):
        if not compatible(a, p):
            raise InferenceError(f"Call parameter must match argument; got parameter {i} shape: "
                                 f"{human(p)}, argument shape: {human(a)}.")
    return result


def infer_while(cond: tuple[list[Shape], Shape], body: tuple[list[Shape], Shape],
                init: Shape) -> Shape:
    """``InferWhileShape``: cond (T) -> pred[], body (T) -> T, init T."""
    (cp, cr), (bp, br) = cond, body
    if len(cp) != 1:
        raise InferenceError(f"Condition must take 1 arguments; got {len(cp)}.")
    if len(bp) != 1:
        raise InferenceError(f"Body must take 1 arguments; got {len(bp)}.")
    shapes = (f"Condition: {signature(cp, cr)}; body: {signature(bp, br)}; init: "
              f"{human(init)}.")
    if not compatible(cr, make("pred", [])):
        raise InferenceError(f"Condition must return a boolean; got {shapes}")
    if not (compatible(br, cp[0]) and compatible(br, bp[0]) and compatible(br, init)):
        raise InferenceError("The parameter of condition and body, the result of the body, and "
                             f"init must all have the same shape; got {shapes}")
    return init


def infer_conditional(index: Shape, branches: Sequence[tuple[list[Shape], Shape]],
                      operands: Sequence[Shape]) -> Shape:
    """``InferConditionalShape``: one single-parameter computation per
    branch, all returning the same shape."""
    if not (compatible(index, make("pred", [])) or compatible(index, make("s32", []))):
        raise InferenceError(f"branch_index must be bool or int32_t; got {human(index)}.")
    if index.element_type == "pred" and len(branches) != 2:
        raise InferenceError(f"a PRED conditional has 2 branches, got {len(branches)}")
    if not branches:
        raise InferenceError("conditional has no branch computations")
    if len(branches) != len(operands):
        raise InferenceError(f"conditional has {len(branches)} branches but "
                             f"{len(operands)} branch operands")
    result = branches[0][1]
    for j, ((params, res), op) in enumerate(zip(branches, operands)):
        if len(params) != 1:
            raise InferenceError(f"branch computation {j} must take 1 argument; got "
                                 f"{len(params)}.")
        if not compatible(params[0], op):
            raise InferenceError(f"branch operand {j} must match the shape of the only parameter "
                                 f"of branch computation {j}: got operand: {human(op)}; "
                                 f"computation: {signature(params, res)}")
        if not compatible(result, res):
            raise InferenceError(f"the result of branch 0 computation and branch {j} computation "
                                 f"must have the same shape: got branch 0 computation result: "
                                 f"{human(result)}; branch {j} computation result: {human(res)}.")
    return result


def _tuple_or_single(shapes: Sequence[Shape]) -> Shape:
    return shapes[0] if len(shapes) == 1 else Shape.tuple(shapes)


def infer_all_gather(shapes: Sequence[Shape], dim: int, shards: int) -> Shape:
    """``InferAllGatherShape``: the gathered dimension grows ``shards`` times."""
    if dim < 0 or shards <= 0:
        raise InferenceError(f"all-gather dimension {dim} / shard count {shards} invalid")
    outs = []
    for s in shapes:
        expect_array(s, "operand of all-gather")
        if dim >= s.rank:
            raise InferenceError(f"all-gather dimension {dim} out of range for {human(s)}")
        dims = list(s.dimensions)
        flags = dynamic_flags(s)
        if dims[dim] != UNBOUNDED_SIZE:
            dims[dim] *= shards
        else:
            flags[dim] = True
        outs.append(make(s.element_type, dims, flags))
    return _tuple_or_single(outs)


def infer_reduce_scatter(shapes: Sequence[Shape], dim: int, shards: int) -> Shape:
    """``InferReduceScatterShape``: the scattered dimension shrinks."""
    if dim < 0 or shards <= 0:
        raise InferenceError(f"reduce-scatter dimension {dim} / shard count {shards} invalid")
    outs = []
    for s in shapes:
        expect_array(s, "operand of reduce-scatter")
        if dim >= s.rank:
            raise InferenceError(f"reduce-scatter dimension {dim} out of range for {human(s)}")
        if s.dimensions[dim] % shards:
            raise InferenceError(f"ReduceScatter operand scatter dimension size "
                                 f"{s.dimensions[dim]} must be dividable by shard_count "
                                 f"{shards}.")
        dims = list(s.dimensions)
        dims[dim] //= shards
        outs.append(make(s.element_type, dims, dynamic_flags(s)))
    return _tuple_or_single(outs)


def infer_all_reduce(shapes: Sequence[Shape]) -> Shape:
    """``InferAllReduceShape``: the operands (a tuple when several)."""
    for s in shapes:
        expect_array(s, "operand of cross replica sum")
    return _tuple_or_single(shapes)


def infer_all_to_all(s: Shape, split_dim: int, concat_dim: int, count: int) -> Shape:
    """``InferAllToAllShape`` (array form)."""
    if count <= 0:
        raise InferenceError(f"all-to-all split count {count} must be positive")
    for what, d in (("split_dimension", split_dim), ("concat_dimension", concat_dim)):
        if d < 0 or d >= s.rank:
            raise InferenceError(f"AllToAll {what} {d} is out-of-bounds in shape {human(s)}.")
    dims = list(s.dimensions)
    if dims[split_dim] != UNBOUNDED_SIZE:
        if dims[split_dim] % count:
            raise InferenceError(f"AllToAll split dimension size {dims[split_dim]} must be "
                                 f"dividable by split_count {count}.")
        dims[split_dim] //= count
    if dims[concat_dim] != UNBOUNDED_SIZE:
        dims[concat_dim] *= count
    return make(s.element_type, dims, dynamic_flags(s))


def infer_all_to_all_tuple(shapes: Sequence[Shape]) -> Shape:
    """``InferAllToAllTupleShape``: N equal operands -> a tuple of N."""
    if not shapes:
        raise InferenceError("all-to-all needs operands")
    for i, s in enumerate(shapes):
        if s.dimensions != shapes[0].dimensions or s.element_type != shapes[0].element_type:
            raise InferenceError(f"HLO all-to-all has operands with different shapes: the 0th "
                                 f"operand shape {human(shapes[0])}, but the {i}th operand has "
                                 f"shape {human(s)}.")
    return Shape.tuple(shapes)


def infer_collective_permute(shapes: Sequence[Shape], inplace: bool) -> Shape:
    if inplace:
        if len(shapes) != 4:
            raise InferenceError("an in-place collective-permute has 4 operands")
        return shapes[1]
    for s in shapes:
        expect_array(s, "operand of collective-permute")
    return _tuple_or_single(shapes)


def infer_collective_permute_start(shapes: Sequence[Shape], context: Sequence[Shape],
                                   inplace: bool) -> Shape:
    if inplace:
        if len(shapes) != 4:
            raise InferenceError("an in-place collective-permute-start has 4 operands")
        parts = [shapes[0], shapes[1]]
    elif len(shapes) == 1:
        expect_array(shapes[0], "operand of collective-permute-start")
        parts = [shapes[0], shapes[0]]
    else:
        t = Shape.tuple(shapes)
        parts = [t, t]
    return Shape.tuple(parts + list(context))
