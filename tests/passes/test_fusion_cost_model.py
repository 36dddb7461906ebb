"""The parts of XLA's GPU cost analysis that priority fusion and
multi-output fusion share: element evaluations through a fusion
(FusionCalculateUtilizations), the emitter of a multi-output fusion, and
the IR-size guard (ProducerConsumerMergedTooLarge)."""

from __future__ import annotations

import sys
from pathlib import Path

from hlorun.passes.priority_fusion.analysis import FusionView, emitter_kind
from hlorun.passes.priority_fusion.ir_size import ir_info, max_direct_users, merged_too_large
from hlorun.passes.priority_fusion.model import DEVICES, estimate
from hlorun.text.parser import parse_module

ROOT = Path(__file__).resolve().parents[2]

# One threefry-like mixing round repeated: each round reads both halves twice.
_ROUND = """
  %a{n} = u32[128,1024]{{1,0}} add(%x{p}, %y{p})
  %s{n} = u32[128,1024]{{1,0}} shift-left(%y{p}, %c13)
  %x{n} = u32[128,1024]{{1,0}} xor(%a{n}, %s{n})
  %y{n} = u32[128,1024]{{1,0}} add(%a{n}, %x{n})"""


def _rounds(k: int):
    body = "".join(_ROUND.format(n=i, p=i - 1) for i in range(1, k + 1))
    text = f"""HloModule rounds
%fused (param_0: u32[128,1024], param_1: u32[]) -> u32[128,1024] {{
  %x0 = u32[128,1024]{{1,0}} parameter(0)
  %param_1 = u32[] parameter(1)
  %y0 = u32[128,1024]{{1,0}} broadcast(%param_1), dimensions={{}}
  %c = u32[] constant(13)
  %c13 = u32[128,1024]{{1,0}} broadcast(%c), dimensions={{}}{body}
  ROOT %out = u32[128,1024]{{1,0}} xor(%x{k}, %y{k})
}}
ENTRY %e (p: u32[128,1024], k: u32[]) -> u32[128,1024] {{
  %p = u32[128,1024]{{1,0}} parameter(0)
  %k = u32[] parameter(1)
  ROOT %f = u32[128,1024]{{1,0}} fusion(%p, %k), kind=kLoop, calls=%fused
}}
"""
    m = parse_module(text)
    return m.entry.root


def test_elementwise_values_are_counted_once_per_element():
    """Four ops per round: flops grow linearly with the rounds (XLA's
    elementwise use roots), and the inputs are read once, not once per path
    through the round DAG (which doubles every round).  u32 add, shift and
    xor are not in XLA's sm_90 op profile: 3 flops per element each."""
    dev = DEVICES["H100"]
    n = 128 * 1024
    for k in (1, 4, 12):
        e = estimate([_rounds(k)], _rounds(k), dev)
        assert e.flops == 3 * (4 * k + 1) * n
        # the u32 input once; the scalar key once per element of its broadcast
        # (bytes accessed), of which 4 bytes come from memory
        assert (e.read_bytes, e.read_net_bytes) == (8 * n, 4 * n + 4)
    assert estimate([_rounds(12)], _rounds(12), dev).time_us < 3.0


def test_ir_size_counts_each_emission_once_per_use_root():
    f = _rounds(3)
    info = ir_info(f)
    p, k = f.operands
    # both inputs are emitted once (the key through its broadcast, a use
    # root of its own that every round reads elementwise)
    assert info.emitted == {p: 1, k: 1}
    assert info.splits == 0
    assert info.size == len(f.fused_computation.instructions)


