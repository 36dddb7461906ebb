"""copy-insertion reasons about buffers, not instructions (XLA's CopyInsertion
over HloAliasAnalysis: one HloValue per tuple element, however many
get-tuple-elements name it; live ranges under DependencyHloOrdering).

* The sort-dispatched MoE's combine (testdata/xla-dumps-holdout/
  moe_sort_dispatch_bf16): a multi-output loop fusion makes the scatter-add's
  zero-filled operand; the scatter fusion updates it in place while another
  kernel, reading the same element through a second get-tuple-element, runs
  later.  XLA keeps ``copy.1`` in front of the scatter.
* A value that initialises updated loop state and is read again after the
  loop (selective_scan_train_f32: ``loop_broadcast_select_fusion#1`` feeds two
  scans and the concatenate after them): the loop writes over the buffer it is
  given, so XLA keeps the copy of the initial value (AddCopiesForWhile).
"""

from __future__ import annotations

import gzip
from pathlib import Path

from hlorun.passes.copy_insertion import CopyInsertion
from hlorun.text.parser import parse_module

_DISPATCH = """HloModule moe_combine_fragment

%add_bf16 (a: bf16[], b: bf16[]) -> bf16[] {
  %a = bf16[] parameter(0)
  %b = bf16[] parameter(1)
  ROOT %s = bf16[] add(%a, %b)
}

%add_f32 (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %r = f32[] add(%x, %y)
}

%fused_broadcast_select (p0: bf16[2048,256], p1: u32[2048,256], p2: u32[2048,256]) -> (bf16[2048,256], bf16[2048,256]) {
  %p0 = bf16[2048,256]{1,0} parameter(0)
  %p1 = u32[2048,256]{1,0} parameter(1)
  %p2 = u32[2048,256]{1,0} parameter(2)
  %eq = pred[2048,256]{1,0} compare(%p1, %p2), direction=EQ
  %z = bf16[] constant(0)
  %zb = bf16[2048,256]{1,0} broadcast(%z), dimensions={}
  %sel = bf16[2048,256]{1,0} select(%eq, %p0, %zb)
  ROOT %t = (bf16[2048,256]{1,0}, bf16[2048,256]{1,0}) tuple(%sel, %zb)
}

%fused_scatter (q0: bf16[2048,256], q1: bf16[2048,256], q2: s32[2048]) -> bf16[2048,256] {
  %q0 = bf16[2048,256]{1,0} parameter(0)
  %q2 = s32[2048]{0} parameter(2)
  %idx = s32[2048,1]{1,0} bitcast(%q2)
  %q1 = bf16[2048,256]{1,0} parameter(1)
  ROOT %sc = bf16[2048,256]{1,0} scatter(%q0, %idx, %q1), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=%add_bf16
}

%fused_reduce (r0: bf16[2048,256], r1: bf16[2048,256]) -> f32[2048] {
  %r0 = bf16[2048,256]{1,0} parameter(0)
  %r1 = bf16[2048,256]{1,0} parameter(1)
  %d = bf16[2048,256]{1,0} subtract(%r0, %r1)
  %f = f32[2048,256]{1,0} convert(%d)
  %zero = f32[] constant(0)
  ROOT %red = f32[2048]{0} reduce(%f, %zero), dimensions={1}, to_apply=%add_f32
}

ENTRY %main (o: bf16[2048,256], m1: u32[2048,256], m2: u32[2048,256], order: s32[2048]) -> f32[2048] {
  %o = bf16[2048,256]{1,0} parameter(0)
  %m1 = u32[2048,256]{1,0} parameter(1)
  %m2 = u32[2048,256]{1,0} parameter(2)
  %order = s32[2048]{0} parameter(3)
  %loop_broadcast_select_fusion = (bf16[2048,256]{1,0}, bf16[2048,256]{1,0}) fusion(%o, %m1, %m2), kind=kLoop, calls=%fused_broadcast_select
  %gte.5 = bf16[2048,256]{1,0} get-tuple-element(%loop_broadcast_select_fusion), index=1
  %gte.4 = bf16[2048,256]{1,0} get-tuple-element(%loop_broadcast_select_fusion), index=0
  %input_scatter_fusion = bf16[2048,256]{1,0} fusion(%gte.5, %gte.4, %order), kind=kInput, calls=%fused_scatter
  %gte.6 = bf16[2048,256]{1,0} get-tuple-element(%loop_broadcast_select_fusion), index=1
  ROOT %input_reduce_fusion = f32[2048]{0} fusion(%input_scatter_fusion, %gte.6), kind=kInput, calls=%fused_reduce
}
"""


