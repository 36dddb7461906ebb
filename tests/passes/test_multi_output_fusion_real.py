"""Multi-output fusion on a real XLA:GPU input (testdata/xla-dumps/
dropout_mlp_train_bf16, JAX 0.11.2): the threefry key chains of dropout give
multi-output producers that are themselves merged into sibling fusions.
Merging a fusion whose root is a tuple once cloned that tuple into the new
body with no users, and the verifier stopped the pipeline after
multi_output_fusion ("Non-root instruction tuple.51 in fusion.345 must have
users")."""

from __future__ import annotations

from pathlib import Path

import hlorun

DUMP = Path(__file__).resolve().parents[2] / "testdata" / "xla-dumps" / "dropout_mlp_train_bf16"


def test_dropout_training_step_compiles_clean():
    src = next(DUMP.glob("*.before_optimizations.txt*"))
    result = hlorun.compile(hlorun.load(src), pipeline="gpu-cuda")
    assert result.ok, [str(v) for v in result.violations][:3]
    fusions = [i for c in result.module.computations for i in c.instructions
               if i.opcode == "fusion" and i.fused_computation.root.opcode == "tuple"]
    assert fusions, "the step has multi-output fusions"
    for f in fusions:
        body = f.fused_computation
        dead = [i.name for i in body.instructions if i is not body.root and not i.users]
        assert not dead, f"{f.name}: unused instructions {dead}"


RESNET = Path(__file__).resolve().parents[2] / "testdata" / "xla-dumps-holdout" / \
    "resnet_bn_train_bf16"


def test_column_reduction_shared_memory_is_xlas_estimate():
    """SharedMemoryUsageNoCache: a column reduction's cache is 32 x (4 x 32
    + 1) elements per reduced input (the largest vector size), a row
    reduction's 32 elements."""
    from hlorun.passes.multi_output_fusion.rules import _shared_memory, fits_in_budget
    from hlorun.text.parser import parse_module
    m = parse_module("""HloModule r
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
ENTRY %e (p: f32[128,128,64], q: f32[128,128,64], s: f32[128,128,64]) -> (f32[128,64], f32[128,64], f32[128,128]) {
  %p = f32[128,128,64]{2,1,0} parameter(0)
  %q = f32[128,128,64]{2,1,0} parameter(1)
  %s = f32[128,128,64]{2,1,0} parameter(2)
  %z = f32[] constant(0)
  %c1 = f32[128,64]{1,0} reduce(%p, %z), dimensions={1}, to_apply=%add
  %c2 = f32[128,64]{1,0} reduce(%q, %z), dimensions={1}, to_apply=%add
  %r = f32[128,128]{1,0} reduce(%s, %z), dimensions={2}, to_apply=%add
  ROOT %t = (f32[128,64]{1,0}, f32[128,64]{1,0}, f32[128,128]{1,0}) tuple(%c1, %c2, %r)
}
""")
    c1, c2, r = m.entry.root.operands
    assert _shared_memory(c1) == 32 * 129 * 4
    assert _shared_memory(r) == 32 * 4
    assert fits_in_budget(c1, c2) is None  # 33 KB of 48 KB


def test_batch_norm_gradient_sums_pair_up_like_xla():
    """resnet_bn_train_bf16 (held-out JAX program): the batch-norm backward's
    f32[16,32,32,64] -> f32[128,64] column sums.  Three column caches need
    49.5 KB, over the 48 KB per block, so sibling fusion stops at two per
    kernel, as in XLA's after_optimizations (eight two-output kInput
    reductions)."""
    src = next(RESNET.glob("*.before_optimizations.txt*"))
    result = hlorun.compile(hlorun.load(src), pipeline="gpu-cuda")
    assert result.ok
    entry = result.module.entry
    counts = []
    for f in entry.instructions:
        if f.opcode != "fusion" or f.fused_computation.root.opcode != "tuple":
            continue
        cols = [i for i in f.fused_computation.instructions if i.opcode == "reduce"
                and i.shape.is_array and list(i.shape.dimensions) == [128, 64]]
        if cols:
            counts.append(len(cols))
    assert counts and max(counts) == 2
    assert counts.count(2) >= 6


def test_transpose_keeping_the_minor_dimension_tiles_it_in_shared_memory():
    """SharedMemoryUsageNoCache: a tiled transpose needs a 32 x 33 tile of its
    elements, times the normalized last dimension when the permutation keeps
    it minor (it is part of the tile)."""
    from hlorun.passes.multi_output_fusion.rules import _shared_memory
    from hlorun.text.parser import parse_module
    m = parse_module("""HloModule t
ENTRY %e (p: bf16[64,128,4], q: bf16[64,128]) -> (bf16[128,64,4], bf16[128,64]) {
  %p = bf16[64,128,4]{2,1,0} parameter(0)
  %q = bf16[64,128]{1,0} parameter(1)
  %t = bf16[128,64,4]{2,1,0} transpose(%p), dimensions={1,0,2}
  %u = bf16[128,64]{1,0} transpose(%q), dimensions={1,0}
  ROOT %r = (bf16[128,64,4]{2,1,0}, bf16[128,64]{1,0}) tuple(%t, %u)
}
""")
    t, u = m.entry.root.operands
    assert _shared_memory(t) == 32 * 33 * 2 * 4
    assert _shared_memory(u) == 32 * 33 * 2


