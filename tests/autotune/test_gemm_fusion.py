"""triton-gemm-rewriter against XLA's own pass-by-pass dumps: our pass on
XLA's input step prints (canonically) exactly as XLA's output step."""

from __future__ import annotations

import pytest

from hlorun.text.parser import load_module
from hlorun.passes import pass_class
from hlorun.passes.base import Target
from hlorun.text.printer import print_module

from ..conftest import shared_path

STEPS = [("cnn_fp16", "0042", "0043"), ("gemm_bias_gelu_bf16", "0022", "0023"),
         ("fp8_matmul_scaled", "0016", "0017")]


@pytest.mark.parametrize("dump,before,after", STEPS)
def test_matches_xla_dump_step(dump, before, after):
    d = shared_path("xla-dumps", dump)
    a = next(d.glob(f"*.{before}.*.txt"))
    b = next(d.glob(f"*.{after}.*after_triton-gemm-rewriter*.txt"))
    m = load_module(a)
    p = pass_class("triton-gemm-rewriter")(target=Target("cuda", "H200", "9.0"))
    assert p.run(m)
    assert print_module(m, canonical=True) == print_module(load_module(b), canonical=True)
    assert any(r.kind == "applied" for r in p.remarks)


def test_skips_are_explained():
    m = load_module(shared_path("xla-dumps", "cnn_fp16") / next(
        x.name for x in shared_path("xla-dumps", "cnn_fp16").glob("*.0042.*.txt")))
    p = pass_class("triton-gemm-rewriter")(target=Target("cuda", "H200", "9.0"))
    p.run(m)
    applied = [r for r in p.remarks if r.kind == "applied"]
    assert {r.instruction for r in applied} == {"gemm_fusion_dot.7", "gemm_fusion_dot.8"}
    assert "transpose.29" in applied[0].derived_from + applied[1].derived_from