def _copies(module):
    return [i for i in module.entry.instructions if i.opcode == "copy"]


def test_scatter_operand_read_through_another_get_tuple_element_is_copied():
    m = parse_module(_DISPATCH)
    assert CopyInsertion().run(m)
    (c,) = _copies(m)
    scatter = m.entry.get_instruction("input_scatter_fusion")
    assert scatter.operands[0] is c
    assert c.operands[0].name == "gte.5"


def test_scatter_operand_without_later_readers_is_not_copied():
    """The reduce reads the scatter's result, not the zero-filled operand: the
    scatter may update the element in place."""
    m = parse_module(_DISPATCH.replace(
        "fusion(%input_scatter_fusion, %gte.6)", "fusion(%input_scatter_fusion, %gte.4)"))
    assert not CopyInsertion().run(m)
    assert _copies(m) == []


_SCAN = """HloModule scan_state_fragment

%body (s: (s32[], f32[64,4,128])) -> (s32[], f32[64,4,128]) {
  %s = (s32[], f32[64,4,128]{2,1,0}) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %one = s32[] constant(1)
  %i1 = s32[] add(%i, %one)
  %h = f32[64,4,128]{2,1,0} get-tuple-element(%s), index=1
  %h1 = f32[64,4,128]{2,1,0} multiply(%h, %h)
  ROOT %t = (s32[], f32[64,4,128]{2,1,0}) tuple(%i1, %h1)
}

%cond (c: (s32[], f32[64,4,128])) -> pred[] {
  %c = (s32[], f32[64,4,128]{2,1,0}) parameter(0)
  %ci = s32[] get-tuple-element(%c), index=0
  %n = s32[] constant(64)
  ROOT %lt = pred[] compare(%ci, %n), direction=LT
}

%fused_negate (p: f32[64,4,128]) -> f32[64,4,128] {
  %p = f32[64,4,128]{2,1,0} parameter(0)
  ROOT %ng = f32[64,4,128]{2,1,0} negate(%p)
}

%fused_add (a0: f32[64,4,128], a1: f32[64,4,128]) -> f32[64,4,128] {
  %a0 = f32[64,4,128]{2,1,0} parameter(0)
  %a1 = f32[64,4,128]{2,1,0} parameter(1)
  ROOT %ad = f32[64,4,128]{2,1,0} add(%a0, %a1)
}

ENTRY %main (x: f32[64,4,128], i0: s32[]) -> f32[64,4,128] {
  %x = f32[64,4,128]{2,1,0} parameter(0)
  %i0 = s32[] parameter(1)
  %init_h = f32[64,4,128]{2,1,0} fusion(%x), kind=kLoop, calls=%fused_negate
  %init = (s32[], f32[64,4,128]{2,1,0}) tuple(%i0, %init_h)
  %w = (s32[], f32[64,4,128]{2,1,0}) while(%init), condition=%cond, body=%body
  %out = f32[64,4,128]{2,1,0} get-tuple-element(%w), index=1
  ROOT %late = f32[64,4,128]{2,1,0} fusion(%init_h, %out), kind=kLoop, calls=%fused_add
}
"""


def test_loop_state_read_after_the_loop_is_copied():
    m = parse_module(_SCAN)
    CopyInsertion().run(m)
    init = m.entry.get_instruction("init")
    copied = [c.operands[0].name for c in _copies(m)]
    assert "init_h" in copied
    assert init.operands[1].opcode == "copy"
    # the entry parameter that initialises the counter is copied too (not donated)
    assert init.operands[0].opcode == "copy"


