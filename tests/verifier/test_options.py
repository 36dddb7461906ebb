"""hlo-verifier rules that need IR edits (what a buggy pass does) or
options (mixed precision, layout sensitivity, reshape-is-bitcast), and the
``hlorun check`` command on a broken dump."""

from __future__ import annotations

from click.testing import CliRunner

import hlorun
from hlorun.cli import cli
from hlorun.ir.module import Instruction
from hlorun.ir.shape import Shape
from hlorun.verifier.checkers import HloVerifier, get_checker

from ..conftest import shared_path
from .test_rules import SOURCES, dump, findings


def messages(module, **options) -> list[str]:
    return [d.message for d in HloVerifier(**options).check(module)]


def test_operand_count_after_a_bad_edit():
    m = hlorun.parse_module(SOURCES["gelu"]())
    tanh = next(i for i in m.instructions() if i.name == "tanh.1")
    tanh.add_operand(tanh.operands[0])
    assert messages(m) == ["Expected 1 operands for tanh instruction, has 2"]


def test_operand_from_another_computation():
    m = hlorun.parse_module(SOURCES["permute_final"]())
    fused = m.get_computation("fused_gather")
    add = fused.get_instruction("add.3.1")
    add.set_operand(0, m.entry.get_instruction("perm.1"))
    assert any("is in a different computation: main.1 vs fused_gather" in x
               for x in messages(m))


def test_use_def_link_broken():
    m = hlorun.parse_module(SOURCES["gelu"]())
    tanh = next(i for i in m.instructions() if i.name == "tanh.1")
    op = tanh.operands[0]
    op._users = tuple(u for u in op._users if u is not tanh)
    assert messages(m) == ["use-def broken: mul.11 does not list tanh.1 as a user"]


def test_new_instruction_with_a_wrong_shape_is_reported_without_location():
    m = hlorun.parse_module(SOURCES["gelu"]())
    x = m.entry.get_instruction("x.1")
    bad = m.entry.add_instruction(Instruction("negate", Shape.array("bf16", [2]), [x]))
    diags = HloVerifier().check(m)
    assert {(d.instruction, d.line) for d in diags} == {(bad.name, None)}
    assert any("equal to bf16[256,512], actual shape is bf16[2]" in d.message for d in diags)


def test_mixed_precision_is_an_option():
    text = SOURCES["gelu"]().replace(
        "%constant.7 = bf16[] constant(0.04468)\n"
        "  %mul.9 = bf16[256,1024]{1,0} broadcast(",
        "%constant.7 = f32[] constant(0.04468)\n"
        "  %mul.9 = f32[256,1024]{1,0} broadcast(")
    strict = findings(text)
    assert [d.instruction for d in strict] == ["mul.10"]
    assert "Seen floating point types of different precisions in multiply" in strict[0].message
    assert findings(text, allow_mixed_precision=True) == []


def test_dot_takes_its_own_element_type_as_preferred_type():
    text = SOURCES["gelu"]().replace(
        "%dot_general.1 = bf16[256,1024]{1,0} dot(", "%dot_general.1 = f32[256,1024]{1,0} dot(")
    assert [d.instruction for d in findings(text)] == ["add.11"]  # only the consumer
    text = text.replace("%add.11 = bf16[256,1024]{1,0} add(%dot_general.1, %add.10)",
                        "%convert.0 = bf16[256,1024]{1,0} convert(%dot_general.1)\n"
                        "  %add.11 = bf16[256,1024]{1,0} add(%convert.0, %add.10)")
    assert findings(text) == []


def test_bitcast_convert_width_rules():
    base = SOURCES["fp8"]()
    ok = base.replace("%convert_element_type.6 = bf16[32,64]{1,0} convert(%a.1)",
                      "%convert_element_type.6 = bf16[32,64]{1,0} convert(%a.1)\n"
                      "  %bc = u8[32,64,2]{2,1,0} bitcast-convert(%convert_element_type.6)")
    assert findings(ok) == []
    bad = ok.replace("u8[32,64,2]{2,1,0} bitcast-convert", "u8[32,64]{1,0} bitcast-convert")
    assert [d.message for d in findings(bad)] == [
        "Expected instruction to have shape equal to u8[32,64,2], actual shape is u8[32,64]"]


def test_layout_sensitive_compares_layouts_of_data_movers():
    text = SOURCES["cpu"]().replace(
        "while_res_1 = f32[128]{0} get-tuple-element(while_res), index=1",
        "while_res_1 = f32[128]{0:T(128)} get-tuple-element(while_res), index=1")
    assert findings(text) == []
    diags = findings(text, layout_sensitive=True)
    # The GTE and the tuple that passes it on to the root both move data.
    assert [d.instruction for d in diags] == ["while_res_1", "root_tuple"]
    assert "f32[128]{0}, actual shape is f32[128]{0:T(128)}" in diags[0].message


def test_reshape_is_bitcast_option_on_the_s0_dump():
    """After layout assignment the cnn_fp16 module has a reshape that is not
    a bitcast (the reshape decomposer fixes it next): the post-layout
    verifier option reports it."""
    text = dump("cnn_fp16", "*.0034.layout_assignment.after_layout-assignment*.txt")
    assert findings(text, layout_sensitive=True) == []
    diags = findings(text, layout_sensitive=True, verify_reshape_is_bitcast=True)
    assert len(diags) == 1 and "Reshape should be a physical bitcast" in diags[0].message


def test_async_pair_needs_its_done():
    text = SOURCES["permute_final"]().replace(
        "ROOT %copy.1 = f32[64,256]{1,0} copy(%bitcast.1.0)",
        "%cs = (f32[64,256]{1,0}, f32[64,256]{1,0}, u32[]) copy-start(%bitcast.1.0)\n"
        "  ROOT %copy.1 = f32[64,256]{1,0} copy(%bitcast.1.0)")
    assert [d.message for d in findings(text)] == [
        "The copy-start instruction requires one consumer, found 0"]


def test_checker_registry_and_options():
    v = get_checker("hlo-verifier", layout_sensitive=True)
    assert isinstance(v, HloVerifier) and v.layout_sensitive and v.name == "hlo-verifier"


def test_hlorun_check_reports_located_findings(tmp_path):
    text = SOURCES["gelu"]().replace("%add.11 = bf16[256,1024]{1,0} add(",
                                     "%add.11 = bf16[256,512]{1,0} add(")
    f = tmp_path / "gelu.hlo"
    f.write_text(text)
    r = CliRunner().invoke(cli, ["check", str(f)])
    assert r.exit_code == 2, r.output
    line = next(i for i, ln in enumerate(text.split("\n"), 1) if "%add.11 =" in ln)
    assert f"{f}:{line}:3: error: Expected instruction to have shape equal to bf16[256,1024]" \
        in r.output
    assert "Traceback" not in r.output
    shared_path("xla-dumps")  # the sources come from the shared dumps
