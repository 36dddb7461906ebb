"""Less common opcodes with a direct numpy form: batch-norm-training /
-inference / -grad (XLA's BatchNormExpander formulas), fft, topk, cholesky.
"""

from __future__ import annotations

import numpy as np

from .dtypes import cast_result, widen
from .registry import EvaluationError, handler


def _bn_parts(instr, x):
    f = instr.int_attr("feature_index")
    eps = float(instr.attrs["epsilon"])
    axes = tuple(d for d in range(x.ndim) if d != f)
    shape = [1] * x.ndim
    shape[f] = x.shape[f]
    return f, eps, axes, shape


def _wide(x):
    w = widen(x)
    return w.astype(np.float64) if w.dtype == np.float32 else w


@handler("batch-norm-training")
def _bn_training(ev, instr, ops):
    x, scale, offset = (_wide(o) for o in ops)
    _, eps, axes, shape = _bn_parts(instr, x)
    mean = x.mean(axis=axes)
    var = np.maximum((x * x).mean(axis=axes) - mean * mean, 0.0)  # E[X^2] - E[X]^2
    y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) * scale.reshape(shape) \
        + offset.reshape(shape)
    ts = [s.element_type for s in instr.shape.tuple_shapes]
    return (cast_result(y, ts[0]), cast_result(mean, ts[1]), cast_result(var, ts[2]))


@handler("batch-norm-inference")
def _bn_inference(ev, instr, ops):
    x, scale, offset, mean, var = (_wide(o) for o in ops)
    _, eps, _, shape = _bn_parts(instr, x)
    y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) * scale.reshape(shape) \
        + offset.reshape(shape)
    return cast_result(y, instr.shape.element_type)


@handler("batch-norm-grad")
def _bn_grad(ev, instr, ops):
    x, scale, mean, var, gy = (_wide(o) for o in ops)
    _, eps, axes, shape = _bn_parts(instr, x)
    n = x.size // max(1, x.shape[instr.int_attr("feature_index")])
    xm = x - mean.reshape(shape)
    rstd = 1.0 / np.sqrt(var + eps)
    sum_gy = gy.sum(axis=axes)
    sum_gy_xm = (gy * xm).sum(axis=axes)
    grad_scale = sum_gy_xm * rstd
    gx = (scale * rstd / n).reshape(shape) * (
        gy * n - sum_gy.reshape(shape) - xm * sum_gy_xm.reshape(shape) / (var.reshape(shape) + eps))
    ts = [s.element_type for s in instr.shape.tuple_shapes]
    return (cast_result(gx, ts[0]), cast_result(grad_scale, ts[1]), cast_result(sum_gy, ts[2]))


@handler("fft")
def _fft(ev, instr, ops):
    x = ops[0]
    kind = instr.attrs.get("fft_type")
    lengths = list(instr.int_list("fft_length"))
    axes = tuple(range(x.ndim - len(lengths), x.ndim))
    if kind == "FFT":
        out = np.fft.fftn(x, s=lengths, axes=axes)
    elif kind == "IFFT":
        out = np.fft.ifftn(x, s=lengths, axes=axes)
    elif kind == "RFFT":
        out = np.fft.rfftn(widen(x), s=lengths, axes=axes)
    elif kind == "IRFFT":
        out = np.fft.irfftn(x, s=lengths, axes=axes)
    else:
        raise EvaluationError(f"unknown fft_type {kind}")
    return cast_result(out, instr.shape.element_type if not instr.shape.is_tuple else "c64")


@handler("topk")
def _topk(ev, instr, ops):
    x = ops[0]
    k = instr.int_attr("k")
    largest = instr.attrs.get("largest", "true") != "false"
    from .dtypes import is_float_dtype, total_order_key
    key = total_order_key(x, instr.operands[0].shape.element_type) if is_float_dtype(x.dtype) \
        else widen(x).astype(np.int64)
    idx = np.argsort(-key if largest else key, axis=-1, kind="stable")[..., :k]
    vals = np.take_along_axis(x, idx, axis=-1)
    ts = [s.element_type for s in instr.shape.tuple_shapes]
    return (vals, cast_result(idx, ts[1]))


@handler("cholesky")
def _cholesky(ev, instr, ops):
    a = _wide(ops[0])
    lower = instr.attrs.get("lower", "false") == "true"
    # XLA reads only the named triangle; the result's other triangle is
    # unspecified (we leave it zero); a non-positive-definite input gives NaN.
    tri = np.tril(a) if lower else np.triu(a)
    diag = np.diagonal(a, axis1=-2, axis2=-1)
    sym = tri + np.swapaxes(tri.conj(), -1, -2) - np.apply_along_axis(np.diag, -1, diag)
    try:
        low = np.linalg.cholesky(sym)
    except np.linalg.LinAlgError:
        low = np.full(a.shape, np.nan, dtype=a.dtype)
    out = low if lower else np.swapaxes(low.conj(), -1, -2)
    return cast_result(out, instr.shape.element_type)
