"""Concatenates in priority fusion: XLA's cost (GpuHloCostAnalysis::
HandleConcatenate: 6 flops per element, 400 when a warp can straddle two
operands) and emitter (UseConcatenateFusion: a single-output fusion whose
hero is a concatenate of at most 4 operands is a kInput concatenate
kernel), checked on the top-k index concatenate of moe_topk_train."""

from __future__ import annotations

from pathlib import Path

import pytest

from hlorun.passes.fusion_wrapper import FusionWrapper
from hlorun.passes.priority_fusion.analysis import FusionView, emitter_kind, fusion_kind_for
from hlorun.passes.priority_fusion.model import DEVICES, concatenate_flops, estimate, launch_dims
from hlorun.text.parser import parse_module

from .dump_compile import compiled_known_dump

ROOT = Path(__file__).resolve().parents[2]

# XLA's fused_concatenate of moe_topk_train (the top-2 expert indices, made
# non-negative, next to the token index: the scatter-add's s32[512,2,2] indices)
_CONCAT = """HloModule moe_concat
%fused_concatenate (param_0: s32[512,8]) -> s32[512,2,{n}] {{
  %iota = s32[512,2,1]{{2,1,0}} iota(), iota_dimension=0
  %param_0 = s32[512,8]{{1,0}} parameter(0)
  %slice = s32[512,2]{{1,0}} slice(%param_0), slice={{[0:512], [0:2]}}
  %c0 = s32[] constant(0)
  %zeros = s32[512,2]{{1,0}} broadcast(%c0), dimensions={{}}
  %lt = pred[512,2]{{1,0}} compare(%slice, %zeros), direction=LT
  %c8 = s32[] constant(8)
  %eights = s32[512,2]{{1,0}} broadcast(%c8), dimensions={{}}
  %add = s32[512,2]{{1,0}} add(%slice, %eights)
  %select = s32[512,2]{{1,0}} select(%lt, %add, %slice)
  %bitcast = s32[512,2,1]{{2,1,0}} bitcast(%select)
  ROOT %concatenate = s32[512,2,{n}]{{2,1,0}} concatenate({ops}), dimensions={{2}}
}}
ENTRY %e (p: s32[512,8]) -> s32[512,2,{n}] {{
  %p = s32[512,8]{{1,0}} parameter(0)
  ROOT %f = s32[512,2,{n}]{{2,1,0}} fusion(%p), kind=kLoop, calls=%fused_concatenate
}}
"""


def _concat_fusion(n_operands: int):
    ops = ", ".join(["%iota", "%bitcast"] * (n_operands // 2) + ["%iota"] * (n_operands % 2))
    return parse_module(_CONCAT.format(n=n_operands, ops=ops)).entry.root


def test_concatenate_hero_gets_the_concatenate_emitter():
    f = _concat_fusion(2)
    assert emitter_kind(FusionView.of(f)) == "concatenate"
    assert fusion_kind_for("concatenate") == "kInput"
    # more than 4 operands: the loop emitter (UseConcatenateFusion's limit)
    assert emitter_kind(FusionView.of(_concat_fusion(5))) == "loop"


def test_concatenate_flops_follow_xla():
    f = _concat_fusion(2)
    concat = f.fused_computation.root
    # along dimension 2, first operand 1 wide (not a multiple of 32): divergent
    assert concatenate_flops(concat) == 400
    major = parse_module("""HloModule m
ENTRY %e (a: f32[64,128], b: f32[64,128]) -> f32[128,128] {
  %a = f32[64,128]{1,0} parameter(0)
  %b = f32[64,128]{1,0} parameter(1)
  ROOT %c = f32[128,128]{1,0} concatenate(%a, %b), dimensions={0}
}
""").entry.root
    assert concatenate_flops(major) == 6
    e = estimate([f], f, DEVICES["H100"])
    # 2048 concatenated elements at 400 flops, plus the compare, the add and
    # the select on 1024 elements each (3 flops per element each: s32 add
    # and pred compare are not in XLA's sm_90 op profile)
    assert e.flops == 2048 * 400 + 3 * 3 * 1024
    assert e.kind == "concatenate"


def test_concatenate_launch_dimensions_follow_the_loop_unroll_rule():
    """ConcatenateFusion launches one thread per element of the largest
    operand with ComputeLoopFusionConfig's unroll factor for that shape: no
    unrolling below threads_per_core_limit x core_count elements (2048 x
    132 on an H100), so the moe concatenate (1024-element operands) gets 8
    blocks of 128 threads, not 2 blocks of 4 elements per thread."""
    f = _concat_fusion(2)
    view = FusionView.of(f)
    assert launch_dims("concatenate", view, f.fused_computation.root, DEVICES["H100"]) == (8, 128)
    big = parse_module("""HloModule m
%fc (a: bf16[8,256,256], b: bf16[8,256,256]) -> bf16[8,512,256] {
  %a = bf16[8,256,256]{2,1,0} parameter(0)
  %b = bf16[8,256,256]{2,1,0} parameter(1)
  ROOT %c = bf16[8,512,256]{2,1,0} concatenate(%a, %b), dimensions={1}
}
ENTRY %e (a: bf16[8,256,256], b: bf16[8,256,256]) -> bf16[8,512,256] {
  %a = bf16[8,256,256]{2,1,0} parameter(0)
  %b = bf16[8,256,256]{2,1,0} parameter(1)
  ROOT %f = bf16[8,512,256]{2,1,0} fusion(%a, %b), kind=kInput, calls=%fc
}
""").entry.root
    # 524288 elements per operand fill the GPU: unrolled 4 times
    assert launch_dims("concatenate", FusionView.of(big), big.fused_computation.root,
                       DEVICES["H100"]) == (524288 // 4 // 128, 128)


def test_wrapped_concatenate_is_a_loop_fusion():
    """FusionWrapper uses ChooseFusionKind: only reductions, scatters and
    tiled transposes make input fusions (XLA's wrapped_concatenate is kLoop)."""
    m = parse_module("""HloModule m
ENTRY %e (a: f32[64,128], b: f32[64,128]) -> f32[64,256] {
  %a = f32[64,128]{1,0} parameter(0)
  %b = f32[64,128]{1,0} parameter(1)
  ROOT %c = f32[64,256]{1,0} concatenate(%a, %b), dimensions={1}
}
""")
    assert FusionWrapper().run(m)
    assert m.entry.root.opcode == "fusion" and m.entry.root.fusion_kind == "kLoop"


def test_moe_topk_indices_concatenate_is_its_own_kernel():
    """moe_topk_train: XLA keeps the top-k indices concatenate as one kInput
    kernel read by both scatter-adds instead of recomputing it (400 flops
    per element) in each of its users."""
    got = compiled_known_dump("moe_topk_train")
    if got is None:
        pytest.skip("moe_topk_train dump not present")
    res, module = got
    assert res.exit_code == 0
    concats = [i for i in module.entry.instructions if i.opcode == "fusion"
               and i.fused_computation.root.opcode == "concatenate"]
    assert len(concats) == 1
    (c,) = concats
    assert c.fusion_kind == "kInput" and str(c.shape).startswith("s32[512,2,2]")
    scatters = [u for u in c.users if u.opcode == "fusion"
                and u.fused_computation.root.opcode == "scatter"]
    assert len(scatters) == 2
