"""The shortcuts that make passes cheaper without changing what they do
(issue 15): each is checked against the work it skips, on real XLA dumps."""

from __future__ import annotations

from pathlib import Path

import pytest

import hlorun
from hlorun.ir.clone import clone_module
from hlorun.passes.algsimp import AlgebraicSimplifier
from hlorun.passes.cse import HloCSE, _Context, _distinct_keys
from hlorun.pipeline.loader import load_pipeline
from hlorun.pipeline.run import RunOptions, run_pipeline
from hlorun.text.parser import parse_module
from hlorun.text.printer import print_module

DUMPS = Path(__file__).resolve().parents[2] / "testdata" / "xla-dumps"
PROGRAMS = ("transformer_2l_bf16", "moe_topk_train", "convnet_train_bf16", "cond_while")


def _before(name: str):
    return hlorun.load_module(next((DUMPS / name).glob("*before_optimizations.txt*")))


@pytest.mark.parametrize("name", PROGRAMS)
@pytest.mark.parametrize("layout_sensitive", [False, True])
def test_cse_skips_only_computations_where_the_walk_changes_nothing(name, layout_sensitive):
    module = _before(name)
    ctx = _Context(layout_sensitive)
    cse = HloCSE(is_layout_sensitive=layout_sensitive)
    skipped = walked = 0
    for comp in list(module.computations):
        if _distinct_keys(comp, ctx.cheap_key):
            skipped += 1
            assert not cse._eliminate(comp, ctx), comp.name
        else:
            walked += 1
    assert skipped  # the shortcut is taken on real modules


def test_cse_walks_a_computation_with_duplicates():
    module = parse_module("""HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  a = f32[4] exponential(p)
  b = f32[4] exponential(p)
  ROOT r = f32[4] add(a, b)
}
""")
    comp = module.entry
    assert not _distinct_keys(comp, _Context(False).cheap_key)
    assert HloCSE().run(module)
    assert comp.instruction_count == 3


@pytest.mark.parametrize("name", ("transformer_2l_bf16",))
def test_a_converged_algsimp_is_not_rerun_by_its_fixed_point_step(name, monkeypatch):
    """A fixed-point algsimp step counts the rerun (as before) without
    walking again; the module is the same as with the rerun."""
    spec = load_pipeline("gpu-cuda")
    module = _before(name)
    reference = clone_module(module)

    calls: list[int] = []
    orig = AlgebraicSimplifier.run

    def counting(self, m):
        calls.append(1)
        return orig(self, m)

    monkeypatch.setattr(AlgebraicSimplifier, "run", counting)
    res = run_pipeline(module, spec, RunOptions())
    with_skip = len(calls)
    calls.clear()
    monkeypatch.setattr(AlgebraicSimplifier, "converged", lambda self, m: False)
    res2 = run_pipeline(reference, spec, RunOptions())
    reruns = [e for e in res2.events if e.name == "algsimp" and (e.fixed_point_iterations or 0) > 1]
    assert reruns  # the transformers have fixed-point algsimp steps that changed something
    assert len(calls) - with_skip == len(reruns)
    assert [e.fixed_point_iterations for e in res2.events] == \
        [e.fixed_point_iterations for e in res.events]
    assert print_module(reference) == print_module(module)


def test_converged_is_about_the_module_the_run_left():
    module = _before("transformer_2l_bf16")
    other = clone_module(module)
    p = AlgebraicSimplifier()
    p.run(module)
    assert p.converged(module)
    assert not p.converged(other)
    assert not p.run(module)  # what converged promises
