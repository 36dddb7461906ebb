"""Buffer assignment rules: reuse of dead buffers, operand sharing,
donation, custom-call aliasing and in-place ops, as XLA:GPU applies them."""

from __future__ import annotations

from .helpers import assign, slice_of

HDR = "HloModule m, is_scheduled=true{extra}\n\n"


def _entry(body: str, params: str = "p0: f32[1024], p1: f32[1024]", result: str = "f32[1024]",
           extra: str = "", comps: str = "") -> str:
    return HDR.format(extra=extra) + comps + f"ENTRY %e ({params}) -> {result} {{\n{body}\n}}\n"


def test_elementwise_user_reuses_its_dying_operand():
    """a -> b -> c -> d are elementwise and each dies at its user.  The output
    d is assigned first (live-out, same size); c, b and a then each take the
    output's allocation because their live ranges only touch where the
    user may reuse the dying operand (CanShareOperandBufferWithUser)."""
    m, asg = assign(_entry("""
  %p0 = f32[1024]{0} parameter(0)
  %p1 = f32[1024]{0} parameter(1)
  %a = f32[1024]{0} exponential(%p0)
  %b = f32[1024]{0} add(%a, %p1)
  %c = f32[1024]{0} negate(%b)
  ROOT %d = f32[1024]{0} multiply(%c, %p0)"""))
    sa, sb, sc, sd = (slice_of(asg, m, n) for n in "abcd")
    assert sa == sb == sc == sd
    assert sd[0].kind == "output" and sd[0].size == 4096
    assert not any(a.is_temp for a in asg.allocations)


def test_heap_shares_a_dying_operand_with_an_elementwise_user():
    """The same chain feeding a smaller output: a, b, c are temporaries and
    the heap simulator gives them one slot (ShareWith)."""
    m, asg = assign(_entry("""
  %p0 = f32[1024]{0} parameter(0)
  %p1 = f32[1024]{0} parameter(1)
  %a = f32[1024]{0} exponential(%p0)
  %b = f32[1024]{0} add(%a, %p1)
  %c = f32[1024]{0} negate(%b)
  ROOT %d = f32[256]{0} slice(%c), slice={[0:256]}""", result="f32[256]"))
    sa, sb, sc = (slice_of(asg, m, n) for n in "abc")
    assert sa == sb == sc
    assert sa[0].is_temp and sa[0].size == 4096


def test_non_elementwise_user_gets_its_own_slot_and_dead_slots_are_reused():
    """reverse is not elementwise, so no operand/user pair shares.  a is
    dead before the output d is defined and reuses d's allocation; b and c
    overlap (t=3) and get two heap slots."""
    m, asg = assign(_entry("""
  %p0 = f32[1024]{0} parameter(0)
  %a = f32[1024]{0} reverse(%p0), dimensions={0}
  %b = f32[1024]{0} reverse(%a), dimensions={0}
  %c = f32[1024]{0} reverse(%b), dimensions={0}
  ROOT %d = f32[1024]{0} reverse(%c), dimensions={0}""", params="p0: f32[1024]"))
    sa, sb, sc, sd = (slice_of(asg, m, n) for n in "abcd")
    assert sa == sd and sd[0].kind == "output"
    assert sb[0] is sc[0] and sb[0].is_temp and sb[1] != sc[1]
    assert sb[0].size == 8192


def test_dead_heap_slot_is_reused_later():
    """Temporaries that are never live together get one offset."""
    m, asg = assign(_entry("""
  %p0 = f32[1024]{0} parameter(0)
  %a = f32[1024]{0} reverse(%p0), dimensions={0}
  %b = f32[1024]{0} reverse(%a), dimensions={0}
  %c = f32[1024]{0} reverse(%b), dimensions={0}
  ROOT %d = f32[16]{0} slice(%c), slice={[0:16]}""", params="p0: f32[1024]", result="f32[16]"))
    sa, sb, sc = (slice_of(asg, m, n) for n in "abc")
    assert sa[0] is sb[0] is sc[0] and sa[0].is_temp
    assert sa[1] == sc[1] != sb[1]
    assert sa[0].size == 8192


def test_live_out_and_parameters_get_their_own_allocations():
    m, asg = assign(_entry("""
  %p0 = f32[1024]{0} parameter(0)
  %p1 = f32[1024]{0} parameter(1)
  ROOT %s = f32[1024]{0} add(%p0, %p1)"""))
    a0, a1, out = (slice_of(asg, m, n)[0] for n in ("p0", "p1", "s"))
    assert a0.is_entry_parameter and a0.param_number == 0 and a0.is_readonly
    assert a1.param_number == 1
    assert out.maybe_live_out and out.kind == "output" and out not in (a0, a1)


