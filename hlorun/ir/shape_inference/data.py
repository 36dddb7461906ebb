"""Shape inference for data movement: concatenate, pad, slice,
dynamic-slice, dynamic-update-slice, transpose, reverse, broadcast (the
parser's form), tuple, get-tuple-element, sort, top-k, get/set-dimension-size
(XLA's ``ShapeInference``)."""

from __future__ import annotations

from typing import Sequence

from ..shape import UNBOUNDED_SIZE, Shape, intern
from .common import (InferenceError, compatible, dynamic_flags, expect_array, higher_precision,
                     human, is_integral, is_unbounded, make, same_dimensions,
                     same_type_ignoring_fp)


def infer_concatenate(shapes: Sequence[Shape], dim: int) -> Shape:
    """``InferConcatOpShape``: equal ranks and types, equal sizes outside
    ``dim``; dynamic bounds combine as in XLA."""
    if not shapes:
        raise InferenceError("Concatenate expects at least one argument.")
    if dim < 0 or dim >= shapes[0].rank:
        raise InferenceError(f"Concatenate dimension out of bounds: {dim}.")
    first = None
    et = None
    for s in shapes:
        expect_array(s, "operand of concatenation")
        if first is None:
            first, et = s, s.element_type
            continue
        if first.rank != s.rank:
            raise InferenceError(f"Cannot concatenate arrays with different ranks: {first.rank} "
                                 f"({human(first)}) vs {s.rank} ({human(s)}).")
        if not same_type_ignoring_fp(first.element_type, s.element_type):
            raise InferenceError(f"Cannot concatenate arrays with different element types: "
                                 f"{first.element_type.upper()} vs {s.element_type.upper()}.")
        for d in range(first.rank):
            a, b = first.dimensions[d], s.dimensions[d]
            if d != dim and not (a == b or UNBOUNDED_SIZE in (a, b)):
                raise InferenceError(
                    "Cannot concatenate arrays that differ in dimensions other than the one "
                    f"being concatenated. Dimension {d} in both shapes must be equal (or "
                    f"compatible): {human(first)} vs {human(s)}.")
        et = higher_precision(s.element_type, first.element_type)
    rank = first.rank
    sizes = [UNBOUNDED_SIZE] * rank
    bounds = [UNBOUNDED_SIZE] * rank
    sizes[dim] = 0
    for s in shapes:
        flags = dynamic_flags(s)
        for d in range(rank):
            size = s.dimensions[d]
            bound = size if flags[d] and size != UNBOUNDED_SIZE else UNBOUNDED_SIZE
            if d == dim:
                sizes[d], bounds[d] = _concat_dim(sizes[d], size, bounds[d], bound)
            else:
                sizes[d], bounds[d] = _merge_dim(d, sizes[d], size, bounds[d], bound)
    dyn = [bounds[d] != UNBOUNDED_SIZE or sizes[d] == UNBOUNDED_SIZE for d in range(rank)]
    return make(et, sizes, dyn)


def _concat_dim(ls: int, rs: int, lb: int, rb: int) -> tuple[int, int]:
    u = UNBOUNDED_SIZE
    size = ls + rs if ls != u and rs != u else u
    bound = u
    if lb != u or rb != u:
        lv = lb if lb != u else ls
        rv = rb if rb != u else rs
        if lv != u and rv != u:
            bound = lv + rv
    return size, bound


def _merge_dim(d: int, ls: int, rs: int, lb: int, rb: int) -> tuple[int, int]:
    u = UNBOUNDED_SIZE
    bound = u
    if lb != u or rb != u:
        if lb != u and rb != u and lb != rb:
            raise InferenceError(f"Mismatched bound sizes {lb} and {rb} in dimension {d}")
        bound = lb if lb != u else rb
    size = u
    if ls != u or rs != u:
        if ls != u and rs != u and ls != rs:
            raise InferenceError(f"Mismatched dimension sizes {ls} and {rs} in dimension {d}")
        size = ls if ls != u else rs
        if bound != u and size != bound:
            raise InferenceError(f"Mismatched dimension size {size} and bound {bound} in "
                                 f"dimension {d}")
    return size, bound


