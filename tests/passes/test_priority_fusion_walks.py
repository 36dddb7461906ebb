"""priority-fusion's utilization walks from per-unit summaries
(hlorun/passes/priority_fusion/walks.py) against the full walk
(model._utilization): bit-identical reads, flops and uncoalesced reads for
every estimate priority fusion makes on a real model, and a full walk
wherever a summary cannot guarantee that."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from hlorun.passes.priority_fusion import PriorityFusion
from hlorun.passes.priority_fusion import model as M
from hlorun.passes.priority_fusion import walks as W
from hlorun.passes.priority_fusion.analysis import fused_members
from hlorun.text.parser import parse_module

from .test_priority_fusion_incremental import pre_fusion

REPO = Path(__file__).resolve().parents[2]
H100 = M.DEVICES["H100"]


def _full(units, kind, members=None):
    u = M.Units(units, members)
    return M._utilization(u, u.root_of(units[-1]), kind)


def _same(got, ref, units):
    assert got.reads == M.read_entries(ref.ext_reads, H100)
    if got.ext_reads is not None:
        assert list(got.ext_reads.items()) == list(ref.ext_reads.items())
    assert got.flops == ref.flops
    assert got.uncoalesced == ref.uncoalesced
    if len(units) == 1:
        assert (got.ir.size, got.ir.splits) == (ref.ir.size, ref.ir.splits)
        assert list(got.ir.emitted.items()) == list(ref.ir.emitted.items())


def test_every_walk_matches_the_full_walk(monkeypatch):
    module = pre_fusion(REPO / "testdata" / "transformer" / "jax_4layer_train_step.hlo.gz")
    seen = Counter()
    orig_walk, orig_part = W.WalkCache.walk_of, W.producer_part

    def checked(self, units, ws, kind):
        got = orig_walk(self, units, ws, kind)
        key = "unit" if len(units) == 1 else "pair"
        if got is None:
            seen[key + " in full"] += 1
            return None
        seen[key] += 1
        _same(got, _full(units, kind, self.members), units)
        return got

    def part(*a):
        seen["producer parts"] += 1
        return orig_part(*a)
    orig_rename = W.WalkCache.rename

    def rename(self, unit, old, new):
        # a user of a new fusion: its walk is renamed, not redone (checked
        # against the full walk above when it is next used)
        seen["renamed"] += unit in self.units
        orig_rename(self, unit, old, new)
    monkeypatch.setattr(W.WalkCache, "walk_of", checked)
    monkeypatch.setattr(W.WalkCache, "rename", rename)
    monkeypatch.setattr(W, "producer_part", part)
    assert PriorityFusion().run(module)
    assert seen["unit"] > 100 and seen["pair"] > 100
    assert seen["renamed"] > 10
    # a producer's half is reused across its users and their changes
    assert seen["producer parts"] < seen["pair"] + seen["pair in full"]


HLO = """
HloModule walks

mixed {
  p0 = f32[64,128]{1,0} parameter(0)
  e = f32[64,128]{1,0} exponential(p0)
  r = f32[64,128]{1,0} reverse(e), dimensions={1}
  ROOT a = f32[64,128]{1,0} add(e, r)
}

chain {
  q0 = f32[64,128]{1,0} parameter(0)
  e = f32[64,128]{1,0} exponential(q0)
  ROOT n = f32[64,128]{1,0} negate(e)
}

ENTRY main {
  x = f32[64,128]{1,0} parameter(0)
  w = f32[64,128]{1,0} parameter(1)
  mix = f32[64,128]{1,0} fusion(x), kind=kLoop, calls=mixed
  ch = f32[64,128]{1,0} fusion(x), kind=kLoop, calls=chain
  c1 = f32[64,128]{1,0} multiply(mix, w)
  c2 = f32[64,128]{1,0} subtract(ch, x)
  c3 = f32[64,128]{1,0} multiply(ch, w)
  c4 = f32[128,64]{1,0} transpose(ch), dimensions={1,0}
  ROOT t = (f32[64,128]{1,0}, f32[64,128]{1,0}, f32[64,128]{1,0}, f32[128,64]{1,0}) tuple(c1, c2, c3, c4)
}
"""


def test_summaries_or_the_full_walk():
    m = parse_module(HLO)
    i = {x.name: x for x in m.entry.instructions}
    cache = W.WalkCache(fused_members, H100)
    # the producer's root set meets one of its own roots (e feeds the root
    # and the reverse): that sum depends on the consumer's roots one by one
    assert cache.walk([i["mix"], i["c1"]], "loop") is None
    # x is read by both the producer and the consumer: their root sets merge
    assert cache.walk([i["ch"], i["c2"]], "loop") is None
    # otherwise the joined summaries are the full walk, for any emitter kind
    for units in ([i["ch"], i["c3"]], [i["ch"], i["c4"]], [i["mix"]], [i["c4"]]):
        for kind in ("loop", "transpose"):
            got = cache.walk(units, kind)
            assert got is not None
            _same(got, _full(units, kind), units)
    # the estimates agree too
    for units in ([i["mix"], i["c1"]], [i["ch"], i["c2"]], [i["ch"], i["c3"]]):
        fast = M.estimate(units, units[-1], H100, fused_members, walks=cache)
        assert fast == M.estimate(units, units[-1], H100, fused_members)
    # one producer part serves every consumer reading the producer alike
    assert len(cache.parts[i["ch"]]) == 1
