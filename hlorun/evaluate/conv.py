"""convolution through numpy's BLAS (``matmul``) on an im2col matrix.

Any ``dim_labels``, padding (negative too), strides, lhs (base) and rhs
(window) dilation, window reversal, ``feature_group_count`` and
``batch_group_count``.  Narrow floats accumulate in f32, integers in int64
and saturate to the result type (XLA's evaluator).

The padded input is viewed as sliding windows (no copy) and gathered once
into an im2col matrix, in the input's own memory order so that the gather
reads runs of contiguous values:

* channels-minor inputs (NHWC, ``b01f``): rows are output positions,
  columns (kernel position, channel) with the channels innermost;
  ``cols (N*P, k*Ci) @ kernel (k*Ci, O)`` gives a channels-last result;
* spatial-minor inputs (NCHW, ``bf01``): rows are (channel, kernel
  position), columns output positions with the last spatial dimension
  innermost; ``kernel (O, Ci*k) @ cols (Ci*k, P)`` per batch element gives
  a channels-first result.

The result is then viewed in the output's ``dim_labels`` order (no copy).
"""

from __future__ import annotations

import numpy as np

from ..ir.attrs import parse_dim_labels, parse_window
from .dtypes import cast_result, int_range
from .linalg import accumulation_dtype
from .registry import EvaluationError, handler
from .shapes import pad_array


def conv_window(instr, spatial_rank: int):
    text = instr.attrs.get("window")
    window = parse_window(text) if text else ()
    if not window and spatial_rank:
        raise EvaluationError("convolution without a window")
    if len(window) != spatial_rank:
        raise EvaluationError(f"window has {len(window)} dimensions, expected {spatial_rank}")
    return window


def _channels_minor(x: np.ndarray, dnums) -> bool:
    """Whether the input's feature dimension is laid out innermost of the
    feature and spatial dimensions (NHWC-like memory)."""
    st = [abs(x.strides[d]) if x.shape[d] > 1 else np.inf for d in dnums.input_spatial]
    f = abs(x.strides[dnums.input_feature]) if x.shape[dnums.input_feature] > 1 else np.inf
    return not st or f <= min(st)


def _padded(x: np.ndarray, spatial_axes: list[int], window, acc: np.dtype) -> np.ndarray:
    """``x`` padded and base-dilated along ``spatial_axes`` per ``window``;
    one zeroed buffer and one copy when the padding is non-negative and
    there is no base dilation (``pad_array`` otherwise)."""
    config = [(0, 0, 0)] * x.ndim
    for ax, wd in zip(spatial_axes, window):
        config[ax] = (wd.padding_low, wd.padding_high, wd.base_dilation - 1)
    if any(i or lo < 0 or hi < 0 for lo, hi, i in config):
        return pad_array(x, np.zeros((), acc), config)
    if not any(lo or hi for lo, hi, _ in config):
        return x
    buf = np.zeros([n + lo + hi for n, (lo, hi, _) in zip(x.shape, config)], dtype=acc)
    buf[tuple(slice(lo, lo + n) for n, (lo, _, _) in zip(x.shape, config))] = x
    return buf


