"""Scenario S3 end to end: two pipeline versions on the FP8 scaled matmul.

testdata/s3/xla-old.yaml runs the FP8 GEMM rewriter before Triton GEMM
fusion (the scaled matmul becomes one ``__cublas$lt$matmul$f8``);
testdata/s3/xla-new.yaml runs them in XLA's current order (GEMM fusion
first: a bf16 ``gemm_fusion_dot_general`` plus separate dequantize
fusions, as in the real dump xla-dumps/fp8_matmul_scaled).
``hlorun diff-pipelines`` must find the divergence at the new version's
triton-gemm-rewriter and show how the final kernels differ; ``--explain``
must say which form each variant takes and which sub-pattern failed.
"""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from hlorun.cli import cli
import hlorun
from hlorun.analysis.explain import explain_kernels
from hlorun.text.fileio import read_text
from hlorun.analysis.kernel_diff import compare_kernels
from hlorun.analysis.lineage import LineageTracker
from hlorun.cli.compile_options import compile_config
from hlorun.reduce.bisect import first_difference

from .conftest import TESTDATA, shared_path

S3 = TESTDATA / "s3"
MODEL = S3 / "fp8_matmul_scaled.hlo"
OLD, NEW = S3 / "xla-old.yaml", S3 / "xla-new.yaml"
F8 = "custom-call:__cublas$lt$matmul$f8"


def run(*args: str):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture(scope="module")
def diverged():
    ta, tb = LineageTracker(), LineageTracker()
    a = compile_config([str(MODEL), "--pipeline", str(OLD)])
    b = compile_config([str(MODEL), "--pipeline", str(NEW)])
    d = first_difference(read_text(MODEL), str(MODEL), a, b, [ta], [tb])
    return d, compare_kernels(d.module_a, ta, d.module_b, tb)


def test_divergence_is_the_new_versions_gemm_fusion(diverged):
    d, _ = diverged
    assert d.found and d.kind == "only-b" and (d.status_a, d.status_b) == ("ok", "ok")
    assert d.pipeline_a == "s3-xla-old" and d.pipeline_b == "s3-xla-new"
    assert d.step_b.path == "hlo_normalization/triton-gemm-rewriter"
    # the old version runs the same pass later (after the FP8 rewriter): a reordering
    assert d.moved is not None and d.moved.path == d.step_b.path and d.moved.index > d.step_b.index
    assert "s3-xla-old runs it later" in d.summary()
    (r,) = d.step_b.remarks
    assert r["kind"] == "applied" and r["message"].startswith(
        "wrapped dot_general.1 into gemm_fusion_dot_general.1 with clamp.3")
    # the dequantize multiplies are left out of the GEMM fusion: separate kernels
    assert sorted(s.split(":")[0] for s in r["data"]["skipped"]) == ["mul.7", "mul.9"]
    # the diff at the divergence: B has the fusion, A still the plain dot
    assert any(ln.startswith("+") and "kind=kCustom" in ln for ln in d.diff)


def test_final_kernels_fp8_call_vs_gemm_fusion_and_dequantize_fusions(diverged):
    _, kd = diverged
    counts = {c: (a, b) for c, a, b in kd.categories}
    assert counts == {F8: (1, 0), "gemm-fusion": (0, 1), "loop-fusion": (0, 2)}
    (op,) = kd.ops
    assert op.op.name == "dot_general.1"
    assert [e.kernel.category for e in op.a] == [F8]
    assert [e.kernel.category for e in op.b] == ["gemm-fusion"]
    (f8,) = [e for e in kd.only_a if e.kernel.category == F8]
    assert f8.kernel.shape.startswith("(f8e4m3fn[32,128]")  # scaled, clamped, converted inside
    assert any("fused the scaling, clamp and conversion to f8e4m3fn" in s for s in f8.story)
    # A is that one call: the three scales reach cuBLAS as f32 without
    # kernels of their own (simplify-fp-conversions drops the f32 -> bf16 ->
    # f32 round trips, as XLA does with excess precision allowed)
    assert [e for e in kd.only_a if e is not f8] == []
    # B: the bf16 GEMM fusion and the two dequantize (convert * scale) fusions
    assert sorted((e.kernel.category, e.kernel.hero, e.kernel.shape) for e in kd.only_b) == [
        ("gemm-fusion", "convert", "f8e4m3fn[32,128]{1,0}"),
        ("loop-fusion", "multiply", "bf16[128,64]{1,0}"),
        ("loop-fusion", "multiply", "bf16[32,64]{1,0}")]


def test_new_version_reproduces_xlas_kernels():
    """xla-new's final kernels are XLA's own for this module (after_optimizations)."""
    import hlorun
    from hlorun.analysis.kernels import kernel_list
    dump = shared_path("xla-dumps", "fp8_matmul_scaled")
    after = next(dump.glob("*gpu_after_optimizations.txt"))
    r = hlorun.compile(MODEL, str(NEW), copy=False)
    module, result = r.module, r.run
    assert result.exit_code == 0
    ours = sorted((k.name, k.category, k.shape) for k in kernel_list(module))
    theirs = sorted((k.name, k.category, k.shape) for k in kernel_list(hlorun.load_module(after)))
    assert ours == theirs


