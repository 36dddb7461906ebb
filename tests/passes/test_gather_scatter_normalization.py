"""Numerics of XLA's gather/scatter normalisation passes
(batched_gather_scatter_normalizer, gather_simplifier, scatter_simplifier):
every fixture case small enough to evaluate computes the same values before
and after its pass (hlorun's evaluator, seeded random inputs with in-range
and out-of-range indices), and on the held-out embed_xent program the
optimization pipeline leaves no batching dimension and only simplified
gathers and scatters."""

from __future__ import annotations

import math

import pytest

from hlorun.evaluate import EvaluationError, compare_values, evaluate, output_types, random_inputs, tolerance_types
from hlorun.passes import pass_class
from hlorun.passes.gather_simplifier import is_simplified_gather
from hlorun.passes.scatter_simplifier import is_simplified_scatter
from hlorun.testing.fixtures import load_fixture_file
from hlorun.text.parser import parse_module

from ..conftest import TESTDATA

PASSES = ("batched_gather_scatter_normalizer", "gather_simplifier", "scatter_simplifier")


def _small(module, limit=1 << 16) -> bool:
    return all(math.prod(p.shape.dimensions) <= limit for p in module.entry.parameters)


CASES = [(name, c) for name in PASSES
         for f in sorted((TESTDATA / "passes" / name).glob("*.hlo"))
         for c in load_fixture_file(f)]


@pytest.mark.parametrize("name,case", CASES, ids=[c.name for _, c in CASES])
@pytest.mark.parametrize("seed", [0, 1])
def test_same_values(name, case, seed):
    before = parse_module(case.text)
    if not _small(before):
        pytest.skip("too large to evaluate")
    after = parse_module(case.text)
    pass_class(name)().run(after)
    args = random_inputs(before, seed)
    try:
        expected = evaluate(before, args)
    except EvaluationError as e:
        # XLA's IndicesBecomeUnsorted case pairs batching dimensions of
        # different sizes (3 vs 2): it only checks the rewrite's text.
        pytest.skip(f"the input itself cannot be evaluated: {e}")
    cmp = compare_values(expected, evaluate(after, args), output_types(before),
                         tolerance_types=tolerance_types(before))
    assert cmp.ok, "; ".join(leaf.describe() for leaf in cmp.leaves if not leaf.ok)


def test_enough_cases_evaluated():
    assert sum(_small(parse_module(c.text)) for _, c in CASES) >= 12


def test_embed_xent_optimization_pipeline():
    path = next((TESTDATA / "xla-dumps-holdout" / "embed_xent_train_bf16").glob(
        "*before_optimizations.txt"))
    m = parse_module(path.read_text())
    batched = [i for c in m.computations for i in c.instructions
               if i.int_list("operand_batching_dims") or i.int_list("input_batching_dims")]
    assert len(batched) == 2
    for name in ("call-inliner",) + PASSES:
        pass_class(name)().run(m)
    ops = [i for c in m.computations for i in c.instructions if i.opcode in ("gather", "scatter")]
    assert len(ops) == 4
    assert not [i for i in ops if i.int_list("operand_batching_dims")
                or i.int_list("input_batching_dims")]
    assert all(is_simplified_gather(i) for i in ops if i.opcode == "gather")
    assert all(is_simplified_scatter(i) for i in ops if i.opcode == "scatter")
    # take_along_axis: s32[2048,3] indices (iota, iota, target) as in XLA's dump
    assert sorted(tuple(i.operands[1].shape.dimensions) for i in ops) == \
        [(2048, 1), (2048, 1), (2048, 3), (2048, 3)]
