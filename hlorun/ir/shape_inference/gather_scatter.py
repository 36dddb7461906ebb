"""Shape inference for gather and scatter (XLA's ``InferGatherShape`` and
``InferScatterShape`` with their dimension-number validation)."""

from __future__ import annotations

from bisect import bisect_left
from typing import Any, Sequence

from ..shape import UNBOUNDED_SIZE, Shape
from .common import (InferenceError, dynamic_flags, expect_array, human, is_integral, is_unbounded,
                     make)
from .compute import verify_reducer


def _ints(attrs: dict[str, Any], key: str) -> tuple[int, ...]:
    from ..attrs import parse_int_list
    v = attrs.get(key)
    return parse_int_list(v) if v is not None else ()


def _contains(sorted_list: Sequence[int], x: int) -> bool:
    i = bisect_left(sorted_list, x)
    return i < len(sorted_list) and sorted_list[i] == x


def _sorted_unique(values: Sequence[int], what: str) -> None:
    if list(values) != sorted(values):
        raise InferenceError(f"{what} must be sorted; got: {', '.join(map(str, values))}.")
    if len(set(values)) != len(values):
        raise InferenceError(f"{what} must not repeat; got: {', '.join(map(str, values))}.")


def _in_range(values: Sequence[int], rank: int, what: str) -> None:
    for v in values:
        if v < 0 or v >= rank:
            raise InferenceError(f"Invalid {what}; valid range is [0, {rank}), got: {v}.")


