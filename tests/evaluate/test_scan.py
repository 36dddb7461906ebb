"""XLA's ``scan`` instruction (hlorun/evaluate/scan.py): what ``jnp.cumsum``
lowers to in JAX 0.11.  Checked against numpy's cumulative functions, in
both directions, with a carry that is not the output, and on the real
held-out program whose optimized module XLA rewrote without ``scan``."""

from __future__ import annotations

import numpy as np

from hlorun.evaluate import Evaluator, compare_values, output_types, tolerance_types
from hlorun.evaluate.compare import reduction_lengths
from hlorun.evaluate.session import build_inputs
from hlorun.text.parser import load_module

from ..conftest import TESTDATA
from .helpers import f32, run_hlo

CUMSUM = """
HloModule cumsum

%add_carry (x: f32[4], c: f32[4]) -> (f32[4], f32[4]) {
  %x = f32[4]{0} parameter(0)
  %c = f32[4]{0} parameter(1)
  %s = f32[4]{0} add(%x, %c)
  ROOT %t = (f32[4]{0}, f32[4]{0}) tuple(%s, %s)
}

ENTRY %e (a: f32[4,16]) -> (f32[4,16], f32[4]) {
  %a = f32[4,16]{1,0} parameter(0)
  %zero = f32[] constant(0)
  %init = f32[4]{0} broadcast(%zero), dimensions={}
  ROOT %s = (f32[4,16]{1,0}, f32[4]{0}) scan(%a, %init), dimensions={1}, num_carries=1, is_associative=true, to_apply=%add_carry
}
"""


def test_cumsum_along_a_dimension():
    a = f32(4, 16)
    out, carry = run_hlo(CUMSUM, a)
    np.testing.assert_allclose(out, np.cumsum(a, axis=1), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(carry, a.sum(axis=1), rtol=1e-6, atol=1e-6)


def test_reverse_scan():
    a = f32(4, 16, seed=1)
    out, carry = run_hlo(CUMSUM.replace("is_associative=true", "is_reverse=true, is_associative=true"), a)
    np.testing.assert_allclose(out, np.cumsum(a[:, ::-1], axis=1)[:, ::-1], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(carry, a.sum(axis=1), rtol=1e-6, atol=1e-6)


def test_output_and_carry_differ():
    """A running maximum carried, the step output is x minus the maximum so far."""
    text = """
HloModule runmax

%step (x: f32[3], m: f32[3]) -> (f32[3], f32[3]) {
  %x = f32[3]{0} parameter(0)
  %m = f32[3]{0} parameter(1)
  %nm = f32[3]{0} maximum(%x, %m)
  %d = f32[3]{0} subtract(%x, %nm)
  ROOT %t = (f32[3]{0}, f32[3]{0}) tuple(%d, %nm)
}

ENTRY %e (a: f32[8,3]) -> (f32[8,3], f32[3]) {
  %a = f32[8,3]{1,0} parameter(0)
  %ninf = f32[] constant(-inf)
  %init = f32[3]{0} broadcast(%ninf), dimensions={}
  ROOT %s = (f32[8,3]{1,0}, f32[3]{0}) scan(%a, %init), dimensions={0}, num_carries=1, to_apply=%step
}
"""
    a = f32(8, 3, seed=2)
    out, carry = run_hlo(text, a)
    running = np.maximum.accumulate(a, axis=0)
    np.testing.assert_allclose(out, a - running, rtol=0, atol=0)
    np.testing.assert_allclose(carry, a.max(axis=0), rtol=0, atol=0)


def test_held_out_program_matches_xlas_rewrite():
    """XLA decomposes the scan of jnp.cumsum into reduce-window and reduce
    fusions; its optimized module must evaluate the same."""
    d = TESTDATA / "xla-dumps-holdout" / "scan_reductions_f32"
    before = load_module(next(d.glob("*before_optimizations.txt*")))
    after = load_module(next(d.glob("*gpu_after_optimizations.txt*")))
    assert any(i.opcode == "scan" for c in before.computations for i in c.instructions)
    args = build_inputs(before, [], 0)
    ra, rb = Evaluator(before).evaluate(args), Evaluator(after).evaluate(args)
    cmp = compare_values(ra, rb, output_types(before), tolerance_types=tolerance_types(before),
                         terms=reduction_lengths(before))
    assert cmp.ok, [leaf.describe() for leaf in cmp.leaves if not leaf.ok]
