"""``hlorun bisect``: --pass-limit search on S0, --between on S3."""

from __future__ import annotations

import json
import shlex
import sys

import pytest
from click.testing import CliRunner

from hlorun.cli import cli
from hlorun.text.fileio import read_text
from hlorun.cli.compile_options import compile_config
from hlorun.reduce import parse_condition
from hlorun.reduce.bisect import CompiledOutput, bisect_passes, first_difference

from ..conftest import TESTDATA

S0 = TESTDATA / "s0" / "jit_dot_general_consumer.hlo"
ATTENTION = TESTDATA / "reduce" / "s0_attention_block.hlo"
S3 = TESTDATA / "s3" / "fp8_matmul_scaled.hlo"
OLD = TESTDATA / "reduce" / "s3_gemm_old.yaml"
NEW = TESTDATA / "reduce" / "s3_gemm_new.yaml"
#: gpu-rocm-41481's BLAS-rewriter path (XLA: --xla_gpu_enable_triton_gemm=false);
#: with Triton on, the GEMM is a __triton_gemm fusion the autotuner decides.
NO_TRITON = ("--disable-passes", "triton-gemm-rewriter")


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def bisect(path, condition, *flags, cmd=None):
    cfg = compile_config([str(path), *map(str, flags)])
    cond = parse_condition(condition, cmd)
    if not cond.needs_compile:
        cond = CompiledOutput(cond)
    cond.prepare(cfg)
    try:
        return bisect_passes(read_text(path), str(path), cond, cfg)
    finally:
        close = getattr(cond, "close", None)
        if close:
            close()


@pytest.mark.parametrize("path", [S0, ATTENTION])
def test_s0_bisect_names_the_gemm_rewriter(path):
    res = bisect(path, "violation:reshape-is-bitcast", "--pipeline", "gpu-rocm-41481", *NO_TRITON)
    assert res.name == "cublas-gemm-rewriter" and res.path == "hlo_normalization/cublas-gemm-rewriter"
    # the same pass the pipeline's own first-appearance tracking names
    full = run("compile", path, "--pipeline", "gpu-rocm-41481", "--format", "json", *NO_TRITON)
    v = json.loads(full.stdout)["violations"][0]
    assert v["after_pass"] == res.path and v["pass_index"] == res.first
    # binary search: about log2(passes) compiles, each probe below the answer is clean
    assert len(res.probes) <= res.passes_total.bit_length() + 3
    assert all(not p.interesting for p in res.probes if p.limit is not None and p.limit < res.first)
    assert any(ln.startswith("+") and "dot(" in ln for ln in res.diff)


def test_bisect_with_a_script_on_the_compiled_output():
    py = shlex.quote(sys.executable)
    res = bisect(S0, None, "--pipeline", "gpu-rocm-41481", *NO_TRITON,
                 cmd=f"{py} -c \"import sys; sys.exit('__cublas' not in open(sys.argv[1]).read())\"")
    assert res.name == "cublas-gemm-rewriter"
    assert any("__cublas$lt$matmul" in r["message"] for r in res.remarks)


def test_s3_bisect_finds_the_fp8_rewriter_and_fails_cleanly_on_the_new_version(tmp_path):
    f = tmp_path / "fused.py"
    f.write_text("import sys\nsys.exit('__cublas$lt$matmul$f8' not in open(sys.argv[1]).read())\n")
    script = f"{shlex.quote(sys.executable)} {f}"
    res = bisect(S3, None, "--pipeline", OLD, cmd=script)
    assert res.path == "hlo_normalization/cublas-gemm-rewriter" and res.first == 5
    r = run("bisect", S3, "--until-cmd", script, "--pipeline", NEW)
    assert r.exit_code == 1 and "does not hold after the whole pipeline" in r.stderr


def test_s3_between_pipeline_versions_finds_the_reordered_rewriter():
    a = compile_config([str(S3), "--pipeline", str(OLD)])
    b = compile_config([str(S3), "--pipeline", str(NEW)])
    d = first_difference(read_text(S3), str(S3), a, b)
    assert d.found and d.kind == "only-b"
    assert d.step_b.path == "hlo_normalization/cublas-gemm-rewriter" and "fp8=none" in d.step_b.label
    # the extra no-op dce of the new version is noticed but not blamed
    assert [s.path for s in d.skipped_b] == ["optimization/dce"]
    # the diff shows the bf16 GEMM the new order produces instead of the fp8 one
    assert any(ln.startswith("+") and '"__cublas$lt$matmul"' in ln for ln in d.diff)
    same = first_difference(read_text(S3), str(S3), a,
                            compile_config([str(S3), "--pipeline", str(OLD)]))
    assert not same.found


def test_cli_bisect_and_between_output(tmp_path):
    r = run("bisect", "--until", "violation:reshape-is-bitcast", "--", "compile", "-p", "gpu-rocm-41481",
            *NO_TRITON, S0)
    assert r.exit_code == 0, r.output
    assert "first pass after which violation:reshape-is-bitcast holds: #11 " \
           "hlo_normalization/cublas-gemm-rewriter" in r.stderr
    assert "BISECT: --pass-limit" in r.stderr
    r = run("bisect", S3, "--between", OLD, NEW, "--format", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["found"] and doc["step_b"]["label"] == "cublas-gemm-rewriter{fp8=none}"
    assert doc["pipelines"] == ["s3-gemm-old", "s3-gemm-new"]
    r = run("bisect", S3, "--between", OLD, NEW, "--until", "numerics")
    assert r.exit_code == 1 and "takes no --until" in r.stderr
    r = run("bisect", S0, "--until", "violation:reshape-is-bitcast", "-p", "gpu-rocm")
    assert r.exit_code == 1 and "nothing to bisect" in r.stderr
