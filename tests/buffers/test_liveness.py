"""Live ranges (XLA's HloLiveRange) over the schedule."""

from __future__ import annotations

from .helpers import assign, ranges

CHAIN = """
HloModule chain, is_scheduled=true{alias}

ENTRY %e (p0: f32[1024], p1: f32[1024]) -> f32[1024] {{
  %p0 = f32[1024]{{0}} parameter(0)
  %p1 = f32[1024]{{0}} parameter(1)
  %a = f32[1024]{{0}} exponential(%p0)
  %b = f32[1024]{{0}} add(%a, %p1)
  %c = f32[1024]{{0}} negate(%b)
  ROOT %d = f32[1024]{{0}} multiply(%c, %p0)
}}
"""


def test_ranges_follow_the_schedule():
    m, asg = assign(CHAIN.format(alias=""))
    r = ranges(asg, m)
    assert asg.live_range.end_time == 6
    assert [i.name for i in asg.live_range.flat] == ["p0", "p1", "a", "b", "c", "d"]
    # entry parameters that are not donated live to the end of the program
    assert r["p0{}"] == (0, 6) and r["p1{}"] == (0, 6)
    assert r["a{}"] == (2, 3) and r["b{}"] == (3, 4) and r["c{}"] == (4, 5)
    # the root lives to the end of its computation
    assert r["d{}"] == (5, 6)


def test_donated_parameter_ends_at_its_last_use():
    m, asg = assign(CHAIN.format(alias=", input_output_alias={ {}: (1, {}, may-alias) }"))
    r = ranges(asg, m)
    assert r["p1{}"] == (0, 3)          # last use: %b at t=3
    assert r["p0{}"] == (0, 6)          # still read-only, whole program
    assert asg.alias.buffer(asg.dataflow.unique_value(m.entry.get_instruction("p1"))) is \
        asg.alias.buffer(asg.dataflow.unique_value(m.entry.get_instruction("d")))


def test_unscheduled_module_uses_its_instruction_order():
    text = CHAIN.format(alias="").replace(", is_scheduled=true", "")
    m, asg = assign(text)
    assert [i.name for i in asg.live_range.flat] == ["p0", "p1", "a", "b", "c", "d"]


def test_invalid_order_falls_back_to_post_order():
    """A pass that appends an instruction used earlier leaves the insertion
    order invalid; the analysis then schedules in XLA's post order."""
    from hlorun.buffers import assign_buffers
    from hlorun.ir.module import Instruction
    from hlorun.text.parser import parse_module
    m = parse_module(CHAIN.format(alias=""), "t.hlo")
    e = m.entry
    a = e.get_instruction("a")
    late = Instruction("negate", a.shape, [a], name="late")
    e.add_instruction(late)
    e.get_instruction("b").replace_operand_with(a, late)
    asg = assign_buffers(m)
    names = [i.name for i in asg.live_range.flat]
    assert names.index("late") < names.index("b")
    assert sorted(names) == sorted(i.name for i in e.instructions)


WHILE = """
HloModule w, is_scheduled=true

%body (t: (s32[], f32[256])) -> (s32[], f32[256]) {
  %t = (s32[], f32[256]{0}) parameter(0)
  %i = s32[] get-tuple-element(%t), index=0
  %x = f32[256]{0} get-tuple-element(%t), index=1
  %one = s32[] constant(1)
  %i1 = s32[] add(%i, %one)
  %x1 = f32[256]{0} exponential(%x)
  ROOT %r = (s32[], f32[256]{0}) tuple(%i1, %x1)
}

%cond (t.1: (s32[], f32[256])) -> pred[] {
  %t.1 = (s32[], f32[256]{0}) parameter(0)
  %i.1 = s32[] get-tuple-element(%t.1), index=0
  %n = s32[] constant(10)
  ROOT %lt = pred[] compare(%i.1, %n), direction=LT
}

ENTRY %e (p: f32[256]) -> f32[256] {
  %p = f32[256]{0} parameter(0)
  %zero = s32[] constant(0)
  %init = (s32[], f32[256]{0}) tuple(%zero, %p)
  %w = (s32[], f32[256]{0}) while(%init), condition=%cond, body=%body
  ROOT %out = f32[256]{0} get-tuple-element(%w), index=1
}
"""


def test_while_flattens_condition_then_body_before_the_loop():
    m, asg = assign(WHILE)
    names = [i.name for i in asg.live_range.flat]
    assert names.index("t.1") < names.index("lt") < names.index("t") < names.index("r") < names.index("w")


def test_while_values_form_one_buffer_per_element():
    m, asg = assign(WHILE)
    body = m.get_computation("body")
    x1 = asg.dataflow.unique_value(body.get_instruction("x1"))
    w = m.entry.get_instruction("w")
    (wv,) = asg.dataflow.value_set(w, (1,))
    # the while's element 1 is a phi (init %p, body root %x1) in one buffer
    # with the body parameter's element, the body root's and the init value
    buf = asg.alias.buffer(wv)
    names = {v.instruction.name for v in buf.values}
    assert {"x1", "w", "t", "t.1"} <= names
    assert asg.alias.buffer(x1) is buf
    # ... so they share one slice
    assert asg.slice_of(x1)[0] is asg.slice_of(wv)[0]
