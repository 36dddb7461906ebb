"""cublas-gemm-rewriter against XLA's real dumps and on its own.

The strongest oracle is ``dot_general_gqa_cublaslt``: XLA's own
before/after files of the cublas-gemm-rewriter step (S0); our output must be
byte-identical to XLA's.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from hlorun.ir.shape import reshape_is_bitcast
from hlorun.text.parser import load_module, parse_module
from hlorun.passes import pass_class
from hlorun.passes.base import Target
from hlorun.text.printer import PRESETS, print_module
from hlorun.errors import PassError

from ..conftest import shared_path

H100 = Target("cuda", "H100", "9.0")


def rewrite(text: str, target: Target = H100, **options):
    module = parse_module(text, "<test>")
    p = pass_class("cublas-gemm-rewriter")(target=target, **options)
    changed = p.run(module)
    return module, p, changed


def gemm_calls(module):
    return [i for i in module.entry.instructions if i.opcode == "custom-call"]


def gemm_config(instr) -> dict:
    return instr.backend_config["gemm_backend_config"]


# ---------------------------------------------------------------------------
# XLA's own output (S0 dump)
# ---------------------------------------------------------------------------


def test_s0_gqa_dump_is_reproduced_byte_for_byte():
    d = shared_path("xla-dumps", "dot_general_gqa_cublaslt")
    before = load_module(next(d.glob("*0023.hlo_normalization*before_algsimp.txt")))
    after_text = next(d.glob("*after_cublas-gemm-rewriter*")).read_text()
    p = pass_class("cublas-gemm-rewriter")(target=Target("cuda", "H200", "9.0"))
    assert p.run(before) is True
    ours = print_module(before, form=replace(PRESETS["full"], compact_gte=True))
    assert ours == after_text


def test_s0_remark_names_the_dot_and_target():
    d = shared_path("xla-dumps", "dot_general_gqa_cublaslt")
    before = load_module(next(d.glob("*0023.hlo_normalization*before_algsimp.txt")))
    p = pass_class("cublas-gemm-rewriter")(target=H100)
    p.run(before)
    applied = [r for r in p.remarks if r.kind == "applied"]
    assert applied and applied[0].derived_from == ["dot.1"]
    assert applied[0].data["target"] == "__cublas$lt$matmul"


def test_bias_gelu_bf16_dump_fuses_into_bias_gelu_epilogue():
    d = shared_path("xla-dumps", "gemm_bias_gelu_bf16")
    module = load_module(next(d.glob("*before_optimizations.txt")))
    p = pass_class("cublas-gemm-rewriter")(target=H100)
    assert p.run(module)
    (call,) = gemm_calls(module)
    cfg = gemm_config(call)
    assert cfg["epilogue"] == "BIAS_GELU"
    assert call.name.startswith("cublas-lt-matmul")
    # x, w and the bias vector; the root reads the GEMM result directly.
    assert [o.name for o in call.operands][:2] == ["x.1", "w.1"]
    assert call.operands[2].shape.dimensions == (1024,)
    assert module.entry.root.opcode == "get-tuple-element"
    assert not any(i.opcode in ("tanh", "dot") for i in module.entry.instructions)


# ---------------------------------------------------------------------------
# Basic rewrite, config JSON, workspace
# ---------------------------------------------------------------------------

SIMPLE = """
HloModule m
ENTRY e {
  x = f32[64,32] parameter(0)
  y = f32[32,16] parameter(1)
  ROOT d = f32[64,16] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""


def test_backend_config_has_every_field_xla_prints():
    module, _, changed = rewrite(SIMPLE)
    assert changed
    (call,) = gemm_calls(module)
    assert call.custom_call_target == "__cublas$lt$matmul"
    assert str(call.shape) == "(f32[64,16]{1,0}, s8[33554432]{0})"
    raw = call.attrs["backend_config"]
    assert raw.startswith('{"device_type":"DEVICE_TYPE_INVALID","force_earliest_schedule":false,'
                          '"gemm_backend_config":{"alpha_imag":0,"alpha_real":1,')
    cfg = json.loads(raw)["gemm_backend_config"]
    assert cfg["lhs_stride"] == "2048" and cfg["rhs_stride"] == "512"
    assert cfg["dot_dimension_numbers"] == {"lhs_batch_dimensions": [], "lhs_contracting_dimensions": ["1"],
                                            "rhs_batch_dimensions": [], "rhs_contracting_dimensions": ["0"]}
    assert "selected_algorithm" not in cfg


@pytest.mark.parametrize("cc,workspace", [("9.0", 33554432), ("8.0", 4194304), ("10.0", 33554432)])
def test_workspace_size_follows_the_compute_capability(cc, workspace):
    module, _, _ = rewrite(SIMPLE, Target("cuda", "x", cc))
    (call,) = gemm_calls(module)
    assert call.shape.tuple_shapes[-1].dimensions == (workspace,)


def test_rocm_gfx942_uses_hipblaslt_form_and_its_workspace():
    module, _, _ = rewrite(SIMPLE, Target("rocm", "MI300X", "gfx942"))
    (call,) = gemm_calls(module)
    assert call.custom_call_target == "__cublas$lt$matmul"
    assert call.shape.tuple_shapes[-1].dimensions == (76 * 1024 * 1024,)


def test_legacy_cublas_target_and_workspace_bounded_by_operand_bytes():
    module, _, _ = rewrite(SIMPLE, cublaslt=False)
    (call,) = gemm_calls(module)
    assert call.custom_call_target == "__cublas$gemm"
    assert call.shape.tuple_shapes[-1].dimensions == ((64 * 32 + 32 * 16) * 4,)


def test_small_dot_is_left_to_the_classical_emitters_with_a_remark():
    text = SIMPLE.replace("64,32", "2,3").replace("32,16", "3,4").replace("64,16", "2,4")
    module, p, changed = rewrite(text)
    assert not changed
    (missed,) = [r for r in p.remarks if r.kind == "missed"]
    assert "classical emitters" in missed.message and missed.data["threshold"] == 100
    assert missed.data == {"m": 2, "n": 4, "k": 3, "threshold": 100}
    _, _, changed = rewrite(text, size_threshold=0)
    assert changed


def test_unsupported_dot_gets_a_missed_remark():
    text = """
HloModule m
ENTRY e {
  x = f32[8,4,4] parameter(0)
  y = f32[4,4,16] parameter(1)
  ROOT d = f32[8,16] dot(x, y), lhs_contracting_dims={1,2}, rhs_contracting_dims={0,1}
}
"""
    module, p, changed = rewrite(text)
    assert not changed
    assert any("2 contracting dimensions" in r.message for r in p.remarks)


def test_two_batch_dimensions_are_collapsed():
    text = """
HloModule m
ENTRY e {
  lhs = f32[2,3,16,1024] parameter(0)
  rhs = f32[2,3,1024,128] parameter(1)
  ROOT dot = f32[2,3,16,128] dot(lhs, rhs), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,1}, rhs_contracting_dims={2}
}
"""
    module, _, _ = rewrite(text)
    (call,) = gemm_calls(module)
    assert [str(o.shape) for o in call.operands] == ["f32[6,16,1024]{2,1,0}", "f32[6,1024,128]{2,1,0}"]
    assert str(call.shape.tuple_shapes[0]) == "f32[6,16,128]{2,1,0}"
    assert gemm_config(call)["dot_dimension_numbers"]["lhs_batch_dimensions"] == ["0"]
    assert module.entry.root.opcode == "reshape"
    assert str(module.entry.root.shape) == "f32[2,3,16,128]{3,2,1,0}"


def test_unsupported_types_fail_like_xla():
    # f16 x f16 -> f64 is a cuBLAS-shaped matmul with no cuBLAS-LT kernel;
    # XLA has no legacy fallback any more and fails the compilation.
    text = SIMPLE.replace("f32[64,32]", "f16[64,32]").replace("f32[32,16]", "f16[32,16]")
    text = text.replace("f32[64,16] dot", "f64[64,16] dot")
    with pytest.raises(PassError, match="not supported by cublasLt.*A=f16, B=f16, D=f64"):
        rewrite(text)
    module, p, changed = rewrite(text.replace("f64[64,16] dot", "s32[64,16] dot"))
    assert not changed and "s32 output needs s8 x s8" in p.remarks[0].message


# ---------------------------------------------------------------------------
# Output layout pinning (scenario S0)
# ---------------------------------------------------------------------------

S0_LAYOUT_ASSIGNED = """
HloModule s0, entry_computation_layout={(f16[2,32,512]{2,1,0}, f16[2,512,128]{2,1,0})->f16[2,1,32,128]{2,3,1,0}}
ENTRY e {
  a = f16[2,32,512]{2,1,0} parameter(0)
  b = f16[2,512,128]{2,1,0} parameter(1)
  dot = f16[2,32,128]{1,2,0} dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
  ROOT r = f16[2,1,32,128]{2,3,1,0} reshape(dot)
}
"""


def test_without_pinning_the_gemm_keeps_the_assigned_layout():
    module, _, _ = rewrite(S0_LAYOUT_ASSIGNED)
    (call,) = gemm_calls(module)
    assert str(call.shape.tuple_shapes[0]) == "f16[2,32,128]{1,2,0}"
    root = module.entry.root
    assert reshape_is_bitcast(root.operands[0].shape, root.shape)


def test_pinning_makes_the_downstream_reshape_a_non_bitcast():
    module, p, _ = rewrite(S0_LAYOUT_ASSIGNED, pin_output_layout=True)
    (call,) = gemm_calls(module)
    assert str(call.shape.tuple_shapes[0]) == "f16[2,32,128]{2,1,0}"
    root = module.entry.root
    assert root.opcode == "reshape"
    assert str(root.operands[0].shape) == "f16[2,32,128]{2,1,0}"
    assert not reshape_is_bitcast(root.operands[0].shape, root.shape)
    assert any("pinned" in r.message and r.data["original_layout"] == "{1,2,0}" for r in p.remarks)


def test_pinning_copies_back_for_layout_sensitive_users():
    text = S0_LAYOUT_ASSIGNED.replace("reshape(dot)", "bitcast(dot)")
    module, _, _ = rewrite(text, pin_output_layout=True)
    root = module.entry.root
    assert root.opcode == "bitcast"
    copy = root.operands[0]
    assert copy.opcode == "copy" and str(copy.shape) == "f16[2,32,128]{1,2,0}"
    assert str(copy.operands[0].shape) == "f16[2,32,128]{2,1,0}"


def test_pinning_a_root_gemm_keeps_the_entry_result_layout():
    text = """
HloModule m, entry_computation_layout={(f32[64,32]{1,0}, f32[32,16]{1,0})->f32[64,16]{0,1}}
ENTRY e {
  x = f32[64,32]{1,0} parameter(0)
  y = f32[32,16]{1,0} parameter(1)
  ROOT d = f32[64,16]{0,1} dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""
    module, _, _ = rewrite(text, pin_output_layout=True)
    root = module.entry.root
    assert root.opcode == "copy" and str(root.shape) == "f32[64,16]{0,1}"
    assert str(root.operands[0].shape) == "f32[64,16]{1,0}"


def test_bad_options_are_usage_errors():
    from hlorun.errors import UsageError
    with pytest.raises(UsageError):
        pass_class("cublas-gemm-rewriter")(fp8="sometimes")


# ---------------------------------------------------------------------------
# A real FP8 model: Llama 3.1 70B training step (XLA's benchmark HLO)
# ---------------------------------------------------------------------------


def test_llama31_70b_fp8_dots_become_fp8_gemms_after_dot_decomposer():
    path = shared_path("corpus", "xla", "files",
                       "xla__tools__benchmarks__hlo__hlo_llama31_70b_fp8_16x8.hlo")
    module = load_module(path)
    dots = sum(1 for i in module.instructions() if i.opcode == "dot")
    assert pass_class("dot_decomposer")().run(module)
    p = pass_class("cublas-gemm-rewriter")(target=H100)
    assert p.run(module)
    calls = [i for i in module.instructions() if i.opcode == "custom-call"
             and i.custom_call_target.startswith("__cublas")]
    f8 = [c for c in calls if c.custom_call_target == "__cublas$lt$matmul$f8"]
    assert len(calls) == dots == 32
    # The quantized projections (e4m3 activations/weights, e5m2 gradients)
    # take their f8 values and f32 scales directly; the embedding/LM-head
    # dots stay bf16.
    assert len(f8) == 27
    for c in f8:
        assert [o.shape.element_type for o in c.operands][2:] == ["f32", "f32"]
        assert {o.shape.element_type for o in c.operands[:2]} <= {"f8e4m3fn", "f8e5m2"}
        assert c.shape.tuple_shapes[0].element_type == "bf16"
    assert not [r for r in p.remarks if r.kind == "missed"]
