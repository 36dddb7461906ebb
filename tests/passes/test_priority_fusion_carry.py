"""What priority fusion carries over to a fusion it grew instead of walking
the fusion again (hlorun/passes/priority_fusion/__init__.py, ``carry``):
whether the members pass :func:`members_refusal` and the fusion's Triton
unit summary must equal a fresh computation on the grown fusion, at every
fusion step of real models with generic Triton fusions (softmax /
layer-norm ``__triton`` fusions absorbing their producers and consumers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hlorun.passes import priority_fusion as pf
from hlorun.passes.priority_fusion.analysis import fused_members
from hlorun.passes.priority_fusion.triton import members_refusal, tiling_refusal, unit_summary

from .test_priority_fusion_incremental import fuse, pre_fusion

REPO = Path(__file__).resolve().parents[2]
MODELS = [
    REPO / "testdata" / "xla-dumps" / "transformer_2l_bf16" /
    "module_0000.jit_transformer_2l_bf16.before_optimizations.txt.gz",
    REPO / "testdata" / "transformer" / "jax_4layer_train_step.hlo.gz",
]


@pytest.mark.parametrize("model", MODELS, ids=lambda p: p.parent.name)
def test_carried_facts_match_a_fresh_walk(model, monkeypatch):
    seen = {"summaries": 0, "members_ok": 0}
    original = pf._Queue.changed

    def checked(self, instr):
        carry = self.carry.get(instr)
        original(self, instr)
        if carry is None:
            return
        ok, summary = carry
        if ok:
            seen["members_ok"] += 1
            assert members_refusal(instr) is None, instr.name
        if summary is not None:
            seen["summaries"] += 1
            assert summary == unit_summary(instr, fused_members), instr.name
    monkeypatch.setattr(pf._Queue, "changed", checked)
    module = pre_fusion(model)
    assert fuse(module, reference=False)[0]
    # both shortcuts were taken on these models
    assert seen["summaries"] > 10 and seen["members_ok"] > 10, seen


def test_tiling_refusal_needs_a_reduce():
    """The shortcut of tiling_refusal (no reduce: nothing to refuse) agrees
    with the full check on every fusion of a fused model."""
    from hlorun.passes.triton_tiling import untileable
    module = pre_fusion(MODELS[0])
    fuse(module, reference=False)
    n = 0
    for comp in module.computations:
        for i in comp.instructions:
            if i.opcode == "fusion":
                n += 1
                assert tiling_refusal(i) == untileable(i.fused_computation.post_order())
    assert n > 20


def test_triton_configs_written_once_match_the_reference():
    """Triton fusions' backend configs are written after the last step (their
    block-level config for the final body); the reference mode writes one at
    every step: the same module text, with Triton fusions in it."""
    from hlorun.text.parser import parse_module
    from hlorun.text.printer import print_module
    before = print_module(pre_fusion(MODELS[0]))
    ref = fuse(parse_module(before), reference=True)
    inc = fuse(parse_module(before), reference=False)
    assert inc[1].count('"kind":"__triton"') >= 5
    assert inc[1] == ref[1] and inc[2] == ref[2]