def test_tiled_transpose_would_become_untiled():
    """FusionHeroesAreCompatible: a fusion whose hero is a tiled transpose
    and a fusion reading it pair up only if that read reaches the reader's
    root through single-user intermediate ops."""
    from hlorun.passes.multi_output_fusion.rules import shapes_compatible
    from hlorun.text.parser import parse_module
    m = parse_module("""HloModule t
%ft (p0: f32[256,128]) -> f32[128,256] {
  %p0 = f32[256,128]{1,0} parameter(0)
  ROOT %t = f32[128,256]{1,0} transpose(%p0), dimensions={1,0}
}
%fn (p1: f32[128,256]) -> f32[128,256] {
  %p1 = f32[128,256]{1,0} parameter(0)
  ROOT %n = f32[128,256]{1,0} negate(%p1)
}
%fr (p2: f32[128,256]) -> f32[128,256] {
  %p2 = f32[128,256]{1,0} parameter(0)
  %r = f32[128,256]{1,0} reverse(%p2), dimensions={1}
  ROOT %e = f32[128,256]{1,0} exponential(%r)
}
ENTRY %e (x: f32[256,128]) -> (f32[128,256], f32[128,256]) {
  %x = f32[256,128]{1,0} parameter(0)
  %a = f32[128,256]{1,0} fusion(%x), kind=kInput, calls=%ft
  %b = f32[128,256]{1,0} fusion(%a), kind=kLoop, calls=%fn
  %c = f32[128,256]{1,0} fusion(%a), kind=kLoop, calls=%fr
  ROOT %o = (f32[128,256]{1,0}, f32[128,256]{1,0}) tuple(%b, %c)
}
""")
    a, b, c = (next(i for i in m.entry.instructions if i.name == n) for n in "abc")
    assert shapes_compatible(a, b) is None
    assert shapes_compatible(a, c) == "tiled transpose would become untiled"
    assert shapes_compatible(c, a) == "tiled transpose would become untiled"


WAVENET = Path(__file__).resolve().parents[2] / "testdata" / "xla-dumps-holdout" / \
    "wavenet_dilated_train_f32"


def test_tiled_transpose_does_not_pair_with_a_loop_transpose():
    """wavenet's dilated-conv weight f32[2,64,128] is read by pad ->
    {2,0,1} (a tiled transpose, kInput) and by reverse -> pad -> {1,0,2} (the
    minor dimension stays: the loop emitter).  Their loop shapes are one
    bitcast apart, yet XLA keeps the two kernels apart -- no module of
    XLA's here pairs a tiled transpose hero with a loop-emitter transpose --
    and so does hlorun; two loop-emitter transposes of one input still pair
    (conv1d_tcn's {1,0,2} weight transposes in XLA)."""
    from hlorun.passes.multi_output_fusion.rules import shapes_compatible
    from hlorun.text.parser import parse_module
    m = parse_module("""HloModule w
%fa (p0: f32[2,64,128]) -> f32[128,3,64] {
  %p0 = f32[2,64,128]{2,1,0} parameter(0)
  %z0 = f32[] constant(0)
  %pa = f32[3,64,128]{2,1,0} pad(%p0, %z0), padding=0_0_1x0_0x0_0
  ROOT %ta = f32[128,3,64]{2,1,0} transpose(%pa), dimensions={2,0,1}
}
%fb (p1: f32[2,64,128]) -> f32[64,3,128] {
  %p1 = f32[2,64,128]{2,1,0} parameter(0)
  %z1 = f32[] constant(0)
  %rb = f32[2,64,128]{2,1,0} reverse(%p1), dimensions={0}
  %pb = f32[3,64,128]{2,1,0} pad(%rb, %z1), padding=0_0_1x0_0x0_0
  ROOT %tb = f32[64,3,128]{2,1,0} transpose(%pb), dimensions={1,0,2}
}
%fc (p2: f32[2,64,128]) -> f32[64,2,128] {
  %p2 = f32[2,64,128]{2,1,0} parameter(0)
  ROOT %tc = f32[64,2,128]{2,1,0} transpose(%p2), dimensions={1,0,2}
}
ENTRY %e (x: f32[2,64,128]) -> (f32[128,3,64], f32[64,3,128], f32[64,2,128]) {
  %x = f32[2,64,128]{2,1,0} parameter(0)
  %a = f32[128,3,64]{2,1,0} fusion(%x), kind=kInput, calls=%fa
  %b = f32[64,3,128]{2,1,0} fusion(%x), kind=kLoop, calls=%fb
  %c = f32[64,2,128]{2,1,0} fusion(%x), kind=kLoop, calls=%fc
  ROOT %o = (f32[128,3,64]{2,1,0}, f32[64,3,128]{2,1,0}, f32[64,2,128]{2,1,0}) tuple(%a, %b, %c)
}
""")
    a, b, c = (next(i for i in m.entry.instructions if i.name == n) for n in "abc")
    assert shapes_compatible(a, b) == "tiled transpose with a loop-emitter transpose"
    assert shapes_compatible(b, a) == "tiled transpose with a loop-emitter transpose"
    assert shapes_compatible(b, c) == "different loop shapes"  # 3 vs 2 rows

    src = next(WAVENET.glob("*.before_optimizations.txt*"))
    result = hlorun.compile(hlorun.load(src), pipeline="gpu-cuda")
    assert result.ok
    from hlorun.passes.priority_fusion.analysis import find_hero, tiled_transpose
    for f in result.module.entry.instructions:
        if f.opcode != "fusion" or f.fused_computation.root.opcode != "tuple":
            continue
        body = f.fused_computation
        heroes = [find_hero(r, set(body.instructions)) for r in body.root.operands]
        kinds = {tiled_transpose(h) for h in heroes if h.opcode == "transpose"}
        assert len(kinds) <= 1, f.name
