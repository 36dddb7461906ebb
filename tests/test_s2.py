"""Scenario S2: "why did my linear layer become fused_reduce?"

testdata/s2/cnn_fp16.hlo is the before_optimizations module of the real
XLA dump shared/xla-dumps/cnn_fp16 (4 convolutions, 5 linear layers, batch
1, fp16; the last linear is 1024 -> 10).  The default GPU pipeline must
turn the small-N linear layers into reduction kernels, the large ones into
GEMM kernels, the convolutions into cuDNN calls, and --explain / hlorun
explain must say why in words, with XLA's rules and numbers.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import hlorun
from hlorun.cli import cli
from hlorun.analysis.explain import explain_kernels
from hlorun.report.schema import validate

S2 = Path(__file__).resolve().parents[1] / "testdata" / "s2" / "cnn_fp16.hlo"
H200 = {"device": "H200"}  # the dump's device

SMALL = {"dot_general.7": (1024, 4096), "dot_general.8": (1024, 1024), "dot_general.9": (10, 1024)}
LARGE = {"dot_general.5": (4096, 16384, 16), "dot_general.6": (4096, 4096, 8)}


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.fixture(scope="module")
def compiled():
    r = hlorun.compile(S2, copy=False, **H200)
    module, result, tracker = r.module, r.run, r.lineage
    assert result.exit_code == 0, result.failure
    return module, tracker


def _kernels_of(module, tracker, op):
    from hlorun.analysis.explain import is_primary
    return [e for e in explain_kernels(module, tracker, op=op) if is_primary(e, op)]


def test_small_linears_become_reduction_kernels(compiled):
    module, tracker = compiled
    for op in SMALL:
        ks = _kernels_of(module, tracker, op)
        reductions = [e for e in ks if e.kernel.category == "input-fusion" and e.kernel.hero == "reduce"]
        assert len(reductions) == 1, (op, [(e.kernel.name, e.kernel.category) for e in ks])
        assert reductions[0].kernel.name.startswith("input_reduce_fusion")


def _gemms_of(module, tracker, op):
    """GEMM kernels that compute ``op``'s dot (a dot-strength-reduction
    decision about it is in their history)."""
    return [e for e in _kernels_of(module, tracker, op)
            if e.kernel.category in ("gemm-fusion", "custom-call:__cublas$lt$matmul")
            and any(d.remark.pass_name == "dot-strength-reduction" and op in d.origins
                    for d in e.decisions)]


def test_large_linears_become_gemm_kernels(compiled):
    """One GEMM kernel computes each large linear's dot (the kernel with the
    dot-strength-reduction decision about it).  The next layer's GEMM may
    list the op too: since reshape-mover sinks the dot's output reshape
    below the bias add and ReLU, the reshape that feeds the next GEMM (fused
    into it as a bitcast) is CSE-merged with one from this dot's rewrite."""
    module, tracker = compiled
    for op in LARGE:
        ks = _kernels_of(module, tracker, op)
        gemms = _gemms_of(module, tracker, op)
        assert len(gemms) == 1, (op, [(e.kernel.name, e.kernel.category) for e in ks])


def test_convolutions_become_cudnn_calls(compiled):
    """Each convolution is one cuDNN bias+ReLU call; as in XLA, its NHWC
    layout on Hopper adds transposes of its NCHW operands (the input of the
    first, every filter), which explain lists as the convolution's kernels
    too (nothing else does)."""
    module, tracker = compiled
    for op, operands in (("conv_general_dilated.4", 2), ("conv_general_dilated.5", 1),
                         ("conv_general_dilated.6", 1), ("conv_general_dilated.7", 1)):
        ks = _kernels_of(module, tracker, op)
        cudnn = [e for e in ks if e.kernel.category.startswith("custom-call:")]
        assert [e.kernel.category for e in cudnn] == ["custom-call:__cudnn$convBiasActivationForward"]
        layout = [e for e in ks if e not in cudnn]
        assert len(layout) == operands and all(
            {i.opcode for i in e.kernel.instruction.fused_computation.instructions}
            == {"parameter", "transpose"} for e in layout), [e.kernel.name for e in layout]
        text = "\n".join(cudnn[0].story)
        assert "bias" in text and "ReLU" in text


