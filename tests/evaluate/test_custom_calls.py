"""GEMM and cuDNN custom calls against numpy, with the operand/result
contracts of XLA's thunk emitter; XLA's own two-module comparison tests
(Triton fusion vs cuBLAS call) must agree."""

from __future__ import annotations

import json
import math

import ml_dtypes
import numpy as np
import pytest
from click.testing import CliRunner

from hlorun.cli import cli
from hlorun.evaluate import EvaluationError, evaluate, random_inputs
from hlorun.text.parser import load_module

from ..conftest import shared_path
from .helpers import f32, run_hlo


def _gemm_cfg(epilogue="DEFAULT", beta=0, alpha=1, lb=(), lc=(1,), rb=(), rc=(0,), **extra):
    cfg = {"alpha_real": alpha, "alpha_imag": 0, "beta": beta, "epilogue": epilogue,
           "dot_dimension_numbers": {
               "lhs_batch_dimensions": [str(d) for d in lb], "lhs_contracting_dimensions": [str(d) for d in lc],
               "rhs_batch_dimensions": [str(d) for d in rb], "rhs_contracting_dimensions": [str(d) for d in rc]},
           "precision_config": {"operand_precision": ["DEFAULT", "DEFAULT"]}, **extra}
    return json.dumps({"gemm_backend_config": cfg})


def _gelu(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


@pytest.mark.parametrize("epilogue", ["DEFAULT", "RELU", "GELU", "BIAS", "BIAS_RELU", "BIAS_GELU"])
def test_cublaslt_epilogues_alpha_beta_bias(epilogue):
    a = f32(2, 16, 24, seed=40)
    b = f32(2, 32, 24, seed=41)
    c = f32(2, 16, 32, seed=42)
    bias = f32(32, seed=43)
    has_bias = epilogue.startswith("BIAS")
    ops = "a, b, c" + (", bias" if has_bias else "")
    params = "  c = f32[2,16,32]{2,1,0} parameter(2)\n" + \
        ("  bias = f32[32]{0} parameter(3)\n" if has_bias else "")
    text = f"""HloModule m
ENTRY e {{
  a = f32[2,16,24]{{2,1,0}} parameter(0)
  b = f32[2,32,24]{{2,1,0}} parameter(1)
{params}  g = (f32[2,16,32]{{2,1,0}}, s8[4194304]{{0}}) custom-call({ops}), custom_call_target="__cublas$lt$matmul", backend_config={_gemm_cfg(epilogue, beta=0.5, alpha=2, lb=(0,), lc=(2,), rb=(0,), rc=(2,))}
  ROOT d = f32[2,16,32]{{2,1,0}} get-tuple-element(g), index=0
}}"""
    args = [a, b, c] + ([bias] if has_bias else [])
    got = run_hlo(text, *args)
    x = 2 * np.einsum("bmk,bnk->bmn", a.astype(np.float64), b) + 0.5 * c
    if has_bias:
        x = x + bias
    if epilogue.endswith("RELU"):
        x = np.maximum(x, 0)
    if epilogue.endswith("GELU"):
        x = _gelu(x)
    np.testing.assert_allclose(got, x, rtol=1e-5, atol=1e-5)


def test_gelu_aux_returns_the_pre_activation_and_bf16_rounds_once():
    a = f32(16, 32, seed=44).astype(ml_dtypes.bfloat16)
    b = f32(32, 8, seed=45).astype(ml_dtypes.bfloat16)
    text = f"""HloModule m
ENTRY e {{
  a = bf16[16,32]{{1,0}} parameter(0)
  b = bf16[32,8]{{1,0}} parameter(1)
  ROOT g = (bf16[16,8]{{1,0}}, bf16[16,8]{{1,0}}, s8[1024]{{0}}) custom-call(a, b), custom_call_target="__cublas$lt$matmul", backend_config={_gemm_cfg("GELU_AUX")}
}}"""
    d, aux, ws = run_hlo(text, a, b)
    pre = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_array_equal(aux, pre.astype(ml_dtypes.bfloat16))
    np.testing.assert_allclose(d.astype(np.float32), _gelu(pre.astype(np.float64)), rtol=1e-2, atol=1e-2)
    assert ws.shape == (1024,) and ws.dtype == np.int8


def test_legacy_cublas_gemm_without_workspace_tuple():
    a = f32(5, 7, seed=46)
    b = f32(7, 3, seed=47)
    text = f"""HloModule m
ENTRY e {{
  a = f32[5,7]{{1,0}} parameter(0)
  b = f32[7,3]{{1,0}} parameter(1)
  ROOT g = f32[5,3]{{1,0}} custom-call(a, b), custom_call_target="__cublas$gemm", backend_config={_gemm_cfg()}
}}"""
    np.testing.assert_allclose(run_hlo(text, a, b), a @ b, rtol=1e-6)


def test_gemm_operand_count_must_match_the_contract():
    text = f"""HloModule m
ENTRY e {{
  a = f32[5,7]{{1,0}} parameter(0)
  b = f32[7,3]{{1,0}} parameter(1)
  ROOT g = (f32[5,3]{{1,0}}, s8[8]{{0}}) custom-call(a, b), custom_call_target="__cublas$lt$matmul", backend_config={_gemm_cfg(beta=1)}
}}"""
    with pytest.raises(EvaluationError, match="takes 3 operands, got 2"):
        run_hlo(text, f32(5, 7), f32(7, 3))


def test_fp8_matmul_scales_amax_and_saturation():
    rng = np.random.default_rng(48)
    a = rng.uniform(-8, 8, (16, 32)).astype(ml_dtypes.float8_e4m3fn)
    b = rng.uniform(-8, 8, (16, 32)).astype(ml_dtypes.float8_e4m3fn)
    text = f"""HloModule m
ENTRY e {{
  a = f8e4m3fn[16,32]{{1,0}} parameter(0)
  b = f8e4m3fn[16,32]{{1,0}} parameter(1)
  sa = f32[] parameter(2)
  sb = f32[] parameter(3)
  sd = f32[] parameter(4)
  ROOT g = (f8e4m3fn[16,16]{{1,0}}, f32[], s8[33554432]{{0}}) custom-call(a, b, sa, sb, sd), custom_call_target="__cublas$lt$matmul$f8", backend_config={_gemm_cfg("RELU", lc=(1,), rc=(1,), damax_output=True)}
}}"""
    d, amax, _ = run_hlo(text, a, b, np.float32(0.5), np.float32(3.0), np.float32(0.25))
    r = np.maximum(1.5 * (a.astype(np.float64) @ b.astype(np.float64).T), 0)
    assert float(amax) == pytest.approx(np.abs(r).max(), rel=1e-6)
    want = np.clip(r * 0.25, -448, 448).astype(np.float32).astype(ml_dtypes.float8_e4m3fn)
    np.testing.assert_array_equal(d.astype(np.float32), want.astype(np.float32))
    assert not np.isnan(d.astype(np.float32)).any()  # saturated, never NaN


def _conv_nhwc(x, w, pad):
    """Plain definition: NHWC input, HWIO kernel, stride 1."""
    n, h, wd, c = x.shape
    kh, kw, _, o = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), pad[0], pad[1], (0, 0)))
    oh, ow = xp.shape[1] - kh + 1, xp.shape[2] - kw + 1
    out = np.zeros((n, oh, ow, o))
    for u in range(kh):
        for v in range(kw):
            out += np.einsum("nhwc,co->nhwo", xp[:, u:u + oh, v:v + ow, :], w[u, v])
    return out


