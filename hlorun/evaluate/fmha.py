"""cuDNN fused multi-head attention: the ``__cudnn$fmha*`` custom calls that
JAX's ``dot_product_attention(implementation="cudnn")`` lowers to (and
XLA's fused-MHA rewriter creates), with the operand and result lists of
JAX's lowering (``jax/_src/cudnn/fused_attention_stablehlo.py``) and the
``cudnn_fmha_backend_config`` of XLA's ``backend_configs.proto``.

Forward (``__cudnn$fmhaSoftmax``, ``...ScaleBiasSoftmax``, and the
``...Dropout`` variants with ``dropout_rate`` 0)::

    operands  Q, K, V, [bias], [q_seqlen, kv_seqlen]
    results   (O, [stats f32[B,N,T]], workspace u8)

    s     = fmha_scale * Q.K  (+ bias)       bmm1_dot_dimension_numbers
    s     = masked(s)                        mask_type, sliding_window_length
    stats = logsumexp(s) over the keys       (only when the call is training)
    P     = softmax(s), rounded to the operand type
    O     = P.V                              bmm2_dot_dimension_numbers

Backward (``__cudnn$fmhaSoftmaxBackward`` and its siblings)::

    operands  Q, K, V, stats, dO, [bias], O, [q_seqlen, kv_seqlen]
    results   (dQ, dK, dV, [dbias], workspace u8)

    P  = exp(masked(s) - stats)              (recomputed from the given stats)
    dV = P^T.dO          dP = dO.V^T         D = rowsum(dO * O)
    dS = P * (dP - D), rounded to the operand type
    dQ = fmha_scale * dS.K    dK = fmha_scale * dS^T.Q    dbias = dS summed
    over the dimensions the bias broadcasts

The six ``bmm*_dot_dimension_numbers`` give where batch (B, N), sequence and
head dimensions sit in Q/K/V/dO (BTNH or BNTH).  Products accumulate in f32
(numpy's BLAS matmul) as the tensor-core kernels do; P and dS are rounded to
the operand type before they feed the second GEMMs, as the flash-attention
kernels do.  K/V may have fewer heads than Q (grouped-query attention).

Masks: ``CAUSAL`` keeps key j <= query i (top-left diagonal, like
``jnp.tril``); ``sliding_window_length`` w > 0 keeps j > i - w; ``PADDING``
keeps i < q_seqlen[b] and j < kv_seqlen[b], and zeroes the outputs of padded
query rows.  A row that sees no key gets O = 0 and stats = 0 (cuDNN leaves
those undefined).

Refused (not evaluable, never guessed): ``dropout_rate`` > 0 (cuDNN's
Philox stream cannot be reproduced bit for bit), ``ALIBI`` masks, packed
segments (``max_seg_per_batch`` > 1), paged attention and the FP8 calls.
"""

from __future__ import annotations

import numpy as np

from .dtypes import cast_result, dtype_of, is_narrow_float
from .registry import EvaluationError, custom_call

_FWD = {"__cudnn$fmhaSoftmax": False, "__cudnn$fmhaScaleBiasSoftmax": True,
        "__cudnn$fmhaSoftmaxDropout": False, "__cudnn$fmhaScaleBiasSoftmaxDropout": True}
_BWD = {"__cudnn$fmhaSoftmaxBackward": False, "__cudnn$fmhaScaleBiasSoftmaxBackward": True,
        "__cudnn$fmhaSoftmaxDropoutBackward": False,
        "__cudnn$fmhaScaleBiasSoftmaxDropoutBackward": True}
_MASKS = {"NO_MASK", "CAUSAL", "PADDING", "PADDING_CAUSAL"}


def _config(instr) -> dict:
    bc = instr.backend_config
    cfg = bc.get("cudnn_fmha_backend_config") if isinstance(bc, dict) else None
    if not isinstance(cfg, dict):
        raise EvaluationError(f"{instr.custom_call_target} without a cudnn_fmha_backend_config")
    rate = float(cfg.get("dropout_rate", 0) or 0)
    if rate > 0:
        raise EvaluationError(f"{instr.custom_call_target} with dropout_rate={rate:g} is not "
                              "evaluable: its dropout mask comes from cuDNN's Philox random stream "
                              f"(seed {cfg.get('seed', '?')}), which cannot be reproduced bit for bit")
    mask = str(cfg.get("mask_type", "NO_MASK"))
    if mask not in _MASKS:
        raise EvaluationError(f"{instr.custom_call_target} with mask_type {mask} is not supported "
                              "by the evaluator")
    if int(cfg.get("max_seg_per_batch", 1) or 1) > 1:
        raise EvaluationError(f"{instr.custom_call_target} with packed segments "
                              "(max_seg_per_batch > 1) is not supported by the evaluator")
    if cfg.get("is_paged_attention"):
        raise EvaluationError(f"{instr.custom_call_target}: paged attention is not supported "
                              "by the evaluator")
    return cfg