_MOF = """HloModule mof
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
%splitk_body (param_0: f32[16,128,256]) -> f32[128,256] {
  %param_0 = f32[16,128,256]{2,1,0} parameter(0)
  %z = f32[] constant(0)
  ROOT %reduce.5 = f32[128,256]{1,0} reduce(%param_0, %z), dimensions={0}, to_apply=%add
}
%bias_grad (param_0.1: f32[128,256]) -> (bf16[256], bf16[128,256]) {
  %param_0.1 = f32[128,256]{1,0} parameter(0)
  %cv = bf16[128,256]{1,0} convert(%param_0.1)
  %cf = f32[128,256]{1,0} convert(%cv)
  %z.1 = f32[] constant(0)
  %r = f32[256]{0} reduce(%cf, %z.1), dimensions={0}, to_apply=%add
  %rb = bf16[256]{0} convert(%r)
  ROOT %t = (bf16[256]{0}, bf16[128,256]{1,0}) tuple(%rb, %cv)
}
%twice (param_0.2: f32[128,256]) -> f32[128,256] {
  %param_0.2 = f32[128,256]{1,0} parameter(0)
  %e = f32[128,256]{1,0} exponential(%param_0.2)
  ROOT %m = f32[128,256]{1,0} multiply(%e, %param_0.2)
}
%neg_body (param_0.3: f32[128,256]) -> f32[128,256] {
  %param_0.3 = f32[128,256]{1,0} parameter(0)
  ROOT %n = f32[128,256]{1,0} negate(%param_0.3)
}
ENTRY %e (g: f32[16,128,256]) -> ((bf16[256], bf16[128,256]), f32[128,256], f32[128,256]) {
  %g = f32[16,128,256]{2,1,0} parameter(0)
  %splitk = f32[128,256]{1,0} fusion(%g), kind=kLoop, calls=%splitk_body
  %grad = (bf16[256]{0}, bf16[128,256]{1,0}) fusion(%splitk), kind=kInput, calls=%bias_grad
  %sq = f32[128,256]{1,0} fusion(%splitk), kind=kLoop, calls=%twice
  %ng = f32[128,256]{1,0} fusion(%splitk), kind=kLoop, calls=%neg_body
  ROOT %out = ((bf16[256]{0}, bf16[128,256]{1,0}), f32[128,256]{1,0}, f32[128,256]{1,0}) tuple(%grad, %sq, %ng)
}
"""


def _mof():
    m = parse_module(_MOF)
    return {i.name: i for i in m.entry.instructions}


def test_multi_output_fusion_with_a_reduction_root_uses_the_reduction_emitter():
    """XLA's GetEmitterFusionKind looks at every root's hero: a column
    reduction among the outputs makes it a reduction kernel (few blocks),
    not a loop kernel."""
    by = _mof()
    assert emitter_kind(FusionView.of(by["grad"])) == "reduction"
    e = estimate([by["grad"]], by["grad"], DEVICES["H100"])
    assert e.kind == "reduction" and e.blocks <= 8
    # fusing the split-K producer into it reads 2 MiB through those few blocks
    fused = estimate([by["splitk"], by["grad"]], by["grad"], DEVICES["H100"])
    assert fused.kind == "reduction"
    assert fused.time_us > estimate([by["splitk"]], by["splitk"], DEVICES["H100"]).time_us * 3


def test_producer_with_a_reduce_is_not_emitted_twice():
    by = _mof()
    # %ng reads the split-K result once: allowed
    assert ir_info(by["ng"]).emitted[by["splitk"]] == 1
    assert ir_info(by["splitk"]).splits == 1
    assert max_direct_users(by["splitk"], by["ng"]) == 1
    assert not merged_too_large(by["splitk"], by["ng"])
    # %grad needs the converted value for its output and again inside the
    # reduction loop (two use roots): emitted twice, refused
    assert ir_info(by["grad"]).emitted[by["splitk"]] == 2
    assert merged_too_large(by["splitk"], by["grad"])
    # %sq has one use root for it (the multiply), but two direct users of a
    # producer whose root is a reduce (EstimateMaxDirectUsers): refused
    assert ir_info(by["sq"]).emitted[by["splitk"]] == 1
    assert max_direct_users(by["splitk"], by["sq"]) == 2
    assert merged_too_large(by["splitk"], by["sq"])
    # a consumer reading it through two non-elementwise paths emits it twice
    m = parse_module(_MOF.replace(
        "ROOT %n = f32[128,256]{1,0} negate(%param_0.3)",
        "%bc = f32[128,256]{1,0} bitcast(%param_0.3)\n"
        "  %bc2 = f32[128,256]{1,0} bitcast(%param_0.3)\n"
        "  ROOT %n = f32[128,256]{1,0} add(%bc, %bc2)"))
    by = {i.name: i for i in m.entry.instructions}
    assert ir_info(by["ng"]).emitted[by["splitk"]] == 2
    assert merged_too_large(by["splitk"], by["ng"])
    # without a cache-invalidating op only the 10,000-instruction budget counts
    assert not merged_too_large(by["sq"], by["out"])


def test_column_reduction_vector_size_follows_xla():
    """GetVectorSizeForMlir for column reductions: none for an odd minor
    dimension or one under 64 elements, 2 for 4-byte inputs, 4 for narrower
    inputs when the minor dimension has >= 128 elements and divides by 4."""
    from hlorun.passes.priority_fusion.model import column_vector_size
    assert column_vector_size(4, 63) == 1
    assert column_vector_size(2, 62) == 1
    assert column_vector_size(4, 64) == 2
    assert column_vector_size(4, 4096) == 2
    assert column_vector_size(2, 64) == 2
    assert column_vector_size(2, 130) == 2
    assert column_vector_size(2, 128) == 4
    assert column_vector_size(1, 1024) == 4


