"""``hlorun buffers``: output formats and exit codes."""

from __future__ import annotations

import json

from click.testing import CliRunner

from hlorun.cli import cli
from tests.conftest import TESTDATA, shared_path

S1 = TESTDATA / "s1"


def _dump(case: str) -> str:
    return str(next(shared_path("xla-dumps", case).glob("*gpu_after_optimizations.txt")))


def run(*args):
    return CliRunner().invoke(cli, list(args))


def test_stdout_is_xla_buffer_assignment_text():
    path = _dump("permute_rows_donated")
    r = run("buffers", path)
    assert r.exit_code == 0, r.output
    want = open(path[:-4] + "-buffer-assignment.txt").read()
    assert r.stdout == want
    # the human summary goes to stderr
    assert "parameter" in r.stderr and "peak live memory 128.2KiB" in r.stderr
    assert "live ranges of the" in r.stderr and "loop_gather_fusion{}" in r.stderr


def test_print_selects_xla_texts():
    path = _dump("permute_rows_donated")
    r = run("buffers", path, "--print", "memory-usage", "--print", "live-range", "--top", "0")
    assert r.exit_code == 0
    want = (open(path[:-4] + "-memory-usage-report.txt").read()
            + open(path[:-4] + "-live-range.txt").read())
    assert r.stdout == want


def test_dump_to_writes_xla_four_files(tmp_path):
    path = _dump("fp8_matmul_scaled")
    r = run("buffers", path, "--dump-to", str(tmp_path), "--print", "none")
    assert r.exit_code == 0, r.output
    base = path[:-4]
    for suffix in ("-buffer-assignment.txt", "-memory-usage-report.txt", "-live-range.txt"):
        assert (tmp_path / f"jit_fn{suffix}").read_text() == open(base + suffix).read()
    assert (tmp_path / "jit_fn-buffer-assignment-values.txt").exists()


def test_json_document():
    r = run("buffers", _dump("dot_general_gqa_cublaslt"), "--format", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["schema"] == "hlorun.buffers/1"
    assert doc["summary"]["total_bytes"] == 34160896
    assert [a["kind"] for a in doc["allocations"]] == ["parameter", "parameter", "output", "temp"]
    temp = doc["allocations"][3]
    assert {(v["instruction"], tuple(v["index"])): v["offset"] for v in temp["values"]} == {
        ("loop_transpose_fusion", ()): 33554688, ("custom-call.1", ()): 0,
        ("custom-call.1", (1,)): 256}
    assert doc["schedule"][5] == "custom-call.1"


def test_plot_writes_an_svg(tmp_path):
    out = tmp_path / "t.svg"
    r = run("buffers", _dump("cnn_fp16"), "--plot", str(out), "--print", "none")
    assert r.exit_code == 0, r.output
    svg = out.read_text()
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert "cudnn-conv-bias-activation.13{0}" in svg and "allocation 35" in svg


def test_check_exit_codes():
    bad = run("buffers", str(S1 / "sort_chunks_by_map_bwd.hlo"), "--check", "--print", "none")
    assert bad.exit_code == 2
    assert "buffer-aliasing: 2 finding(s)" in bad.stderr
    assert "sort_chunks_by_map_bwd.hlo:30:3: error: custom-call inp_grad" in bad.stderr
    good = run("buffers", str(S1 / "sort_chunks_by_map_bwd_fixed.hlo"), "--check", "--print", "none")
    assert good.exit_code == 0 and "buffer-aliasing: ok" in good.stderr
    # a target declared never-in-place on the command line
    r = run("buffers", str(S1 / "sort_chunks_by_map_bwd.hlo"), "--check", "--print", "none",
            "--no-alias", "triton_kernel_call")
    assert r.exit_code == 0


def test_check_json_includes_diagnostics():
    r = run("buffers", str(S1 / "sort_chunks_by_map_bwd.hlo"), "--check", "--format", "json")
    assert r.exit_code == 2
    doc = json.loads(r.stdout)
    assert [d["rule"] for d in doc["diagnostics"]] == ["buffer-aliasing", "buffer-aliasing"]


def test_pipeline_option_takes_its_targets(tmp_path):
    yaml = tmp_path / "p.yaml"
    yaml.write_text("name: p\ninclude: [gpu-cuda]\ncustom_call_targets:\n"
                    "  triton_kernel_call: {in_place: false}\n")
    r = run("buffers", str(S1 / "sort_chunks_by_map_bwd.hlo"), "--pipeline", str(yaml),
            "--check", "--print", "none")
    assert r.exit_code == 0, r.output


def test_bad_input_is_a_located_error_not_a_traceback(tmp_path):
    f = tmp_path / "bad.hlo"
    f.write_text("HloModule m\nENTRY %e () -> f32[] {\n  ROOT %x = f32[] bogus()\n}\n")
    r = run("buffers", str(f))
    assert r.exit_code == 1
    assert "bad.hlo:3" in r.output and "Traceback" not in r.output
    r = run("buffers", str(tmp_path / "missing.hlo"))
    assert r.exit_code != 0 and "Traceback" not in r.output
