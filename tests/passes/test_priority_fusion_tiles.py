"""Priority fusion's cached symbolic-tile check (hlorun/passes/
priority_fusion/tiles.py) against the full walk of
:func:`hlorun.passes.triton_indexing.fused_pair_refusal`, at every Triton
pair priority fusion asks about in real programs with generic Triton
fusions: swin's window layer norm (refusals: a transpose between
bitcasts), the HMM forward scan and DINO centering (refusals the
session-8 pre-filter missed), and a bf16 transformer (softmax and layer
norms absorbing their producers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hlorun.passes.priority_fusion import tiles
from hlorun.passes.triton_indexing import _dim_ok, fused_pair_refusal, root_index

from .test_priority_fusion_incremental import fuse, pre_fusion

REPO = Path(__file__).resolve().parents[2]
HELD = REPO / "testdata" / "xla-dumps-holdout"
MODELS = {
    "swin": HELD / "swin_window_attn_bf16" /
    "module_0000.jit_swin_window_attn_bf16.before_optimizations.txt",
    "hmm": HELD / "hmm_forward_scan_f32" /
    "module_0000.jit_hmm_forward_scan_f32.before_optimizations.txt.gz",
    "dino": HELD / "dino_centering_ema_f32" /
    "module_0000.jit_dino_centering_ema_f32.before_optimizations.txt.gz",
    "transformer": REPO / "testdata" / "xla-dumps" / "transformer_2l_bf16" /
    "module_0000.jit_transformer_2l_bf16.before_optimizations.txt.gz",
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_cached_check_matches_the_full_walk(name, monkeypatch):
    seen = {"pairs": 0, "refused": 0, "extended": 0, "early": 0}
    refusal, restore = tiles.TileCache.refusal, tiles.TileCache.restore

    def checked_refusal(self, producer, consumer):
        got = refusal(self, producer, consumer)
        assert got == fused_pair_refusal(producer, consumer), (producer.name, consumer.name)
        seen["pairs"] += 1
        seen["refused"] += got is not None
        # the no-regroup shortcut: every passing index passes the producer
        ok, reach, bad = self._part(consumer, tiles.ROOT)
        if ok and not bad and not tiles.regroups(producer):
            for index in reach.get(producer, ()):
                seen["early"] += 1
                p_ok, _, p_bad = tiles._part(producer, index)
                assert p_ok and not p_bad, producer.name
        return got

    def checked_restore(self, instr):
        carried = self.carried.get(instr)
        restore(self, instr)
        if carried is None:
            return
        parts, rg = carried
        for key, part in parts.items():
            fresh = tiles.unit_part(instr) if key is tiles.ROOT else tiles._part(instr, key)
            assert part[0] == fresh[0], instr.name
            if part[0]:  # (a failed walk stops early: the rest is incomplete)
                assert part[1:] == fresh[1:], instr.name
            seen["extended"] += 1
        if rg is not None:
            assert rg == tiles.regroups(instr), instr.name

    monkeypatch.setattr(tiles.TileCache, "refusal", checked_refusal)
    monkeypatch.setattr(tiles.TileCache, "restore", checked_restore)
    module = pre_fusion(MODELS[name])
    assert fuse(module, reference=False)[0]
    assert seen["pairs"] > 20 and seen["extended"] > 10 and seen["early"] > 10, seen
    if name in ("swin", "hmm", "dino"):
        assert seen["refused"] > 0, seen


def test_canonical_index_walks_alike():
    """A walk from an index and from its canonical renaming pass alike and
    reach the same canonical indices (every fusion body of swin, from its
    root's index and from that index with dimensions permuted)."""
    module = pre_fusion(MODELS["swin"])
    fuse(module, reference=False)
    n = 0
    for comp in module.computations:
        for f in comp.instructions:
            if f.opcode != "fusion" or not f.shape.is_array:
                continue
            start = root_index(f.fused_computation.root)
            assert tiles._part(f, start) == tiles._part(f, tiles.canonical(start))
            assert all(_dim_ok(p) for p in tiles.canonical(start)) == \
                all(_dim_ok(p) for p in start)
            n += 1
    assert n > 10

