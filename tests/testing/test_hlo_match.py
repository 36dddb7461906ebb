"""hlorun.testing.hlo_match: XLA's m:: matcher expressions from GmockMatch."""

from __future__ import annotations

import pytest

from hlorun.text.parser import parse_module
from hlorun.testing.hlo_match import parse_matcher

MODULE = """
HloModule m
ENTRY e {
  p0 = f32[2,3] parameter(0)
  p1 = f32[3,4] parameter(1)
  cc = (f32[2,4], s8[16]) custom-call(p0, p1), custom_call_target="__cublas$lt$matmul"
  gte = f32[2,4] get-tuple-element(cc), index=0
  ROOT b = f32[2,2,2] bitcast(gte)
}
"""


def root():
    return parse_module(MODULE, "<m>").entry.root


def test_nested_pattern_with_shapes_and_parameters_matches():
    pat = parse_matcher('m::Bitcast(m::GetTupleElement(m::CustomCall({"__cublas$lt$matmul"}, '
                        'm::Parameter(0).WithShape(F32, {2, 3}), m::Parameter(1).WithShape(F32, {3, 4})), 0))'
                        ' .WithShape(F32, {2, 2, 2})')
    assert pat.why_not(root()) is None


@pytest.mark.parametrize("expr,why", [
    ('m::Convert(m::Op())', "root: expected convert, got bitcast b"),
    ('m::Bitcast(m::GetTupleElement(m::CustomCall({"__cublas$gemm"}), 0))',
     "custom call target __cublas$lt$matmul not in ['__cublas$gemm']"),
    ('m::Bitcast(m::GetTupleElement(m::Op(), 1))', "index 0, expected 1"),
    ('m::Bitcast(m::Op()).WithShape(F16, {2, 2, 2})', "expected f16[2, 2, 2]"),
])
def test_mismatches_say_where(expr, why):
    assert why in parse_matcher(expr).why_not(root())


def test_helper_calls_are_substituted_and_unknown_syntax_is_an_error():
    pat = parse_matcher("m::Bitcast(m::GetTupleElement(m::CustomCall({CustomCallTarget()}), 0))",
                        {"CustomCallTarget": "__cublas$lt$matmul"})
    assert pat.why_not(root()) is None
    with pytest.raises(ValueError):
        parse_matcher("m::Bitcast(m::Op()).WithPredicate([](auto*){return true;})")
    with pytest.raises(ValueError):
        parse_matcher("m::CustomCall({Target()})")