def convolution(lhs: np.ndarray, rhs: np.ndarray, dnums, window, feature_group_count: int = 1,
                batch_group_count: int = 1) -> np.ndarray:
    """Convolution in the accumulation dtype, result in ``dnums``' output order."""
    acc = accumulation_dtype(lhs, rhs)
    isp, ksp, osp = list(dnums.input_spatial), list(dnums.kernel_spatial), list(dnums.output_spatial)
    nsp = len(isp)
    last = _channels_minor(lhs, dnums)
    # converted in memory order first (a strided narrow-float cast is slow)
    xc = lhs.astype(acc, order="K", copy=False)
    if last:  # (N, spatial..., C)
        x = _padded(np.transpose(xc, [dnums.input_batch] + isp + [dnums.input_feature]),
                    list(range(1, 1 + nsp)), window, acc)
        sp_axes, nb, c = list(range(1, 1 + nsp)), x.shape[0], x.shape[-1]
    else:  # (N, C, spatial...)
        x = _padded(np.transpose(xc, [dnums.input_batch, dnums.input_feature] + isp),
                    list(range(2, 2 + nsp)), window, acc)
        sp_axes, nb, c = list(range(2, 2 + nsp)), x.shape[0], x.shape[1]
    w = np.transpose(rhs, [dnums.kernel_output_feature, dnums.kernel_input_feature] + ksp
                     ).astype(acc, copy=False)  # (O, Ci, k...)
    flips = [2 + i for i, wd in enumerate(window) if wd.window_reversal]
    if flips:
        w = np.flip(w, axis=flips)
    o, ci = w.shape[:2]
    ksizes = w.shape[2:]
    ext = [(k - 1) * wd.window_dilation + 1 for k, wd in zip(ksizes, window)]
    outsp = [max(0, (x.shape[ax] - e) // wd.stride + 1) if x.shape[ax] >= e else 0
             for ax, e, wd in zip(sp_axes, ext, window)]
    G, BG = feature_group_count, batch_group_count
    if c != ci * G or o % G or o % BG or nb % BG:
        raise EvaluationError(f"convolution features do not match: input {c}, kernel input {ci}, "
                              f"output {o}, feature_group_count {G}, batch_group_count {BG}")
    n_out = nb // BG
    og = o // (G * BG)
    empty = any(s == 0 for s in outsp) or n_out == 0 or o == 0
    P, Kp = int(np.prod(outsp)), int(np.prod(ksizes))
    if not empty:
        v = np.lib.stride_tricks.sliding_window_view(x, ext, axis=tuple(sp_axes))
        strided = tuple(slice(None, None, wd.stride) for wd in window)
        dilated = tuple(slice(None, None, wd.window_dilation) for wd in window)
    if empty:
        out = np.zeros([n_out] + outsp + [o] if last else [n_out, o] + outsp, dtype=acc)
    elif G == 1 and BG == 1 and nsp:
        out = _chunked(v, w, strided, dilated, last, outsp, acc)
    elif last:
        v = v[(slice(None),) + strided + (slice(None),) + dilated]  # (N, out..., C, k...)
        v = v.reshape((BG, n_out) + tuple(outsp) + (G, ci) + tuple(ksizes))
        # -> (BG, G, n_out, out..., k..., Ci): one gather, channels innermost
        perm = [0, 2 + nsp, 1] + list(range(2, 2 + nsp)) + \
            list(range(4 + nsp, 4 + 2 * nsp)) + [3 + nsp]
        cols = np.transpose(v, perm).reshape(BG, G, n_out * P, Kp * ci)
        wk = np.moveaxis(w, 1, -1).reshape(o, Kp * ci)  # rows (k..., Ci) like cols
        wk = wk.reshape(BG, 1, og, Kp * ci) if BG > 1 else wk.reshape(1, G, og, Kp * ci)
        with np.errstate(all="ignore"):
            res = np.matmul(cols, np.swapaxes(wk, -1, -2))  # (BG, G, n_out*P, Og)
        res = res.reshape((BG, G, n_out) + tuple(outsp) + (og,))
        # -> (n_out, out..., BG, G, Og): O = (BG, G, Og) in XLA's order
        out = np.moveaxis(res, [0, 1], [1 + nsp, 2 + nsp]).reshape([n_out] + outsp + [o])
    else:
        v = v[(slice(None), slice(None)) + strided + dilated]  # (N, C, out..., k...)
        v = v.reshape((BG, n_out, G, ci) + tuple(outsp) + tuple(ksizes))
        # -> (BG, G, n_out, Ci, k..., out...): one gather, last spatial dim innermost
        perm = [0, 2, 1, 3] + list(range(4 + nsp, 4 + 2 * nsp)) + list(range(4, 4 + nsp))
        cols = np.transpose(v, perm).reshape(BG, G, n_out, ci * Kp, P)
        wk = w.reshape(o, ci * Kp)
        wk = wk.reshape(BG, 1, 1, og, ci * Kp) if BG > 1 else wk.reshape(1, G, 1, og, ci * Kp)
        with np.errstate(all="ignore"):
            res = np.matmul(wk, cols)  # (BG, G, n_out, Og, P)
        # -> (n_out, BG, G, Og, out...)
        out = np.moveaxis(res, 2, 0).reshape([n_out, o] + outsp)
    order = [0] * (2 + nsp)
    order[dnums.output_batch] = 0
    if last:  # (N, out..., O)
        order[dnums.output_feature] = 1 + nsp
        for i, d in enumerate(osp):
            order[d] = 1 + i
    else:  # (N, O, out...)
        order[dnums.output_feature] = 1
        for i, d in enumerate(osp):
            order[d] = 2 + i
    return np.transpose(out, order)


#: bytes of im2col matrix per GEMM in the ungrouped path: a chunk stays in
#: cache between the gather and BLAS (1 MiB: 30% faster than one big matrix
#: that goes through main memory, on a 3x3, 64-channel, 56x56 f32 convolution)
CHUNK_BYTES = 1 << 20


def _chunked(v, w, strided, dilated, last: bool, outsp: list[int], acc) -> np.ndarray:
    """Ungrouped convolution as a loop of cache-sized im2col GEMMs over
    (batch element, block of the first output spatial dimension)."""
    nsp = len(outsp)
    o, ci = w.shape[:2]
    kp = int(np.prod(w.shape[2:]))
    n = v.shape[0]
    row = int(np.prod(outsp[1:], dtype=np.int64))  # output positions per first-dim index
    block = max(1, CHUNK_BYTES // max(1, row * kp * ci * np.dtype(acc).itemsize))
    if last:
        v = v[(slice(None),) + strided + (slice(None),) + dilated]  # (N, out..., C, k...)
        perm = [0] + list(range(1, 1 + nsp)) + list(range(2 + nsp, 2 + 2 * nsp)) + [1 + nsp]
        v = np.transpose(v, perm)  # (N, out..., k..., C): channels innermost
        wt = np.moveaxis(w, 1, -1).reshape(o, kp * ci).T  # (k...*Ci, O)
        out = np.empty([n] + outsp + [o], dtype=acc)
        with np.errstate(all="ignore"):
            for b in range(n):
                for h in range(0, outsp[0], block):
                    cols = v[b, h:h + block].reshape(-1, kp * ci)
                    np.matmul(cols, wt, out=out[b, h:h + block].reshape(-1, o))
        return out
    v = v[(slice(None), slice(None)) + strided + dilated]  # (N, C, out..., k...)
    perm = [0, 1] + list(range(2 + nsp, 2 + 2 * nsp)) + list(range(2, 2 + nsp))
    v = np.transpose(v, perm)  # (N, C, k..., out...): last spatial dimension innermost
    wk = w.reshape(o, ci * kp)
    out = np.empty([n, o] + outsp, dtype=acc)
    with np.errstate(all="ignore"):
        for b in range(n):
            for h in range(0, outsp[0], block):
                hb = min(block, outsp[0] - h)
                cols = v[(b, slice(None)) + (slice(None),) * nsp + (slice(h, h + hb),)]
                cols = cols.reshape(ci * kp, hb * row)
                out[b, :, h:h + hb] = np.matmul(wk, cols).reshape([o, hb] + outsp[1:])
    return out


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
