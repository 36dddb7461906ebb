"""cublas-gemm-broadcast-folding-rewriter on XLA's own test modules."""

from __future__ import annotations

import pytest

from hlorun.text.parser import parse_module
from hlorun.passes import pass_class

from ..conftest import shared_path


def _run(text: str):
    module = parse_module(text, "<test>")
    assert pass_class("cublas-gemm-rewriter")(size_threshold=0).run(module)
    folding = pass_class("cublas-gemm-broadcast-folding-rewriter")()
    return module, folding, folding.run(module)


@pytest.mark.parametrize("test,changed,side", [
    ("BroadcastedStridedRewriteRhs", True, "rhs"),
    ("BroadcastedStridedRewriteLhs", True, "lhs"),
    ("LHSBatchDimNonZero", False, "lhs"),
    ("RHSBatchDimNonZero", False, "rhs"),
])
def test_xla_modules(test, changed, side):
    path = shared_path("corpus", "xla", "passes", "gemm_broadcast_folding_rewriter_test",
                       f"GemmBroadcastFoldingRewriteTest.{test}.hlo")
    module, folding, got = _run(path.read_text())
    assert got is changed
    (gemm,) = [i for i in module.entry.instructions if i.opcode == "custom-call"]
    dims = gemm.backend_config["gemm_backend_config"]["dot_dimension_numbers"]
    (remark,) = folding.remarks
    if changed:
        assert dims[f"{side}_batch_dimensions"] == []
        assert all(o.opcode == "parameter" for o in gemm.operands)
        assert remark.kind == "applied" and f"({side} batch stride 0)" in remark.message
    else:
        assert dims[f"{side}_batch_dimensions"] != []
        assert remark.kind == "missed" and "batch dimension 1" in remark.message


def test_folded_contracting_dimension_moves_down():
    text = """
HloModule m
ENTRY e {
  x = f32[8,64,32] parameter(0)
  y = f32[32,16] parameter(1)
  yb = f32[8,32,16] broadcast(y), dimensions={1,2}
  ROOT d = f32[8,64,16] dot(x, yb), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
}
"""
    module, _, changed = _run(text)
    assert changed
    (gemm,) = [i for i in module.entry.instructions if i.opcode == "custom-call"]
    dims = gemm.backend_config["gemm_backend_config"]["dot_dimension_numbers"]
    assert dims["rhs_contracting_dimensions"] == ["0"] and dims["lhs_batch_dimensions"] == ["0"]
    assert [o.name for o in gemm.operands] == ["x", "y"]
