"""``hlorun compile`` / ``opt`` / ``pipelines`` / ``passes`` through click's
CliRunner on real modules (XLA dumps and corpus files)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from hlorun.cli import cli
from hlorun.report.schema import validate

from .conftest import shared_path
from .pipeline_testkit import testkit  # noqa: F401  (fixture)

CNN = ("xla-dumps", "cnn_fp16",
       "module_14585.jit_model.0011.simplification.after_reshape-mover.before_constant_folding.txt")
#: The machinery tests below pin their pipeline (the first gpu-cuda.yaml:
#: cse/dce/tuple-simplifier only) so that growing the bundled pipelines does
#: not change their pass numbers.
MACHINERY = Path(__file__).resolve().parent.parent / "testdata" / "pipelines" / "machinery.yaml"
GELU = ("xla-dumps", "gemm_bias_gelu_bf16",
        "module_2651.jit__lambda.0008.simplification.after_algsimp.before_simplify-sorts.txt")


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def diff_headers(text):
    return re.findall(r"^--- (?:before )?#(\d+) (\S+)", text, re.M)


def test_compile_prints_table_diffs_for_changed_passes_and_module():
    f = shared_path(*CNN)
    r = run("compile", "-p", MACHINERY, f)
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("HloModule jit_model")
    err = r.stderr
    assert "optimization/simplification/cse [1]" in err and "111 -> 97" in err
    # exactly one pass changed the module, so exactly one diff
    assert diff_headers(err) == [("2", "optimization/simplification/cse")]
    assert "-  %constant.9 = f16[] constant(0)" in err
    assert "+  %max.19 = f16[1,16,32,32]{3,2,1,0} maximum(%add.28, %max.16)" in err
    assert re.search(r"^ok: 14 passes run, 1 changed, 111 -> 97 instructions", err, re.M)
    r = run("compile", "-p", MACHINERY, f, "--diff", "all")
    assert len(diff_headers(r.stderr)) == 14
    assert len(diff_headers(run("compile", "-p", MACHINERY, f, "--diff", "none").stderr)) == 0
    assert diff_headers(run("compile", "-p", MACHINERY, f, "--diff", "all", "--diff-filter", "post-layout").stderr) == [
        ("9", "post-layout_assignment/tuple-simplifier"), ("10", "post-layout_assignment/cse")]


def test_diff_on_second_module_shows_dce_removals():
    r = run("compile", "-p", MACHINERY, shared_path(*GELU), "--no-table")
    assert r.exit_code == 0
    heads = diff_headers(r.stderr)
    assert heads and all(p.endswith("/dce") for _, p in heads)
    assert re.search(r"^-  %\S+ = ", r.stderr, re.M)


def test_disable_and_enable_flags_and_xla_spellings():
    f = shared_path(*CNN)

    def executed(*flags):
        r = run("compile", f, "--format", "json", *flags)
        assert r.exit_code == 0, r.output
        return [p["path"] for p in json.loads(r.stdout)["passes"]]

    all_ = executed()
    assert "optimization/simplification/cse" in all_
    assert not any(p.endswith("/cse") for p in executed("--disable-passes", "cse"))
    no_simp = executed("--disable-passes", "simplification")
    assert not any("/simplification/" in p for p in no_simp) and "hlo_normalization/cse" in no_simp
    assert "optimization/simplification-2/algsimp" in no_simp  # another pipeline
    assert executed("--disable-passes", "hlo_normalization/cse") == [
        p for p in all_ if p != "hlo_normalization/cse"]
    assert executed("--disable-passes", "cse:2") == [p for p in all_ if p != "hlo_normalization/cse"]
    assert executed("--xla_disable_hlo_passes=cse,dce") == executed("--disable-passes", "cse",
                                                                    "--disable-passes", "dce")
    # XLA runs GemvRewriter / SplitkRewriter / GemmFusion only with Triton GEMMs on
    assert executed("--xla-flags", "--xla_gpu_enable_triton_gemm=false --xla_disable_hlo_passes=dce") \
        == executed("--disable-passes", "dce,gemv-rewriter,splitk-rewriter,triton-gemm-rewriter")
    assert set(executed("--enable-passes-only", "fusion")) == {"fusion/sort-iota-fusion",
                                                                "fusion/priority-fusion",
                                                                "fusion/cse", "fusion/dce",
                                                                "fusion/multi_output_fusion"}
    assert executed("--xla_enable_hlo_passes_only=post-layout_assignment/cse") == [
        "post-layout_assignment/cse"]
    assert executed("--xla_disable_all_hlo_passes") == []


def test_typos_are_errors_with_near_matches():
    f = shared_path(*CNN)
    r = run("compile", f, "--disable-passes", "tuple-simplifer")
    assert r.exit_code == 1
    assert "did you mean tuple-simplifier" in r.stderr and "Traceback" not in r.output
    r = run("compile", f, "--pipeline", "gpu-cudaa")
    assert r.exit_code == 1 and "did you mean gpu-cuda" in r.stderr
    r = run("compile", f, "--enable-passes-only", "simplification/cse:7")
    assert r.exit_code == 1 and "only 1 step" in r.stderr


def test_bad_pipeline_yaml_is_located(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("name: bad\nsteps:\n  - pipeline: x\n    steps:\n      - dce\n      - csee\n")
    r = run("compile", shared_path(*CNN), "--pipeline", p)
    assert r.exit_code == 1
    assert f"{p}:6:9: error: unknown pass 'csee'; did you mean cse" in r.stderr
    assert "      - csee\n        ^" in r.stderr


def test_json_report_matches_schema_and_is_the_only_stdout(tmp_path):
    out = tmp_path / "out.hlo"
    r = run("compile", "-p", MACHINERY, shared_path(*CNN), "--format", "json", "-o", out)
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert validate(doc) == []
    assert doc["status"] == "ok" and doc["summary"]["instructions_after"] == 97
    # proportionate: remarks counted, listed only when asked
    assert doc["remarks"] == [] and doc["remarks_total"] > 0 and "remarks" in doc["omitted"]
    assert doc["autotune"] == [] and doc["output"] == str(out)
    assert out.read_text().startswith("HloModule jit_model")
    r = run("compile", "-p", MACHINERY, shared_path(*CNN), "--format", "json", "-o", out,
            "--json-include", "remarks,diffs,module")
    doc = json.loads(r.stdout)
    assert validate(doc) == []
    assert len(doc["remarks"]) == doc["remarks_total"] and doc["remarks"][0]["pass"] == "cse"
    assert [d["pass"] for d in doc["diffs"]] == ["#2 optimization/simplification/cse"]
    assert any(ln.startswith("-") for ln in doc["diffs"][0]["lines"])
    assert doc["module_text"] == out.read_text()
    r = run("compile", "-p", MACHINERY, shared_path(*CNN), "--format", "json", "--json-include", "bogus")
    assert r.exit_code != 0 and "--json-include" in r.output  # (hlorun main maps it to 1)
    schema = json.loads(run("compile", "-p", MACHINERY, "--print-json-schema").stdout)
    assert schema["$id"] == "hlorun.compile/1"


def test_json_report_on_failure_matches_schema(testkit, tmp_path):
    p = tmp_path / "p.yaml"
    p.write_text("name: p\ncheckers: [no-negate]\nsteps:\n  - pipeline: a\n    steps: [dce, test-negate-root]\n")
    r = run("compile", shared_path(*CNN), "--pipeline", p, "--format", "json")
    assert r.exit_code == 2
    doc = json.loads(r.stdout)
    assert validate(doc) == [] and doc["status"] == "violation"
    assert doc["violations"][0]["after_pass"] == "a/test-negate-root"
    p.write_text("name: p\nsteps: [dce, test-fail]\n")
    r = run("compile", shared_path(*CNN), "--pipeline", p, "--format", "json")
    doc = json.loads(r.stdout)
    assert r.exit_code == 2 and validate(doc) == [] and doc["failure"]["pass"] == "test-fail"


def test_pass_failure_has_no_traceback_unless_asked(testkit, tmp_path):
    p = tmp_path / "p.yaml"
    p.write_text("name: p\nsteps: [dce, test-crash]\n")
    r = run("compile", shared_path(*CNN), "--pipeline", p)
    assert r.exit_code == 2 and r.stdout == ""
    assert "pass #2 p/test-crash failed (ZeroDivisionError)" in r.stderr
    assert "Traceback" not in r.output
    r = run("compile", shared_path(*CNN), "--pipeline", p, "--traceback")
    assert r.exit_code == 2 and "Traceback (most recent call last)" in r.stderr


def test_violation_panel_names_pass_instruction_rule(testkit, tmp_path):
    p = tmp_path / "p.yaml"
    p.write_text("name: p\ncheckers: [no-negate]\nsteps:\n  - pipeline: a\n    steps: [cse, test-negate-root, dce]\n")
    r = run("compile", shared_path(*CNN), "--pipeline", p)
    assert r.exit_code == 2
    assert "[no-negate] after #2 a/test-negate-root" in r.stderr
    assert "instruction: main.4/negate" in r.stderr
    assert "negate is not allowed here" in r.stderr


def test_output_is_atomic_and_input_is_protected(tmp_path):
    src = tmp_path / "in.hlo"
    src.write_text(shared_path(*CNN).read_text())
    r = run("compile", src, "-o", src)
    assert r.exit_code == 1 and "refusing to overwrite the input" in r.stderr
    out = tmp_path / "sub" / "out.hlo"
    r = run("compile", src, "-o", out, "--diff", "none")
    assert r.exit_code == 0 and r.stdout == "" and out.exists()
    assert not [x for x in out.parent.iterdir() if x.name.startswith(".")]


XLA_STEP = re.compile(r"^module_(\d{4,})\.([^.]+)\.(\d{4})\.([^.]+)\.after_([^.]+)\.before_([^.]+)\.txt$")


def test_dump_names_follow_xla_scheme(tmp_path):
    f = shared_path(*CNN)
    d = tmp_path / "dump"
    r = run("compile", "-p", MACHINERY, f, "--dump-to", d, "--diff", "none")
    assert r.exit_code == 0, r.output
    names = sorted(p.name for p in d.iterdir())
    assert names == [
        "module_14585.jit_model.0000.optimization.after_pipeline-start.before_simplification.txt",
        "module_14585.jit_model.0001.simplification.after_pipeline-start.before_tuple-simplifier.txt",
        "module_14585.jit_model.0002.simplification.after_cse.before_dce.txt",
        "module_14585.jit_model.0003.simplification.after_pipeline-start.before_tuple-simplifier.txt",
        "module_14585.jit_model.0004.optimization.after_simplification.before_pipeline-end.txt",
        "module_14585.jit_model.0005.hlo_normalization.after_pipeline-start.before_cse.txt",
        "module_14585.jit_model.0006.post-layout_assignment.after_pipeline-start.before_tuple-simplifier.txt",
        "module_14585.jit_model.0007.fusion.after_pipeline-start.before_cse.txt",
        "module_14585.jit_model.0008.post-fusion_optimization.after_pipeline-start.before_dce.txt",
        "module_14585.jit_model.before_optimizations.txt",
        "module_14585.jit_model.metadata.json",
        "module_14585.jit_model.sm_9.0_gpu_after_optimizations.txt",
    ]
    # the same grammar as every per-pass file of the real XLA dumps
    real = [p.name for p in shared_path("xla-dumps", "cnn_fp16").iterdir() if XLA_STEP.match(p.name)]
    assert len(real) > 50
    ours = [n for n in names if XLA_STEP.match(n)]
    assert len(ours) == 9
    # dumps are valid HLO that hlorun re-reads; cse's file equals XLA's own after_cse dump
    from hlorun.text.parser import load_module
    from hlorun.text.printer import print_module
    ours_cse = load_module(d / names[2])
    xla_cse = load_module(shared_path("xla-dumps", "cnn_fp16",
                                      "module_14585.jit_model.0012.simplification.after_cse.before_dce.txt"))
    assert print_module(ours_cse, form="diff") == print_module(xla_cse, form="diff")
    meta = json.loads((d / "module_14585.jit_model.metadata.json").read_text())
    assert meta["after_optimizations"] == names[-1]
    assert any(s.get("dump") == names[2] for s in meta["steps"])
    # --dump-pass-re: every matching pass, changed or not; XLA_FLAGS spelling works too
    d2 = tmp_path / "dump2"
    r = run("compile", "-p", MACHINERY, f, "--diff", "none", "--xla-flags", f"--xla_dump_to={d2} --xla_dump_hlo_pass_re=^dce$")
    assert r.exit_code == 0
    names2 = sorted(p.name for p in d2.iterdir() if XLA_STEP.match(p.name))
    # as XLA: a step is dumped when the pass before or after it matches
    assert names2[0] == "module_14585.jit_model.0000.simplification.after_cse.before_dce.txt"
    assert "module_14585.jit_model.0008.post-fusion_optimization.after_pipeline-start.before_dce.txt" in names2
    assert all("_dce." in n for n in names2)
    assert len([n for n in names2 if ".after_dce." in n]) == 5


def test_repro_bundle_reruns_to_the_same_violation(testkit, tmp_path):
    p = tmp_path / "p.yaml"
    p.write_text("name: p\ncheckers: [hlo-verifier, no-negate]\nsteps:\n"
                 "  - pipeline: early\n    steps: [cse, dce]\n"
                 "  - pipeline: late\n    steps: [tuple-simplifier, test-negate-root, dce]\n")
    rd = tmp_path / "repro"
    r = run("compile", shared_path(*CNN), "--pipeline", p, "--repro-dir", rd, "--diff", "none")
    assert r.exit_code == 2
    assert {x.name for x in rd.iterdir()} == {"before.hlo", "repro.yaml", "command.txt", "README.md"}
    line = [ln.strip() for ln in r.stderr.splitlines() if ln.strip().startswith("hlorun compile")]
    assert len(line) == 1
    assert "--pipeline" in (rd / "command.txt").read_text()
    # the bundled module is the state before test-negate-root (after early/cse)
    assert "negate(" not in (rd / "before.hlo").read_text()
    args = shlex.split(line[0])[1:]
    r2 = run(*args, "--format", "json")
    assert r2.exit_code == 2
    v = json.loads(r2.stdout)["violations"][0]
    assert (v["rule"], v["instruction"]) == ("no-negate", "negate")
    assert v["after_pass"] == "late/test-negate-root"


def test_repro_bundle_for_pass_failure(testkit, tmp_path):
    p = tmp_path / "p.yaml"
    p.write_text("name: p\nsteps:\n  - pipeline: x\n    steps: [cse, test-fail]\n")
    rd = tmp_path / "r"
    r = run("compile", shared_path(*CNN), "--pipeline", p, "--repro-dir", rd)
    assert r.exit_code == 2
    r2 = run("compile", rd / "before.hlo", "--pipeline", rd / "repro.yaml", "--format", "json")
    doc = json.loads(r2.stdout)
    assert r2.exit_code == 2 and doc["failure"]["path"] == "x/test-fail"
    assert doc["failure"]["message"] == "cannot handle this root"


def test_pass_limit_numbering():
    f = shared_path(*CNN)
    r = run("compile", "-p", MACHINERY, f, "--pass-limit", "2", "--diff", "none")
    assert r.exit_code == 0 and "stopped at --pass-limit 2" in r.stderr
    assert re.search(r"^ *2  optimization/simplification/cse", r.stderr, re.M)
    assert not re.search(r"^ *3  ", r.stderr, re.M)
    assert r.stdout.startswith("HloModule")


def test_opt_runs_listed_passes(tmp_path):
    f = shared_path(*CNN)
    r = run("opt", "--passes", "cse{is_layout_sensitive=true},dce", f, "--changed")
    assert r.exit_code == 0
    assert "cse: changed" in r.stderr and "dce: unchanged" in r.stderr
    assert r.stdout.count("constant(0)") < Path(f).read_text().count("constant(0)")
    r = run("opt", "--passes", "cse{is_layout_sensitiv=true}", f)
    assert r.exit_code == 1 and "did you mean is_layout_sensitive" in r.stderr
    chunks = tmp_path / "c.hlo"
    chunks.write_text("HloModule a\nENTRY e {\n  p = f32[] parameter(0)\n  n = f32[] negate(p)\n"
                      "  ROOT c = f32[] constant(1)\n}\n// -----\nHloModule b\nENTRY e {\n"
                      "  ROOT c = f32[] constant(2)\n}\n")
    r = run("opt", "--passes=dce", "--split-input-file", chunks)
    assert r.exit_code == 0 and r.stdout.count("// -----") == 1 and "negate" not in r.stdout


def test_pipelines_and_passes_commands():
    r = run("pipelines")
    assert r.exit_code == 0 and "gpu-cuda" in r.stderr
    r = run("pipelines", "gpu-cuda", "--disable-passes", "simplification,post-layout_assignment/cse")
    assert r.exit_code == 0
    assert "x pipeline simplification (fixed point, max 25)   [disabled]" in r.stderr
    assert "x cse:3{is_layout_sensitive=true}   [disabled]" in r.stderr
    assert "  - cse:2{is_layout_sensitive=true}\n" in r.stderr
    r = run("pipelines", "gpu-cuda", "--disable-passes", "simplifcation")
    assert r.exit_code == 1 and "did you mean simplification" in r.stderr
    r = run("passes")
    assert r.exit_code == 0 and "tuple-simplifier" in r.stderr and "is_layout_sensitive" in r.stderr


def test_dumps_are_read_back_by_xlas_own_parser(tmp_path):
    hlo = pytest.importorskip("jaxlib._hlo")
    d = tmp_path / "dump"
    r = run("compile", shared_path(*GELU), "--dump-to", d, "--diff", "none")
    assert r.exit_code == 0
    files = sorted(d.glob("*.txt"))
    assert len(files) >= 5
    for f in files:
        hlo.hlo_module_from_text(f.read_text())  # raises on anything XLA rejects


def test_repro_bundle_for_precondition_points_at_the_introducing_pass(testkit, tmp_path):
    p = tmp_path / "p.yaml"
    p.write_text("name: p\nsteps:\n"
                 "  - pipeline: early\n    steps: [cse, test-negate-root, dce]\n"
                 "  - pipeline: late\n    steps:\n      - tuple-simplifier\n"
                 "      - check: no-negate\n      - dce\n")
    rd = tmp_path / "repro"
    r = run("compile", shared_path(*CNN), "--pipeline", p, "--repro-dir", rd, "--format", "json")
    assert r.exit_code == 2
    v = json.loads(r.stdout)["violations"][0]
    assert v["after_pass"] == "early/test-negate-root" and v["precondition_of"] == "late/dce"
    assert "negate(" not in (rd / "before.hlo").read_text()  # state before the introducing pass
    r2 = run("compile", rd / "before.hlo", "--pipeline", rd / "repro.yaml", "--format", "json")
    v2 = json.loads(r2.stdout)["violations"][0]
    assert r2.exit_code == 2 and (v2["rule"], v2["instruction"]) == ("no-negate", "negate")
    assert v2["after_pass"] == "early/test-negate-root"


def test_remarks_listing():
    r = run("compile", "-p", MACHINERY, shared_path(*CNN), "--remarks", "--diff", "none")
    assert r.exit_code == 0
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("#2 optimization/simplification/cse [applied]")]
    assert len(lines) == 14 and "replaced by identical" in r.stderr


CORPUS = ["xla__backends__cpu__benchmarks__hlo__sum_axis_1x4096x1024_bf16.hlo",
          "xla__backends__cpu__benchmarks__hlo__topk_logits_k10_1x50000_bf16.hlo",
          "xla__backends__cpu__tests__thunk_coverage__cpu.hlo",
          pytest.param("xla__tools__benchmarks__hlo__hlo_gemma4_2b_bf16.hlo.gz", marks=pytest.mark.slow)]


@pytest.mark.parametrize("name", CORPUS)
def test_compile_corpus_modules(name):
    f = shared_path("corpus", "xla", "files", name)
    r = run("compile", f, "--format", "json", "--check-changed")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert validate(doc) == [] and doc["status"] == "ok"
    assert not any(p["changed_mismatch"] for p in doc["passes"])


def test_explain_flag_does_not_swallow_the_file(tmp_path):
    """`compile --explain FILE` (flag before the positional) compiles FILE;
    --explain-op takes the regex."""
    s0 = Path(__file__).resolve().parent.parent / "testdata" / "s0" / "jit_dot_general.hlo"
    r = run("compile", "--explain", str(s0), "--diff", "none", "--no-table", "-o", tmp_path / "o.hlo")
    assert r.exit_code == 0, r.output
    assert re.search(r"^kernels \(\d+\):", r.stderr, re.M), r.stderr
    r = run("compile", "--explain-op", "dot_general.*", str(s0), "--diff", "none", "--no-table",
            "-o", tmp_path / "o.hlo")
    assert r.exit_code == 0, r.output
    assert "kernels (" in r.stderr and "matching dot_general.*" in r.stderr