def test_donation_puts_the_output_in_the_parameter_allocation():
    m, asg = assign(_entry("""
  %p0 = f32[1024]{0} parameter(0)
  %p1 = f32[1024]{0} parameter(1)
  ROOT %s = f32[1024]{0} add(%p0, %p1)""", extra=", input_output_alias={ {}: (1, {}, may-alias) }"))
    a1 = slice_of(asg, m, "p1")[0]
    assert slice_of(asg, m, "s")[0] is a1
    assert a1.param_aliased and a1.maybe_live_out and not a1.is_readonly


def test_buffer_donor_is_matched_to_an_output_of_the_same_size():
    """OptimizeInputOutputBufferAlias: a registered donor becomes an alias of
    an unaliased output of equal size."""
    m, asg = assign(_entry("""
  %p0 = f32[1024]{0} parameter(0)
  %p1 = f32[512]{0} parameter(1)
  ROOT %n = f32[1024]{0} negate(%p0)""", params="p0: f32[1024], p1: f32[512]",
                           extra=", buffer_donor={ (0, {}), (1, {}) }"))
    assert asg.alias.io_alias == [((), 0, (), "may-alias")]
    a0 = slice_of(asg, m, "p0")[0]
    assert slice_of(asg, m, "n")[0] is a0 and a0.param_aliased


def test_temp_reuses_a_donated_parameter_after_its_last_use():
    """A donated parameter's allocation is registered for reuse: a temporary
    living between the parameter's last use and the output takes it."""
    m, asg = assign(_entry("""
  %p0 = f32[1024]{0} parameter(0)
  %t = f32[1024]{0} reverse(%p0), dimensions={0}
  %u = f32[1024]{0} reverse(%t), dimensions={0}
  ROOT %o = f32[1024]{0} negate(%u)""", params="p0: f32[1024]",
                           extra=", input_output_alias={ {}: (0, {}, may-alias) }"))
    a0 = slice_of(asg, m, "p0")[0]
    assert slice_of(asg, m, "o")[0] is a0
    # u (2..3) only touches o (3..4), which may reuse it (negate is
    # elementwise); t (1..2) touches p0's last use at t=1 through a reverse,
    # which may not
    assert slice_of(asg, m, "u")[0] is a0
    assert slice_of(asg, m, "t")[0] is not a0


CC = """
  %p0 = f32[1024]{{0}} parameter(0)
  %p1 = f32[1024]{{0}} parameter(1)
  %x = f32[1024]{{0}} exponential(%p0)
  %y = f32[1024]{{0}} custom-call(%x, %p1), custom_call_target="{target}"{extra}
  ROOT %z = f32[256]{{0}} slice(%y), slice={{[0:256]}}"""


def _cc(target: str, extra: str = "") -> str:
    return _entry(CC.format(target=target, extra=extra), result="f32[256]")


def test_undeclared_custom_call_reuses_its_dead_operand():
    m, asg = assign(_cc("my_kernel"))
    assert slice_of(asg, m, "y") == slice_of(asg, m, "x")


def test_custom_call_declared_never_in_place_keeps_its_own_buffer():
    m, asg = assign(_cc("my_kernel"),
                    custom_call_targets={"my_kernel": {"in_place": False}})
    assert slice_of(asg, m, "y") != slice_of(asg, m, "x")


def test_strict_xla_rule_for_every_undeclared_target():
    m, asg = assign(_cc("my_kernel"),
                    custom_call_targets={"*": {"in_place": False}})
    assert slice_of(asg, m, "y") != slice_of(asg, m, "x")


def test_xla_library_calls_never_reuse_operands():
    m, asg = assign(_cc("__cudnn$convForward"))
    assert slice_of(asg, m, "y") != slice_of(asg, m, "x")


def test_declared_output_to_operand_aliasing_shares_the_operand_buffer():
    m, asg = assign(_cc("__cudnn$convForward", ", output_to_operand_aliasing={{}: (0, {})}"))
    assert slice_of(asg, m, "y") == slice_of(asg, m, "x")
    x = asg.dataflow.unique_value(m.entry.get_instruction("x"))
    y = asg.dataflow.unique_value(m.entry.get_instruction("y"))
    assert asg.alias.buffer(x) is asg.alias.buffer(y)


def _lt(beta: float) -> str:
    cfg = ('{"gemm_backend_config":{"alpha_real":1,"beta":%s,"dot_dimension_numbers":'
           '{"lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["0"],'
           '"lhs_batch_dimensions":[],"rhs_batch_dimensions":[]},"epilogue":"DEFAULT"}}' % beta)
    return _entry(f"""
  %a = f32[64,64]{{1,0}} parameter(0)
  %b = f32[64,64]{{1,0}} parameter(1)
  %c0 = f32[64,64]{{1,0}} parameter(2)
  %bias = f32[64,64]{{1,0}} exponential(%c0)
  %mm = (f32[64,64]{{1,0}}, s8[4194304]{{0}}) custom-call(%a, %b, %bias), custom_call_target="__cublas$lt$matmul", backend_config={cfg}
  %r = f32[64,64]{{1,0}} get-tuple-element(%mm), index=0
  ROOT %o = f32[8,64]{{1,0}} slice(%r), slice={{[0:8], [0:64]}}""",
                  params="a: f32[64,64], b: f32[64,64], c0: f32[64,64]", result="f32[8,64]")