def test_elementwise_flops_follow_xlas_sm90_op_profile():
    """GpuHloCostAnalysis prices an elementwise op by the clock cycles XLA
    measured for it (hlo_op_profiles_data.h, sm_90); unlisted ops cost 3."""
    from hlorun.passes.priority_fusion.op_profiles import flops_per_element
    assert flops_per_element("power", "f32") == 510
    assert flops_per_element("divide", "f32") == 19
    assert flops_per_element("add", "f32") == 7
    assert flops_per_element("multiply", "f32") == 3
    assert flops_per_element("tanh", "f16") == 502
    assert flops_per_element("multiply", "bf16") == 3  # no bf16 entries on sm_90
    assert flops_per_element("compare", "pred") == 3
    assert flops_per_element("convert", "f32") == 3  # HandleConvert -> HandleElementwiseOp
    assert flops_per_element("copy", "f32") == 0  # HandleCopy: free
    assert flops_per_element("broadcast", "f32") == 0


def test_reduce_flops_are_the_reducers_per_reduced_element():
    """HloCostAnalysis::HandleReduce: the reducer's flops (an f32 add: 7)
    times (input elements - output elements)."""
    m = parse_module("""HloModule r
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
ENTRY %e (p: f32[256,1024]) -> f32[256] {
  %p = f32[256,1024]{1,0} parameter(0)
  %z = f32[] constant(0)
  ROOT %r = f32[256]{0} reduce(%p, %z), dimensions={1}, to_apply=%add
}
""")
    r = m.entry.root
    assert estimate([r], r, DEVICES["H100"]).flops == 7 * (256 * 1024 - 256)


def test_scalar_power_is_not_recomputed_per_element():
    """adamw_clip_tree (held-out JAX program): the bias corrections
    ``1 - 0.9**step`` are scalar powers read by every parameter's update.
    At 510 flops per power, recomputing one per element of a 4M-element
    update makes it compute-bound, so priority fusion keeps the two scalar
    kernels (XLA's loop_subtract_fusion{,.1}) and every kind matches."""
    sys.path.insert(0, str(ROOT / "bench"))
    from kernel_lists import compare_row
    d = ROOT / "testdata" / "xla-dumps-holdout" / "adamw_clip_tree"
    row = compare_row(d)
    assert row.failure is None
    assert len(row.ours) == len(row.theirs) == 19
    assert row.matched == 19
    subtract = [k for k in row.ours if k.name.startswith("loop_subtract_fusion")]
    assert len(subtract) == 2


def test_triton_estimate_counts_flops_like_xlas_tiled_model():
    """GpuIndexingPerformanceModel::FlopsPerElement: elementwise ops at their
    op-profile cost, a reduce at (reduced elements - 1) reducer evaluations
    per output element."""
    from hlorun.passes.priority_fusion.triton import triton_estimate
    m = parse_module("""HloModule t
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
ENTRY %e (p: f32[8,128]) -> f32[8] {
  %p = f32[8,128]{1,0} parameter(0)
  %x = f32[8,128]{1,0} exponential(%p)
  %z = f32[] constant(0)
  ROOT %r = f32[8]{0} reduce(%x, %z), dimensions={1}, to_apply=%add
}
""")
    r = m.entry.root
    x = r.operands[0]
    e = triton_estimate([x, r], r, DEVICES["H100"])
    assert e.flops == 79 * 8 * 128 + (128 - 1) * 7 * 8


def test_reduce_window_flops_are_the_reducers_per_window_element():
    """HloCostAnalysis::HandleReduceWindow: (window - 1) reducer evaluations
    per output (a 16-long cumulative window of an f32 add: 15 x 7 flops)."""
    m = parse_module("""HloModule rw
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
ENTRY %e (p: f32[64,16]) -> f32[64,16] {
  %p = f32[64,16]{1,0} parameter(0)
  %z = f32[] constant(0)
  ROOT %r = f32[64,16]{1,0} reduce-window(%p, %z), window={size=1x16 pad=0_0x15_0}, to_apply=%add
}
""")
    r = m.entry.root
    assert estimate([r], r, DEVICES["H100"]).flops == 64 * 16 * 15 * 7