def test_same_pipeline_twice_is_no_difference():
    r = run("diff-pipelines", MODEL, "--a", OLD, "--b", OLD, "--format", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert not doc["found"] and doc["kernels"]["same"] and doc["kernels"]["counts"] == [1, 1]


def test_cli_text_and_json():
    r = run("diff-pipelines", MODEL, "--a", OLD, "--b", NEW)
    assert r.exit_code == 0, r.output
    err = r.stderr
    # the step numbers move as passes join gpu-cuda's earlier sub-pipelines
    m = re.search(r"first difference: #(\d+) hlo_normalization/triton-gemm-rewriter runs only in "
                  r"s3-xla-new and changes the module \(s3-xla-old runs it later, as #(\d+) "
                  r"hlo_normalization/triton-gemm-rewriter\)", err)
    assert m and int(m.group(2)) == int(m.group(1)) + 1, err
    moved = int(m.group(2))
    assert "left out: mul.7: not obviously profitable to fuse as input" in err
    assert "final kernels: s3-xla-old 1, s3-xla-new 3" in err
    assert "    s3-xla-old: cublas-gemm.2 [custom-call:__cublas$lt$matmul$f8]" in err
    assert "    s3-xla-new: gemm_fusion_dot_general.1 [gemm-fusion]" in err
    assert "--- module after the diverging step" not in err  # --diff is off by default
    r = run("diff-pipelines", MODEL, "--a", OLD, "--b", NEW, "--diff", "changed")
    assert "--- module after the diverging step" in r.stderr
    r = run("diff-pipelines", MODEL, "--a", OLD, "--b", NEW, "--format", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["step_b"]["path"] == "hlo_normalization/triton-gemm-rewriter"
    assert doc["moved"]["index"] == moved and "diff" not in doc
    cats = {c["category"]: (c["a"], c["b"]) for c in doc["kernels"]["categories"]}
    assert cats[F8] == (1, 0) and cats["gemm-fusion"] == (0, 1)
    assert doc["kernels"]["ops"][0]["b"] == [{"name": "gemm_fusion_dot_general.1",
                                             "category": "gemm-fusion"}]


def test_cli_bad_input():
    r = run("diff-pipelines", MODEL, "--a", OLD, "--b", S3 / "nope.yaml")
    assert r.exit_code == 1 and "Traceback" not in r.output
    r = run("diff-pipelines", MODEL, "--a", OLD)
    assert r.exit_code != 0 and "--b" in r.output


# ---------------------------------------------------------------------------
# --explain on the S3 variants (the old order: the FP8 rewriter gets to look)
# ---------------------------------------------------------------------------


def _explain(variant: str, pipeline=OLD):
    r = hlorun.compile(S3 / f"{variant}.hlo", str(pipeline), copy=False)
    module, result, tracker = r.module, r.run, r.lineage
    assert result.exit_code == 0, result.failure
    return explain_kernels(module, tracker)


def _one(exps, category):
    (e,) = [e for e in exps if e.kernel.category == category]
    return e, "\n".join(e.story)


def test_explain_scaled_matmul_is_one_fp8_call():
    exps = _explain("fp8_matmul_scaled")
    e, text = _one(exps, F8)
    assert "computing dot_general.1 (jit(fn)/dot_general" in e.story[0]
    assert "rewrote dot_general.1 into __cublas$lt$matmul$f8 (f8e4m3fn x f8e4m3fn -> bf16)" in text
    assert "fused the scaling, clamp and conversion to f8e4m3fn into the GEMM of dot_general.1" in text
    assert not [x for x in exps if x.kernel.category == "gemm-fusion"]


def test_explain_no_clamp_says_the_clamp_is_missing():
    exps = _explain("fp8_no_clamp")
    e, _ = _one(exps, F8)
    assert e.kernel.shape.startswith("(bf16[32,128]")  # the conversion stayed outside
    (conv,) = [x for x in exps if x.kernel.shape == "f8e4m3fn[32,128]{1,0}"]
    assert conv.kernel.category == "loop-fusion"
    assert any("conversion to f8e4m3fn not fused into the GEMM of d: clamp missing" in s
               for s in conv.story)


def test_explain_relu_amax_matches_again():
    e, text = _one(_explain("fp8_relu_amax"), F8)
    assert e.kernel.shape.startswith("(f8e4m3fn[32,128]{1,0}, f32[]")  # amax output
    assert "fused relu d_relu into the GEMM of d (epilogue RELU)" in text
    assert "the amax reduction amax into the GEMM of d (damax_output)" in text


def test_explain_gelu_after_scaling_never_matches():
    exps = _explain("fp8_gelu")
    e, _ = _one(exps, F8)
    assert e.kernel.shape.startswith("(bf16[32,128]")
    (rest,) = [x for x in exps if x.kernel.shape == "f8e4m3fn[32,128]{1,0}"]
    text = "\n".join(rest.story)
    assert "gelu epilogue not fused into the GEMM of d: the GELU reads multiply d_scaled" in text
    assert "conversion to f8e4m3fn not fused into the GEMM of d" in text


def test_explain_vector_scale_falls_back_to_a_gemm_fusion():
    exps = _explain("fp8_vector_scale")
    assert not [x for x in exps if x.kernel.category == F8]
    e, text = _one(exps, "gemm-fusion")
    assert "FP8 GEMM not rewritten: scale is not a scalar: sa_bf16 has shape bf16[32]{0}" in text
    assert "hlo_normalization/triton-gemm-rewriter: gemm_fusion_d: wrapped d into gemm_fusion_d" in text


def test_explain_new_order_says_gemm_fusion_took_the_dot():
    r = run("compile", MODEL, "-p", NEW, "--no-table", "--diff", "none", "--explain-op", "dot_general.1")
    assert r.exit_code == 0, r.output
    assert "gemm_fusion_dot_general.1 is a Triton GEMM kernel (__triton_gemm fusion) computing " \
           "dot_general.1" in r.stderr
    assert "__cublas$lt$matmul$f8" not in r.stderr
