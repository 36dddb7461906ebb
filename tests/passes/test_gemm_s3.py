"""Scenario S3: which FP8 scaled-matmul variants become one
``__cublas$lt$matmul$f8`` call, and what the rewriter says when they do not.

testdata/s3/fp8_matmul_scaled.hlo is the real JAX module
(xla-dumps/fp8_matmul_scaled, before_optimizations); the others are the
variants of SCENARIOS.md S3 written in the same form.
"""

from __future__ import annotations

import pytest

from hlorun.text.parser import load_module
from hlorun.passes import pass_class
from hlorun.passes.base import Target

from ..conftest import TESTDATA

H100 = Target("cuda", "H100", "9.0")


def run(name: str, target: Target = H100, **options):
    module = load_module(TESTDATA / "s3" / f"{name}.hlo")
    p = pass_class("cublas-gemm-rewriter")(target=target, **options)
    p.run(module)
    calls = [i for i in module.entry.instructions if i.opcode == "custom-call"]
    return module, calls, p.remarks


def missed(remarks) -> list[str]:
    return [r.message for r in remarks if r.kind == "missed"]


def test_s3_module_from_jax_is_one_fp8_custom_call():
    module, (call,), remarks = run("fp8_matmul_scaled")
    assert call.custom_call_target == "__cublas$lt$matmul$f8"
    # f8 operands (b transposed into the column-major layout cuBLAS-LT wants),
    # then the a, b and d scales converted to f32.
    assert [o.shape.element_type for o in call.operands] == ["f8e4m3fn", "f8e4m3fn", "f32", "f32", "f32"]
    assert [o.name for o in call.operands[:2]] == ["a.1", "transpose.2"]
    assert str(call.shape) == "(f8e4m3fn[32,128]{1,0}, s8[33554432]{0})"
    cfg = call.backend_config["gemm_backend_config"]
    assert cfg["scale_mode"] == 1 and cfg["epilogue"] == "DEFAULT" and cfg["damax_output"] is False
    # Nothing of the bf16 dequantize/dot/clamp/convert chain is left.
    assert not {i.opcode for i in module.entry.instructions} & {"dot", "clamp", "multiply"}
    assert not missed(remarks)
    assert any("fused the scaling, clamp and conversion to f8e4m3fn" in r.message for r in remarks)


def test_without_clamp_the_conversion_stays_outside():
    module, (call,), remarks = run("fp8_no_clamp")
    assert call.custom_call_target == "__cublas$lt$matmul$f8"
    assert call.shape.tuple_shapes[0].element_type == "bf16"
    assert module.entry.root.opcode == "convert"
    (msg,) = missed(remarks)
    assert msg.startswith("conversion to f8e4m3fn not fused into the GEMM of d: clamp missing")


def test_relu_and_amax_capture_match_again():
    module, (call,), remarks = run("fp8_relu_amax")
    cfg = call.backend_config["gemm_backend_config"]
    assert call.custom_call_target == "__cublas$lt$matmul$f8"
    assert (cfg["epilogue"], cfg["damax_output"]) == ("RELU", True)
    assert str(call.shape) == "(f8e4m3fn[32,128]{1,0}, f32[], s8[33554432]{0})"
    root = module.entry.root
    assert root.opcode == "tuple"
    d, amax = root.operands
    assert d.opcode == "get-tuple-element" and d.tuple_index == 0
    assert amax.opcode == "convert" and str(amax.shape) == "bf16[]"
    assert amax.operands[0].tuple_index == 1
    assert not {i.opcode for i in module.entry.instructions} & {"reduce", "abs", "maximum", "clamp"}
    assert not missed(remarks)


def test_gelu_after_scaling_never_matches_and_says_why():
    module, (call,), remarks = run("fp8_gelu")
    cfg = call.backend_config["gemm_backend_config"]
    assert call.custom_call_target == "__cublas$lt$matmul$f8"
    assert cfg["epilogue"] == "DEFAULT" and call.shape.tuple_shapes[0].element_type == "bf16"
    assert module.entry.root.opcode == "convert"
    msgs = missed(remarks)
    assert any("gelu epilogue not fused into the GEMM of d: the GELU reads multiply d_scaled" in m for m in msgs)
    assert any("conversion to f8e4m3fn not fused" in m and "multiply d_gelu" in m for m in msgs)


@pytest.mark.parametrize("toolkit,epilogue,out", [("12.8", "GELU", "f8e4m3fn"), ("12.3", "DEFAULT", "bf16")])
def test_gelu_on_the_gemm_needs_cuda_12_4_for_fp8(toolkit, epilogue, out):
    _, (call,), remarks = run("fp8_gelu_on_dot", toolkit_version=toolkit)
    cfg = call.backend_config["gemm_backend_config"]
    assert (cfg["epilogue"], call.shape.tuple_shapes[0].element_type) == (epilogue, out)
    if epilogue == "DEFAULT":
        assert "gelu epilogue not supported with fp8 GEMMs before CUDA 12.4 (toolkit 12.3.0)" in missed(remarks)
    else:
        assert not missed(remarks)


def test_vector_scale_is_not_a_scalar():
    module, (call,), remarks = run("fp8_vector_scale")
    assert call.custom_call_target == "__cublas$lt$matmul"
    assert [o.shape.element_type for o in call.operands] == ["bf16", "bf16"]
    (msg,) = missed(remarks)
    assert msg == "FP8 GEMM not rewritten: scale is not a scalar: sa_bf16 has shape bf16[32]{0}"
    (r,) = [r for r in remarks if r.kind == "missed"]
    assert r.instruction == "d" and r.data["scale_shape"] == "bf16[32]{0}"


def test_pre_ada_gpus_get_no_fp8_call():
    _, (call,), remarks = run("fp8_matmul_scaled", Target("cuda", "A100", "8.0"))
    assert call.custom_call_target == "__cublas$lt$matmul"
    assert any("require Ada, Hopper, or later architectures (target is sm_80)" in m for m in missed(remarks))


def test_rocm_forms_the_fp8_call_but_not_the_output_conversion():
    # MI300 (gfx942) has only the FNUZ FP8 types; MI350 (gfx950) takes OCP
    # f8e4m3fn but XLA does not fuse the output conversion on ROCm.
    _, (call,), remarks = run("fp8_matmul_scaled", Target("rocm", "MI300X", "gfx942"))
    assert call.custom_call_target == "__cublas$lt$matmul"
    assert any("the input types must be f8e5m2fnuz or f8e4m3fnuz" in m for m in missed(remarks))
    _, (call,), remarks = run("fp8_matmul_scaled", Target("rocm", "MI355X", "gfx950"))
    assert call.custom_call_target == "__cublas$lt$matmul$f8"
    assert call.shape.tuple_shapes[0].element_type == "bf16"
    assert call.shape.tuple_shapes[-1].dimensions == (64 * 1024 * 1024,)
    assert any("output conversion fusion is not supported on ROCm" in m for m in missed(remarks))
