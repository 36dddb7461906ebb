"""Moving a bitcast across a broadcast or a transpose: XLA's bitcast_utils
(xla/backends/gpu/transforms/bitcast_utils.cc), used by hoist-fused-bitcasts.

Each function returns ``(new_shape, new_dims)`` or raises
:class:`BitcastRefused` when the bitcast mixes dimensions the op keeps
apart (XLA returns an error status and the caller leaves the bitcast where
it is):

* :func:`bitcast_of_broadcast` -- ``bitcast(broadcast(x))`` as
  ``broadcast(bitcast(x))``: the new operand shape and broadcast dimensions;
* :func:`broadcast_of_bitcast` -- ``broadcast(bitcast(x))`` as
  ``bitcast(broadcast(x))``: the new broadcast shape and dimensions;
* :func:`bitcast_of_transpose` -- ``bitcast(transpose(x))`` as
  ``transpose(bitcast(x))``;
* :func:`transpose_of_bitcast` -- ``transpose(bitcast(x))`` as
  ``bitcast(transpose(x))``.

Shapes carry layouts; transposes must keep the layout (normalized code).
"""

from __future__ import annotations

from typing import Sequence

from ..ir.module import Instruction
from ..ir.shape import Shape, common_factors


class BitcastRefused(ValueError):
    """The bitcast cannot be moved across the op."""


def _inverse(p: Sequence[int]) -> list[int]:
    out = [0] * len(p)
    for i, x in enumerate(p):
        out[x] = i
    return out


def _physical(shape: Shape) -> list[int]:
    return [shape.dimensions[d] for d in shape.layout.minor_to_major]


def _m2m(shape: Shape) -> tuple[int, ...]:
    if shape.layout is None:
        raise BitcastRefused(f"{shape} has no layout")
    return shape.layout.minor_to_major


def _merging_trivial_ranges(a: Sequence[int], b: Sequence[int]) -> list[tuple[int, int]]:
    """``CommonFactorsMergingTrivialRanges``: CommonFactors without the empty
    groups of product 1 (each joins the next group, the last one the
    previous)."""
    bounds = common_factors(a, b)
    i = 0
    while i + 1 < len(bounds) and len(bounds) > 2:
        (a0, b0), (a1, b1) = bounds[i], bounds[i + 1]
        if a0 != a1 and b0 != b1:
            i += 1
            continue
        if i + 2 == len(bounds):
            del bounds[i]
        else:
            del bounds[i + 1]
    return bounds


def bitcast_of_broadcast(broadcast: Instruction, result_shape: Shape) -> tuple[Shape, list[int]]:
    """``CalculateBitcastOfBroadcast``."""
    bshape = broadcast.shape
    b_m2m, r_m2m = _m2m(bshape), _m2m(result_shape)
    is_operand = [False] * bshape.rank
    for d in broadcast.dimensions:
        is_operand[d] = True
    bphys = _physical(bshape)
    factors = common_factors(_physical(result_shape), bphys)
    new_dims: list[int] = []
    for (r0, b0), (r1, b1) in zip(factors, factors[1:]):
        all_ops, any_ops = True, False
        for j in range(b0, b1):
            if bphys[j] == 1:
                continue
            v = is_operand[b_m2m[j]]
            all_ops &= v
            any_ops |= v
        if not any_ops:
            continue
        if not all_ops:
            raise BitcastRefused(f"{broadcast.name} mixes operand and broadcast dimensions")
        new_dims.extend(r_m2m[j] for j in range(r0, r1))
    new_dims.sort()
    pos = {d: k for k, d in enumerate(new_dims)}
    layout = [pos[d] for d in r_m2m if d in pos]
    new_shape = Shape.array(result_shape.element_type,
                            [result_shape.dimensions[d] for d in new_dims], layout)
    return new_shape, new_dims