def test_cublaslt_bias_is_overwritten_in_place_when_beta_is_nonzero():
    """NVPTXAliasInfo: cuBLASLt's C operand may alias output {0} iff beta != 0."""
    m, asg = assign(_lt(1))
    assert slice_of(asg, m, "mm", (0,)) == slice_of(asg, m, "bias")
    m, asg = assign(_lt(0))
    assert slice_of(asg, m, "mm", (0,)) != slice_of(asg, m, "bias")


def test_dynamic_update_slice_and_scatter_are_in_place():
    add = """%add (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %s = f32[] add(%x, %y)
}

"""
    m, asg = assign(_entry("""
  %p0 = f32[1024]{0} parameter(0)
  %u = f32[16]{0} parameter(1)
  %i = s32[] parameter(2)
  %buf = f32[1024]{0} exponential(%p0)
  %dus = f32[1024]{0} dynamic-update-slice(%buf, %u, %i)
  %idx = s32[16,1]{1,0} iota(), iota_dimension=0
  %sc = f32[1024]{0} scatter(%dus, %idx, %u), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=%add
  ROOT %o = f32[1024]{0} reverse(%sc), dimensions={0}""", params="p0: f32[1024], u: f32[16], i: s32[]",
                           comps=add))
    assert slice_of(asg, m, "buf") == slice_of(asg, m, "dus") == slice_of(asg, m, "sc")
    vals = [asg.dataflow.unique_value(m.entry.get_instruction(n)) for n in ("buf", "dus", "sc")]
    assert len({id(asg.alias.buffer(v)) for v in vals}) == 1
    # the reducer's values are thread-local allocations
    assert any(a.is_thread_local for a in asg.allocations)


def test_fusion_with_in_place_root_aliases_its_parameter():
    """A fusion whose root (through a bitcast) is a dynamic-update-slice of a
    fusion parameter must alias that operand (AliasInfo's fusion rule)."""
    comps = """%fused_dus (f0: f32[32,32], f1: f32[1,32], f2: s32[]) -> f32[1024] {
  %f0 = f32[32,32]{1,0} parameter(0)
  %f1 = f32[1,32]{1,0} parameter(1)
  %f2 = s32[] parameter(2)
  %z = s32[] constant(0)
  %d = f32[32,32]{1,0} dynamic-update-slice(%f0, %f1, %f2, %z)
  ROOT %bc = f32[1024]{0} bitcast(%d)
}

"""
    m, asg = assign(_entry("""
  %p0 = f32[32,32]{1,0} parameter(0)
  %u = f32[1,32]{1,0} parameter(1)
  %i = s32[] parameter(2)
  %buf = f32[32,32]{1,0} exponential(%p0)
  %f = f32[1024]{0} fusion(%buf, %u, %i), kind=kLoop, calls=%fused_dus
  ROOT %o = f32[1024]{0} reverse(%f), dimensions={0}""",
                           params="p0: f32[32,32], u: f32[1,32], i: s32[]", comps=comps))
    assert asg.rules.in_place_pairs(m.entry.get_instruction("f")) == [((0, ()), ())]
    assert slice_of(asg, m, "f") == slice_of(asg, m, "buf")


def test_tuple_elements_are_separate_values():
    m, asg = assign(_entry("""
  %p0 = f32[1024]{0} parameter(0)
  %t = (f32[1024]{0}, f32[16]{0}) custom-call(%p0), custom_call_target="__cudnn$x"
  %g0 = f32[1024]{0} get-tuple-element(%t), index=0
  %b = f32[32,32]{1,0} bitcast(%g0)
  ROOT %o = f32[32,32]{1,0} reverse(%b), dimensions={0}""", params="p0: f32[1024]",
                           result="f32[32,32]"))
    t = m.entry.get_instruction("t")
    labels = [v.short() for v in asg.dataflow.values if v.instruction is t]
    assert labels == ["<1 t{} @0>", "<2 t{0} @0>", "<3 t{1} @0>"]
    v0 = asg.dataflow.unique_value(t, (0,))
    assert [p[0].name for p in v0.positions] == ["t", "g0", "b"]
    assert [(u[0].name, u[1]) for u in v0.uses] == [("b", 0), ("o", 0)]
    # the tuple's pointer table is 16 bytes in its own (tuple) allocation
    tup = slice_of(asg, m, "t", ())
    assert tup[2] == 16
