"""hlorun fmt / check through click's CliRunner."""

from __future__ import annotations

from click.testing import CliRunner

from hlorun.cli import cli

from .conftest import shared_path

GOOD = """HloModule m, entry_computation_layout={(f32[4]{0})->f32[4]{0}}

ENTRY %main (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} negate(%p)
}
"""

BAD = """HloModule m
ENTRY %main {
  %p = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} negate(%q)
}
"""


def test_fmt_prints_module(tmp_path):
    f = tmp_path / "m.hlo"
    f.write_text(GOOD)
    r = CliRunner().invoke(cli, ["fmt", str(f)])
    assert r.exit_code == 0, r.output
    assert r.output.strip() == GOOD.strip()


def test_fmt_error_is_located_and_exit_1(tmp_path):
    f = tmp_path / "bad.hlo"
    f.write_text(BAD)
    r = CliRunner().invoke(cli, ["fmt", str(f)])
    assert r.exit_code == 1
    assert f"{f}:4:30: error: instruction does not exist: q" in r.output
    assert "Traceback" not in r.output


def test_fmt_many_files_status_and_check(tmp_path):
    good, bad = tmp_path / "a.hlo", tmp_path / "b.hlo"
    good.write_text(GOOD)
    bad.write_text(BAD)
    r = CliRunner().invoke(cli, ["fmt", "--check", str(good), str(bad)])
    assert r.exit_code == 1
    assert "1/2 parsed, 1 failed" in r.output
    r = CliRunner().invoke(cli, ["fmt", "--check", str(good)])
    assert r.exit_code == 0


def test_fmt_output_file_written_and_input_untouched(tmp_path):
    f = tmp_path / "m.hlo"
    f.write_text(GOOD.replace("negate(%p)", "negate(f32[4]{0} %p)"))
    out = tmp_path / "out.hlo"
    r = CliRunner().invoke(cli, ["fmt", str(f), "-o", str(out)])
    assert r.exit_code == 0
    assert "negate(%p)" in out.read_text()
    assert "negate(f32[4]{0} %p)" in f.read_text()


def test_fmt_gz_model_dump_canonical():
    p = shared_path("corpus/xla/files/xla__tools__benchmarks__hlo__hlo_gemma4_2b_bf16.hlo.gz")
    r = CliRunner().invoke(cli, ["fmt", "--canonical", str(p)])
    assert r.exit_code == 0
    assert "tmp_0" in r.output and "metadata=" not in r.output


def test_check_reports_verifier_finding(tmp_path):
    f = tmp_path / "v.hlo"
    f.write_text(GOOD.replace("ROOT %n = f32[4]{0} negate(%p)",
                              "ROOT %n = f32[4]{0} reshape(%p)\n  %x = f32[3]{0} reshape(%p)"))
    r = CliRunner().invoke(cli, ["check", str(f)])
    assert r.exit_code == 2
    assert "reshape changes the element count" in r.output


def test_version():
    r = CliRunner().invoke(cli, ["--version"])
    assert r.exit_code == 0 and "hlorun" in r.output