def infer_pad(s: Shape, value: Shape, config: Sequence[tuple[int, int, int]]) -> Shape:
    """``InferPadShape``: lo + hi + size + (size - 1) * interior per dimension."""
    if not s.is_array:
        raise InferenceError("Pad operation does not support tuple-shape operands.")
    if not value.is_scalar:
        raise InferenceError("Pad operation does not support non-scalar padding values.")
    if s.rank != len(config):
        raise InferenceError(f"The rank of the operand and the padding configuration do not "
                             f"match: {human(s)} vs {len(config)} dimensions.")
    if not same_type_ignoring_fp(s.element_type, value.element_type):
        raise InferenceError("The element types of the operands to Pad do not match.")
    if any(it < 0 for _, _, it in config):
        raise InferenceError("Interior padding cannot be negative.")
    if value.is_dynamic:
        raise InferenceError("Dynamic padding value is not supported")
    dims = []
    for i, (lo, hi, it) in enumerate(config):
        if is_unbounded(s, i):
            dims.append(UNBOUNDED_SIZE)
            continue
        size = s.dimensions[i]
        n = size + lo + hi + max(size - 1, 0) * it
        if n < 0:
            raise InferenceError(f"Padding result in negative size for dimension {i}")
        dims.append(n)
    return make(higher_precision(s.element_type, value.element_type), dims, dynamic_flags(s))