def test_side_output_write_overlaps_with_compute():
    """EstimateRunTimeForFusion(producer_writes_side_output): a multi-output
    fusion's extra write joins the kernel's memory time before it is
    overlapped with compute -- a compute-bound kernel hides most of it."""
    m = parse_module("""HloModule so
ENTRY %e (p: f32[1024,1024]) -> f32[1024,1024] {
  %p = f32[1024,1024]{1,0} parameter(0)
  %a = f32[1024,1024]{1,0} tanh(%p)
  %b = f32[1024,1024]{1,0} tanh(%a)
  %c = f32[1024,1024]{1,0} tanh(%b)
  ROOT %d = f32[1024,1024]{1,0} tanh(%c)
}
""")
    dev = DEVICES["H100"]
    units = [i for i in m.entry.instructions if i.opcode == "tanh"]
    root = m.entry.root
    base = estimate(units, root, dev)
    side = estimate(units, root, dev, side_output_bytes=4 * 1024 * 1024)
    write_us = 4 * 1024 * 1024 / dev.bandwidth * 1e6
    assert 0 < side.time_us - base.time_us < 0.5 * write_us  # 4 tanh at 467 flops: compute-bound


def test_scatter_indices_and_updates_are_read_once_per_element():
    """HloCostAnalysis::HandleScatter sets no operand utilization (default
    1.0): a take_along_axis gradient scatter into f32[8,256,32000] evaluates
    its fused index concatenate (iota, iota, target: 400 flops per element,
    a divergent concatenate) once per index element, not once per element of
    the scatter's 65M-element output (26e9 flops, which kept the
    concatenate out of the scatter; XLA fuses it in)."""
    m = parse_module("""HloModule s
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
%fused (p0: f32[8,256,32000], p1: s32[8,256,1,1], p2: f32[2048,1,1,1]) -> f32[8,256,32000] {
  %p0 = f32[8,256,32000]{2,1,0} parameter(0)
  %i0 = s32[8,256,1,1]{3,2,1,0} iota(), iota_dimension=0
  %i1 = s32[8,256,1,1]{3,2,1,0} iota(), iota_dimension=1
  %p1 = s32[8,256,1,1]{3,2,1,0} parameter(1)
  %c = s32[8,256,1,3]{3,2,1,0} concatenate(%i0, %i1, %p1), dimensions={3}
  %b = s32[2048,3]{1,0} bitcast(%c)
  %p2 = f32[2048,1,1,1]{3,2,1,0} parameter(2)
  ROOT %s = f32[8,256,32000]{2,1,0} scatter(%p0, %b, %p2), update_window_dims={1,2,3}, inserted_window_dims={}, scatter_dims_to_operand_dims={0,1,2}, index_vector_dim=1, to_apply=%add
}
ENTRY %e (x: f32[8,256,32000], t: s32[8,256,1,1], u: f32[2048,1,1,1]) -> f32[8,256,32000] {
  %x = f32[8,256,32000]{2,1,0} parameter(0)
  %t = s32[8,256,1,1]{3,2,1,0} parameter(1)
  %u = f32[2048,1,1,1]{3,2,1,0} parameter(2)
  ROOT %f = f32[8,256,32000]{2,1,0} fusion(%x, %t, %u), kind=kInput, calls=%fused
}
""")
    f = m.entry.root
    e = estimate([f], f, DEVICES["H100"])
    assert e.flops == 400 * 2048 * 3
    assert e.time_us < 200


def test_embed_xent_loss_kernels_follow_xla():
    """embed_xent_train_bf16 (held-out): after gather/scatter normalisation
    the take_along_axis index concatenate is fused into both its users (the
    per-token loss loop and the gradient scatter, as in XLA's
    after_optimizations), and the per-token loss stays a kLoop kernel apart
    from the f32[] loss sum."""
    import hlorun
    from hlorun.pipeline.loader import load_pipeline
    from hlorun.pipeline.run import RunOptions, run_pipeline
    d = ROOT / "testdata" / "xla-dumps-holdout" / "embed_xent_train_bf16"
    final = hlorun.load_module(next(d.glob("*before_optimizations.txt")))
    assert run_pipeline(final, load_pipeline("gpu-cuda"), RunOptions()).exit_code == 0
    entry = final.entry
    kinds = [(i.name, i.attrs.get("kind")) for i in entry.instructions if i.opcode == "fusion"]
    assert not [n for n, _ in kinds if "concatenate" in n], kinds
    scatters = [i for i in entry.instructions if i.opcode == "fusion"
                and i.fused_computation.root.opcode == "scatter"]
    assert len(scatters) == 2
    assert all(any(x.opcode == "concatenate" for x in s.fused_computation.instructions)
               for s in scatters if s.shape.dimensions == (8, 256, 32000))
    sums = [i for i in entry.instructions if i.opcode == "fusion" and i.shape.rank == 0
            and i.fused_computation.root.opcode == "reduce"]
    assert len(sums) == 1
    loss = sums[0].operands[0]
    while loss.opcode in ("get-tuple-element", "bitcast"):
        loss = loss.operands[0]
    assert loss.attrs.get("kind") == "kLoop" and loss.shape.is_tuple
