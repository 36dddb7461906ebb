"""The top-k custom calls (hlorun/evaluate/topk_calls.py): ``TopK`` and
XLA's ``__gpu$TopK`` give the top k along the last dimension by the call's
comparator, ties at the lower index -- exactly what the ``topk`` instruction
and the sort + slice they decompose into give, NaNs and signed zeros
included; and the real sort / top-k program evaluates the same before and
after the gpu-cuda pipeline (which now makes __gpu$TopK and sort fusions)."""

from __future__ import annotations

import numpy as np
import pytest

from hlorun.api import compile as hl_compile
from hlorun.evaluate import EvaluationError, evaluate
from hlorun.text.parser import load_module, parse_module

from ..conftest import TESTDATA
from .helpers import run_hlo

# the comparator of the __gpu$TopK call in XLA's dump of sort_total_order
# (testdata/xla-dumps/sort_total_order, after_optimizations)
_XLA_CMP = """
%compare-greater-than.1 (p.0.lhs.1: f32[], p.0.rhs.1: f32[], p.1.lhs.1: s32[], p.1.rhs.1: s32[]) -> pred[] {
  %p.1.lhs.1 = s32[] parameter(2)
  %p.1.rhs.1 = s32[] parameter(3)
  %p.0.lhs.1 = f32[] parameter(0)
  %bitcast.2.0 = s32[] bitcast(%p.0.lhs.1)
  %constant_10_0 = s32[] constant(0)
  %compare.7.0 = pred[] compare(%bitcast.2.0, %constant_10_0), direction=LT
  %constant_12_0 = s32[] constant(2147483647)
  %xor.4.0 = s32[] xor(%constant_12_0, %bitcast.2.0)
  %select.4.0 = s32[] select(%compare.7.0, %xor.4.0, %bitcast.2.0)
  %p.0.rhs.1 = f32[] parameter(1)
  %bitcast.3.0 = s32[] bitcast(%p.0.rhs.1)
  %compare.8.0 = pred[] compare(%bitcast.3.0, %constant_10_0), direction=LT
  %xor.5.0 = s32[] xor(%constant_12_0, %bitcast.3.0)
  %select.5.0 = s32[] select(%compare.8.0, %xor.5.0, %bitcast.3.0)
  ROOT %compare.1.0 = pred[] compare(%select.4.0, %select.5.0), direction=GT
}
"""


def _call(target: str, cmp: str = _XLA_CMP, name: str = "%compare-greater-than.1",
          n: int = 64, k: int = 8) -> str:
    return f"""HloModule m
{cmp}
ENTRY %e (x: f32[4,{n}]) -> (f32[4,{k}], s32[4,{k}]) {{
  %x = f32[4,{n}]{{1,0}} parameter(0)
  ROOT %t = (f32[4,{k}]{{1,0}}, s32[4,{k}]{{1,0}}) custom-call(%x), custom_call_target="{target}", called_computations={{{name}}}
}}"""


def _topk(n: int = 64, k: int = 8) -> str:
    return f"""HloModule m
ENTRY %e (x: f32[4,{n}]) -> (f32[4,{k}], s32[4,{k}]) {{
  %x = f32[4,{n}]{{1,0}} parameter(0)
  ROOT %t = (f32[4,{k}]{{1,0}}, s32[4,{k}]{{1,0}}) topk(%x), k={k}, largest=true
}}"""


def _special_rows(n: int = 64) -> np.ndarray:
    rng = np.random.default_rng(3)
    x = rng.integers(-3, 4, (4, n)).astype(np.float32)  # many ties
    x[0, [5, 9]] = np.nan
    x[1] = np.minimum(x[1], -1)
    x[1, [2, 7, 11]] = [-0.0, 0.0, -0.0]  # the zeros are the largest of row 1
    x[2, 1] = np.inf
    x[3, :] = 1.0  # all equal: indices 0..k-1
    return x


@pytest.mark.parametrize("target", ["__gpu$TopK", "TopK"])
def test_xla_comparator_call_equals_topk_instruction(target):
    x = _special_rows()
    want_v, want_i = run_hlo(_topk(), x)
    got_v, got_i = run_hlo(_call(target), x)
    np.testing.assert_array_equal(got_i, want_i)
    np.testing.assert_array_equal(got_v.view(np.int32), want_v.view(np.int32))
    assert list(got_i[0, :2]) == [5, 9]          # NaN is the largest, lower index first
    assert list(got_i[1, :3]) == [7, 2, 11]      # +0 before -0, then ties by index
    assert list(got_i[3]) == list(range(8))


def test_total_order_comparator_takes_the_direct_path():
    cmp = """
%gt (a: f32[], b: f32[], c: s32[], d: s32[]) -> pred[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  %c = s32[] parameter(2)
  %d = s32[] parameter(3)
  ROOT %r = pred[] compare(%a, %b), direction=GT, order=TOTAL
}"""
    x = _special_rows(2048)
    got = run_hlo(_call("__gpu$TopK", cmp, "%gt", n=2048, k=16), x)
    want = run_hlo(_topk(2048, 16), x)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_k_larger_than_the_row_is_refused():
    with pytest.raises(EvaluationError, match="exceeds the row length"):
        run_hlo(_call("TopK", n=4, k=8), np.zeros((4, 4), np.float32))


def test_sort_total_order_program_same_before_and_after_the_pipeline():
    """jnp.sort, jnp.argsort and lax.top_k (XLA dump): after gpu-cuda (two
    kCustom sort fusions with iota tie-breakers and a __gpu$TopK call) the
    results are bit-identical on inputs full of ties, NaNs and zeros."""
    before = load_module(TESTDATA / "xla-dumps" / "sort_total_order"
                         / "module_0000.jit_sort_total_order.before_optimizations.txt")
    out = hl_compile(before)
    out.raise_for_status()
    after = out.module
    targets = [i.custom_call_target for i in after.entry.instructions if i.opcode == "custom-call"]
    assert targets == ["__gpu$TopK"]
    x = np.repeat(_special_rows(4096)[:, :], 2, axis=0)
    y = np.random.default_rng(5).integers(-2, 3, (8, 4096)).astype(np.float32)
    y[0, ::7] = -0.0
    for a, b in zip(evaluate(before, [x, y]), evaluate(after, [x, y])):
        np.testing.assert_array_equal(np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8))
