"""dot through numpy's BLAS (``matmul``); convolution is in :mod:`.conv`.

dot: operands are transposed to (batch, free, contracting) / (batch,
contracting, free), reshaped to 3-D and multiplied; the result is in XLA's
order (batch dims, lhs free dims, rhs free dims).  Narrow floats (bf16, f16,
fp8) accumulate in f32 as XLA:GPU does (the preferred element type, i.e.
the result type, is applied once at the end); f64 in f64; integers in int64
then wrap to the result type.
"""

from __future__ import annotations

import numpy as np

from .dtypes import cast_result, is_float_dtype
from .registry import EvaluationError, handler


def accumulation_dtype(*arrays: np.ndarray) -> np.dtype:
    kinds = [a.dtype for a in arrays]
    if any(d.kind == "c" for d in kinds):
        return np.dtype(np.complex128 if any(d == np.complex128 for d in kinds) else np.complex64)
    if any(is_float_dtype(d) for d in kinds):
        return np.dtype(np.float64 if any(d == np.float64 for d in kinds) else np.float32)
    return np.dtype(np.int64)


def dot_general(lhs: np.ndarray, rhs: np.ndarray, lb, lc, rb, rc) -> np.ndarray:
    """The dot in the accumulation dtype, result dims (batch, lhs free, rhs free)."""
    lb, lc, rb, rc = list(lb), list(lc), list(rb), list(rc)
    if len(lb) != len(rb) or len(lc) != len(rc):
        raise EvaluationError("dot has mismatched batch or contracting dimensions")
    lf = [d for d in range(lhs.ndim) if d not in lb and d not in lc]
    rf = [d for d in range(rhs.ndim) if d not in rb and d not in rc]
    acc = accumulation_dtype(lhs, rhs)
    bshape = [lhs.shape[d] for d in lb]
    mshape = [lhs.shape[d] for d in lf]
    nshape = [rhs.shape[d] for d in rf]
    kshape = [lhs.shape[d] for d in lc]
    if [rhs.shape[d] for d in rc] != kshape or [rhs.shape[d] for d in rb] != bshape:
        raise EvaluationError("dot operand dimensions do not match")
    B = int(np.prod(bshape, dtype=np.int64))
    M = int(np.prod(mshape, dtype=np.int64))
    N = int(np.prod(nshape, dtype=np.int64))
    K = int(np.prod(kshape, dtype=np.int64))
    a = _matrices(np.transpose(lhs, lb + lf + lc), len(lb), len(lf), (B, M, K), acc)
    b = _matrices(np.transpose(rhs, rb + rc + rf), len(rb), len(rc), (B, K, N), acc)
    with np.errstate(all="ignore"):
        if B == 1:  # one GEMM: BLAS takes a transposed matrix as a flag, no copy
            out = np.matmul(a[0], b[0])
        else:
            out = np.matmul(a, b)
    return out.reshape(bshape + mshape + nshape)


def _matrices(view: np.ndarray, nbatch: int, nrows: int, shape3: tuple[int, int, int],
              acc: np.dtype) -> np.ndarray:
    """The transposed operand ``view`` (batch dims, row dims, column dims)
    as (batch, rows, cols) matrices in the accumulation type, laid out for
    BLAS, in at most one pass over memory: a view (converted in its memory
    order) when the layout allows, else one copy that converts and reorders
    together.  The copy is row-major, or column-major when the source's
    minor-most dimension is a row dimension (so it reads memory in order:
    a K-minor rhs becomes a transposed (N, K) matrix, not a gathered (K, N))."""
    try:
        x = np.reshape(view, shape3, copy=False)
    except ValueError:  # the transposed dimensions do not merge into matrices
        x = None
    if x is not None and (acc.kind not in "fc" or _blas_layout(x)):
        return x.astype(acc, order="K", copy=False)
    strides = [abs(st) if n > 1 else np.inf for st, n in zip(view.strides, view.shape)]
    rows, cols = strides[nbatch:nbatch + nrows], strides[nbatch + nrows:]
    if rows and cols and min(rows) < min(cols):  # column-major copy
        b, r, c = shape3
        perm = list(range(nbatch)) + list(range(nbatch + nrows, view.ndim)) + \
            list(range(nbatch, nbatch + nrows))
        return np.ascontiguousarray(np.transpose(view, perm), dtype=acc).reshape(b, c, r) \
            .swapaxes(1, 2)
    return np.ascontiguousarray(view, dtype=acc).reshape(shape3)


