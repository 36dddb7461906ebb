"""Numeric checks that do not cry wolf (issue 19): realistic default
inputs, tolerances that grow with low-precision reduction length, an f64
referee for differences, and XLA's own before/after modules agreeing."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from hlorun.cli import cli
from hlorun.evaluate import Evaluator, compare_values, output_types, random_inputs
from hlorun.evaluate.compare import reduction_lengths, reduction_rtol
from hlorun.evaluate.inputs import describe_inputs, index_bounds, weight_fan_ins
from hlorun.evaluate.reference import f64_reference, referee
from hlorun.text.parser import load_module, parse_module

from ..conftest import TESTDATA

DUMPS = TESTDATA / "xla-dumps"


def _pair(name):
    d = DUMPS / name
    return next(d.glob("*before_optimizations*")), next(d.glob("*gpu_after_optimizations*"))


@pytest.mark.parametrize("name", ["transformer_2l_bf16", "moe_topk_train", "gqa_decode_loop",
                                  "mlp_train_mixed", "dot_algorithms_no_triton",
                                  "sort_total_order"])
def test_xla_before_and_after_optimization_agree_with_default_inputs(name):
    before, after = _pair(name)
    r = CliRunner().invoke(cli, ["compare", str(before), str(after), "--format", "json"])
    doc = json.loads(r.stdout)
    assert r.exit_code == 0 and doc["ok"], [o for o in doc["outputs"] if not o["ok"]]
    assert doc["inputs"]  # the input scheme is part of the report


def test_weights_are_scaled_by_fan_in_and_activations_stay_finite():
    before, _ = _pair("transformer_2l_bf16")
    m = load_module(before)
    fans = weight_fan_ins(m)
    names = {p.parameter_number: p.name for p in m.entry.parameters}
    w2 = [i for i, n in names.items() if "w2" in n][0]
    assert fans[w2][0] == 1024                      # [1024,256] contracts 1024
    args = random_inputs(m, 0)
    assert float(np.abs(args[w2].astype(np.float32)).max()) <= 1.01 * (3 / 1024) ** 0.5  # bf16 rounding
    out = Evaluator(m).evaluate(args)
    loss = float(np.asarray(out[-1]))
    assert np.isfinite(loss) and 5 < loss < 9     # ~ln(1024): logits of unit scale
    lines = describe_inputs(m)
    assert any("(weight: fan-in 1024 of" in ln for ln in lines)


def test_token_ids_compared_with_an_iota_stay_below_the_vocabulary():
    m = parse_module("""HloModule onehot

ENTRY e {
  ids = s32[8] parameter(0)
  b = s32[8,50] broadcast(ids), dimensions={0}
  io = s32[8,50] iota(), iota_dimension=1
  eq = pred[8,50] compare(b, io), direction=EQ
  ROOT c = f32[8,50] convert(eq)
}
""")
    assert index_bounds(m) == {0: 49}
    for seed in range(5):
        ids = random_inputs(m, seed)[0]
        assert ids.min() >= 0 and ids.max() <= 49
        assert float(Evaluator(m).evaluate([ids]).sum()) == 8.0   # every row one-hot


BF16_SUM = """HloModule s

add {
  a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT s = bf16[] add(a, b)
}

ENTRY e {
  x = bf16[16384] parameter(0)
  z = bf16[] constant(0)
  ROOT r = bf16[] reduce(x, z), dimensions={0}, to_apply=add
}
"""

ROUNDTRIP = """HloModule r

ENTRY e {
  x = bf16[4096] parameter(0)
  three = bf16[] constant(3)
  t = bf16[4096] broadcast(three), dimensions={}
  m = bf16[4096] multiply(x, t)
  ROOT d = bf16[4096] divide(m, t)
}
"""


def test_long_bf16_reductions_get_a_wider_tolerance():
    m = parse_module(BF16_SUM)
    assert reduction_lengths(m) == [16384]
    assert reduction_rtol("bf16", 16384) == pytest.approx(2 ** -8 * 14)
    assert reduction_rtol("bf16", 1) == 0.0 and reduction_rtol("f32", 16384) == 0.0
    x = random_inputs(m, 0)[0]
    r = Evaluator(m).evaluate([x])
    off = (r.astype(np.float32) * np.float32(1.2)).astype(r.dtype)   # 20% off: still wrong
    assert not compare_values(r, off, output_types(m), terms=reduction_lengths(m)).ok
    # 7% off: beyond the flat bf16 rtol+atol (3% + 3% of a scalar), within 5.5% + 3%
    near = (r.astype(np.float32) * np.float32(1.07)).astype(r.dtype)
    assert not compare_values(r, near, output_types(m)).ok
    assert compare_values(r, near, output_types(m), terms=reduction_lengths(m)).ok


def test_f64_referee_excuses_a_better_rounding_not_a_wrong_result():
    """A rounds (x*3)/3 through bf16; B is x (what algsimp makes of it).
    Under a tight tolerance they differ; against A's f64 evaluation B is
    exact, so the referee accepts it.  A B that is 10% off is not."""
    a = parse_module(ROUNDTRIP)
    x = random_inputs(a, 0)[0]
    ra = Evaluator(a).evaluate([x])
    ref = f64_reference(a, [x])
    assert np.allclose(ref, x.astype(np.float64))
    cmp = compare_values(ra, x, output_types(a), rtol=1e-5, atol=1e-5)
    assert not cmp.ok
    assert "1 of 1" in referee(cmp, ra, x, ref) and cmp.ok
    assert "agrees against the f64 reference" in cmp.leaves[0].describe()
    wrong = (x.astype(np.float32) * np.float32(1.1)).astype(x.dtype)
    cmp = compare_values(ra, wrong, output_types(a), rtol=1e-5, atol=1e-5)
    referee(cmp, ra, wrong, ref)
    assert not cmp.ok and "also differs from the f64 reference" in cmp.leaves[0].referee


def test_dot_algorithms_round_operands_like_the_hardware():
    """algorithm=dot_bf16_bf16_f32 multiplies bf16-rounded operands (XLA
    converts them before cuBLAS); the x3/x6/x9 splits come back to f32
    accuracy; without the rounding, XLA's own optimized module 'differed'
    from its input by 53x the tolerance."""
    from hlorun.evaluate.linalg import _algorithm_dot
    rng = np.random.default_rng(0)
    a = rng.random((64, 128), dtype=np.float32) - 0.5
    b = rng.random((128, 32), dtype=np.float32) - 0.5
    dims = ([], [1], [], [0])
    exact = a.astype(np.float64) @ b.astype(np.float64)
    err = {alg: float(np.abs(_algorithm_dot(a, b, dims, alg) - exact).max())
           for alg in ("dot_bf16_bf16_f32", "dot_bf16_bf16_f32_x3", "dot_bf16_bf16_f32_x6",
                       "dot_bf16_bf16_f32_x9", "dot_tf32_tf32_f32", "dot_tf32_tf32_f32_x3")}
    f32 = float(np.abs(a @ b - exact).max())
    assert err["dot_bf16_bf16_f32"] > 100 * f32
    assert err["dot_tf32_tf32_f32"] > 10 * f32
    assert err["dot_bf16_bf16_f32"] > err["dot_bf16_bf16_f32_x3"] > err["dot_bf16_bf16_f32_x6"]
    assert err["dot_bf16_bf16_f32_x9"] < 10 * f32 and err["dot_tf32_tf32_f32_x3"] < 10 * f32
