"""dot-strength-reduction: decisions and their remarks on the S2 model's
linear layers (shared/xla-dumps/cnn_fp16), and the rewrite's numerics."""

from __future__ import annotations

import pytest

import hlorun
from hlorun.passes import pass_class

from ..conftest import shared_path


def _step(n: str):
    d = shared_path("xla-dumps", "cnn_fp16")
    return hlorun.load_module(next(d.glob(f"*.{n}.*")))


def test_s2_remarks_name_rule_and_numbers():
    m = _step("0008")
    p = pass_class("dot-strength-reduction")()
    assert p.run(m)
    by = {r.instruction: r for r in p.remarks}
    assert by["dot"].kind == by["dot.1"].kind == "missed"
    assert "(4,096 + 1) * 16,384 = 67,125,248 >= 10,000,000" in by["dot"].message
    for name, n, k in (("dot.2", "1,024", "4,096"), ("dot.3", "1,024", "1,024"), ("dot.4", "10", "1,024")):
        r = by[name]
        assert r.kind == "applied" and r.data["rule"] == "too-small"
        assert f"({n} + 1) * {k}" in r.message and "multiply+reduce" in r.message
        assert r.derived_from == [name]
    assert by["dot.4"].data["n"] == 10 and by["dot.4"].data["cost"] == 11264


@pytest.mark.parametrize("alg", [None, "dot_bf16_bf16_f32_x3", "dot_bf16_bf16_f32_x6",
                                 "dot_tf32_tf32_f32"])
def test_algorithm_multiplies_are_built(alg):
    attr = f", algorithm={alg}" if alg else ""
    m = hlorun.parse_module(f"""
HloModule t
ENTRY e {{
  a = f32[64,2]{{1,0}} parameter(0)
  b = f32[2]{{0}} parameter(1)
  ROOT d = f32[64]{{0}} dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}{attr}
}}""")
    assert pass_class("dot-strength-reduction")().run(m)
    ops = [i.opcode for i in m.entry.post_order()]
    assert "dot" not in ops and ops.count("reduce") == 1
    muls = {None: 1, "dot_bf16_bf16_f32_x3": 3, "dot_bf16_bf16_f32_x6": 6, "dot_tf32_tf32_f32": 1}
    assert ops.count("multiply") == muls[alg]
    if alg and "bf16" in alg:
        assert "bitcast-convert" in ops and "select" in ops