def test_loop_state_read_only_before_the_loop_is_not_copied():
    """A reader that feeds the loop's initial tuple runs before the loop."""
    text = _SCAN.replace(
        "%init = (s32[], f32[64,4,128]{2,1,0}) tuple(%i0, %init_h)",
        "%i2 = s32[] parameter(2)\n"
        "  %early = f32[64,4,128]{2,1,0} fusion(%init_h, %x), kind=kLoop, calls=%fused_add\n"
        "  %init = (s32[], f32[64,4,128]{2,1,0}, f32[64,4,128]{2,1,0}) tuple(%i0, %init_h, %early)")
    text = text.replace("(s32[], f32[64,4,128])", "(s32[], f32[64,4,128], f32[64,4,128])")
    text = text.replace("(s32[], f32[64,4,128]{2,1,0})", "(s32[], f32[64,4,128]{2,1,0}, f32[64,4,128]{2,1,0})")
    text = text.replace("tuple(%i1, %h1)", "tuple(%i1, %h1, %e)").replace(
        "  ROOT %t =", "  %e = f32[64,4,128]{2,1,0} get-tuple-element(%s), index=2\n  ROOT %t =")
    text = text.replace("fusion(%init_h, %out), kind=kLoop", "fusion(%x, %out), kind=kLoop")
    text = text.replace("(x: f32[64,4,128], i0: s32[])", "(x: f32[64,4,128], i0: s32[], i2: s32[])")
    m = parse_module(text)
    CopyInsertion().run(m)
    assert [c.operands[0].name for c in _copies(m)] == ["i0"]


def test_moe_sort_dispatch_keeps_xlas_copy():
    """End to end on the real module: one copy kernel, in front of the
    scatter-add fusion, as XLA's copy.1."""
    import hlorun
    from hlorun.analysis.kernels import kernel_list
    d = Path(__file__).resolve().parents[2] / "testdata/xla-dumps-holdout/moe_sort_dispatch_bf16"
    (path,) = d.glob("*before_optimizations.txt.gz")
    res = hlorun.compile(parse_module(gzip.open(path, "rt").read()))
    assert not res.failures
    kinds = [k.kind for k in kernel_list(res.module)]
    assert kinds.count("copy") == 1
    (c,) = [i for i in res.module.entry.instructions if i.opcode == "copy"]
    (user,) = c.users
    assert user.opcode == "fusion" and \
        any(i.opcode == "scatter" for i in user.fused_computation.instructions)