def _dims(cfg: dict, key: str) -> tuple[list[int], list[int], list[int], list[int]]:
    d = cfg.get(key)
    if not isinstance(d, dict):
        raise EvaluationError(f"cudnn_fmha_backend_config has no {key}")
    out = tuple([int(v) for v in d.get(k, [])] for k in (
        "lhs_batch_dimensions", "lhs_contracting_dimensions", "rhs_batch_dimensions",
        "rhs_contracting_dimensions"))
    if any(len(out[i]) != n for i, n in ((0, 2), (1, 1), (2, 2), (3, 1))):
        raise EvaluationError(f"{key}: fused attention needs 2 batch and 1 contracting dimension "
                              "per operand")
    return out


def _canon(x: np.ndarray, batch: list[int], middle: list[int], name: str) -> np.ndarray:
    """``x`` (rank 4) transposed to (B, N, middle, rest) in f32/f64."""
    if x.ndim != 4:
        raise EvaluationError(f"fused attention operand {name} must have rank 4, got {x.ndim}")
    rest = [d for d in range(4) if d not in batch and d not in middle]
    if len(rest) != 1 or sorted(batch + middle + rest) != [0, 1, 2, 3]:
        raise EvaluationError(f"fused attention dimension numbers do not fit operand {name}")
    acc = np.float64 if x.dtype == np.float64 else np.float32
    return np.transpose(x, batch + middle + rest).astype(acc, copy=False)


def _free(batch: list[int], contracting: list[int]) -> list[int]:
    return [d for d in range(4) if d not in batch and d not in contracting]


