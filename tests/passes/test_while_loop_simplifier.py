"""while-loop-simplifier (XLA's WhileLoopSimplifier: induction variables,
constant propagation, constant-parameter removal) and algsimp's slice rules,
on the held-out lax.fori_loop GRU (XLA's own before_optimizations) and on
small loops: the loop state shrinks the way XLA's does, and the values stay
the same (hlorun's evaluator)."""

from __future__ import annotations

from pathlib import Path

import pytest

import hlorun
from hlorun.evaluate import compare_values, evaluate, output_types, random_inputs, tolerance_types
from hlorun.passes import pass_class
from hlorun.text.parser import parse_module

ROOT = Path(__file__).resolve().parents[2]
GRU = ROOT / "testdata" / "xla-dumps-holdout" / "gru_fori_f32"


def _simplify(module) -> None:
    """XLA's simplification fixed point, as far as these passes go."""
    passes = [pass_class(n)() for n in ("algsimp", "while-loop-simplifier", "tuple-simplifier",
                                         "dce")]
    for _ in range(10):
        if not any([p.run(module) for p in passes]):
            break


def _agree(before, after, seed=0) -> None:
    args = random_inputs(before, seed)
    cmp = compare_values(evaluate(before, args), evaluate(after, args), output_types(before),
                         tolerance_types=tolerance_types(before))
    assert cmp.ok, "; ".join(leaf.describe() for leaf in cmp.leaves if not leaf.ok)


def _while(module):
    return next(i for c in module.computations for i in c.instructions if i.opcode == "while")


def test_fori_loop_index_merges_into_the_trip_counter():
    path = next(GRU.glob("*before_optimizations.txt"))
    before, after = hlorun.load_module(path), hlorun.load_module(path)
    counters = [s for s in _while(before).shape.tuple_shapes if s.element_type == "s32"]
    assert len(counters) == 2  # the scan's trip counter and fori_loop's index
    _simplify(after)
    w = _while(after)
    # XLA's after_optimizations carries (s32[], f32[64,256], xs, 6 weights)
    assert [s.element_type for s in w.shape.tuple_shapes].count("s32") == 1
    assert len(w.shape.tuple_shapes) == 9
    body = w.attrs["body"]
    adds = [i for i in body.instructions if i.opcode == "add" and i.shape.element_type == "s32"]
    # one counter increment, and the index arithmetic of the dynamic slice (i + 20 when i < 0)
    assert len(adds) == 2, [a.name for a in adds]
    _agree(before, after)


LOOP = """HloModule loop

%body (p: (s32[], s32[], f32[8], s32[])) -> (s32[], s32[], f32[8], s32[]) {
  %p = (s32[], s32[], f32[8]{0}, s32[]) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %one = s32[] constant(1)
  %next_i = s32[] add(%i, %one)
  %j = s32[] get-tuple-element(%p), index=1
  %three = s32[] constant(3)
  %next_j = s32[] add(%three, %j)
  %acc = f32[8]{0} get-tuple-element(%p), index=2
  %jf = f32[] convert(%j)
  %k = s32[] get-tuple-element(%p), index=3
  %kf = f32[] convert(%k)
  %s = f32[] add(%jf, %kf)
  %b = f32[8]{0} broadcast(%s), dimensions={}
  %next_acc = f32[8]{0} add(%acc, %b)
  %seven = s32[] constant(7)
  ROOT %t = (s32[], s32[], f32[8]{0}, s32[]) tuple(%next_i, %next_j, %next_acc, %seven)
}

%cond (q: (s32[], s32[], f32[8], s32[])) -> pred[] {
  %q = (s32[], s32[], f32[8]{0}, s32[]) parameter(0)
  %j = s32[] get-tuple-element(%q), index=1
  %lim = s32[] constant(40)
  ROOT %lt = pred[] compare(%j, %lim), direction=LT
}

ENTRY %e (x: f32[8]) -> (s32[], f32[8], s32[]) {
  %x = f32[8]{0} parameter(0)
  %zero = s32[] constant(0)
  %five = s32[] constant(5)
  %seven = s32[] constant(7)
  %init = (s32[], s32[], f32[8]{0}, s32[]) tuple(%zero, %five, %x, %seven)
  %w = (s32[], s32[], f32[8]{0}, s32[]) while(%init), condition=%cond, body=%body
  %wi = s32[] get-tuple-element(%w), index=0
  %wj = s32[] get-tuple-element(%w), index=1
  %wacc = f32[8]{0} get-tuple-element(%w), index=2
  ROOT %out = (s32[], f32[8]{0}, s32[]) tuple(%wj, %wacc, %wi)
}
"""