# A scan body of ctc_loss_scan_f32's pattern: element 1 (alpha) is rewritten
# each step by a loop fusion that reads alpha shifted (slice + pad, not
# elementwise), element 2 by an elementwise update, element 3 stays.
_BODY = """HloModule scan_body_fragment

%fused_shift (a: f32[16,25]) -> f32[16,25] {
  %a = f32[16,25]{1,0} parameter(0)
  %sl = f32[16,24]{1,0} slice(%a), slice={[0:16], [0:24]}
  %lo = f32[] constant(-1e+30)
  %pd = f32[16,25]{1,0} pad(%sl, %lo), padding=0_0x1_0
  ROOT %mx = f32[16,25]{1,0} maximum(%a, %pd)
}

%fused_max (b: f32[16,25], c: f32[16,25]) -> f32[16,25] {
  %b = f32[16,25]{1,0} parameter(0)
  %c = f32[16,25]{1,0} parameter(1)
  ROOT %m = f32[16,25]{1,0} maximum(%b, %c)
}

%fused_sub (d: f32[16,25], e: f32[16,25]) -> f32[16,25] {
  %d = f32[16,25]{1,0} parameter(0)
  %e = f32[16,25]{1,0} parameter(1)
  ROOT %s = f32[16,25]{1,0} subtract(%d, %e)
}

%fused_inc (i: s32[]) -> s32[] {
  %i = s32[] parameter(0)
  %one = s32[] constant(1)
  ROOT %n = s32[] add(%i, %one)
}

%body (p: (s32[], f32[16,25], f32[16,25], f32[16,25])) -> (s32[], f32[16,25], f32[16,25], f32[16,25]) {
  %p = (s32[], f32[16,25]{1,0}, f32[16,25]{1,0}, f32[16,25]{1,0}) parameter(0)
  %p0 = s32[] get-tuple-element(%p), index=0
  %p1 = f32[16,25]{1,0} get-tuple-element(%p), index=1
  %p2 = f32[16,25]{1,0} get-tuple-element(%p), index=2
  %p3 = f32[16,25]{1,0} get-tuple-element(%p), index=3
  %inc = s32[] fusion(%p0), kind=kLoop, calls=%fused_inc
  %alpha = f32[16,25]{1,0} fusion(%p1), kind=kLoop, calls=%fused_shift
  %beta = f32[16,25]{1,0} fusion(%p2, %p3), kind=kLoop, calls=%fused_max
  ROOT %t = (s32[], f32[16,25]{1,0}, f32[16,25]{1,0}, f32[16,25]{1,0}) tuple(%inc, %alpha, %beta, %p3)
}

%cond (q: (s32[], f32[16,25], f32[16,25], f32[16,25])) -> pred[] {
  %q = (s32[], f32[16,25]{1,0}, f32[16,25]{1,0}, f32[16,25]{1,0}) parameter(0)
  %qi = s32[] get-tuple-element(%q), index=0
  %nn = s32[] constant(63)
  ROOT %lt = pred[] compare(%qi, %nn), direction=LT
}

ENTRY %main (a0: f32[16,25], b0: f32[16,25], c0: f32[16,25]) -> f32[16,25] {
  %a0 = f32[16,25]{1,0} parameter(0)
  %b0 = f32[16,25]{1,0} parameter(1)
  %c0 = f32[16,25]{1,0} parameter(2)
  %zero = s32[] constant(0)
  %init = (s32[], f32[16,25]{1,0}, f32[16,25]{1,0}, f32[16,25]{1,0}) tuple(%zero, %a0, %b0, %c0)
  %w = (s32[], f32[16,25]{1,0}, f32[16,25]{1,0}, f32[16,25]{1,0}) while(%init), condition=%cond, body=%body
  ROOT %out = f32[16,25]{1,0} get-tuple-element(%w), index=1
}
"""


def _body_copies(m):
    body = next(c for c in m.computations if c.name == "body")
    return body, [i for i in body.instructions if i.opcode == "copy"]


def test_body_copies_a_new_value_that_reads_its_old_value_shifted():
    """ctc_loss_scan_f32's copy.34: the shifted read cannot share the buffer;
    the elementwise update of element 2 and the counter can."""
    m = parse_module(_BODY)
    CopyInsertion().run(m)
    body, copies = _body_copies(m)
    assert [c.operands[0].name for c in copies] == ["alpha"]
    assert body.root.operands[1] is copies[0]


def test_body_copies_an_old_value_read_after_the_new_one():
    """chunked_vocab_xent_bf16's copy.27: a reader of the old element 2 needs
    the new one first, so the old value gets a buffer of its own, read by all
    of the element's readers."""
    text = _BODY.replace(
        "  ROOT %t = (s32[], f32[16,25]{1,0}, f32[16,25]{1,0}, f32[16,25]{1,0}) tuple(%inc, %alpha, %beta, %p3)",
        "  %late = f32[16,25]{1,0} fusion(%p2, %beta), kind=kLoop, calls=%fused_sub\n"
        "  ROOT %t = (s32[], f32[16,25]{1,0}, f32[16,25]{1,0}, f32[16,25]{1,0}) tuple(%inc, %alpha, %beta, %late)")
    m = parse_module(text)
    CopyInsertion().run(m)
    body, copies = _body_copies(m)
    old = [c for c in copies if c.operands[0].name == "p2"]
    assert len(old) == 1
    assert body.get_instruction("beta").operands[0] is old[0]
    assert body.get_instruction("late").operands[0] is old[0]


