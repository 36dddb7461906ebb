"""Epilogue fusion into BLAS-LT custom calls: alpha scaling, matrix bias
(``beta``), vector bias (``BIAS``), ReLU, approximate GELU (``GELU``,
``GELU_AUX`` with the pre-activation as auxiliary output), and SiLU on
ROCm >= 7.  Mirrors ``HandleMultiply`` / ``HandleAdd`` / ``HandleMaximum``
and the ``Fuse*`` helpers of XLA's GemmRewriterVisitor."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np

from ...ir.module import Instruction
from ...ir.shape import Shape, compatible
from . import fp8_output
from . import hlo as H
from .config import CUBLAS_GEMM, CUBLAS_LT_MATMUL_F8, read_gemm_config, write_gemm_config
from .patterns import (LT_F8, LT_MAYBE_F8, SQRT_2_OVER_PI, bcast_const_near, bcast_const_scalar,
                       is_custom_call, scalar_value)

if TYPE_CHECKING:  # pragma: no cover
    from .rewriter import GemmRewriterVisitor

Pred = Callable[[Instruction], bool]

EPILOGUE_TYPES = ("f8e4m3fn", "f8e5m2", "f16", "bf16", "f32", "f64")


def supports_epilogue_fusion(v: "GemmRewriterVisitor", element_type: str) -> bool:
    if v.gpu.is_rocm and element_type == "f64":
        return False
    return element_type in EPILOGUE_TYPES


def _gemm(targets) -> Pred:
    return lambda x: is_custom_call(x, targets)


def _one(pred: Pred) -> Pred:
    return lambda x: x.user_count == 1 and pred(x)


def optional_wrapped(x: Instruction, gemm_pred: Pred, slice_: bool = True, bitcast: bool = True):
    """``AnyOf(Slice(gemm), Bitcast(gemm), gemm)``: (gemm, wrapper) or None."""
    if slice_ and x.opcode == "slice" and gemm_pred(x.operands[0]):
        return x.operands[0], x
    if bitcast and x.opcode == "bitcast" and gemm_pred(x.operands[0]):
        return x.operands[0], x
    if gemm_pred(x):
        return x, None
    return None


def lt_targets(v: "GemmRewriterVisitor", base: tuple) -> tuple:
    """Matchers also accept legacy ``__cublas$gemm`` calls when the pass
    runs in legacy mode (``cublaslt: false``), as older XLA did."""
    return base if v.opts.cublaslt else base + (CUBLAS_GEMM,)


# ---------------------------------------------------------------------------
# multiply: alpha, FP8 D scale, GELU, SiLU
# ---------------------------------------------------------------------------


def handle_multiply(v: "GemmRewriterVisitor", instr: Instruction) -> None:
    a, b = instr.operands
    gemm_one = _one(_gemm(lt_targets(v, LT_MAYBE_F8)))
    for g, other in ((a, b), (b, a)):
        if gemm_one(g) and other.user_count == 1 and bcast_const_scalar(other) is not None:
            if _fold_alpha(v, instr, g, bcast_const_scalar(other)):
                return
            break
    f8_one = _one(_gemm(LT_F8))
    for g, other in ((a, b), (b, a)):
        if f8_one(g) and other.opcode == "broadcast" and other.user_count == 1:
            fp8_output.scale_d(v, instr, g, other.operands[0])
            return
    if _match_gelu(v, instr):
        return
    if v.gpu.is_rocm and v.gpu.toolkit >= (7, 0, 0):
        _match_swish(v, instr)


def _fold_alpha(v: "GemmRewriterVisitor", instr: Instruction, gemm: Instruction, alpha: Instruction) -> bool:
    if gemm.shape.element_type == "s32":
        v.missed(instr, "alpha not folded: s32 GEMMs only support fixed alpha/beta", gemm=gemm.name)
        return True
    cfg = read_gemm_config(gemm)
    if cfg["beta"] != 0 or cfg["epilogue"] != "DEFAULT" or gemm.user_count != 1:
        v.missed(instr, f"alpha not folded into {v.label(gemm)}: it already has "
                        + ("a matrix bias (beta != 0)" if cfg["beta"] != 0 else f"epilogue {cfg['epilogue']}"),
                 gemm=gemm.name)
        return False
    value = scalar_value(alpha)
    new = complex(value) * complex(cfg["alpha_real"], cfg["alpha_imag"])
    cfg["alpha_real"], cfg["alpha_imag"] = new.real, new.imag
    write_gemm_config(gemm, cfg)
    v.replace(instr, gemm)
    v.applied(gemm, f"folded scalar multiply {instr.name} into alpha={_fmt(new)} of {v.label(gemm)}",
              alpha_real=new.real, alpha_imag=new.imag)
    return True


def _fmt(c: complex) -> str:
    return f"{c.real:g}" if c.imag == 0 else f"({c.real:g},{c.imag:g})"


def _gelu_cdf_failure(cdf: Instruction, x: Instruction) -> str | None:
    """Why ``cdf`` is not 0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))),
    or None when it is (with XLA's one-user constraints)."""
    if cdf.opcode != "multiply":
        return f"cdf is {cdf.opcode}, not multiply"
    pair = _either(cdf, lambda y: bcast_const_scalar(y, 0.5) is not None, lambda y: y.opcode == "add")
    if pair is None:
        return "cdf is not 0.5 * (1 + tanh(...))"
    add1 = pair[1]
    pair = _either(add1, lambda y: bcast_const_scalar(y, 1.0) is not None, lambda y: y.opcode == "tanh")
    if pair is None:
        return "missing 1 + tanh(...)"
    tanh = pair[1]
    if tanh.user_count != 1:
        return "tanh has other users"
    inner = tanh.operands[0]
    if inner.opcode != "multiply" or inner.user_count != 1:
        return "tanh argument is not a single-use multiply"
    pair = _either(inner, lambda y: bcast_const_near(y, SQRT_2_OVER_PI), lambda y: y.opcode == "add")
    if pair is None:
        return "tanh argument is not sqrt(2/pi) * (...) (constant not within 128 epsilons of sqrt(2/pi))"
    add2 = pair[1]
    if add2.user_count != 1:
        return "x + 0.044715*x^3 has other users"
    pair = _either(add2, lambda y: y is x, lambda y: y.opcode == "multiply")
    if pair is None:
        return "missing x + 0.044715 * x^3"
    mul3 = pair[1]
    if mul3.user_count != 1:
        return "0.044715*x^3 has other users"
    pair = _either(mul3, lambda y: bcast_const_near(y, 0.044715), lambda y: y.opcode == "multiply")
    if pair is None:
        return "cubic coefficient is not 0.044715"
    mul2 = pair[1]
    if mul2.user_count != 1:
        return "x^3 has other users"
    pair = _either(mul2, lambda y: y is x, lambda y: y.opcode == "multiply")
    if pair is None:
        return "missing x * x^2"
    mul1 = pair[1]
    if mul1.user_count != 1 or mul1.operands[0] is not x or mul1.operands[1] is not x:
        return "missing x * x"
    return None


def _either(instr: Instruction, p: Pred, q: Pred):
    a, b = instr.operands
    if p(a) and q(b):
        return a, b
    if p(b) and q(a):
        return b, a
    return None


def _match_gelu(v: "GemmRewriterVisitor", instr: Instruction) -> bool:
    gemm_pred = _gemm(LT_MAYBE_F8)
    best_failure = None
    for first, cdf in ((instr.operands[0], instr.operands[1]), (instr.operands[1], instr.operands[0])):
        got = optional_wrapped(first, gemm_pred)
        if got is None or cdf.user_count != 1:
            continue
        gemm, wrapper = got
        x = wrapper if wrapper is not None else gemm
        failure = _gelu_cdf_failure(cdf, x)
        if failure is None:
            fuse_gelu(v, instr, gemm, wrapper)
            return True
        if cdf.opcode == "multiply" and any(bcast_const_scalar(o, 0.5) is not None for o in cdf.operands):
            best_failure = (gemm, failure)
    if best_failure is not None:
        v.missed(instr, f"gelu epilogue not fused into {v.label(best_failure[0])}: {best_failure[1]}",
                 gemm=best_failure[0].name)
        return False
    # GELU of a *scaled* GEMM result (S3: gelu(dot * d_scale)): the epilogue
    # would have to run after the scaling, which cuBLAS-LT cannot do.
    for first, cdf in ((instr.operands[0], instr.operands[1]), (instr.operands[1], instr.operands[0])):
        if first.opcode not in ("multiply", "divide") or cdf.user_count != 1:
            continue
        gemms = [o for o in first.operands if gemm_pred(o)]
        if gemms and _gelu_cdf_failure(cdf, first) is None:
            v.missed(instr, f"gelu epilogue not fused into {v.label(gemms[0])}: the GELU reads "
                            f"{first.opcode} {first.name} (the GEMM output rescaled), not the GEMM "
                            f"output; epilogues apply before any output scaling", gemm=gemms[0].name)
            return False
    return False


def fuse_gelu(v: "GemmRewriterVisitor", multiply: Instruction, gemm: Instruction,
              wrapper: Instruction | None) -> None:
    t = gemm.shape.element_type
    if not supports_epilogue_fusion(v, t):
        v.missed(multiply, f"gelu epilogue not fused: epilogue fusion does not support {t} output")
        return
    if v.gpu.is_cuda and v.gpu.toolkit < (12, 4, 0) and gemm.custom_call_target == CUBLAS_LT_MATMUL_F8:
        v.missed(multiply, "gelu epilogue not supported with fp8 GEMMs before CUDA 12.4 "
                           f"(toolkit {'.'.join(map(str, v.gpu.toolkit))})", gemm=gemm.name,
                 toolkit=list(v.gpu.toolkit), required=[12, 4, 0])
        return
    has_aux = (wrapper.user_count > 4 or gemm.user_count > 1) if wrapper is not None else gemm.user_count > 4
    cfg = read_gemm_config(gemm)
    if cfg["epilogue"] == "DEFAULT":
        cfg["epilogue"] = "GELU_AUX" if has_aux else "GELU"
    elif cfg["epilogue"] == "BIAS":
        cfg["epilogue"] = "BIAS_GELU_AUX" if has_aux else "BIAS_GELU"
    else:
        v.missed(multiply, f"gelu epilogue not fused: {v.label(gemm)} already has epilogue {cfg['epilogue']}")
        return
    comp = gemm.parent
    shape = Shape.tuple([gemm.shape, gemm.shape]) if has_aux else gemm.shape
    out = v.clone(comp, gemm, shape)
    write_gemm_config(out, cfg)
    H.set_gemm_name(out)
    if has_aux:
        gelu_out = H.gte(comp, out, 0)
        pre_activation = H.gte(comp, out, 1)
        if wrapper is not None:
            gelu_out = H.clone(comp, wrapper, wrapper.shape, [gelu_out])
            if wrapper.user_count > 4:
                v.replace(wrapper, H.clone(comp, wrapper, wrapper.shape, [pre_activation]))
        if gemm.parent is comp and (gemm.has_users() or gemm is comp.root):
            v.replace(gemm, pre_activation)
        result = gelu_out
    elif wrapper is not None:
        result = H.clone(comp, wrapper, wrapper.shape, [out])
    else:
        result = out
    v.replace(multiply, result)
    v.applied(out, f"fused approximate gelu {multiply.name} into {v.label(out)} (epilogue {cfg['epilogue']})",
              epilogue=cfg["epilogue"])


def _match_swish(v: "GemmRewriterVisitor", instr: Instruction) -> None:
    gemm_pred = _gemm(LT_MAYBE_F8)
    for first, sig in ((instr.operands[0], instr.operands[1]), (instr.operands[1], instr.operands[0])):
        got = optional_wrapped(first, gemm_pred)
        if got is None or sig.user_count != 1 or sig.opcode != "divide":
            continue
        gemm, wrapper = got
        x = wrapper if wrapper is not None else gemm
        num, den = sig.operands
        if bcast_const_scalar(num, 1.0) is None or den.opcode != "add":
            continue
        pair = _either(den, lambda y: bcast_const_scalar(y, 1.0) is not None,
                       lambda y: y.opcode == "exponential" and y.user_count == 1
                       and y.operands[0].opcode == "negate" and y.operands[0].operands[0] is x)
        if pair is None:
            continue
        _fuse_swish(v, instr, gemm, wrapper)
        return


def _count_final_users(instr: Instruction) -> int:
    n = 0
    for u in instr.users:
        n += _count_final_users(u) if u.opcode in ("slice", "bitcast") else 1
    return n


def _fuse_swish(v: "GemmRewriterVisitor", multiply: Instruction, gemm: Instruction,
                wrapper: Instruction | None) -> None:
    if not supports_epilogue_fusion(v, gemm.shape.element_type):
        return
    if _count_final_users(gemm) > 2:
        v.missed(multiply, "silu epilogue not fused: the GEMM output has other users (SILU_AUX unsupported)")
        return
    cfg = read_gemm_config(gemm)
    if cfg["epilogue"] not in ("DEFAULT", "BIAS"):
        return
    cfg["epilogue"] = "SILU" if cfg["epilogue"] == "DEFAULT" else "BIAS_SILU"
    comp = gemm.parent
    out = v.clone(comp, gemm, gemm.shape)
    write_gemm_config(out, cfg)
    H.set_gemm_name(out)
    result = H.clone(comp, wrapper, wrapper.shape, [out]) if wrapper is not None else out
    v.replace(multiply, result)
    v.applied(out, f"fused silu {multiply.name} into {v.label(out)} (epilogue {cfg['epilogue']})")


# ---------------------------------------------------------------------------
# maximum: ReLU
# ---------------------------------------------------------------------------


def handle_maximum(v: "GemmRewriterVisitor", instr: Instruction) -> None:
    gemm_pred = _gemm(LT_MAYBE_F8)
    gemm_one = _one(gemm_pred)
    for first, zeros in ((instr.operands[0], instr.operands[1]), (instr.operands[1], instr.operands[0])):
        if first.user_count != 1 or bcast_const_scalar(zeros, 0) is None:
            continue
        got = None
        if first.opcode in ("slice", "bitcast") and gemm_one(first.operands[0]):
            got = first.operands[0], first
        elif gemm_pred(first):
            got = first, None
        if got is not None:
            _fuse_relu(v, instr, zeros, *got)
            return


def _fuse_relu(v: "GemmRewriterVisitor", instr: Instruction, zeros: Instruction, gemm: Instruction,
               wrapper: Instruction | None) -> None:
    if not compatible(zeros.shape, (wrapper or gemm).shape):
        v.missed(instr, "relu epilogue not fused: shape mismatch")
        return
    t = gemm.shape.element_type
    if not supports_epilogue_fusion(v, t):
        v.missed(instr, f"relu epilogue not fused: epilogue fusion does not support {t} output")
        return
    if gemm.user_count != 1:
        v.missed(instr, f"relu epilogue not fused: {v.label(gemm)} has {gemm.user_count} users")
        return
    cfg = read_gemm_config(gemm)
    if cfg["epilogue"] == "DEFAULT":
        cfg["epilogue"] = "RELU"
    elif cfg["epilogue"] == "BIAS":
        cfg["epilogue"] = "BIAS_RELU"
    else:
        v.missed(instr, f"relu epilogue not fused: {v.label(gemm)} already has epilogue {cfg['epilogue']}")
        return
    comp = gemm.parent
    out = v.clone(comp, gemm, gemm.shape, name=gemm.name + ".clone")
    write_gemm_config(out, cfg)
    H.set_gemm_name(out)
    result = H.clone(comp, wrapper, wrapper.shape, [out]) if wrapper is not None else out
    v.replace(instr, result)
    v.applied(out, f"fused relu {instr.name} into {v.label(out)} (epilogue {cfg['epilogue']})",
              epilogue=cfg["epilogue"])


# ---------------------------------------------------------------------------
# add: vector bias, matrix bias
# ---------------------------------------------------------------------------


def constant_fold_bias(bias: Instruction) -> Instruction:
    """``MaybeConstantFoldBias``: materialize broadcast(non-scalar constant)
    (optionally reshaped, transposed or bitcast) up to 8 MiB."""
    if bias.shape.byte_size() > 8 * 1024 * 1024:
        return bias
    inner = bias.operands[0] if bias.opcode in ("reshape", "transpose", "bitcast") else bias
    if inner.opcode != "broadcast":
        return bias
    c = inner.operands[0]
    if c.opcode != "constant" or c.literal is None or all(d == 1 for d in c.shape.dimensions):
        return bias
    try:
        src = np.asarray(c.literal.value)
    except ValueError:
        return bias
    bdims = inner.int_list("dimensions")
    shape = [1] * inner.shape.rank
    for i, d in enumerate(bdims):
        shape[d] = src.shape[i]
    value = np.broadcast_to(src.reshape(shape), inner.shape.dimensions)
    if bias is not inner:
        if bias.opcode == "reshape":
            value = value.reshape(bias.shape.dimensions)
        elif bias.opcode == "transpose":
            value = np.transpose(value, bias.dimensions)
        else:  # bitcast: same physical bytes
            phys = np.transpose(value, list(reversed(inner.shape.minor_to_major)))
            out_phys_dims = [bias.shape.dimensions[d] for d in reversed(bias.shape.minor_to_major)]
            phys = phys.reshape(out_phys_dims)
            inv = np.argsort(list(reversed(bias.shape.minor_to_major)))
            value = np.transpose(phys, inv)
    return H.constant_array(bias.parent, np.ascontiguousarray(value), bias.shape)