def broadcast_of_bitcast(broadcast: Instruction, operand_shape: Shape) -> tuple[Shape, list[int]]:
    """``CalculateBroadcastOfBitcast``."""
    bitcast_shape = broadcast.operands[0].shape
    result_shape = broadcast.shape
    bc_m2m, r_m2m, o_m2m = _m2m(bitcast_shape), _m2m(result_shape), _m2m(operand_shape)
    to_range: list[tuple[int, int] | None] = [None] * result_shape.rank
    r_inv = _inverse(r_m2m)
    dims = broadcast.dimensions
    factors = common_factors(_physical(bitcast_shape), _physical(operand_shape))
    for (b0, o0), (b1, o1) in zip(factors, factors[1:]):
        if b0 == b1:
            raise BitcastRefused(f"{broadcast.name}: operand dimensions without a bitcast one")
        indices = []
        for j in range(b0, b1):
            index = dims[bc_m2m[j]]
            to_range[index] = (o0, o1)
            o0 = o1
            indices.append(r_inv[index])
        if indices[-1] - indices[0] >= b1 - b0 or indices != sorted(indices):
            raise BitcastRefused(f"{broadcast.name}: result dimensions are not contiguous")
    rank = operand_shape.rank + result_shape.rank - bitcast_shape.rank
    sizes = [0] * rank
    layout: list[int] = []
    new_dims = [0] * operand_shape.rank
    extra = operand_shape.rank
    for ri in r_m2m:
        rng = to_range[ri]
        if rng is not None:
            for i in range(*rng):
                oi = o_m2m[i]
                sizes[oi] = operand_shape.dimensions[oi]
                layout.append(oi)
                new_dims[oi] = oi
        else:
            sizes[extra] = result_shape.dimensions[ri]
            layout.append(extra)
            extra += 1
    new_dims.sort()
    return Shape.array(operand_shape.element_type, sizes, layout), new_dims


def _transpose_impl(transpose: Instruction, result_shape: Shape, transpose_shape: Shape,
                    operand_shape: Shape, transpose_dims: Sequence[int]) -> tuple[Shape, list[int]]:
    """``CalculateBitcastOfTransposeImpl``."""
    if _m2m(transpose.shape) != _m2m(transpose.operands[0].shape):
        raise BitcastRefused(f"{transpose.name} changes the layout")
    t_m2m, r_m2m = _m2m(transpose_shape), _m2m(result_shape)
    to_range = [(0, 0)] * operand_shape.rank
    o_inv = _inverse(_m2m(operand_shape))
    factors = _merging_trivial_ranges(_physical(result_shape), _physical(transpose_shape))
    for (r0, t0), (r1, t1) in zip(factors, factors[1:]):
        indices = []
        for j in range(t0, t1):
            dim = t_m2m[j]
            index = o_inv[transpose_dims[dim]]
            if transpose_shape.dimensions[dim] == 1:
                to_range[index] = (r0, r0)
                continue
            to_range[index] = (r0, r1)
            r0 = r1
            indices.append(index)
        if not indices:
            continue
        if indices[-1] - indices[0] >= len(indices) or indices != sorted(indices):
            raise BitcastRefused(f"{transpose.name}: result dimensions are not contiguous")
    sizes = [0] * result_shape.rank
    new_dims = [0] * result_shape.rank
    j = 0
    for i in range(operand_shape.rank):
        a, b = to_range[i]
        for k in range(a, b):
            new_index = r_m2m[j]
            j += 1
            ri = r_m2m[k]
            sizes[new_index] = result_shape.dimensions[ri]
            new_dims[new_index] = ri
    return Shape.array(result_shape.element_type, sizes, result_shape.layout), new_dims


def bitcast_of_transpose(transpose: Instruction, result_shape: Shape) -> tuple[Shape, list[int]]:
    """``CalculateBitcastOfTranspose``."""
    shape, dims = _transpose_impl(transpose, result_shape, transpose.shape,
                                  transpose.operands[0].shape, transpose.dimensions)
    return shape, _inverse(dims)


def transpose_of_bitcast(transpose: Instruction, operand_shape: Shape) -> tuple[Shape, list[int]]:
    """``CalculateTransposeOfBitcast``."""
    return _transpose_impl(transpose, operand_shape, transpose.operands[0].shape,
                           transpose.shape, _inverse(transpose.dimensions))


__all__ = ["BitcastRefused", "bitcast_of_broadcast", "bitcast_of_transpose",
           "broadcast_of_bitcast", "transpose_of_bitcast"]
