"""reshape-mover in gpu-cuda's "simplification" fixed point (XLA's
ReshapeMover there), checked on moe_topk_train: the strength-reduced
forward combine (sum over the experts of expert output x routing weight)
reads the expert outputs through a transpose to [token, d_model, expert];
the mover sinks that transpose below the multiply, so the broadcast of the
routing weights that CSE shared with the backward outer product
(d_out x routing weights, the weight gradients' input) belongs to the outer
product alone, and layout assignment lays the outer product out as both
weight-gradient GEMMs read it -- XLA's loop_convert_fusion
bf16[8,256,512]{2,1,0}."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from hlorun.passes.algsimp import AlgebraicSimplifier
from hlorun.passes.dce import HloDCE
from hlorun.passes.reshape_mover import ReshapeMover
from hlorun.text.parser import parse_module

from .dump_compile import compiled_known_dump

ROOT = Path(__file__).resolve().parents[2]

# moe_topk_train after dot-strength-reduction (shapes and dimension numbers
# as in the real module): %fwd is dot_general.13 (the combine), %outer is
# dot_general.15 (no contracting dimension); %w is the shared broadcast.
_MOE = """HloModule moe_combine
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
ENTRY %e (y: bf16[512,8,256], g: f32[512,8], go: f32[512,256]) -> (f32[512,256], bf16[8,256,512]) {
  %y = bf16[512,8,256]{2,1,0} parameter(0)
  %g = f32[512,8]{1,0} parameter(1)
  %go = f32[512,256]{1,0} parameter(2)
  %cy = f32[512,8,256]{2,1,0} convert(%y)
  %t = f32[512,256,8]{2,1,0} transpose(%cy), dimensions={0,2,1}
  %w = f32[512,256,8]{2,1,0} broadcast(%g), dimensions={0,2}
  %m = f32[512,256,8]{2,1,0} multiply(%t, %w)
  %z = f32[] constant(0)
  %fwd = f32[512,256]{1,0} reduce(%m, %z), dimensions={2}, to_apply=%add
  %bgo = f32[512,256,8]{2,1,0} broadcast(%go), dimensions={0,1}
  %outer = f32[512,256,8]{2,1,0} multiply(%bgo, %w)
  %t8 = f32[512,8,256]{2,1,0} transpose(%outer), dimensions={0,2,1}
  %c = bf16[512,8,256]{2,1,0} convert(%t8)
  %t9 = bf16[8,256,512]{2,1,0} transpose(%c), dimensions={1,2,0}
  ROOT %r = (f32[512,256]{1,0}, bf16[8,256,512]{2,1,0}) tuple(%fwd, %t9)
}
"""


def test_forward_transpose_sinks_and_unshares_the_routing_broadcast():
    """The mover rewrites multiply(transpose(cy), w) into
    transpose(multiply(transpose'(transpose(cy)), transpose'(w))); algsimp
    then folds the transposes (of the transpose, into the reduce, of the
    broadcast into a new broadcast), as in the simplification fixed point."""
    m = parse_module(_MOE)
    assert ReshapeMover().run(m)
    AlgebraicSimplifier().run(m)
    HloDCE().run(m)
    entry = m.entry
    by = {i.name: i for i in entry.instructions}
    fwd = entry.root.operands[0]
    assert fwd.opcode == "reduce" and fwd.shape.dimensions == (512, 256)
    # XLA's reduce.8: the product in the expert outputs' own
    # [token, expert, d_model] order, reduced over the experts (dimension 1)
    assert fwd.dimensions == (1,)
    mul = fwd.operands[0]
    assert mul.opcode == "multiply" and mul.shape.dimensions == (512, 8, 256)
    assert by["cy"] in mul.operands
    (bcast,) = [o for o in mul.operands if o is not by["cy"]]
    assert bcast.opcode == "broadcast" and bcast.dimensions == (0, 1) \
        and bcast.operands[0] is by["g"]
    # the [token, d_model, expert] broadcast now feeds the outer product only
    assert [u.name for u in by["w"].users] == ["outer"]


def test_moe_outer_product_laid_out_as_the_weight_gradient_gemms_read_it():
    """End to end on XLA's before_optimizations module: the outer product is
    one kLoop kernel bf16[8,256,512]{2,1,0} (convert root) read by the two
    weight-gradient GEMM fusions, as XLA's loop_convert_fusion, and the
    kernel count is within +-10% of XLA's 29 (26 before this pass)."""
    got = compiled_known_dump("moe_topk_train")
    if got is None:
        pytest.skip("moe_topk_train dump not present")
    res, module = got
    assert res.exit_code == 0
    outer = [i for i in module.entry.instructions if i.opcode == "fusion"
             and i.fusion_kind == "kLoop" and str(i.shape) == "bf16[8,256,512]{2,1,0}"
             and i.fused_computation.root.opcode == "convert"]
    assert len(outer) == 1
    gemms = [u for u in outer[0].users if u.opcode == "fusion" and u.fusion_kind == "kCustom"
             and "dot" in {i.opcode for i in u.fused_computation.instructions}]
    assert len(gemms) == 2
    sys.path.insert(0, str(ROOT / "bench"))
    import kernel_lists
    row = kernel_lists.compare_row(ROOT / "testdata" / "xla-dumps" / "moe_topk_train")
    assert row.failure is None and row.count_ok, row.differences()
    assert 27 <= len(row.ours) <= 31 and row.matched >= 27, row.differences()