def test_gpu_fusion_buffer_sharing_hint():
    from hlorun.passes.buffer_sharing import fusion_can_share
    m = parse_module(_BODY)
    body = next(c for c in m.computations if c.name == "body")
    assert not fusion_can_share(body.get_instruction("alpha"), 0)
    assert fusion_can_share(body.get_instruction("beta"), 0)
    assert fusion_can_share(body.get_instruction("beta"), 1)
    assert fusion_can_share(body.get_instruction("inc"), 0)


def test_body_new_value_from_a_multi_output_fusion():
    """chunked_vocab_xent_bf16's copy.58: element 2's new value is one output
    of a multi-output fusion whose other output a reader of the old element 2
    needs; that reader runs after the fusion, so the old value is copied."""
    text = _BODY.replace(
        "%fused_inc (i: s32[]) -> s32[] {",
        "%fused_two (g: f32[16,25], h: f32[16,25]) -> (f32[16,25], f32[16,25]) {\n"
        "  %g = f32[16,25]{1,0} parameter(0)\n"
        "  %h = f32[16,25]{1,0} parameter(1)\n"
        "  %x = f32[16,25]{1,0} maximum(%g, %h)\n"
        "  %y = f32[16,25]{1,0} subtract(%g, %h)\n"
        "  ROOT %gy = (f32[16,25]{1,0}, f32[16,25]{1,0}) tuple(%x, %y)\n"
        "}\n\n"
        "%fused_inc (i: s32[]) -> s32[] {"
    ).replace(
        "  %beta = f32[16,25]{1,0} fusion(%p2, %p3), kind=kLoop, calls=%fused_max\n",
        "  %two = (f32[16,25]{1,0}, f32[16,25]{1,0}) fusion(%p2, %p3), kind=kLoop, calls=%fused_two\n"
        "  %beta = f32[16,25]{1,0} get-tuple-element(%two), index=0\n"
        "  %other = f32[16,25]{1,0} get-tuple-element(%two), index=1\n"
        "  %late = f32[16,25]{1,0} fusion(%p2, %other), kind=kLoop, calls=%fused_sub\n"
    ).replace("tuple(%inc, %alpha, %beta, %p3)", "tuple(%inc, %alpha, %beta, %late)")
    m = parse_module(text)
    CopyInsertion().run(m)
    body, copies = _body_copies(m)
    old = [c for c in copies if c.operands[0].name == "p2"]
    assert len(old) == 1
    assert body.get_instruction("late").operands[0] is old[0]


# loss_scale_fp16_cond's step: lax.cond(finite, apply the update, keep the
# parameters); the keep branch returns its parameter.
_COND = """HloModule cond_fragment

%keep (k: (f16[1024], f16[512,1024])) -> (f16[1024], f16[512,1024]) {
  ROOT %k = (f16[1024]{0}, f16[512,1024]{1,0}) parameter(0)
}

%update (u: (f16[1024], f16[512,1024], f16[1024], f16[512,1024])) -> (f16[1024], f16[512,1024]) {
  %u = (f16[1024]{0}, f16[512,1024]{1,0}, f16[1024]{0}, f16[512,1024]{1,0}) parameter(0)
  %b = f16[1024]{0} get-tuple-element(%u), index=0
  %gb = f16[1024]{0} get-tuple-element(%u), index=2
  %nb = f16[1024]{0} subtract(%b, %gb)
  %w = f16[512,1024]{1,0} get-tuple-element(%u), index=1
  %gw = f16[512,1024]{1,0} get-tuple-element(%u), index=3
  %nw = f16[512,1024]{1,0} subtract(%w, %gw)
  ROOT %r = (f16[1024]{0}, f16[512,1024]{1,0}) tuple(%nb, %nw)
}

ENTRY %main (ok: pred[], b1: f16[1024], w1: f16[512,1024], g1: f16[1024], g2: f16[512,1024]) -> (f16[1024], f16[512,1024]) {
  %ok = pred[] parameter(0)
  %b1 = f16[1024]{0} parameter(1)
  %w1 = f16[512,1024]{1,0} parameter(2)
  %g1 = f16[1024]{0} parameter(3)
  %g2 = f16[512,1024]{1,0} parameter(4)
  %t_keep = (f16[1024]{0}, f16[512,1024]{1,0}) tuple(%b1, %w1)
  %t_upd = (f16[1024]{0}, f16[512,1024]{1,0}, f16[1024]{0}, f16[512,1024]{1,0}) tuple(%b1, %w1, %g1, %g2)
  ROOT %c = (f16[1024]{0}, f16[512,1024]{1,0}) conditional(%ok, %t_upd, %t_keep), true_computation=%update, false_computation=%keep
}
"""


