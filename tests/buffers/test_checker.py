"""The buffer-aliasing invariant (scenario S1)."""

from __future__ import annotations

import pytest

from hlorun.buffers.checker import BufferAliasingChecker
from hlorun.text.parser import load_module, parse_module
from hlorun.pipeline.loader import parse_pipeline
from hlorun.verifier.checkers import CHECKERS, get_checker
from tests.conftest import TESTDATA

S1 = TESTDATA / "s1"


def _check(name: str, **kw):
    return BufferAliasingChecker(**kw).check(load_module(S1 / f"{name}.hlo"))


def test_registered():
    assert "buffer-aliasing" in CHECKERS
    assert isinstance(get_checker("buffer-aliasing"), BufferAliasingChecker)


def test_s1_violation_names_call_operand_allocation_and_reason():
    diags = _check("sort_chunks_by_map_bwd")
    assert len(diags) == 2
    d = diags[0]
    assert d.rule == "buffer-aliasing" and d.instruction == "inp_grad"
    assert "triton_kernel_call" in d.message
    assert "operand 0 output_grad" in d.message
    assert "allocation 0" in d.message
    assert "reuse of a dead operand buffer" in d.message
    assert d.line == 30 and d.filename.endswith("sort_chunks_by_map_bwd.hlo")
    assert any("output_to_operand_aliasing" in n for n in d.notes)
    # jax-triton autotunes triton_kernel_call on the live buffers
    assert "autotuning re-runs" in diags[1].message


def test_s1_fix_is_accepted():
    assert _check("sort_chunks_by_map_bwd_fixed") == []


def test_s1_fix_puts_the_output_in_the_dedicated_buffer():
    from hlorun.buffers import assign_buffers
    m = load_module(S1 / "sort_chunks_by_map_bwd_fixed.hlo")
    asg = assign_buffers(m)
    e = m.entry
    out = asg.slices_at(e.get_instruction("inp_grad"))
    assert out == asg.slices_at(e.get_instruction("inp_grad_buf"))
    assert out != asg.slices_at(e.get_instruction("output_grad"))


def test_donation_reason():
    (d, auto) = _check("sort_chunks_by_map_bwd_donated")
    assert "donation" in d.message and "allocation 0 (parameter" in d.message
    assert any("parameter 0{} is donated" in n for n in d.notes)


def test_target_declared_safe_in_place_is_accepted():
    assert _check("sort_chunks_by_map_bwd",
                  custom_call_targets={"triton_kernel_call": {"in_place": True}}) == []


def test_target_declared_never_in_place_is_kept_apart():
    assert _check("sort_chunks_by_map_bwd",
                  custom_call_targets={"triton_kernel_call": {"in_place": False}}) == []


def test_declared_never_in_place_still_reports_donation():
    diags = _check("sort_chunks_by_map_bwd_donated",
                   custom_call_targets={"triton_kernel_call": {"in_place": False}})
    assert diags and "donation" in diags[0].message
    assert any("declared in_place: false" in n for n in diags[0].notes)


def test_autotune_finding_only_for_autotuned_targets():
    text = (S1 / "sort_chunks_by_map_bwd.hlo").read_text().replace(
        '"triton_kernel_call"', '"te_sort_chunks_by_map_bwd"')
    diags = BufferAliasingChecker().check(parse_module(text, "x.hlo"))
    assert len(diags) == 1 and "reuse" in diags[0].message
    diags = BufferAliasingChecker(custom_call_targets={
        "te_*": {"autotuned": True}}).check(parse_module(text, "x.hlo"))
    assert len(diags) == 2


def test_declared_alias_to_the_read_input_is_the_users_promise():
    """A kernel declared to work in place on its input (alias to operand 0)
    is not a hazard: the declaration says so, and the autotuner saves and
    restores declared aliases."""
    text = (S1 / "sort_chunks_by_map_bwd.hlo").read_text().replace(
        'api_version=API_VERSION_STATUS_RETURNING,',
        'api_version=API_VERSION_STATUS_RETURNING, output_to_operand_aliasing={{}: (0, {})},')
    assert BufferAliasingChecker().check(parse_module(text, "x.hlo")) == []


def test_options_from_pipeline_yaml():
    spec = parse_pipeline("""
name: t
checkers:
  - buffer-aliasing
custom_call_targets:
  triton_kernel_call: {in_place: false}
steps: []
""", "t.yaml")
    ch = spec.checkers[0].instantiate(spec)
    assert ch.custom_call_targets == {"triton_kernel_call": {"in_place": False}}
    assert ch.check(load_module(S1 / "sort_chunks_by_map_bwd.hlo")) == []
    # checker options win over the section
    spec2 = parse_pipeline("""
name: t
checkers:
  - buffer-aliasing: {custom_call_targets: {triton_kernel_call: {in_place: true}}, platform: rocm}
custom_call_targets:
  triton_kernel_call: {in_place: false}
steps: []
""", "t.yaml")
    ch2 = spec2.checkers[0].instantiate(spec2)
    assert ch2.custom_call_targets["triton_kernel_call"]["in_place"] is True
    assert ch2.platform == "rocm"


def test_bad_custom_call_targets_section_is_a_located_error():
    from hlorun.pipeline.yaml_source import YamlError
    with pytest.raises(YamlError) as e:
        parse_pipeline("""
name: t
custom_call_targets:
  my_kernel: {in_place: maybe}
steps: []
""", "t.yaml")
    assert e.value.loc.line == 4
    assert "in_place" in e.value.message
    with pytest.raises(YamlError):
        parse_pipeline("name: t\ncustom_call_targets:\n  k: {inplace: false}\nsteps: []\n", "t.yaml")


def test_compile_with_the_checker_reports_s1_and_passes_the_fix(tmp_path):
    from click.testing import CliRunner

    from hlorun.cli import cli
    r = CliRunner()
    pipeline = str(S1 / "pipeline.yaml")
    bad = r.invoke(cli, ["compile", str(S1 / "sort_chunks_by_map_bwd.hlo"), "--pipeline", pipeline,
                         "-o", str(tmp_path / "o.hlo")])
    assert bad.exit_code == 2, bad.output
    assert "buffer-aliasing" in bad.output and "inp_grad" in bad.output
    good = r.invoke(cli, ["compile", str(S1 / "sort_chunks_by_map_bwd_fixed.hlo"), "--pipeline",
                          pipeline, "-o", str(tmp_path / "o2.hlo")])
    assert good.exit_code == 0, good.output


def test_real_dumps_have_no_findings(shared):
    """XLA's own output (copy insertion done, library calls only) is clean."""
    for d in sorted((shared / "xla-dumps").glob("*/*gpu_after_optimizations.txt")):
        assert BufferAliasingChecker().check(load_module(d)) == [], d