def infer_gather(operand: Shape, indices: Shape, attrs: dict[str, Any]) -> Shape:
    """The gather result: offset dims take slice sizes (skipping collapsed
    and batching operand dims), the others take the index dims (skipping
    ``index_vector_dim``)."""
    expect_array(operand, "input tensor operand of gather op")
    expect_array(indices, "gather indices operand of gather op")
    if not is_integral(indices.element_type):
        raise InferenceError(f"Gather indices parameter must be an integral tensor; got "
                             f"{human(indices)}.")
    offset = _ints(attrs, "offset_dims")
    collapsed = _ints(attrs, "collapsed_slice_dims")
    start_map = _ints(attrs, "start_index_map")
    obatch = _ints(attrs, "operand_batching_dims")
    ibatch = _ints(attrs, "start_indices_batching_dims")
    ivd = int(attrs.get("index_vector_dim", 0))
    sizes = _ints(attrs, "slice_sizes")
    if ivd < 0 or ivd > indices.rank:
        raise InferenceError("Gather index leaf dimension must be within [0, rank(start_indices)"
                             f" + 1). rank(start_indices) is {indices.rank} and gather index "
                             f"leaf dimension is {ivd}.")
    exp_dims = list(indices.dimensions)
    exp_dyn = dynamic_flags(indices)
    if len(exp_dims) == ivd:
        exp_dims.append(1)
        exp_dyn.append(False)
    _sorted_unique(offset, "Output window dimensions in gather op")
    out_rank = len(offset) + len(exp_dims) - 1
    _in_range(offset, out_rank, "offset_dims in gather op")
    if exp_dims[ivd] != UNBOUNDED_SIZE and len(start_map) != exp_dims[ivd]:
        raise InferenceError(f"Gather op has {len(start_map)} elements in start_index_map and "
                             f"the bound of dimension index_vector_dim={ivd} of start_indices "
                             f"is {exp_dims[ivd]}. These two numbers must be equal.")
    _in_range(start_map, operand.rank, "start_index_map")
    if len(set(start_map)) != len(start_map):
        raise InferenceError("Repeated dimensions are not allowed in start_index_map; got: "
                             + ", ".join(map(str, start_map)) + ".")
    _in_range(collapsed, operand.rank, "collapsed_slice_dims set in gather op")
    _sorted_unique(collapsed, "collapsed_slice_dims in gather op")
    if len(obatch) != len(ibatch):
        raise InferenceError("operand_batching_dims and start_indices_batching_dims in gather op "
                             f"must be of the same size; got: {len(obatch)} and {len(ibatch)}.")
    _in_range(obatch, operand.rank, "operand_batching_dims set in gather op")
    _sorted_unique(obatch, "operand_batching_dims in gather op")
    _in_range(ibatch, len(exp_dims), "start_indices_batching_dims")
    if len(set(ibatch)) != len(ibatch):
        raise InferenceError("Repeated dimensions are not allowed in "
                             "start_indices_batching_dims.")
    if len(sizes) != operand.rank:
        raise InferenceError("Gather op must have one slice size for every input dimension; "
                             f"got: len(slice_sizes)={len(sizes)}, input_shape.rank="
                             f"{operand.rank}.")
    if len(sizes) != len(offset) + len(collapsed) + len(obatch):
        raise InferenceError("All components of the offset index in a gather op must either be "
                             "a offset dimension or explicitly collapsed or explicitly batched; "
                             f"got len(slice_sizes)={len(sizes)}, output_slice_sizes="
                             f"{','.join(map(str, offset))}, collapsed_slice_dims="
                             f"{','.join(map(str, collapsed))}, operand_batching_dims="
                             f"{','.join(map(str, obatch))}.")
    for i, n in enumerate(sizes):
        if is_unbounded(operand, i):
            continue
        if n < 0 or n > operand.dimensions[i]:
            raise InferenceError(f"Slice size at index {i} in gather op is out of range, must be "
                                 f"within [0, {operand.dimensions[i] + 1}), got {n}.")
    for what, dims in (("collapse slice dims", collapsed), ("have operand_batching_dims", obatch)):
        for pos, d in enumerate(dims):
            if sizes[d] > 1:
                raise InferenceError(f"Gather op can only {what} with bound 1 or 0, but bound is "
                                     f"{sizes[d]} for index {d} at position {pos}.")
    oflags = dynamic_flags(operand)
    skip = sorted(set(collapsed) | set(obatch))
    dims, dyn = [], []
    seen_offset = seen_gather = 0
    for i in range(out_rank):
        if _contains(offset, i):
            while _contains(skip, seen_offset):
                seen_offset += 1
            d = seen_offset
            dyn.append(oflags[d] if sizes[d] == operand.dimensions[d] else False)
            dims.append(sizes[d])
            seen_offset += 1
        else:
            if seen_gather == ivd:
                seen_gather += 1
            dyn.append(exp_dyn[seen_gather])
            dims.append(exp_dims[seen_gather])
            seen_gather += 1
    return make(operand.element_type, dims, dyn)


