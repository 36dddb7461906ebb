"""``--until`` conditions and ``--until-cmd``, judged by real compiles."""

from __future__ import annotations

import shlex
import sys

import pytest

from hlorun.text.fileio import read_text
from hlorun.text.parser import parse_module
from hlorun.cli.compile_options import compile_config
from hlorun.reduce import parse_condition
from hlorun.reduce.conditions import (BackendCondition, CommandCondition, PassFailsCondition,
                                      ViolationCondition)
from hlorun.errors import UsageError

from ..conftest import TESTDATA

S0 = TESTDATA / "s0" / "jit_dot_general_consumer.hlo"
S0_PLAIN = TESTDATA / "s0" / "jit_dot_general.hlo"
S3 = TESTDATA / "s3" / "fp8_matmul_scaled.hlo"


def judge(condition: str, file, *flags, cmd: str | None = None):
    cfg = compile_config([str(file), *map(str, flags)])
    cond = parse_condition(condition, cmd)
    cond.prepare(cfg)
    text = read_text(file)
    try:
        return cond.test(parse_module(text, str(file)), text)
    finally:
        close = getattr(cond, "close", None)
        if close:
            close()


#: gpu-rocm-41481's BLAS-rewriter path (XLA: --xla_gpu_enable_triton_gemm=false);
#: with Triton on, the GEMM is a __triton_gemm fusion the autotuner decides.
NO_TRITON = ("--disable-passes", "triton-gemm-rewriter")


def test_violation_holds_with_the_historical_pipeline_only():
    v = judge("violation:reshape-is-bitcast", S0, "--pipeline", "gpu-rocm-41481", *NO_TRITON)
    assert v.interesting
    assert v.signature == ("reshape-is-bitcast", "cublas-gemm-rewriter")
    assert "ReshapeIsBitcast" in v.detail and "cublas-gemm-rewriter" in v.detail
    fixed = judge("violation:reshape-is-bitcast", S0, "--pipeline", "gpu-rocm")
    assert not fixed.interesting and fixed.result.status == "ok"


def test_violation_rule_not_in_the_pipeline_is_added_as_a_checker():
    cfg = compile_config([str(S0), "--pipeline", "gpu-rocm-41481",
                                   "--disable-passes", "reshape-decomposer"])
    cond = ViolationCondition("reshape-is-bitcast")
    names_before = [c.name for c in cfg.spec().checkers]
    cond.prepare(cfg)
    assert names_before == [c.name for c in cfg.spec().checkers]  # it has check steps
    cfg2 = compile_config([str(S3), "--pipeline",
                                    str(TESTDATA / "reduce" / "s3_gemm_old.yaml")])
    ViolationCondition("reshape-is-bitcast").prepare(cfg2)
    assert "reshape-is-bitcast" in [c.name for c in cfg2.spec().checkers]


def test_compile_flags_reach_the_judge():
    # the crash itself: with --keep-going layout_normalization runs on the
    # non-bitcast reshape and fails like XLA's RET_CHECK
    v = judge("pass-fails:layout_normalization", S0, "--pipeline", "gpu-rocm-41481", "--keep-going",
              *NO_TRITON)
    assert v.interesting and v.signature == ("layout_normalization", "PassError")
    assert "RET_CHECK" in v.detail
    stopped = judge("pass-fails:layout_normalization", S0, "--pipeline", "gpu-rocm-41481", *NO_TRITON)
    assert not stopped.interesting  # the violation stops the run first
    off = judge("violation:reshape-is-bitcast", S0, "--pipeline", "gpu-rocm-41481",
                "--disable-passes", "cublas-gemm-rewriter", *NO_TRITON)
    assert not off.interesting


def test_pass_fails_without_a_name_and_unknown_names():
    v = judge("pass-fails", S0, "--pipeline", "gpu-rocm-41481", "--keep-going", *NO_TRITON)
    assert v.interesting
    with pytest.raises(UsageError, match="no such pass"):
        judge("pass-fails:layout-normalization", S0, "--pipeline", "gpu-rocm-41481")


def test_until_cmd_exit_status_decides(tmp_path):
    py = shlex.quote(sys.executable)
    yes = judge(None, S0, cmd=f"{py} -c \"import sys; sys.exit('dot(' not in open(sys.argv[1]).read())\" {{}}")
    assert yes.interesting
    no = judge(None, S0, cmd=f"{py} -c \"import sys; sys.exit('sort(' not in open(sys.argv[1]).read())\"")
    assert not no.interesting and no.detail.startswith("exit 1")
    c = CommandCondition(f"{py} -c 'import time; time.sleep(5)'", timeout=0.5)
    c.prepare(None)
    try:
        v = c.test(None, "HloModule x")
    finally:
        c.close()
    assert not v.interesting and "timed out" in v.detail


AUTOTUNE = TESTDATA / "reduce" / "s0_autotune_41481.yaml"
AUTOTUNE_BLAS = TESTDATA / "reduce" / "s0_autotune_41481_blas.yaml"
ATTENTION = TESTDATA / "reduce" / "s0_attention_block.hlo"


def test_backend_condition_reads_the_autotuners_decisions():
    # noisy measurements, seed 1: hipBLASLt wins the attention dot (S0's flip),
    # Triton keeps the output projection
    v = judge("backend:gemm_fusion_dot=BLAS", ATTENTION, "--pipeline", AUTOTUNE)
    assert v.interesting and "hipblaslt" in v.detail
    assert not judge("backend:gemm_fusion_dot.1=BLAS", ATTENTION, "--pipeline", AUTOTUNE).interesting
    assert judge("backend:gemm_fusion_dot.1=triton", ATTENTION, "--pipeline", AUTOTUNE).interesting
    assert judge("backend:gemm_fusion_dot*=hipblaslt", ATTENTION, "--pipeline", AUTOTUNE).interesting
    assert not judge("backend:gemm_fusion_dot=cublaslt", ATTENTION, "--pipeline", AUTOTUNE).interesting
    # the dot a fusion was made from names it too (the autotuner's remark lineage)
    assert judge("backend:dot.2=BLAS", ATTENTION, "--pipeline", AUTOTUNE).interesting
    forced = judge("backend:gemm_fusion_dot.1=BLAS", ATTENTION, "--pipeline", AUTOTUNE_BLAS)
    assert forced.interesting
    none = judge("backend:nothing_here=BLAS", ATTENTION, "--pipeline", AUTOTUNE)
    assert not none.interesting and "no autotuner decision for nothing_here" in none.detail


def test_backend_condition_needs_an_autotuning_pipeline():
    with pytest.raises(UsageError, match="no autotuner step"):
        judge("backend:dot_general.1=BLAS", S0, "--pipeline", str(TESTDATA / "reduce" / "s3_gemm_old.yaml"))
    with pytest.raises(UsageError, match="BLAS, triton"):
        BackendCondition("dot.1", "magic")


def test_condition_parse_errors_are_usage_errors():
    for bad, msg in [("violation:reshape-is-bitcas", "did you mean reshape-is-bitcast"),
                     ("violation", "needs a checker"), ("numerix", "did you mean numerics"),
                     ("backend:dot.1", "INSTR=BACKEND"), (None, "missing --until")]:
        with pytest.raises(UsageError, match=msg):
            parse_condition(bad)
    assert isinstance(parse_condition("pass-fails:dce"), PassFailsCondition)