def test_branch_returning_its_read_only_parameter_copies_it():
    """XLA's copy.3-copy.5 in loss_scale_fp16_cond's keep branch."""
    m = parse_module(_COND)
    CopyInsertion().run(m)
    keep = next(c for c in m.computations if c.name == "keep")
    assert keep.root.opcode == "tuple"
    assert [o.opcode for o in keep.root.operands] == ["copy", "copy"]
    update = next(c for c in m.computations if c.name == "update")
    assert not [i for i in update.instructions if i.opcode == "copy"]


def test_branch_returning_a_donated_parameter_keeps_no_copy():
    text = _COND.replace("HloModule cond_fragment",
                         "HloModule cond_fragment, input_output_alias={ {0}: (1, {}, may-alias), "
                         "{1}: (2, {}, may-alias) }")
    m = parse_module(text)
    CopyInsertion().run(m)
    keep = next(c for c in m.computations if c.name == "keep")
    assert not [i for i in keep.instructions if i.opcode == "copy"]


# adafactor_tree_f32 (held-out set 9): the new second-moment statistic is the
# elementwise output of a multi-output reduce fusion that also reduces it; the
# statistic is donated.  XLA:GPU's FusionCanShareBufferHint lets the fusion
# write it over the donated buffer (the reduce hero ends the other path).
_DONATED_REDUCE = """HloModule donated_reduce, input_output_alias={ {0}: (0, {}, may-alias) }

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%fused_add_reduce (p0: f32[512,512], p1: f32[512,512]) -> (f32[512], f32[512,512]) {
  %p0 = f32[512,512]{1,0} parameter(0)
  %c = f32[] constant(0.9)
  %cb = f32[512,512]{1,0} broadcast(%c), dimensions={}
  %m = f32[512,512]{1,0} multiply(%p0, %cb)
  %p1 = f32[512,512]{1,0} parameter(1)
  %n = f32[512,512]{1,0} add(%m, %p1)
  %z = f32[] constant(0)
  %r = f32[512]{0} reduce(%n, %z), dimensions={1}, to_apply=%add
  ROOT %t = (f32[512]{0}, f32[512,512]{1,0}) tuple(%r, %n)
}

ENTRY %main (v: f32[512,512], g: f32[512,512]) -> (f32[512,512], f32[512]) {
  %v = f32[512,512]{1,0} parameter(0)
  %g = f32[512,512]{1,0} parameter(1)
  %f = (f32[512]{0}, f32[512,512]{1,0}) fusion(%v, %g), kind=kInput, calls=%fused_add_reduce
  %new_v = f32[512,512]{1,0} get-tuple-element(%f), index=1
  %row = f32[512]{0} get-tuple-element(%f), index=0
  ROOT %out = (f32[512,512]{1,0}, f32[512]{0}) tuple(%new_v, %row)
}
"""


def test_donated_output_of_a_multi_output_reduce_fusion_shares_the_buffer():
    m = parse_module(_DONATED_REDUCE)
    CopyInsertion().run(m)
    assert _copies(m) == []
    # reading the donated statistic transposed cannot share: the copy stays
    m = parse_module(_DONATED_REDUCE.replace(
        "%m = f32[512,512]{1,0} multiply(%p0, %cb)",
        "%pt = f32[512,512]{1,0} transpose(%p0), dimensions={1,0}\n"
        "  %m = f32[512,512]{1,0} multiply(%pt, %cb)"))
    CopyInsertion().run(m)
    assert [c.operands[0].name for c in _copies(m)] == ["new_v"]
