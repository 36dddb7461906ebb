"""--force-backend through ``hlorun compile`` (issue 19): a global force
applies where the backend can run a GEMM and reports the others with the
reason; --force-backend-strict fails instead; ``blas`` is the platform's Lt
library; an INSTR= that names no GEMM is an error with did-you-mean."""

from __future__ import annotations

import json

from click.testing import CliRunner

from hlorun.cli import cli

from ..conftest import TESTDATA

MIXED = TESTDATA / "autotune" / "force_mixed_f32_f16.hlo"


def run(*args):
    return CliRunner().invoke(cli, ["compile", str(MIXED), "--diff", "none", *args])


def test_global_force_reports_the_infeasible_gemm_and_compiles():
    r = run("-p", "gpu-rocm", "--force-backend", "hipblaslt", "--format", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    recs = {x["instruction"]: x for x in doc["autotune"]}
    assert recs["gemm_fusion_dot.1"]["source"] == "forced"
    assert recs["gemm_fusion_dot.1"]["winner"]["backend"] == "hipblaslt"
    fi = recs["gemm_fusion_dot.2"]["force_infeasible"]
    assert fi["reasons"] == ["hipBLASLt has no f32 x f32 -> f16 GEMM (its type table takes "
                             "f32xf32->f32)"]
    r = run("-p", "gpu-rocm", "--force-backend", "hipblaslt")
    assert r.exit_code == 0
    assert ("--force-backend hipblaslt not applied to gemm_fusion_dot.2 [128x64x512 f32->f16]: "
            "hipBLASLt has no f32 x f32 -> f16 GEMM") in r.stderr


def test_strict_fails_naming_the_gemm_and_the_reason():
    r = run("-p", "gpu-rocm", "--force-backend", "hipblaslt", "--force-backend-strict")
    assert r.exit_code == 2
    assert "gemm_fusion_dot.2 [128x64x512 f32->f16]: --force-backend hipblaslt cannot run it: " \
           "hipBLASLt has no f32 x f32 -> f16 GEMM" in r.stderr
    assert "rejected: \n" not in r.stderr


def test_blas_alias_is_the_platforms_lt_library():
    for pipeline, lib in (("gpu-rocm", "hipblaslt"), ("gpu-cuda", "cublaslt")):
        r = run("-p", pipeline, "--force-backend", "blas", "--format", "json")
        assert r.exit_code == 0, r.output
        recs = {x["instruction"]: x for x in json.loads(r.stdout)["autotune"]}
        assert recs["gemm_fusion_dot.1"]["winner"]["backend"] == lib


def test_unknown_instruction_is_an_error_with_did_you_mean():
    r = run("-p", "gpu-rocm", "--force-backend", "dot.9=triton")
    assert r.exit_code == 2
    assert "no GEMM matches 'dot.9'; did you mean dot.2 or dot.1?" in r.stderr
    assert "a bug in the pass" not in r.stderr
    r = run("-p", "gpu-rocm", "--force-backend", "hipblast")
    assert r.exit_code == 1 and "did you mean hipblaslt?" in r.stderr