def test_cudnn_conv_bias_activation_forward():
    x = f32(1, 8, 8, 4, seed=49)
    w = f32(6, 3, 3, 4, seed=50)  # o01i
    bias = f32(6, seed=51)
    side = f32(1, 8, 8, 6, seed=52)
    cfg = json.dumps({"cudnn_conv_backend_config": {"activation_mode": "kRelu", "conv_result_scale": 1,
                                                    "side_input_scale": 0.5, "leakyrelu_alpha": 0}})
    text = f"""HloModule m
ENTRY e {{
  x = f32[1,8,8,4]{{3,2,1,0}} parameter(0)
  w = f32[6,3,3,4]{{3,2,1,0}} parameter(1)
  b = f32[6]{{0}} parameter(2)
  s = f32[1,8,8,6]{{3,2,1,0}} parameter(3)
  c = (f32[1,8,8,6]{{3,2,1,0}}, u8[0]{{0}}) custom-call(x, w, b, s), window={{size=3x3 pad=1_1x1_1}}, dim_labels=b01f_o01i->b01f, custom_call_target="__cudnn$convBiasActivationForward", backend_config={cfg}
  ROOT r = f32[1,8,8,6]{{3,2,1,0}} get-tuple-element(c), index=0
}}"""
    got = run_hlo(text, x, w, bias, side)
    ref = _conv_nhwc(x, np.transpose(w, (1, 2, 3, 0)), [(1, 1), (1, 1)])
    np.testing.assert_allclose(got, np.maximum(ref + 0.5 * side + bias, 0), rtol=1e-5, atol=1e-5)