def infer_slice(s: Shape, ranges: Sequence[tuple[int, int, int]]) -> Shape:
    """``InferSliceShape``: ceil((limit - start) / stride) per dimension."""
    expect_array(s, "operand of slice")
    if len(ranges) != s.rank:
        raise InferenceError(f"Slice index count does not match argument rank: {len(ranges)} "
                             f"vs {s.rank}.")
    sizes = []
    for d, (start, limit, stride) in enumerate(ranges):
        if start < 0:
            raise InferenceError(f"Negative start index to slice: {start}.")
        if not is_unbounded(s, d) and limit > s.dimensions[d]:
            raise InferenceError(f"limit index ({limit}) must be less than or equal to "
                                 f"dimension size ({s.dimensions[d]}) in slice operation; "
                                 f"argument shape: {human(s)}.")
        if start > limit:
            raise InferenceError(f"limit index ({limit}) must be greater or equal to start "
                                 f"index ({start}) in slice with positive stride in slice "
                                 f"operation; argument shape: {human(s)}.")
        if stride <= 0:
            raise InferenceError(f"Stride ({stride}) must be positive.")
        sizes.append((limit - start + stride - 1) // stride)
    flags = dynamic_flags(s)
    dyn = [sizes[i] != 1 and flags[i] and not is_unbounded(s, i) for i in range(s.rank)]
    return make(s.element_type, sizes, dyn)


def _check_indices(what: str, s: Shape, indices: Sequence[Shape]) -> None:
    """The scalar start-index operands of dynamic-(update-)slice (or the
    legacy single rank-1 index vector)."""
    if indices and indices[0].is_array and indices[0].rank == 1:
        if len(indices) != 1:
            raise InferenceError(f"{what} should have exactly 1 index operand, has "
                                 f"{len(indices)}.")
        v = indices[0]
        if not is_integral(v.element_type):
            raise InferenceError(f"{what} start indices must be of integral type.")
        if v.dimensions[0] != s.rank:
            raise InferenceError(f"{what} start number of dimensions {v.dimensions[0]} "
                                 f"({human(v)}) must match rank {s.rank} of slice input "
                                 f"({human(s)}).")
        return
    if len(indices) != s.rank:
        raise InferenceError(f"{what} start number of dimensions {len(indices)} must match rank "
                             f"{s.rank} of slice input ({human(s)}).")
    if indices:
        first = indices[0]
        if not first.is_scalar:
            raise InferenceError(f"{what} indices must be scalar, not {human(first)}.")
        if not is_integral(first.element_type):
            raise InferenceError(f"{what} start indices must be of integral type.")
        for ix in indices:
            if not compatible(first, ix):
                raise InferenceError(f"{what} start indices must all have the same shape, got "
                                     f"mismatching indices with shapes {human(first)} and "
                                     f"{human(ix)}.")


def infer_dynamic_slice(s: Shape, indices: Sequence[Shape], sizes: Sequence[int]) -> Shape:
    """``InferDynamicSliceShape``: the result has ``dynamic_slice_sizes``."""
    expect_array(s, "operand of dynamic slice")
    _check_indices("Dynamic slice", s, indices)
    if len(sizes) != s.rank:
        raise InferenceError(f"Dynamic slice index count does not match argument rank: "
                             f"{len(sizes)} vs {s.rank}.")
    for d, n in enumerate(sizes):
        if n < 0:
            raise InferenceError(f"Negative size index to dynamic slice: {n}.")
        if not is_unbounded(s, d) and n > s.dimensions[d]:
            raise InferenceError(f"Slice dim size {n} greater than dynamic slice dimension: "
                                 f"{s.dimensions[d]}.")
    flags = dynamic_flags(s)
    dyn = [flags[d] and sizes[d] > 1 and sizes[d] == s.dimensions[d] for d in range(s.rank)]
    return make(s.element_type, sizes, dyn)


def infer_dynamic_update_slice(s: Shape, update: Shape, indices: Sequence[Shape]) -> Shape:
    """``InferDynamicUpdateSliceShape``: the operand's shape."""
    if not s.is_array and not s.is_buffer:
        raise InferenceError("Expected array or buffer argument for operand of dynamic update "
                             f"slice, but got {human(s)}.")
    base = s.buffer_of if s.is_buffer else s
    expect_array(update, "update of dynamic update slice")
    _check_indices("Dynamic update slice", base, indices)
    if update.rank != base.rank:
        raise InferenceError(f"Dynamic update slice update rank does not match argument rank: "
                             f"{update.rank} vs {base.rank}.")
    if not same_type_ignoring_fp(base.element_type, update.element_type):
        raise InferenceError(
            "Dynamic update slice update element type does not match argument. "
            f"operand.element_type: {base.element_type.upper()} vs update.element_type: "
            f"{update.element_type.upper()}.")
    for d in range(base.rank):
        n, u = base.dimensions[d], update.dimensions[d]
        if u != UNBOUNDED_SIZE and u < 0:
            raise InferenceError(f"Size index {u} to dynamic update slice must be >= 0.")
        if n != UNBOUNDED_SIZE and u > n:
            raise InferenceError(f"Update dim size {u} greater than dynamic slice dimension: "
                                 f"{n}.")
    if update.dynamic is None:
        return s
    flags = dynamic_flags(base)
    for d in range(base.rank):
        if update.dynamic[d] and update.dimensions[d] == base.dimensions[d]:
            flags[d] = True
    out = intern(Shape(base.element_type, base.dimensions, base.layout, flags))
    return intern(Shape("buffer", buffer_of=out)) if s.is_buffer else out


def infer_transpose(s: Shape, perm: Sequence[int]) -> Shape:
    """``InferTransposeShape``: result dimension i is operand dimension perm[i]."""
    expect_array(s, "transpose")
    if len(perm) != s.rank or sorted(perm) != list(range(s.rank)):
        raise InferenceError(f"Transpose dimensions [{','.join(map(str, perm))}] are not a "
                             f"permutation of the operand dimensions (operand shape is "
                             f"{human(s)}).")
    flags = dynamic_flags(s)
    layout = None
    if s.layout is not None:
        inverse = [0] * len(perm)
        for i, p in enumerate(perm):
            inverse[p] = i
        layout = s.layout.with_minor_to_major([inverse[d] for d in s.layout.minor_to_major])
    return intern(Shape(s.element_type, [s.dimensions[p] for p in perm], layout,
                        [flags[p] for p in perm]))


def infer_reverse(s: Shape, dims: Sequence[int]) -> Shape:
    """``InferReverseShape``."""
    expect_array(s, "operand of reverse")
    if len(set(dims)) != len(dims):
        raise InferenceError("a dimension number is duplicated in reverse")
    for d in dims:
        if d < 0 or d >= s.rank:
            raise InferenceError(f"One of the reverse dimensions ({d}) is out-of-bounds in "
                                 f"shape {human(s)}.")
    return s


def infer_broadcast_sizes(s: Shape, sizes: Sequence[int]) -> Shape:
    """``InferBroadcastShape(operand, broadcast_sizes)``: ``sizes`` are new
    major dimensions (what XLA's parser uses when a broadcast has no shape)."""
    expect_array(s, "operand of broadcast")
    for n in sizes:
        if n < 0:
            raise InferenceError(f"Broadcast with negative dimension size {n}.")
    return make(s.element_type, list(sizes) + list(s.dimensions),
                [False] * len(sizes) + dynamic_flags(s))


def infer_tuple(shapes: Sequence[Shape]) -> Shape:
    return Shape.tuple(shapes)


def infer_get_tuple_element(s: Shape, index: int) -> Shape:
    """``InferGetTupleElementShape``."""
    if not s.is_tuple:
        raise InferenceError(f"Cannot infer shape: attempting to index into non-tuple: "
                             f"{human(s)}.")
    if index < 0 or index >= len(s.tuple_shapes):
        raise InferenceError(f"Cannot infer shape: attempt to index out of tuple bounds: "
                             f"{index} >= {len(s.tuple_shapes)} in shape {human(s)}.")
    return s.tuple_shapes[index]


def infer_sort(shapes: Sequence[Shape]) -> Shape:
    """``InferVariadicOpShape(kSort)``: keys and values share dimensions."""
    if len(shapes) == 1:
        return shapes[0]
    for i, s in enumerate(shapes[1:], 1):
        if not same_dimensions(shapes[0], s):
            raise InferenceError(f"Sort keys and values dimensions must match. Keys shape is: "
                                 f"{human(shapes[0])}\n, Values shape (operand index {i}) is: "
                                 f"{human(s)}")
    return Shape.tuple(shapes)


def infer_topk(s: Shape, k: int) -> Shape:
    """``InferTopKShape``: (values, s32 indices) with the minor dimension k."""
    expect_array(s, "operand of top-k operation")
    if not s.rank or s.dimensions[-1] < k:
        raise InferenceError(f"k={k} is larger than the last dimension of size="
                             f"{s.dimensions[-1] if s.rank else 0}")
    flags = dynamic_flags(s)
    flags[-1] = False
    dims = list(s.dimensions[:-1]) + [k]
    return Shape.tuple([make(s.element_type, dims, flags), make("s32", dims, flags)])


def infer_get_dimension_size(s: Shape, dim: int) -> Shape:
    if dim < 0 or dim >= s.rank:
        raise InferenceError(f"GetDimensionSize dimension out of bounds: {dim}.")
    if s.dimensions[dim] > 2**31 - 1:
        raise InferenceError(f"GetDimensionSize's input shape is {human(s)}, the {dim}th "
                             "dimension exceeds the INT_MAX limit.")
    return make("s32", [])


def infer_set_dimension_size(s: Shape, value: Shape, dim: int) -> Shape:
    if dim < 0 or dim >= s.rank:
        raise InferenceError(f"SetDimensionSize dimension out of bounds: {dim}.")
    if value.rank or value.element_type != "s32":
        raise InferenceError(f"SetDimensionSize's value has to be S32 scalar, got {value}")
    if s.dimensions[dim] > 2**31 - 1:
        raise InferenceError(f"SetDimensionSize's input shape is {human(s)}, the {dim}th "
                             "dimension exceeds the INT_MAX limit.")
    flags = dynamic_flags(s)
    flags[dim] = True
    return intern(Shape(s.element_type, s.dimensions, s.layout, flags))
