"""The library calls XLA:GPU's rewriters create, with the operand and result
contracts of XLA's thunk emitter (``service/gpu/thunk_emitter.cc``):

``__cublas$gemm`` / ``__cublas$lt$matmul``
    operands ``a, b, [c if beta != 0], [bias if the epilogue adds one]``;
    result ``d`` or a tuple ``(d, [aux if *_AUX], workspace)``.
    ``d = act(alpha * dot(a, b) + beta * c + bias)`` with the dot numbers of
    ``gemm_backend_config``; ``aux`` is the value before the activation.
    The vector bias is broadcast along the output's last (column) dimension.
    An operand without batch dimensions while the other has them (what
    ``cublas-gemm-broadcast-folding-rewriter`` leaves) is shared by every
    batch (a batch stride of 0).
    GELU is cuBLASLt's tanh approximation.

``__cublas$lt$matmul$f8``
    operands ``a, b, [c], a_scale, b_scale, [bias], [d_scale]``; result
    ``(d, [d_amax if damax_output], workspace)``.
    ``r = act(alpha * a_scale * b_scale * dot(a, b) + beta * c + bias)``;
    ``d_amax = max |r|``; an fp8 ``d`` is ``saturate(r * d_scale)`` with
    ``d_scale`` the last operand (as the thunk reads it), other types ``r``.

``__cudnn$convForward`` / ``__cudnn$convBiasActivationForward``
    operands ``input, filter, [bias, [side_input]]``; result
    ``(output, scratch)``;
    ``output = act(conv_result_scale * conv + side_input_scale * side + bias)``.
``__cudnn$convBackwardInput`` / ``__cudnn$convBackwardFilter``
    the gradients of the forward convolution the attributes describe, as
    adjoints of the forward map (the kernel window is walked in a loop,
    each step one BLAS matmul over the channels).
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from ..ir.attrs import parse_dim_labels
from .conv import conv_window, convolution
from .dtypes import cast_result, dtype_of, widen
from .linalg import accumulation_dtype, dot_general
from .registry import EvaluationError, custom_call

_VECTOR_BIAS = {"BIAS", "BIAS_RELU", "BIAS_GELU", "BIAS_GELU_AUX", "BIAS_SILU"}
_AUX = {"GELU_AUX", "BIAS_GELU_AUX"}
_EPILOGUES = {"DEFAULT", "RELU", "GELU", "GELU_AUX", "SILU"} | _VECTOR_BIAS


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


def _activate(kind: str, x: np.ndarray) -> np.ndarray:
    if kind.endswith("RELU"):
        return np.maximum(x, 0)
    if kind.endswith("GELU") or kind.endswith("GELU_AUX"):
        return _gelu_tanh(x)
    if kind.endswith("SILU"):
        return x / (1.0 + np.exp(-x))
    return x


def _gemm_config(instr) -> dict:
    bc = instr.backend_config
    if not isinstance(bc, dict):
        raise EvaluationError("GEMM custom call without a JSON backend_config")
    cfg = bc.get("gemm_backend_config", bc)
    if "dot_dimension_numbers" not in cfg:
        raise EvaluationError("gemm_backend_config has no dot_dimension_numbers")
    return cfg


def _dims(cfg: dict, key: str) -> list[int]:
    return [int(v) for v in cfg["dot_dimension_numbers"].get(key, [])]


def _gemm_core(instr, a, b, cfg) -> np.ndarray:
    lb, lc = _dims(cfg, "lhs_batch_dimensions"), _dims(cfg, "lhs_contracting_dimensions")
    rb, rc = _dims(cfg, "rhs_batch_dimensions"), _dims(cfg, "rhs_contracting_dimensions")
    # cublas-gemm-broadcast-folding-rewriter drops the batch dimensions of a
    # broadcast operand (a batch stride of 0): broadcast it back in front.
    if lb and not rb:
        batch = [a.shape[d] for d in lb]
        b = np.broadcast_to(b, tuple(batch) + b.shape)
        rb, rc = list(range(len(batch))), [d + len(batch) for d in rc]
    elif rb and not lb:
        batch = [b.shape[d] for d in rb]
        a = np.broadcast_to(a, tuple(batch) + a.shape)
        lb, lc = list(range(len(batch))), [d + len(batch) for d in lc]
    out = dot_general(a, b, lb, lc, rb, rc)
    alpha = complex(float(cfg.get("alpha_real", 1)), float(cfg.get("alpha_imag", 0)))
    if out.dtype.kind == "c":
        return out * alpha
    return out * out.dtype.type(alpha.real) if alpha.real != 1 else out


def _result_shapes(instr):
    shape = instr.shape
    if shape.is_tuple:
        return list(shape.tuple_shapes)
    return [shape]


def _bias_along_columns(bias: np.ndarray, out: np.ndarray) -> np.ndarray:
    if bias.ndim != 1 or bias.shape[0] != out.shape[-1]:
        raise EvaluationError(f"vector bias {list(bias.shape)} does not match the output's "
                              f"column dimension {out.shape[-1]}")
    return bias


def _finish(instr, values: list[np.ndarray]):
    """Tuple the outputs and append a zero workspace if the shape has one."""
    shapes = _result_shapes(instr)
    outs = []
    for i, s in enumerate(shapes):
        if i < len(values):
            outs.append(values[i])
        else:
            outs.append(np.zeros(s.dimensions, dtype=dtype_of(s.element_type)))
    return tuple(outs) if instr.shape.is_tuple else outs[0]


@custom_call("__cublas$gemm", "__cublas$lt$matmul")
def _cublas_gemm(ev, instr, ops):
    cfg = _gemm_config(instr)
    epilogue = cfg.get("epilogue", "DEFAULT")
    if epilogue not in _EPILOGUES:
        raise EvaluationError(f"GEMM epilogue {epilogue} is not supported by the evaluator")
    if instr.custom_call_target == "__cublas$gemm" and epilogue != "DEFAULT":
        raise EvaluationError(f"__cublas$gemm cannot have epilogue {epilogue}")
    beta = float(cfg.get("beta", 0))
    has_c = beta != 0
    has_bias = epilogue in _VECTOR_BIAS
    if len(ops) != 2 + has_c + has_bias:
        raise EvaluationError(f"{instr.custom_call_target} with beta={beta:g} and epilogue {epilogue} "
                              f"takes {2 + has_c + has_bias} operands, got {len(ops)}")
    shapes = _result_shapes(instr)
    has_aux = epilogue in _AUX
    want = 1 + has_aux + (1 if instr.shape.is_tuple and len(shapes) > 1 + has_aux else 0)
    if instr.shape.is_tuple and len(shapes) != want:
        raise EvaluationError(f"{instr.custom_call_target} result tuple has {len(shapes)} elements")
    out = _gemm_core(instr, ops[0], ops[1], cfg)
    with np.errstate(all="ignore"):
        if has_c:
            out = out + out.dtype.type(beta) * widen(ops[2]).astype(out.dtype)
        if has_bias:
            out = out + _bias_along_columns(widen(ops[2 + has_c]).astype(out.dtype), out)
        aux = out
        out = _activate(epilogue, out)
    d_type = shapes[0].element_type
    values = [cast_result(out, d_type)]
    if has_aux:
        values.append(cast_result(aux, shapes[1].element_type))
    return _finish(instr, values)


def _scalar(x: np.ndarray) -> float:
    x = np.asarray(x)
    if x.size != 1:
        raise EvaluationError(f"expected a scalar scale, got shape {list(x.shape)}")
    return float(widen(x.reshape(())))


@custom_call("__cublas$lt$matmul$f8")
def _cublas_lt_f8(ev, instr, ops):
    cfg = _gemm_config(instr)
    epilogue = cfg.get("epilogue", "DEFAULT")
    if epilogue not in _EPILOGUES or epilogue in _AUX:
        raise EvaluationError(f"FP8 GEMM epilogue {epilogue} is not supported")
    if not instr.shape.is_tuple:
        raise EvaluationError("__cublas$lt$matmul$f8 must return a tuple")
    if not 3 < len(ops) < 8:
        raise EvaluationError(f"__cublas$lt$matmul$f8 takes 4 to 7 operands, got {len(ops)}")
    beta = float(cfg.get("beta", 0))
    has_c = beta != 0
    has_bias = epilogue in _VECTOR_BIAS
    shapes = _result_shapes(instr)
    d_type = shapes[0].element_type
    is_f8_out = d_type in ("f8e4m3fn", "f8e5m2")
    a_scale_idx = 3 if has_c else 2
    if len(ops) < a_scale_idx + 2 + has_bias:
        raise EvaluationError("__cublas$lt$matmul$f8 is missing scale or bias operands")
    a_scale = _scalar(ops[a_scale_idx])
    b_scale = _scalar(ops[a_scale_idx + 1])
    out = _gemm_core(instr, ops[0], ops[1], cfg)
    with np.errstate(all="ignore"):
        out = out * out.dtype.type(a_scale * b_scale)
        if has_c:
            out = out + out.dtype.type(beta) * widen(ops[2]).astype(out.dtype)
        if has_bias:
            out = out + _bias_along_columns(widen(ops[a_scale_idx + 2]).astype(out.dtype), out)
        out = _activate(epilogue, out)
        amax = np.max(np.abs(out)) if out.size else np.float32(0)
        if is_f8_out:
            d_scale = _scalar(ops[-1])
            fmax = float(ml_dtypes.finfo(dtype_of(d_type)).max)
            out = np.clip(out * out.dtype.type(d_scale), -fmax, fmax)
    values = [cast_result(out, d_type)]
    if cfg.get("damax_output"):
        if len(shapes) < 2:
            raise EvaluationError("damax_output is set but the result has no amax element")
        values.append(cast_result(np.asarray(amax), shapes[1].element_type))
    return _finish(instr, values)


# ---------------------------------------------------------------------------
# cuDNN convolutions
# ---------------------------------------------------------------------------


def _conv_parts(instr):
    text = instr.attrs.get("dim_labels")
    if text is None:
        raise EvaluationError("cuDNN convolution without dim_labels")
    dnums = parse_dim_labels(text)
    window = conv_window(instr, len(dnums.input_spatial))
    return dnums, window, instr.int_attr("feature_group_count", 1), instr.int_attr("batch_group_count", 1)


def _conv_config(instr) -> dict:
    bc = instr.backend_config
    if isinstance(bc, dict):
        return bc.get("cudnn_conv_backend_config", {})
    return {}


_ACTIVATIONS = {
    "kNone": lambda x, a: x,
    "kRelu": lambda x, a: np.maximum(x, 0),
    "kRelu6": lambda x, a: np.clip(x, 0, 6),
    "kTanh": lambda x, a: np.tanh(x),
    "kSigmoid": lambda x, a: 1.0 / (1.0 + np.exp(-x)),
    "kElu": lambda x, a: np.where(x > 0, x, np.expm1(x)),
    "kLeakyRelu": lambda x, a: np.where(x > 0, x, a * x),
}


@custom_call("__cudnn$convForward", "__cudnn$convBiasActivationForward")
def _cudnn_forward(ev, instr, ops):
    dnums, window, fgc, bgc = _conv_parts(instr)
    cfg = _conv_config(instr)
    fused = instr.custom_call_target == "__cudnn$convBiasActivationForward"
    if fused and len(ops) not in (3, 4):
        raise EvaluationError(f"__cudnn$convBiasActivationForward takes 3 or 4 operands, got {len(ops)}")
    if not fused and len(ops) != 2:
        raise EvaluationError(f"__cudnn$convForward takes 2 operands, got {len(ops)}")
    out = convolution(ops[0], ops[1], dnums, window, fgc, bgc)
    shapes = _result_shapes(instr)
    with np.errstate(all="ignore"):
        if fused:
            out = out * out.dtype.type(float(cfg.get("conv_result_scale", 1)))
            side_scale = float(cfg.get("side_input_scale", 0))
            if len(ops) == 4 and side_scale != 0:
                out = out + out.dtype.type(side_scale) * widen(ops[3]).astype(out.dtype)
            bias = widen(ops[2]).astype(out.dtype)
            bshape = [1] * out.ndim
            bshape[dnums.output_feature] = bias.size
            out = out + bias.reshape(bshape)
            mode = cfg.get("activation_mode", "kNone")
            fn = _ACTIVATIONS.get(mode)
            if fn is None:
                raise EvaluationError(f"cuDNN activation {mode} is not supported by the evaluator")
            out = fn(out, float(cfg.get("leakyrelu_alpha", 0)))
        else:
            scale = float(cfg.get("conv_result_scale", 1))
            if scale != 1:
                out = out * out.dtype.type(scale)
    return _finish(instr, [cast_result(out, shapes[0].element_type)])


def _adjoint_conv(grad_out, other, dnums, window, fgc, want: str, x_shape, w_shape):
    """Gradient of ``convolution(x, w)`` w.r.t. x (want='input') or w
    (want='filter'), by walking the kernel window."""
    acc = accumulation_dtype(grad_out, other)
    nsp = len(dnums.input_spatial)
    g = np.transpose(grad_out, [dnums.output_batch, dnums.output_feature] + list(dnums.output_spatial)
                     ).astype(acc)
    xs = [x_shape[d] for d in [dnums.input_batch, dnums.input_feature] + list(dnums.input_spatial)]
    ws = [w_shape[d] for d in [dnums.kernel_output_feature, dnums.kernel_input_feature]
          + list(dnums.kernel_spatial)]
    pads = [(wd.padding_low, wd.padding_high, wd.base_dilation - 1) for wd in window]
    padded_sp = [(s - 1) * (wd.base_dilation) + 1 + wd.padding_low + wd.padding_high if s else 0
                 for s, wd in zip(xs[2:], window)]
    n, c = xs[:2]
    o, ci = ws[:2]
    G = fgc
    og = o // G
    out_sp = g.shape[2:]
    if want == "input":
        w = np.transpose(other, [dnums.kernel_output_feature, dnums.kernel_input_feature]
                         + list(dnums.kernel_spatial)).astype(acc)
        gx = np.zeros([n, c] + [max(p, 0) for p in padded_sp], dtype=acc)
    else:
        x = np.transpose(other, [dnums.input_batch, dnums.input_feature] + list(dnums.input_spatial)
                         ).astype(acc)
        from .shapes import pad_array
        xp = pad_array(x, np.zeros((), acc), [(0, 0, 0), (0, 0, 0)] + pads)
        gw = np.zeros(ws, dtype=acc)
    gg = g.reshape((n, G, og) + tuple(out_sp))
    P = int(np.prod(out_sp, dtype=np.int64))
    g_mat = np.ascontiguousarray(gg.reshape(n, G, og, P))  # (n, G, og, P) matrices for BLAS
    if want == "filter":  # (G, og, n*P): the sum over batch and positions is one GEMM per group
        g_rows = np.ascontiguousarray(np.moveaxis(g_mat, 0, 2)).reshape(G, og, n * P)
    for kpos in np.ndindex(*ws[2:]):
        kidx = [(ws[2 + i] - 1 - k) if window[i].window_reversal else k for i, k in enumerate(kpos)]
        sl = tuple(slice(k * wd.window_dilation, k * wd.window_dilation + (s - 1) * wd.stride + 1,
                         wd.stride) for k, wd, s in zip(kpos, window, out_sp))
        if want == "input":
            wk = w[(slice(None), slice(None)) + tuple(kidx)].reshape(G, og, ci)
            wt = np.ascontiguousarray(np.swapaxes(wk, 1, 2))  # (G, ci, og)
            contrib = np.matmul(wt, g_mat).reshape((n, c) + tuple(out_sp))  # (n, G, ci, P)
            gx[(slice(None), slice(None)) + sl] += contrib
        else:
            xk = xp[(slice(None), slice(None)) + sl].reshape((n, G, ci, P))
            x_cols = np.ascontiguousarray(np.transpose(xk, (1, 0, 3, 2))).reshape(G, n * P, ci)
            upd = np.matmul(g_rows, x_cols).reshape(o, ci)  # (G, og, ci)
            gw[(slice(None), slice(None)) + tuple(kidx)] += upd
    if want == "input":
        # undo padding and base dilation
        sl = []
        for wd, s in zip(window, xs[2:]):
            sl.append(slice(wd.padding_low, wd.padding_low + (s - 1) * wd.base_dilation + 1,
                            wd.base_dilation))
        res = gx[(slice(None), slice(None)) + tuple(sl)]
        if any(wd.padding_low < 0 or wd.padding_high < 0 for wd in window):
            raise EvaluationError("backward-input convolution with negative padding is not supported")
        order = [0] * (2 + nsp)
        order[dnums.input_batch] = 0
        order[dnums.input_feature] = 1
        for i, d in enumerate(dnums.input_spatial):
            order[d] = 2 + i
        return np.transpose(res, order)
    order = [0] * (2 + nsp)
    order[dnums.kernel_output_feature] = 0
    order[dnums.kernel_input_feature] = 1
    for i, d in enumerate(dnums.kernel_spatial):
        order[d] = 2 + i
    return np.transpose(gw, order)


@custom_call("__cudnn$convBackwardInput")
def _cudnn_backward_input(ev, instr, ops):
    dnums, window, fgc, bgc = _conv_parts(instr)
    if bgc != 1 or len(ops) != 2:
        raise EvaluationError("__cudnn$convBackwardInput: only 2 operands and batch_group_count 1 "
                              "are supported")
    shapes = _result_shapes(instr)
    res = _adjoint_conv(ops[0], ops[1], dnums, window, fgc, "input", shapes[0].dimensions,
                        instr.operands[1].shape.dimensions)
    return _finish(instr, [cast_result(res, shapes[0].element_type)])


@custom_call("__cudnn$convBackwardFilter")
def _cudnn_backward_filter(ev, instr, ops):
    dnums, window, fgc, bgc = _conv_parts(instr)
    if bgc != 1 or len(ops) != 2:
        raise EvaluationError("__cudnn$convBackwardFilter: only 2 operands and batch_group_count 1 "
                              "are supported")
    shapes = _result_shapes(instr)
    res = _adjoint_conv(ops[1], ops[0], dnums, window, fgc, "filter",
                        instr.operands[0].shape.dimensions, shapes[0].dimensions)
    return _finish(instr, [cast_result(res, shapes[0].element_type)])


# ---------------------------------------------------------------------------
# Annotations that are the identity on one device
# ---------------------------------------------------------------------------


@custom_call("Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape", "MoveToHost",
             "MoveToDevice", "annotate_device_placement")
def _identity_annotation(ev, instr, ops):
    """Sharding and memory-space annotations: the operand itself (a
    shape-changing SPMD conversion needs a partitioned program: refused)."""
    if len(ops) != 1:
        raise EvaluationError(f"{instr.custom_call_target} takes one operand, got {len(ops)}")
    src = instr.operands[0].shape
    if src.to_string(False) != instr.shape.to_string(False):
        raise EvaluationError(f"{instr.custom_call_target} from {src.to_string(False)} to "
                              f"{instr.shape.to_string(False)} needs the partitioned program")
    return ops[0]