def test_cudnn_backward_convolutions_are_adjoints_of_forward():
    x = f32(2, 9, 7, 3, seed=53)
    w = f32(3, 3, 3, 5, seed=54)
    g = f32(2, 5, 4, 5, seed=55)
    common = "window={size=3x3 stride=2x2 pad=1_1x1_1}, dim_labels=b01f_01io->b01f"
    text = f"""HloModule m
ENTRY e {{
  x = f32[2,9,7,3]{{3,2,1,0}} parameter(0)
  w = f32[3,3,3,5]{{3,2,1,0}} parameter(1)
  g = f32[2,5,4,5]{{3,2,1,0}} parameter(2)
  fwd = (f32[2,5,4,5]{{3,2,1,0}}, u8[0]{{0}}) custom-call(x, w), {common}, custom_call_target="__cudnn$convForward"
  bi = (f32[2,9,7,3]{{3,2,1,0}}, u8[0]{{0}}) custom-call(g, w), {common}, custom_call_target="__cudnn$convBackwardInput"
  bf = (f32[3,3,3,5]{{3,2,1,0}}, u8[0]{{0}}) custom-call(x, g), {common}, custom_call_target="__cudnn$convBackwardFilter"
  y = f32[2,5,4,5]{{3,2,1,0}} get-tuple-element(fwd), index=0
  dx = f32[2,9,7,3]{{3,2,1,0}} get-tuple-element(bi), index=0
  dw = f32[3,3,3,5]{{3,2,1,0}} get-tuple-element(bf), index=0
  ROOT out = (f32[2,5,4,5]{{3,2,1,0}}, f32[2,9,7,3]{{3,2,1,0}}, f32[3,3,3,5]{{3,2,1,0}}) tuple(y, dx, dw)
}}"""
    y, dx, dw = run_hlo(text, x, w, g)
    full = _conv_nhwc(x, w, [(1, 1), (1, 1)])[:, ::2, ::2, :]
    np.testing.assert_allclose(y, full, rtol=1e-5, atol=1e-5)
    inner = float(np.sum(y.astype(np.float64) * g))
    assert float(np.sum(x.astype(np.float64) * dx)) == pytest.approx(inner, rel=1e-5)
    assert float(np.sum(w.astype(np.float64) * dw)) == pytest.approx(inner, rel=1e-5)


def test_unknown_custom_call_is_a_clear_error_naming_the_target():
    text = """HloModule m
ENTRY e {
  x = f32[4]{0} parameter(0)
  ROOT c = f32[4]{0} custom-call(x), custom_call_target="my_kernel"
}"""
    with pytest.raises(EvaluationError, match="custom-call target 'my_kernel' is not supported"):
        run_hlo(text, f32(4))


XLA_COMPARE_TESTS = [
    "F32WithTrivialNonContractingDimension", "PredToBF16ConversionWorks",
    "TritonDotFusionCanHaveManyParameters", "TritonDotFusionCanHaveNoParametersAtAll",
    "TritonDotFusionCanHaveOnlyRHSParameter",
]


@pytest.mark.parametrize("name", XLA_COMPARE_TESTS)
def test_xla_run_and_compare_two_modules_pairs_agree(name):
    """XLA's triton_gemm_fusion_test compares a cuBLAS-call module with a
    Triton-fusion module (ErrorSpec 1e-3): so must we."""
    base = shared_path("corpus", "xla", "passes", "triton_gemm_fusion_test")
    ref, test = base / f"CompareTest.{name}__1.hlo", base / f"CompareTest.{name}__2.hlo"
    for seed in (0, 1):
        r = CliRunner().invoke(cli, ["compare", str(ref), str(test), "--seed", str(seed),
                                     "--rtol", "1e-3", "--atol", "1e-3"])
        assert r.exit_code == 0, r.output


def test_corpus_gelu_aux_module_returns_the_aux_output():
    path = shared_path("corpus", "xla", "passes", "cublaslt_test", "CublasLtBackendTest.CompileFor3TupleOutput.hlo")
    m = load_module(path)
    p0, p1 = random_inputs(m, 0)
    aux = evaluate(m, [p0, p1])  # the module returns tuple element 1: the aux output
    np.testing.assert_allclose(aux, p0.astype(np.float64) @ p1, rtol=1e-5, atol=1e-5)