def infer_scatter(shapes: Sequence[Shape], params: Sequence[Shape], result: Shape,
                  attrs: dict[str, Any]) -> Shape:
    """``InferScatterShape``: N operands, the indices, N updates; the result
    is the operand (or the tuple of operands)."""
    n = len(shapes) // 2
    if n * 2 + 1 != len(shapes):
        raise InferenceError(f"Invalid argument count of scatter op: Expected {n * 2 + 1}, saw "
                             f"{len(shapes)}")
    indices = shapes[n]
    expect_array(indices, "scatter indices of scatter op")
    if not is_integral(indices.element_type):
        raise InferenceError(f"Scatter indices parameter must be an integral tensor; got "
                             f"{human(indices)}.")
    uwd = _ints(attrs, "update_window_dims")
    iwd = _ints(attrs, "inserted_window_dims")
    sd2od = _ints(attrs, "scatter_dims_to_operand_dims")
    ibd = _ints(attrs, "input_batching_dims")
    sibd = _ints(attrs, "scatter_indices_batching_dims")
    ivd = int(attrs.get("index_vector_dim", 0))
    if ivd < 0 or ivd > indices.rank:
        raise InferenceError("Scatter index leaf dimension must be within [0, "
                             f"rank(scatter_indices) + 1). rank(scatter_indices) is "
                             f"{indices.rank} and scatter index leaf dimension is {ivd}.")
    exp = list(indices.dimensions)
    if len(exp) == ivd:
        exp.append(1)
    operands, updates = shapes[:n], shapes[n + 1:]
    for i in range(n):
        operand, upd = operands[i], updates[i]
        expect_array(operand, f"operand {i} of scatter op")
        expect_array(upd, f"updates {i} of scatter op")
        max_sizes = [operand.dimensions[d] for d in range(operand.rank)
                     if d not in iwd and d not in ibd]
        want_rank = len(exp) - 1 + len(uwd)
        if upd.rank != want_rank:
            raise InferenceError(f"Updates tensor must be of rank {want_rank}; got {upd.rank}.")
        _validate_scatter_dims(operand, exp, upd, uwd, iwd, sd2od, ibd, sibd, ivd)
        for k, d in enumerate(uwd):
            if k < len(max_sizes) and upd.dimensions[d] > max_sizes[k]:
                raise InferenceError(
                    "Bounds of the window dimensions of updates must not exceed the bounds of "
                    f"the corresponding dimensions of operand. For dimension {d}, updates bound "
                    f"is {upd.dimensions[d]}, operand bound is {max_sizes[k]}.")
        seen = 0
        for d in range(upd.rank):
            if _contains(uwd, d):
                continue
            if seen == ivd:
                seen += 1
            a, b = upd.dimensions[d], exp[seen]
            if not (a == b or UNBOUNDED_SIZE in (a, b)):
                raise InferenceError(
                    "Bounds of the scatter dimensions of updates must be same as the bounds of "
                    f"the corresponding dimensions of scatter indices. For scatter dimension "
                    f"{d}, updates bound is {a}, scatter_indices bound is {b}.")
            seen += 1
    verify_reducer(params, result, [make(s.element_type, []) for s in operands],
                   [s.element_type for s in updates], n)
    return operands[0] if n == 1 else Shape.tuple(operands)


def _validate_scatter_dims(operand: Shape, exp: list[int], upd: Shape, uwd, iwd, sd2od, ibd,
                           sibd, ivd: int) -> None:
    """``ValidateScatterDimensionNumbers``."""
    _sorted_unique(uwd, "update_window_dims in scatter op")
    _in_range(uwd, upd.rank, "update_window_dims set in scatter op")
    _sorted_unique(iwd, "inserted_window_dims in scatter op")
    _in_range(iwd, operand.rank, "inserted_window_dims set in scatter op")
    window = len(uwd) + len(iwd) + len(ibd)
    if window != operand.rank:
        raise InferenceError(f"Scatter op has window of size {window}; doesn't match operand of "
                             f"rank {operand.rank}.")
    if not (len(sd2od) == exp[ivd] or exp[ivd] == UNBOUNDED_SIZE):
        raise InferenceError(f"Scatter op has {len(sd2od)} elements in "
                             f"scatter_dims_to_operand_dims and the bound of dimension "
                             f"index_vector_dim={ivd} of scatter_indices is {exp[ivd]}. These "
                             "two numbers must be equal.")
    _in_range(sd2od, operand.rank, "scatter_dims_to_operand_dims mapping")
    if len(set(sd2od)) != len(sd2od):
        raise InferenceError("Repeated dimensions not allowed in scatter_dims_to_operand_dims; "
                             "got: " + ", ".join(map(str, sd2od)) + ".")
    if len(ibd) != len(sibd):
        raise InferenceError("input_batching_dims and scatter_indices_batching_dims in scatter "
                             f"op must be of the same size; got: {len(ibd)} and {len(sibd)}.")
    _sorted_unique(ibd, "input_batching_dims in scatter op")
    _in_range(ibd, operand.rank, "input_batching_dims set in scatter op")
    _in_range(sibd, len(exp), "scatter_indices_batching_dims set in scatter op")
    if len(set(sibd)) != len(sibd):
        raise InferenceError("scatter_indices_batching_dims in scatter op must not repeat.")
