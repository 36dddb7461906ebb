"""compare's ``order=`` (XLA as JAX 0.11 prints it) next to the older
``type=``: parsed, printed as written, verified, and evaluated as
Comparison::Order says (TOTAL: -0 < +0 and NaNs ordered)."""

from __future__ import annotations

import numpy as np
import pytest

import hlorun
from hlorun.evaluate import evaluate
from hlorun.ir.comparison import comparison_order
from hlorun.text.printer import print_module
from hlorun.errors import HloError
from hlorun.verifier.checkers import HloVerifier

TEXT = """HloModule m, entry_computation_layout={{(f32[4]{{0}}, f32[4]{{0}}, s32[4]{{0}})->(pred[4]{{0}}, pred[4]{{0}}, pred[4]{{0}})}}

ENTRY %e (a: f32[4], b: f32[4], i: s32[4]) -> (pred[4], pred[4], pred[4]) {{
  %a = f32[4]{{0}} parameter(0)
  %b = f32[4]{{0}} parameter(1)
  %total = pred[4]{{0}} compare(%a, %b), direction=LT{attr}
  %partial = pred[4]{{0}} compare(%a, %b), direction=LT
  %i = s32[4]{{0}} parameter(2)
  %ints = pred[4]{{0}} compare(%i, %i), direction=LE
  ROOT %t = (pred[4]{{0}}, pred[4]{{0}}, pred[4]{{0}}) tuple(%total, %partial, %ints)
}}
"""


def _module(attr: str):
    return hlorun.parse_module(TEXT.format(attr=attr), "cmp.hlo")


@pytest.mark.parametrize("attr", [", order=TOTAL", ", type=TOTALORDER"])
def test_total_order_spellings_parse_print_and_evaluate_alike(attr):
    m = _module(attr)
    assert attr in print_module(m)  # kept as written
    instrs = {i.name: i for i in m.entry.instructions}
    assert comparison_order(instrs["total"]) == "TOTAL"
    assert comparison_order(instrs["partial"]) == "PARTIAL"
    assert comparison_order(instrs["ints"]) == "TOTAL"
    assert [d.message for d in HloVerifier().check(m)] == []
    a = np.array([-0.0, np.nan, 1.0, 2.0], np.float32)
    b = np.array([0.0, 1.0, np.nan, 3.0], np.float32)
    total, partial, _ = evaluate(m, [a, b, np.arange(4, dtype=np.int32)])
    assert list(total) == [True, False, True, True]   # -0 < +0; +NaN sorts last
    assert list(partial) == [False, False, False, True]


def test_unknown_order_is_a_located_parse_error():
    with pytest.raises(HloError) as e:
        _module(", order=STRICT")
    assert "order" in str(e.value) and "6:" in str(e.value)
