"""Our final kernel list against XLA's after_optimizations for the real
dumps (S2 cnn_fp16; gemm_bias_gelu_bf16): same number and kinds of kernels,
category by category, with every known difference stated (and checked to
still be exactly that difference).  ``python bench/kernel_lists.py`` prints
the table."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from .conftest import shared_path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))


#: dump -> category -> (hlorun count - XLA count, why)
KNOWN: dict[str, dict[str, tuple[int, str]]] = {
    # cnn_fp16's one known difference (the 4096x1024 multiply fused into its
    # column reduction) went away with XLA's column-reduction vector size
    # (GetVectorSizeForMlir) in the fusion cost model: every category matches.
}


@pytest.mark.parametrize("dump", ["cnn_fp16", "gemm_bias_gelu_bf16", "fp8_matmul_scaled"])
def test_kernel_list_matches_xla(dump):
    shared_path("xla-dumps", dump)
    from kernel_lists import compare
    ours, theirs, rows = compare(dump)
    known = KNOWN.get(dump, {})
    # GEMMs: Triton GEMM fusions in both (gpu-cuda runs triton-gemm-rewriter
    # before the BLAS rewriter, as XLA does), no cuBLAS call
    counts = {c: (a, b) for c, a, b in rows}
    assert counts["gemm-fusion"][0] == counts["gemm-fusion"][1] > 0
    assert "custom-call:__cublas$lt$matmul" not in counts
    for cat, a, b in rows:
        if cat in known:
            assert a - b == known[cat][0], f"{cat}: {a} vs {b}; known: {known[cat]}"
        else:
            assert a == b, f"{cat}: hlorun {a}, XLA {b}"


def test_s2_kernel_kinds_in_detail():
    """cnn_fp16: the kernels XLA makes for the S2 question, one by one."""
    shared_path("xla-dumps", "cnn_fp16")
    from kernel_lists import compare
    ours, theirs, _ = compare("cnn_fp16")

    def kinds(ks, prefix):
        return sorted(k.category for k in ks if k.name.startswith(prefix))
    for prefix in ("cudnn-conv-bias-activation", "input_reduce_fusion", "gemm_fusion"):
        assert kinds(ours, prefix) == kinds(theirs, prefix), prefix
    # the three small linear layers: reduce heroes in both
    assert sorted(k.hero for k in ours if k.name.startswith("input_reduce")) == ["reduce"] * 3
    assert sorted(k.hero for k in theirs if k.name.startswith("input_reduce")) == ["reduce"] * 3