def test_the_s2_snippet_reduction_in_f32(compiled):
    """The 1024 -> 10 layer's kernel is XLA's snippet: convert to f32, reduce,
    convert back to f16 (the reduction runs in the GEMM accumulator type)."""
    module, tracker = compiled
    (e,) = _kernels_of(module, tracker, "dot_general.9")
    body = hlorun.print_module(module).split(f"%{e.kernel.instruction.fused_computation.name} ")[1]
    body = body.split("\n}\n", 1)[0]
    assert "f32[1024,10]{1,0} convert(" in body
    assert "f32[10]{0} reduce(" in body
    assert "f16[10]{0} convert(" in body.split("ROOT")[1]


def test_explanations_say_why_in_words(compiled):
    module, tracker = compiled
    for op, (n, k) in SMALL.items():
        (e,) = [x for x in _kernels_of(module, tracker, op) if x.kernel.category == "input-fusion"]
        text = "\n".join(e.story)
        assert f"(N + M) * K = ({n:,} + 1) * {k:,} = {(n + 1) * k:,}" in text, text
        assert "below XLA's 10,000,000 threshold" in text
        assert "too little work for a GEMM kernel" in text
        assert f"sum over the {k:,} inputs (a reduce), computed in f32" in text
        assert "size-1 (batch) dimension was dropped" in text
        assert "To get a GEMM kernel instead" in text and "dot-strength-reduction" in text
    for op, (n, k, split) in LARGE.items():
        (e,) = _gemms_of(module, tracker, op)
        text = "\n".join(e.story)
        assert f"({n:,} + 1) * {k:,} = {(n + 1) * k:,} >= 10,000,000" in text, text
        assert "enough work for a GEMM kernel" in text
        assert f"split into {split} chunks" in text


def test_lineage_survives_fusion_and_renaming(compiled):
    module, tracker = compiled
    (e,) = [x for x in _kernels_of(module, tracker, "dot_general.9")
            if x.kernel.category == "input-fusion"]
    names = {o.name for o in e.origins}
    # the layer's dot, and the previous layer's bias add and ReLU fused in
    assert {"dot_general.9", "add.40", "jit_relu_.15"} <= names
    ops = {o.op_name for o in e.origins}
    assert "jit(model)/dot_general" in ops and "jit(model)/add" in ops
    passes = [d.remark.pass_name for d in e.decisions]
    for p in ("algsimp", "dot-strength-reduction", "priority-fusion", "rename_fusions"):
        assert p in passes
    # renamed by rename_fusions, still the same lineage
    assert any(d.remark.pass_name == "rename_fusions" and e.kernel.name in d.remark.message
               for d in e.decisions)


def test_hlorun_explain_op_fits_one_screen():
    r = run("explain", str(S2), "--op", "dot_general.9", "--device", "H200")
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert out.startswith("dot_general.9 (dot, jit(model)/dot_general, f16[1,10]{1,0}) runs in 1 kernel(s):")
    assert "input_reduce_fusion" in out and "(10 + 1) * 1,024 = 11,264" in out
    assert len(out.splitlines()) <= 30
    assert max(len(line) for line in out.splitlines()) < 400


def test_hlorun_explain_errors():
    r = run("explain", str(S2), "--op", "dot_general.99")
    assert r.exit_code == 1 and "no instruction 'dot_general.99'" in r.output
    assert "did you mean" in r.output and "Traceback" not in r.output


def test_explain_by_op_name_regex_json():
    r = run("explain", str(S2), "--op", "dot_general", "--device", "H200", "--format", "json")
    assert r.exit_code == 0, r.output
    docs = json.loads(r.stdout)
    assert {d["op"]["name"] for d in docs} == set(SMALL) | set(LARGE)


def test_compile_explain_text_and_json(tmp_path):
    out = tmp_path / "out.hlo"
    r = run("compile", str(S2), "--device", "H200", "--diff", "none", "-o", str(out),
            "--explain-op", "input_reduce_fusion.*")
    assert r.exit_code == 0, r.output
    assert "kernels (3 matching input_reduce_fusion.*)" in r.stderr
    assert "below XLA's 10,000,000 threshold" in r.stderr
    r = run("compile", str(S2), "--device", "H200", "--format", "json", "--explain")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert validate(doc) == []
    cats = [k["category"] for k in doc["kernels"]]
    assert cats.count("custom-call:__cudnn$convBiasActivationForward") == 4
    assert cats.count("input-fusion") == 3
    red = [k for k in doc["kernels"] if k["name"] == "input_reduce_fusion.2"][0]
    assert any(d["pass"] == "dot-strength-reduction" and d["data"]["n"] == 10
               for d in red["decisions"])
    assert {"name": "dot_general.9", "opcode": "dot", "op_name": "jit(model)/dot_general",
            "shape": "f16[1,10]{1,0}"} in red["origins"]
