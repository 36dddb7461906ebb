"""Matmul shape analysis: ``IsCublasSupportedMatMul``,
``IsMatrixMultiplicationTooSmallForRewriting``, ``MatrixLayout::For``
(row/column-major with one leading dimension) and the batch-dimension
normalization GemmRewriter applies to dots with two batch dimensions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from ...ir.module import Instruction
from ...ir.shape import Shape
from . import hlo as H
from .config import DotDims, algorithm
from .types import ELEMENTAL_ALGORITHMS


def non_contracting_dims(rank: int, batch: Sequence[int], contracting: Sequence[int]) -> list[int]:
    return [d for d in range(rank) if d not in batch and d not in contracting]


def cublas_support_reason(dot: Instruction, allow_matrix_vector: bool = True) -> str | None:
    """``IsCublasSupportedMatMul``: None if supported, else why not."""
    dims = DotDims.of(dot)
    num_matrix = 0
    for side, (batch, contracting) in enumerate(((dims.lhs_batch, dims.lhs_contracting),
                                                  (dims.rhs_batch, dims.rhs_contracting))):
        name = ("lhs", "rhs")[side]
        shape = dot.operands[side].shape
        if len(contracting) != 1:
            return f"{name} has {len(contracting)} contracting dimensions (cuBLAS supports exactly one)"
        if any(b == shape.rank - 1 for b in batch):
            return f"{name} batch dimension is its minor-most dimension"
        nc = non_contracting_dims(shape.rank, batch, contracting)
        if len(nc) > 1:
            return f"{name} has {len(nc)} non-contracting dimensions (cuBLAS supports at most one)"
        if nc:
            num_matrix += shape.dimensions[nc[0]] != 1
    if num_matrix == 0 or (num_matrix == 1 and not allow_matrix_vector):
        return "neither operand is a matrix (vector-vector product)"
    t = dot.shape.element_type
    a, b = (o.shape.element_type for o in dot.operands)
    if t in ("f8e4m3fn", "f8e5m2", "f16", "bf16", "f32", "f64", "c64"):
        return None
    if t == "s32":
        return None if (a, b) == ("s8", "s8") else f"s32 output needs s8 x s8 operands (got {a} x {b})"
    if t in ("f8e3m4", "f8e4m3", "f8e4m3fnuz", "f8e5m2fnuz", "c128"):
        return None if num_matrix == 2 else f"{t} matrix-vector products are not supported"
    return f"output type {t} is not supported by cuBLAS"


def matmul_sizes(dot: Instruction) -> tuple[int, int, int]:
    """(lhs non-contracting size, rhs non-contracting size, contracting size)."""
    dims = DotDims.of(dot)
    lhs, rhs = (o.shape for o in dot.operands)
    k = math.prod(lhs.dimensions[d] for d in dims.lhs_contracting)
    m = math.prod(lhs.dimensions[d] for d in non_contracting_dims(lhs.rank, dims.lhs_batch, dims.lhs_contracting))
    n = math.prod(rhs.dimensions[d] for d in non_contracting_dims(rhs.rank, dims.rhs_batch, dims.rhs_contracting))
    return m, n, k


def too_small_for_rewriting(dot: Instruction, threshold: int) -> bool:
    m, n, k = matmul_sizes(dot)
    return (m + n) * k < threshold


def supported_by_classical_emitters(dot: Instruction) -> bool:
    if algorithm(dot) not in ELEMENTAL_ALGORITHMS:
        return False
    return dot.shape.element_type in ("f16", "f32", "bf16")


# ---------------------------------------------------------------------------
# MatrixLayout
# ---------------------------------------------------------------------------


@dataclass
class MatrixLayout:
    order: str  # "row" or "col"
    batch: int
    rows: int
    cols: int


def batch_row_col(shape: Shape, batch: Sequence[int], rows: Sequence[int],
                  cols: Sequence[int]) -> tuple[tuple[int, int, int], tuple[int, ...]] | None:
    """``GetBatchRowColumnShape``: ((batch, rows, cols), minor_to_major of
    that 3-d shape), or None when a group is not physically contiguous."""
    m2m = shape.minor_to_major
    out: list[int] = []
    i = 0
    while i < len(m2m):
        dim = m2m[i]
        if rows and dim == rows[-1]:
            out.append(1)
            group = rows
        elif cols and dim == cols[-1]:
            out.append(2)
            group = cols
        elif batch and dim == batch[-1]:
            out.append(0)
            group = batch
        else:
            return None
        for d in reversed(group):
            if i >= len(m2m) or m2m[i] != d:
                return None
            i += 1
    if not cols:
        out.append(2)
    if not rows:
        out.append(1)
    if not batch:
        out.append(0)
    size = lambda ds: math.prod(shape.dimensions[d] for d in ds)  # noqa: E731
    return (size(batch), size(rows), size(cols)), tuple(out)


def matrix_layout(shape: Shape, batch: Sequence[int], rows: Sequence[int],
                  cols: Sequence[int]) -> MatrixLayout | None:
    """``MatrixLayout::For``; None where XLA returns an error."""
    got = batch_row_col(shape, batch, rows, cols)
    if got is None:
        return None
    (b, r, c), m2m = got
    code = 64 * m2m[2] + 8 * m2m[1] + m2m[0]
    if code == 0o12:
        order = "row"
    elif code == 0o21:
        order = "row" if c == 1 else "col"
    elif code == 0o102:
        order = "row"
    elif code == 0o201:
        order = "col"
    else:
        return None
    return MatrixLayout(order, b, r, c)


def operand_layouts(lhs: Shape, rhs: Shape, dims: DotDims) -> tuple[MatrixLayout | None, MatrixLayout | None]:
    lhs_rows = non_contracting_dims(lhs.rank, dims.lhs_batch, dims.lhs_contracting)
    rhs_cols = non_contracting_dims(rhs.rank, dims.rhs_batch, dims.rhs_contracting)
    return (matrix_layout(lhs, dims.lhs_batch, lhs_rows, dims.lhs_contracting),
            matrix_layout(rhs, dims.rhs_batch, dims.rhs_contracting, rhs_cols))


# ---------------------------------------------------------------------------
# NormalizeBatchDimensions
# ---------------------------------------------------------------------------


def _move_single_element(perm: list[int], src: int, dst: int) -> None:
    v = perm.pop(src)
    perm.insert(dst, v)


def normalize_batch_dimensions(dot: Instruction) -> Instruction | None:
    """Dots with two batch dimensions get them made adjacent (transpose)
    and collapsed into one (reshape) on each operand; returns the reshape
    that replaces ``dot`` (its operand is the new dot), or None when there
    is nothing to do."""
    dims = DotDims.of(dot)
    if len(dims.lhs_batch) != 2:
        return None
    comp = dot.parent
    new_ops = []
    side_dims: list[tuple[list[int], list[int]]] = []
    for side in (0, 1):
        operand = dot.operands[side]
        batch = list(dims.lhs_batch if side == 0 else dims.rhs_batch)
        contracting = list(dims.lhs_contracting if side == 0 else dims.rhs_contracting)
        shape = operand.shape
        b0, b1 = batch
        if b1 != b0 + 1:
            perm = list(range(shape.rank))
            _move_single_element(perm, b1, b0 if b1 < b0 else b0 + 1)
            shape = H.permute_dims_keep_layout(shape, perm, None)
            operand = H.transpose(comp, operand, perm, shape)
            inv = [0] * len(perm)
            for i, p in enumerate(perm):
                inv[p] = i
            batch = [inv[d] for d in batch]
            contracting = [inv[d] for d in contracting]
        if batch != sorted(batch) or batch[1] != batch[0] + 1:
            return None  # XLA: "non-sorted or non-consecutive dimensions"
        lo, hi = batch
        dims_list = list(shape.dimensions)
        dims_list[lo] = dims_list[lo] * dims_list[hi]
        del dims_list[hi]
        contracting = [d - 1 if d > hi else d for d in contracting]
        new_ops.append(H.reshape(comp, operand, Shape.array(shape.element_type, dims_list)))
        side_dims.append(([lo], contracting))
    new_dims = DotDims(side_dims[0][0], side_dims[0][1], side_dims[1][0], side_dims[1][1])
    lhs, rhs = new_ops
    out_dims = [lhs.shape.dimensions[new_dims.lhs_batch[0]]]
    out_dims += [lhs.shape.dimensions[d] for d in non_contracting_dims(lhs.shape.rank, new_dims.lhs_batch, new_dims.lhs_contracting)]
    out_dims += [rhs.shape.dimensions[d] for d in non_contracting_dims(rhs.shape.rank, new_dims.rhs_batch, new_dims.rhs_contracting)]
    attrs = {}
    new_dot = H.add(comp, "dot", Shape.array(dot.shape.element_type, out_dims), [lhs, rhs], attrs,
                    metadata=dot.attrs.get("metadata"))
    new_dims.set_on(new_dot)
    for key in ("operand_precision", "algorithm"):
        if key in dot.attrs:
            new_dot.attrs[key] = dot.attrs[key]
    return H.reshape(comp, new_dot, dot.shape)