def _mm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Batched matmul over row-major matrices (numpy hands each to BLAS)."""
    with np.errstate(all="ignore"):
        return np.matmul(np.ascontiguousarray(a), np.ascontiguousarray(b))


def _round(x: np.ndarray, like: np.dtype) -> np.ndarray:
    """Round to the operand type (what the kernel feeds its second GEMMs)."""
    if is_narrow_float(like):
        return x.astype(like).astype(x.dtype)
    return x


def _heads(q: np.ndarray, kv: np.ndarray, name: str) -> int:
    """Query heads per K/V head (grouped-query attention)."""
    if q.shape[0] != kv.shape[0] or kv.shape[1] == 0 or q.shape[1] % kv.shape[1]:
        raise EvaluationError(f"fused attention: {name} batch/heads {list(kv.shape[:2])} do not "
                              f"fit the query's {list(q.shape[:2])}")
    return q.shape[1] // kv.shape[1]


def _expand(x: np.ndarray, group: int) -> np.ndarray:
    return x if group == 1 else np.repeat(x, group, axis=1)


def _reduce_group(x: np.ndarray, group: int) -> np.ndarray:
    if group == 1:
        return x
    b, n = x.shape[:2]
    return x.reshape((b, n // group, group) + x.shape[2:]).sum(axis=2)


def _visible(cfg: dict, b: int, t: int, s: int, seqlens) -> np.ndarray | None:
    """Boolean (B|1, 1, T, S) mask of the keys each query sees, or None."""
    mask_type = str(cfg.get("mask_type", "NO_MASK"))
    window = int(cfg.get("sliding_window_length", 0) or 0)
    i = np.arange(t)[:, None]
    j = np.arange(s)[None, :]
    keep = None
    if "CAUSAL" in mask_type:
        keep = j <= i
    if window > 0:
        w = j > i - window
        keep = w if keep is None else keep & w
    if keep is not None:
        keep = keep[None, None]
    if seqlens is not None:
        ql, kl = seqlens
        pad = (np.arange(t)[None, :, None] < ql[:, None, None]) & \
              (np.arange(s)[None, None, :] < kl[:, None, None])
        pad = pad[:, None]
        keep = pad if keep is None else keep & pad
    return keep


def _seqlens(ops, idx: int, cfg: dict, b: int, instr):
    if "PADDING" not in str(cfg.get("mask_type", "")):
        return None, idx
    if len(ops) < idx + 2:
        raise EvaluationError(f"{instr.custom_call_target} with a padding mask needs q_seqlen and "
                              "kv_seqlen operands")
    ql = np.asarray(ops[idx]).reshape(-1).astype(np.int64)
    kl = np.asarray(ops[idx + 1]).reshape(-1).astype(np.int64)
    if ql.size != b or kl.size != b:
        raise EvaluationError(f"fused attention sequence lengths must have {b} elements")
    return (ql, kl), idx + 2


def _logits(cfg, q, k, bias, keep) -> np.ndarray:
    """Scaled (biased) logits (B, N, T, S) with masked keys at -inf."""
    s = _mm(q, np.swapaxes(k, -1, -2))
    with np.errstate(all="ignore"):
        s = s * s.dtype.type(float(cfg.get("fmha_scale", 1.0)))
        if bias is not None:
            s = s + bias
    if keep is not None:
        s = np.where(keep, s, -np.inf)
    return s


def _bias(ops, idx: int, has_bias: bool, shape4) -> tuple[np.ndarray | None, int]:
    if not has_bias:
        return None, idx
    raw = np.asarray(ops[idx])
    b, n, t, s = shape4
    if raw.ndim != 4 or any(d not in (1, w) for d, w in zip(raw.shape, (b, n, t, s))):
        raise EvaluationError(f"fused attention bias {list(raw.shape)} does not broadcast to "
                              f"[B,N,T,S] = {[b, n, t, s]}")
    acc = np.float64 if raw.dtype == np.float64 else np.float32
    return raw.astype(acc), idx + 1


def _result_shapes(instr) -> list:
    if not instr.shape.is_tuple:
        raise EvaluationError(f"{instr.custom_call_target} must return a tuple")
    return list(instr.shape.tuple_shapes)


def _out(x: np.ndarray, shape, name: str) -> np.ndarray:
    if list(x.shape) != list(shape.dimensions):
        raise EvaluationError(f"fused attention {name} is {list(x.shape)} but the result shape "
                              f"says {list(shape.dimensions)}")
    return cast_result(x, shape.element_type)


def _workspace(shape) -> np.ndarray:
    return np.zeros(shape.dimensions, dtype=dtype_of(shape.element_type))


@custom_call(*_FWD)
def _fmha_forward(ev, instr, ops):
    cfg = _config(instr)
    shapes = _result_shapes(instr)
    if len(shapes) not in (2, 3):
        raise EvaluationError(f"{instr.custom_call_target} returns (O, [stats], workspace), "
                              f"got {len(shapes)} results")
    if len(ops) < 3:
        raise EvaluationError(f"{instr.custom_call_target} needs Q, K and V")
    lb, lc, rb, rc = _dims(cfg, "bmm1_dot_dimension_numbers")
    _, l2c, r2b, r2c = _dims(cfg, "bmm2_dot_dimension_numbers")
    q = _canon(np.asarray(ops[0]), lb, _free(lb, lc), "Q")            # B N T H
    k = _canon(np.asarray(ops[1]), rb, _free(rb, rc), "K")            # B N S H
    v = _canon(np.asarray(ops[2]), r2b, r2c, "V")                    # B N S Hv
    group = _heads(q, k, "K")
    if _heads(q, v, "V") != group or v.shape[2] != k.shape[2]:
        raise EvaluationError("fused attention: K and V do not match")
    k, v = _expand(k, group), _expand(v, group)
    B, N, T = q.shape[:3]
    S = k.shape[2]
    bias, idx = _bias(ops, 3, _FWD[instr.custom_call_target], (B, N, T, S))
    seqlens, idx = _seqlens(ops, idx, cfg, B, instr)
    if len(ops) != idx:
        raise EvaluationError(f"{instr.custom_call_target} with this config takes {idx} operands, "
                              f"got {len(ops)}")
    keep = _visible(cfg, B, T, S, seqlens)
    s = _logits(cfg, q, k, bias, keep)
    with np.errstate(all="ignore"):
        m = np.max(s, axis=-1, keepdims=True)
        seen = np.isfinite(m)
        m = np.where(seen, m, 0)
        e = np.exp(s - m)
        total = np.sum(e, axis=-1, keepdims=True)
        p = np.where(seen, e / np.where(seen, total, 1), 0)
        stats = np.where(seen, m + np.log(np.where(seen, total, 1)), 0)[..., 0]
    o = _mm(_round(p, np.asarray(ops[0]).dtype), v)                   # B N T Hv
    if seqlens is not None:
        o = o * (np.arange(T)[None, :] < seqlens[0][:, None])[:, None, :, None]
    values = [_out(o, shapes[0], "output")]
    if len(shapes) == 3:
        values.append(_out(stats, shapes[1], "softmax statistics"))
    values.append(_workspace(shapes[-1]))
    return tuple(values)


@custom_call(*_BWD)
def _fmha_backward(ev, instr, ops):
    cfg = _config(instr)
    has_bias = _BWD[instr.custom_call_target]
    shapes = _result_shapes(instr)
    if len(shapes) not in (4, 5) or (len(shapes) == 5 and not has_bias):
        raise EvaluationError(f"{instr.custom_call_target} returns (dQ, dK, dV, [dbias], "
                              f"workspace), got {len(shapes)} results")
    if len(ops) < 6:
        raise EvaluationError(f"{instr.custom_call_target} needs Q, K, V, stats, dO and O")
    g1b, g1c, g1rb, g1rc = _dims(cfg, "bmm1_grad_gemm1_dot_dimension_numbers")  # dS^T.Q
    _, _, g2rb, g2rc = _dims(cfg, "bmm1_grad_gemm2_dot_dimension_numbers")      # dS.K
    _, _, _, _ = _dims(cfg, "bmm2_grad_gemm1_dot_dimension_numbers")            # P^T.dO
    olb, olc, vrb, vrc = _dims(cfg, "bmm2_grad_gemm2_dot_dimension_numbers")    # dO.V^T
    dtype_in = np.asarray(ops[0]).dtype
    q = _canon(np.asarray(ops[0]), g1rb, g1rc, "Q")                   # B N T H
    k = _canon(np.asarray(ops[1]), g2rb, g2rc, "K")                   # B N S H
    v = _canon(np.asarray(ops[2]), vrb, _free(vrb, vrc), "V")         # B N S Hv
    do = _canon(np.asarray(ops[4]), olb, _free(olb, olc), "dO")       # B N T Hv
    group = _heads(q, k, "K")
    if _heads(q, v, "V") != group:
        raise EvaluationError("fused attention: K and V do not match")
    ke, ve = _expand(k, group), _expand(v, group)
    B, N, T = q.shape[:3]
    S = ke.shape[2]
    stats = np.asarray(ops[3]).astype(np.float64 if q.dtype == np.float64 else np.float32)
    if stats.shape != (B, N, T):
        raise EvaluationError(f"fused attention statistics {list(stats.shape)} should be "
                              f"{[B, N, T]}")
    bias, idx = _bias(ops, 5, has_bias, (B, N, T, S))
    if len(ops) <= idx:
        raise EvaluationError(f"{instr.custom_call_target} needs the forward output O")
    o = _canon(np.asarray(ops[idx]), olb, _free(olb, olc), "O")
    if o.shape != do.shape:
        raise EvaluationError(f"fused attention: O {list(o.shape)} and dO {list(do.shape)} differ")
    seqlens, idx = _seqlens(ops, idx + 1, cfg, B, instr)
    if len(ops) != idx:
        raise EvaluationError(f"{instr.custom_call_target} with this config takes {idx} operands, "
                              f"got {len(ops)}")
    keep = _visible(cfg, B, T, S, seqlens)
    s = _logits(cfg, q, ke, bias, keep)
    with np.errstate(all="ignore"):
        p = np.exp(s - stats[..., None])
        p = np.where(np.isfinite(p), p, 0)
        if seqlens is not None:
            do = do * (np.arange(T)[None, :] < seqlens[0][:, None])[:, None, :, None]
        d = np.sum(do * o, axis=-1, keepdims=True)                    # B N T 1
        dv = _mm(np.swapaxes(_round(p, dtype_in), -1, -2), do)        # B N S Hv
        dp = _mm(do, np.swapaxes(ve, -1, -2))                         # B N T S
        ds = p * (dp - d)
        scale = ds.dtype.type(float(cfg.get("fmha_scale", 1.0)))
        ds_r = _round(ds, dtype_in)
        dq = _mm(ds_r, ke) * scale                                    # B N T H
        dk = _mm(np.swapaxes(ds_r, -1, -2), q) * scale                # B N S H
    dk, dv = _reduce_group(dk, group), _reduce_group(dv, group)
    values = [_out(dq, shapes[0], "dQ"), _out(dk, shapes[1], "dK"), _out(dv, shapes[2], "dV")]
    if len(shapes) == 5:
        raw_shape = np.asarray(ops[5]).shape
        axes = tuple(i for i, n in enumerate(raw_shape) if n == 1 and ds.shape[i] != 1)
        db = ds.sum(axis=axes, keepdims=True) if axes else ds
        values.append(_out(db, shapes[3], "dbias"))
    values.append(_workspace(shapes[-1]))
    return tuple(values)