def _blas_layout(x: np.ndarray) -> bool:
    """Whether numpy's matmul hands each matrix of ``x`` (batch, rows, cols)
    to BLAS as laid out: row- or column-major with unit stride along one
    axis (BLAS takes the transpose as a flag; numpy checks each operand for
    both).  Other strides (a gathered view) run numpy's loop without BLAS,
    up to 250x slower, so those are copied once."""
    item = x.itemsize
    _, s1, s2 = x.strides
    rows, cols = x.shape[1], x.shape[2]
    if rows <= 1 or cols <= 1:
        return (s1 == item or rows == 1) and (s2 == item or cols == 1) or x.size <= 1
    row_major = s2 == item and s1 % item == 0 and s1 // item >= cols
    col_major = s1 == item and s2 % item == 0 and s2 // item >= rows
    return row_major or col_major


def _round_bf16(x: np.ndarray) -> np.ndarray:
    import ml_dtypes
    return x.astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


def _round_tf32(x: np.ndarray) -> np.ndarray:
    """f32 -> TF32 (10 mantissa bits), round to nearest, ties away from zero
    (the tensor cores' cvt.rna.tf32.f32)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    finite = (u & np.uint32(0x7F800000)) != np.uint32(0x7F800000)
    r = np.where(finite, (u + np.uint32(0x1000)) & np.uint32(0xFFFFE000), u)
    return r.astype(np.uint32).view(np.float32)


def _trunc_tf32(x: np.ndarray) -> np.ndarray:
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return (u & np.uint32(0xFFFFE000)).view(np.float32)


def _splits(x: np.ndarray, parts: int, kind: str) -> list[np.ndarray]:
    """x = sum of ``parts`` lower-precision pieces (bf16 by rounding, as
    XLA's algorithm expansion; tf32 by truncating the mantissa)."""
    out = []
    rest = np.asarray(x, dtype=np.float32)
    for _ in range(parts):
        piece = _round_bf16(rest) if kind == "bf16" else _trunc_tf32(rest)
        out.append(piece)
        with np.errstate(all="ignore"):
            rest = rest - piece
    return out


#: algorithm -> (operand format, pieces per operand, products kept: i + j < n)
_ALGORITHMS = {
    "dot_bf16_bf16_f32": ("bf16", 1, 1), "dot_bf16_bf16_f32_x3": ("bf16", 2, 2),
    "dot_bf16_bf16_f32_x6": ("bf16", 3, 3), "dot_bf16_bf16_f32_x9": ("bf16", 3, 5),
    "dot_tf32_tf32_f32": ("tf32", 1, 1), "dot_tf32_tf32_f32_x3": ("tf32", 2, 2),
}


def _algorithm_dot(lhs, rhs, dims, algorithm: str) -> np.ndarray | None:
    """The dot as ``algorithm`` computes it (operands rounded to bf16, f16
    or TF32, or split into pieces whose cross products are summed, like
    XLA's dot-algorithm expansion), or None for algorithms that are plain
    f32 (or narrower-operand) dots here."""
    if algorithm == "dot_f16_f16_f32":
        return dot_general(lhs.astype(np.float32).astype(np.float16), rhs.astype(np.float32)
                           .astype(np.float16), *dims)
    spec = _ALGORITHMS.get(algorithm)
    if spec is None or lhs.dtype.kind == "c":
        return None
    kind, parts, order = spec
    if parts == 1:
        r = _round_bf16 if kind == "bf16" else _round_tf32
        return dot_general(r(lhs), r(rhs), *dims)
    ls, rs = _splits(lhs, parts, kind), _splits(rhs, parts, kind)
    out = None
    # smallest terms first, as the expansion adds them
    for i, j in sorted(((i, j) for i in range(parts) for j in range(parts) if i + j < order),
                       key=lambda t: -(t[0] + t[1])):
        term = dot_general(ls[i], rs[j], *dims)
        out = term if out is None else out + term
    return out


@handler("dot")
def _dot(ev, instr, ops):
    lhs, rhs = ops
    if "sparsity" in instr.attrs:
        raise EvaluationError("sparse dot is not supported by the evaluator")
    dims = (instr.int_list("lhs_batch_dims"), instr.int_list("lhs_contracting_dims"),
            instr.int_list("rhs_batch_dims"), instr.int_list("rhs_contracting_dims"))
    out = None
    alg = instr.attrs.get("algorithm")
    if alg and is_float_dtype(lhs.dtype) and is_float_dtype(rhs.dtype):
        with np.errstate(all="ignore"):
            out = _algorithm_dot(lhs, rhs, dims, str(alg).lower())
    if out is None:
        out = dot_general(lhs, rhs, *dims)
    return cast_result(out, instr.shape.element_type)
