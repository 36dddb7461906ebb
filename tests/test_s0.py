"""Scenario S0 end to end: a non-bitcast reshape reaching layout
normalization after the GEMM output is pinned (openxla/xla#41481).

* gpu-rocm-41481 (no reshape-decomposer after GEMM rewriting) reports the
  reshape-is-bitcast violation, names cublas-gemm-rewriter, exits 2 and
  writes a reproducer;
* gpu-rocm (fixed) compiles it; its diff shows the reshape decomposed into
  copy + bitcast; ``--disable-passes reshape-decomposer`` brings the
  violation back;
* on XLA's own input module, the GEMM we produce is XLA's (target, operand
  and result shapes and layouts of the dump's after_optimizations).
"""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

import hlorun
from hlorun.cli import cli

from .conftest import TESTDATA, shared_path

S0 = TESTDATA / "s0" / "jit_dot_general.hlo"
S0_CONSUMER = TESTDATA / "s0" / "jit_dot_general_consumer.hlo"
DUMP = "dot_general_gqa_cublaslt"
#: The BLAS-rewriter path of S0 (XLA's --xla_gpu_enable_triton_gemm=false, as
#: in the dump): with Triton on, the GEMM becomes a __triton_gemm fusion and
#: the autotuner decides it (tests/test_s0_autotune.py).
NO_TRITON = ("--disable-passes", "triton-gemm-rewriter")


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_historical_pipeline_reports_the_violation_and_writes_a_reproducer(tmp_path):
    repro = tmp_path / "repro"
    r = run("compile", "-p", "gpu-rocm-41481", S0_CONSUMER, "--diff", "none", "--repro-dir", repro,
            "-o", tmp_path / "out.hlo", *NO_TRITON)
    assert r.exit_code == 2, r.output
    err = r.stderr
    assert "[reshape-is-bitcast] precondition of hlo_normalization/layout_normalization" in err
    assert re.search(r"first violated after #\d+ hlo_normalization/cublas-gemm-rewriter", err)
    assert "ShapeUtil::ReshapeIsBitcast(s, operand->shape())" in err
    assert "is not a bitcast (operand layout {2,1,0}" in err
    assert not (tmp_path / "out.hlo").exists()
    assert (repro / "before.hlo").exists() and (repro / "repro.yaml").exists()
    # the reproducer reproduces
    r2 = run("compile", repro / "before.hlo", "--pipeline", repro / "repro.yaml", "--diff", "none")
    assert r2.exit_code == 2 and "reshape-is-bitcast" in r2.stderr


def test_historical_violation_in_json_names_the_pass():
    r = run("compile", "-p", "gpu-rocm-41481", S0_CONSUMER, "--format", "json", *NO_TRITON)
    assert r.exit_code == 2
    doc = json.loads(r.stdout)
    text = json.dumps(doc)
    assert "reshape-is-bitcast" in text and "cublas-gemm-rewriter" in text


def test_fixed_pipeline_decomposes_the_reshape(tmp_path):
    out = tmp_path / "out.hlo"
    r = run("compile", "-p", "gpu-rocm", S0_CONSUMER, "--diff-filter",
            "hlo_normalization/reshape-decomposer", "--diff", "changed", "-o", out, *NO_TRITON)
    assert r.exit_code == 0, r.output
    diff = r.stderr
    # the non-bitcast reshape behind the pinned GEMM becomes copy + bitcast
    m = re.search(r"^-\s+%(reshape\.\d+) = f16\[2,1,32,128\]\{2,1,3,0\} reshape\(%get-tuple-element\)",
                  diff, re.M)
    assert m, diff
    assert re.search(r"^\+\s+%(copy\.?\d*) = f16\[2,32,128\]\{1,2,0\} copy\(%get-tuple-element\)",
                     diff, re.M), diff
    module = hlorun.load_module(out)
    assert not [i for i in module.instructions() if i.opcode == "reshape"]
    assert [i for i in module.instructions() if i.custom_call_target == "__cublas$lt$matmul"]


def test_disabling_reshape_decomposer_brings_the_violation_back():
    r = run("compile", "-p", "gpu-rocm", S0_CONSUMER, "--diff", "none",
            "--disable-passes", "reshape-decomposer", *NO_TRITON)
    assert r.exit_code == 2, r.output
    assert re.search(r"first violated after #\d+ hlo_normalization/cublas-gemm-rewriter", r.stderr)
    r = run("compile", "-p", "gpu-rocm", S0_CONSUMER, "--diff", "none",
            "--xla_disable_hlo_passes", "reshape-decomposer,triton-gemm-rewriter")
    assert r.exit_code == 2 and "reshape-is-bitcast" in r.stderr


@pytest.mark.parametrize("pipeline", ["gpu-cuda", "gpu-rocm", "gpu-rocm-41481"])
def test_plain_s0_module_compiles_everywhere(pipeline):
    # The root wants the canonical layout, so nothing non-canonical is
    # planted and even the historical pipeline is fine.
    r = run("compile", "-p", pipeline, S0, "--diff", "none")
    assert r.exit_code == 0, r.output


def test_cuda_layout_assignment_does_not_plant_the_layout():
    # On CUDA, XLA constrains batched dot outputs to the canonical layout
    # before consumers are considered: a copy after the GEMM, no violation.
    r = run("compile", "-p", "gpu-cuda", S0_CONSUMER, "--diff", "none")
    assert r.exit_code == 0, r.output


def _gemm(module):
    calls = [i for i in module.instructions() if (i.custom_call_target or "").startswith("__cublas")]
    assert len(calls) == 1, calls
    c = calls[0]
    return c.custom_call_target, [str(o.shape) for o in c.operands], str(c.shape)


def test_gemm_matches_xla_after_optimizations():
    before = shared_path("xla-dumps", DUMP, "module_1988.jit__lambda.before_optimizations.txt")
    after = shared_path("xla-dumps", DUMP, "module_1988.jit__lambda.sm_9.0a_gpu_after_optimizations.txt")
    # the dump's XLA flags (info.json): cuBLAS-LT, no Triton GEMMs (so no GEMV /
    # split-K rewriting either)
    r = run("compile", "-p", "gpu-cuda", before, "--diff", "none", "--xla-flags",
            "--xla_gpu_enable_triton_gemm=false --xla_gpu_enable_cublaslt=true")
    assert r.exit_code == 0, r.output
    ours = _gemm(hlorun.parse_module(r.stdout))
    xla = _gemm(hlorun.load_module(after))
    assert ours == xla
    assert ours == ("__cublas$lt$matmul", ["f16[2,32,512]{2,1,0}", "f16[2,512,128]{2,1,0}"],
                    "(f16[2,32,128]{2,1,0}, s8[33554432]{0})")
