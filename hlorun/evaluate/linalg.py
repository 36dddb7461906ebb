"""dot and convolution through numpy's BLAS (``matmul``).

dot: operands are transposed to (batch, free, contracting) / (batch,
contracting, free), reshaped to 3-D and multiplied; the result is in XLA's
order (batch dims, lhs free dims, rhs free dims).  Narrow floats (bf16, f16,
fp8) accumulate in f32 as XLA:GPU does (the preferred element type, i.e.
the result type, is applied once at the end); f64 in f64; integers in int64
then wrap to the result type.

convolution: any ``dim_labels``, padding (negative too), strides, lhs
(base) and rhs (window) dilation, window reversal, ``feature_group_count``
and ``batch_group_count``.  The padded input is viewed as sliding windows
(no copy), gathered once into an im2col matrix and multiplied per group.
Integer convolutions saturate to the result type (XLA's evaluator).
"""

from __future__ import annotations

import numpy as np

from ..ir.attrs import parse_dim_labels, parse_window
from .dtypes import cast_result, int_range, is_float_dtype
from .registry import EvaluationError, handler
from .shapes import pad_array


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
    # Transposes stay views and conversions keep the memory order (order="K"),
    # so BLAS reads a transposed operand in place instead of a copy.
    a = _blas_ready(np.transpose(lhs, lb + lf + lc).astype(acc, order="K", copy=False)
                    .reshape(B, M, K))
    b = _blas_ready(np.transpose(rhs, rb + rc + rf).astype(acc, order="K", copy=False)
                    .reshape(B, K, N))
    with np.errstate(all="ignore"):
        if B == 1:  # one GEMM: BLAS takes a transposed matrix as a flag, no copy
            out = np.matmul(a[0], b[0])
        else:
            out = np.matmul(a, b)
    return out.reshape(bshape + mshape + nshape)


def _blas_ready(x: np.ndarray) -> np.ndarray:
    """``x`` (batch, rows, cols) laid out so that numpy's matmul hands each
    matrix to BLAS.  One matrix (batch 1) may be row- or column-major (BLAS
    takes the transpose as a flag); a batch must be row-major matrices:
    numpy's batched loop runs other strides (a transposed or sliced view)
    without BLAS, up to 250x slower (a [16,128,64] column-major batch:
    0.1 s instead of 0.4 ms), so those are copied once."""
    if x.dtype.kind not in "fc":
        return x
    item = x.itemsize
    s0, s1, s2 = x.strides
    rows, cols = x.shape[1], x.shape[2]
    row_major = (s2 == item or cols == 1) and (s1 == cols * item or rows == 1)
    col_major = (s1 == item or rows == 1) and (s2 == rows * item or cols == 1)
    if row_major or (col_major and x.shape[0] == 1):
        return x
    return np.ascontiguousarray(x)


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


def conv_window(instr, spatial_rank: int):
    text = instr.attrs.get("window")
    window = parse_window(text) if text else ()
    if not window and spatial_rank:
        raise EvaluationError("convolution without a window")
    if len(window) != spatial_rank:
        raise EvaluationError(f"window has {len(window)} dimensions, expected {spatial_rank}")
    return window


def convolution(lhs: np.ndarray, rhs: np.ndarray, dnums, window, feature_group_count: int = 1,
                batch_group_count: int = 1) -> np.ndarray:
    """Convolution in the accumulation dtype, result in ``dnums``' output order."""
    acc = accumulation_dtype(lhs, rhs)
    isp, ksp, osp = list(dnums.input_spatial), list(dnums.kernel_spatial), list(dnums.output_spatial)
    nsp = len(isp)
    x = np.transpose(lhs, [dnums.input_batch, dnums.input_feature] + isp).astype(acc, copy=False)
    w = np.transpose(rhs, [dnums.kernel_output_feature, dnums.kernel_input_feature] + ksp
                     ).astype(acc, copy=False)
    flips = [2 + i for i, wd in enumerate(window) if wd.window_reversal]
    if flips:
        w = np.flip(w, axis=flips)
    config = [(0, 0, 0), (0, 0, 0)] + [(wd.padding_low, wd.padding_high, wd.base_dilation - 1)
                                       for wd in window]
    x = pad_array(x, np.zeros((), acc), config)
    nb, c = x.shape[:2]
    o, ci = w.shape[:2]
    ksizes = w.shape[2:]
    ext = [(k - 1) * wd.window_dilation + 1 for k, wd in zip(ksizes, window)]
    outsp = [max(0, (s - e) // wd.stride + 1) if s >= e else 0
             for s, e, wd in zip(x.shape[2:], ext, window)]
    G, BG = feature_group_count, batch_group_count
    if c != ci * G or o % G or o % BG or nb % BG:
        raise EvaluationError(f"convolution features do not match: input {c}, kernel input {ci}, "
                              f"output {o}, feature_group_count {G}, batch_group_count {BG}")
    n_out = nb // BG
    if any(s == 0 for s in outsp) or n_out == 0 or o == 0:
        out = np.zeros([n_out, o] + outsp, dtype=acc)
    else:
        v = np.lib.stride_tricks.sliding_window_view(x, ext, axis=tuple(range(2, 2 + nsp)))
        sl = (slice(None), slice(None)) + tuple(slice(None, None, wd.stride) for wd in window) + \
            tuple(slice(None, None, wd.window_dilation) for wd in window)
        v = v[sl]  # (N, C, out..., k...)
        P = int(np.prod(outsp))
        Kp = int(np.prod(ksizes))
        # groups: (BG, Nb, G, Ci, out..., k...) -> (BG, G, Nb*P, Ci*K)
        v = v.reshape((BG, n_out, G, ci) + tuple(outsp) + tuple(ksizes))
        perm = [0, 2, 1] + list(range(4, 4 + nsp)) + [3] + list(range(4 + nsp, 4 + 2 * nsp))
        cols = np.transpose(v, perm).reshape(BG, G, n_out * P, ci * Kp)
        # kernel: (O, Ci, k...) -> O = (BG, G, Og) in XLA's order for each count
        og = o // (G * BG)
        if BG > 1:
            wk = w.reshape(BG, 1, og, ci * Kp)
        else:
            wk = w.reshape(1, G, og, ci * Kp)
        with np.errstate(all="ignore"):
            res = np.matmul(cols, np.swapaxes(wk, -1, -2))  # (BG, G, Nb*P, Og)
        res = res.reshape((BG, G, n_out) + tuple(outsp) + (og,))
        # -> (Nb, BG, G, Og, out...)
        res = np.moveaxis(res, [0, 1, 2, 3 + nsp], [1, 2, 0, 3])
        out = res.reshape([n_out, o] + outsp)
    # to the output layout of dim_labels
    rank = 2 + nsp
    order = [0] * rank
    order[dnums.output_batch] = 0
    order[dnums.output_feature] = 1
    for i, d in enumerate(osp):
        order[d] = 2 + i
    return np.transpose(out, order)


@handler("convolution")
def _convolution(ev, instr, ops):
    lhs, rhs = ops
    dnums = parse_dim_labels(instr.attrs["dim_labels"])
    window = conv_window(instr, len(dnums.input_spatial))
    out = convolution(lhs, rhs, dnums, window, instr.int_attr("feature_group_count", 1),
                      instr.int_attr("batch_group_count", 1))
    et = instr.shape.element_type
    if out.dtype.kind == "i":
        lo, hi = int_range(et)
        out = np.clip(out, lo, hi)
    return cast_result(out, et)
