"""What priority fusion's queue and the shared parser keep alive (issue 15,
memory): a removed instruction is not kept by the queue's priorities,
estimates or dirty marks, and the parser keeps no parsed instruction."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

from hlorun.passes import priority_fusion as pf
from hlorun.passes.priority_fusion import PriorityFusion
from hlorun.text.parser import load_module, parse_module
from hlorun.text.printer import print_module

from .test_priority_fusion_incremental import pre_fusion

REPO = Path(__file__).resolve().parents[2]
MODEL = REPO / "testdata" / "transformer" / "jax_4layer_train_step.hlo.gz"


def test_queue_state_after_the_loop_holds_no_removed_instruction(monkeypatch):
    module = pre_fusion(MODEL)
    seen = []
    fuse_constants = pf._Queue.fuse_constants

    def check(q):
        comp = q.comp
        costs = q.costs
        seen.append((len(q.prio), len(costs.agg)))
        for d in (q.prio, q.last_estimate, q.rejected):
            assert all(i.parent is comp for i in d), "a removed instruction is kept"
        # marks only where an aggregate would read them
        assert set(costs.dirty) <= set(costs.agg)
        return fuse_constants(q)
    monkeypatch.setattr(pf._Queue, "fuse_constants", check)
    assert PriorityFusion().run(module)
    assert seen and max(n for n, _ in seen) > 100


def test_parser_keeps_no_parsed_instruction_alive():
    text = print_module(load_module(str(MODEL)))
    module = parse_module(text)
    refs = [weakref.ref(i) for i in module.instructions()]
    assert len(refs) > 1000
    del module
    gc.collect()
    assert sum(r() is not None for r in refs) == 0


def test_cached_walks_and_aggregates_share_their_empty_parts(monkeypatch):
    """A unit walk and an aggregate are kept for every costed producer (at
    the queue's peak they were twice the module): a unit that is not a
    fusion shares one read-only empty ``param_of`` / ``links``, equal
    opcode sets are one object, and an aggregate without refusals or
    missing estimates holds no container of its own for them."""
    from hlorun.passes.priority_fusion import costs, walks
    module = pre_fusion(MODEL)
    seen = []
    fuse_constants = pf._Queue.fuse_constants

    def check(q):
        ws = list(q.walks.units.values())
        ops: dict = {}
        for w in ws:
            if w.unit.opcode != "fusion":
                assert w.param_of is walks._EMPTY and w.links is walks._EMPTY
            assert ops.setdefault(w.ops, w.ops) is w.ops
            assert w.unc or w.unc == ()
        aggs = list(q.costs.agg.values())
        assert all(a.missing is costs._NO_USERS for a in aggs if not a.missing)
        assert all(a.bad is costs._NONE for a in aggs if not a.bad)
        # only producers with more users than KEEP_AGGREGATE keep one
        assert all(len(a.terms) > pf.KEEP_AGGREGATE for a in aggs)
        seen.append((len(ws), len(ops), sum(a.bad is costs._NONE for a in aggs)))
        return fuse_constants(q)
    monkeypatch.setattr(pf._Queue, "fuse_constants", check)
    assert PriorityFusion().run(module)
    assert max(n for n, _, _ in seen) > 50 and max(s for _, _, s in seen) > 10
    assert all(k < n / 4 for n, k, _ in seen if n > 50), seen  # a handful of opcode sets