def test_induction_variable_and_constant_element():
    before, after = parse_module(LOOP), parse_module(LOOP)
    wlp = pass_class("while-loop-simplifier")()
    assert wlp.run(after)
    _simplify(after)
    w = _while(after)
    # element 3 (always 7) left the loop; element 1 (5, 8, 11 ...) is read as 5 + 3 * counter
    assert [s.element_type for s in w.shape.tuple_shapes] == ["s32", "f32"]
    cond = w.attrs["condition"]
    assert any(i.opcode == "multiply" for i in cond.instructions)
    _agree(before, after)


def test_loop_with_a_shared_body_is_left_alone():
    text = LOOP.replace("ROOT %out = (s32[], f32[8]{0}, s32[]) tuple(%wj, %wacc, %wi)",
                        "%w2 = (s32[], s32[], f32[8]{0}, s32[]) while(%w), condition=%cond, "
                        "body=%body\n  ROOT %out = (s32[], f32[8]{0}, s32[]) tuple(%wj, %wacc, %wi)")
    m = parse_module(text)
    assert not pass_class("while-loop-simplifier")().run(m)


SLICES = """HloModule s

ENTRY %e (x: f32[64,768]) -> (f32[64,256], f32[64,256], f32[64,768]) {
  %x = f32[64,768]{1,0} parameter(0)
  %s2 = f32[64,512]{1,0} slice(%x), slice={[0:64], [0:512]}
  %a = f32[64,256]{1,0} slice(%s2), slice={[0:64], [256:512]}
  %s3 = f32[64,512]{1,0} slice(%x), slice={[0:64], [256:768]}
  %b = f32[64,256]{1,0} slice(%s3), slice={[0:64], [256:512]}
  %c = f32[64,768]{1,0} slice(%x), slice={[0:64], [0:768]}
  ROOT %t = (f32[64,256]{1,0}, f32[64,256]{1,0}, f32[64,768]{1,0}) tuple(%a, %b, %c)
}
"""


@pytest.mark.parametrize("layout_sensitive", [False, True])
def test_slice_of_slice_is_one_slice(layout_sensitive):
    before, after = parse_module(SLICES), parse_module(SLICES)
    pass_class("algsimp")(is_layout_sensitive=layout_sensitive).run(after)
    pass_class("dce")().run(after)
    root = after.entry.root
    a, b, c = root.operands
    assert c.opcode == "parameter"  # a no-op slice is its operand
    assert a.opcode == b.opcode == "slice" and a.operands[0] is b.operands[0] is c
    assert a.attrs["slice"] == "{[0:64], [256:512]}"
    assert b.attrs["slice"] == "{[0:64], [512:768]}"
    _agree(before, after)


def test_dead_elements_leave_the_loop_with_their_computation():
    # element 2 (acc) feeds only itself; elements 4 and 5 feed each other but
    # nothing else (XLA's union-find group); none is read after the loop
    text = LOOP.replace("(s32[], s32[], f32[8], s32[])", "(s32[], s32[], f32[8], s32[], f32[8], f32[8])") \
        .replace("(s32[], s32[], f32[8]{0}, s32[])", "(s32[], s32[], f32[8]{0}, s32[], f32[8]{0}, f32[8]{0})") \
        .replace("  %seven = s32[] constant(7)\n  ROOT %t", "  %u = f32[8]{0} get-tuple-element(%p), index=4\n"
                 "  %v = f32[8]{0} get-tuple-element(%p), index=5\n  %nu = f32[8]{0} add(%u, %v)\n"
                 "  %nv = f32[8]{0} multiply(%u, %v)\n  %seven = s32[] constant(7)\n  ROOT %t") \
        .replace("tuple(%next_i, %next_j, %next_acc, %seven)", "tuple(%next_i, %next_j, %next_acc, %seven, %nu, %nv)") \
        .replace("tuple(%zero, %five, %x, %seven)", "tuple(%zero, %five, %x, %seven, %x, %x)") \
        .replace("ROOT %out = (s32[], f32[8]{0}, s32[]) tuple(%wj, %wacc, %wi)",
                 "ROOT %out = (s32[], s32[]) tuple(%wj, %wi)") \
        .replace("-> (s32[], f32[8], s32[]) {", "-> (s32[], s32[]) {")
    before, after = parse_module(text), parse_module(text)
    _simplify(after)
    w = _while(after)
    assert [s.element_type for s in w.shape.tuple_shapes] == ["s32"]
    body = w.attrs["body"]
    assert not any(i.opcode in ("multiply", "broadcast") and i.shape.element_type == "f32"
                   for i in body.instructions)
    _agree(before, after)
