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


# jnp.take(log_b.T, obs, axis=0) and its gradient as JAX lowers them (the
# HMM emission update of hmm_forward_scan_f32, smaller): the scatter-add
# into log_b.T [24,16] is transposed back, so layout assignment gives it the
# layout {0,1} and layout normalization leaves update_window_dims={2,1}.
EMISSION_GRAD = """
HloModule emission_grad

region_add {
  lhs = f32[] parameter(0)
  rhs = f32[] parameter(1)
  ROOT sum = f32[] add(lhs, rhs)
}

ENTRY main {
  log_b = f32[16,24] parameter(0)
  obs = s32[8,20] parameter(1)
  cot = f32[20,8,16] parameter(2)
  zero_i = s32[] constant(0)
  zeros_i = s32[8,20] broadcast(zero_i), dimensions={}
  neg = pred[8,20] compare(obs, zeros_i), direction=LT
  n_sym = s32[] constant(24)
  n_syms = s32[8,20] broadcast(n_sym), dimensions={}
  wrapped = s32[8,20] add(obs, n_syms)
  idx = s32[8,20] select(neg, wrapped, obs)
  idx3 = s32[8,20,1] reshape(idx)
  cot_t = f32[8,20,16] transpose(cot), dimensions={1,0,2}
  zero = f32[] constant(0)
  init = f32[24,16] broadcast(zero), dimensions={}
  grad_t = f32[24,16] scatter(init, idx3, cot_t), update_window_dims={2}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=2, to_apply=region_add
  grad = f32[16,24] transpose(grad_t), dimensions={1,0}
  lr = f32[] constant(0.1)
  lrs = f32[16,24] broadcast(lr), dimensions={}
  step = f32[16,24] multiply(grad, lrs)
  ROOT new_b = f32[16,24] subtract(log_b, step)
}
"""


def test_scatter_with_transposed_layout_compiles_on_gpu_cuda():
    """The verifier used to stop gpu-cuda after layout_normalization
    ("update_window_dims in scatter op must be sorted; got: 2, 1."): XLA's
    RunLayoutNormalizationPasses runs without an invariant checker and ends
    with ScatterSimplifier, which sorts them."""
    from hlorun.pipeline.loader import load_pipeline
    from hlorun.pipeline.run import run_pipeline

    m = parse_module(EMISSION_GRAD)
    res = run_pipeline(m, load_pipeline("gpu-cuda"))
    assert res.exit_code == 0, res.violations
    names = [e.path for e in res.events]
    assert names.index("layout_normalization/scatter_simplifier") > \
        names.index("layout_normalization/layout_normalization")
    scatters = [i for c in m.computations for i in c.instructions if i.opcode == "scatter"]
    assert len(scatters) == 1
    s = scatters[0]
    assert is_simplified_scatter(s)
    assert list(s.int_list("scatter_dims_to_operand_dims")) == [1]
    assert tuple(s.operands[2].shape.dimensions) == (160, 16, 1)


@pytest.mark.parametrize("incremental", [True, False])
def test_deferred_verifier_sees_what_layout_normalization_left(incremental):
    """In a ``checkers_at_end`` sub-pipeline the verifier (incremental or
    full) still finds, at the pipeline's end, the unsorted update_window_dims
    when no ScatterSimplifier follows, and nothing when one does."""
    from hlorun.pipeline.loader import parse_pipeline
    from hlorun.pipeline.run import RunOptions, run_pipeline

    text = (TESTDATA / "passes" / "scatter_simplifier" / "transposed_table_grad.hlo").read_text()
    body = "name: t\ncheckers: [hlo-verifier]\nsteps:\n  - pipeline: ln\n" \
           "    checkers_at_end: true\n    steps: [reshape-decomposer, layout_normalization, dce{}]\n"
    opts = RunOptions(incremental_checks=incremental)
    res = run_pipeline(parse_module(text), parse_pipeline(body.format(""), "t.yaml"), opts)
    assert [(v.after_pass, v.message) for v in res.violations] == [
        ("ln/dce", "update_window_dims in scatter op must be sorted; got: 2, 1.")]
    res = run_pipeline(parse_module(text),
                       parse_pipeline(body.format(", scatter_simplifier"), "t.yaml"), opts)
    assert res.exit_code == 0 and not res.violations
