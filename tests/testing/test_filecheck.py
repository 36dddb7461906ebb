"""FileCheck semantics (LLVM's, through the ``filecheck`` package), checked
on small inputs and on XLA-style HLO patterns."""

from __future__ import annotations

import pytest

from hlorun.testing.filecheck import filecheck, has_checks

HLO = """\
HloModule Module, entry_computation_layout={(f32[4,2,3]{0,1,2})->f32[8,3]{1,0}}

ENTRY %main (p: f32[4,2,3]) -> f32[8,3] {
  %p = f32[4,2,3]{0,1,2} parameter(0)
  %copy = f32[4,2,3]{2,1,0} copy(%p)
  ROOT %bitcast = f32[8,3]{1,0} bitcast(%copy)
}
"""


def ok(inp, chk, **kw):
    r = filecheck(inp, chk, **kw)
    return r.ok


def test_plain_in_order():
    assert ok("a\nb\nc\n", "CHECK: a\nCHECK: c")
    assert not ok("a\nb\nc\n", "CHECK: c\nCHECK: a")


def test_xla_capture_and_use():
    chk = """
// CHECK: [[INSTR_0:%[^ ]+]] = f32[4,2,3]{2,1,0} copy([[INSTR_1:%[^ ]+]])
// CHECK-NEXT: ROOT [[INSTR_2:%[^ ]+]] = f32[8,3]{1,0} bitcast([[INSTR_0]])
"""
    assert ok(HLO, chk)
    bad = chk.replace("bitcast([[INSTR_0]])", "bitcast([[INSTR_1]])")
    r = filecheck(HLO, bad)
    assert not r and "<check>:3: error: Couldn't match \"ROOT [[INSTR_2" in r.message


def test_next_capture_is_leftmost_on_the_next_line():
    """LLVM takes the leftmost match (filecheck 1.0.6 took a greedy prefix:
    C1 would be 't'); XLA's FP8 GEMM tests capture names this way."""
    inp = "  %t = f32[] transpose(%y)\n  %constant = f32[] constant(1)\n  g(%constant, %constant)\n"
    chk = ("CHECK: transpose(%y)\nCHECK-NEXT: [[C1:[^ ]+]] = f32[] constant(1)\n"
           "CHECK-NEXT: g([[C1]], [[C1]])")
    assert ok(inp, chk)
    assert not ok(inp.replace("g(%constant, %constant)", "g(%constant, %t)"), chk)


def test_capture_does_not_cross_lines():
    # [^ ]+ must not run over a newline (REG_NEWLINE semantics).
    assert not ok("x = a\nb", "CHECK: x = [[V:[^ ]+]]b")
    assert ok("x = ab", "CHECK: x = [[V:[^ ]+]]")


def test_next_same_empty():
    assert ok("a\nb\n", "CHECK: a\nCHECK-NEXT: b")
    r = filecheck("a\nx\nb\n", "CHECK: a\nCHECK-NEXT: b")
    assert not r and "<check>:2: error: Couldn't match \"b\"" in r.message
    assert not ok("a b\n", "CHECK: a\nCHECK-NEXT: b")
    assert ok("a b\n", "CHECK: a\nCHECK-SAME: b")
    assert not ok("a\nb\n", "CHECK: a\nCHECK-SAME: b")
    assert ok("a\n\nb\n", "CHECK: a\nCHECK-EMPTY:\nCHECK-NEXT: b")
    assert not ok("a\nc\n\nb\n", "CHECK: a\nCHECK-EMPTY:")


def test_not():
    assert ok("a\nb\nc\n", "CHECK: a\nCHECK-NOT: x\nCHECK: c")
    r = filecheck("a\nx\nc\n", "CHECK: a\nCHECK-NOT: x\nCHECK: c")
    assert not r and "excluded string found in input" in r.message
    # only the region between the matches counts
    assert ok("x\na\nc\nx\n", "CHECK: a\nCHECK-NOT: x\nCHECK: c")
    # trailing NOT runs to the end of input
    assert not ok("a\nc\nx\n", "CHECK: a\nCHECK-NOT: x")
    # leading NOT from the start of input
    assert not ok("x\na\n", "CHECK-NOT: x\nCHECK: a")


def test_dag_any_order_no_overlap():
    inp = "add r1\nadd r2\nmul r1, r2\n"
    chk = ("CHECK-DAG: add [[A:r[0-9]]]\nCHECK-DAG: add [[B:r[0-9]]]\n"
           "CHECK: mul [[A]], [[B]]")
    assert ok(inp, chk)
    # two identical DAG patterns need two distinct matches
    assert not ok("add r1\nmul\n", "CHECK-DAG: add\nCHECK-DAG: add\nCHECK: mul")
    # order inside a group does not matter
    assert ok("b\na\nc\n", "CHECK-DAG: a\nCHECK-DAG: b\nCHECK: c")
    # the check after the group starts after the group's furthest match
    assert not ok("b\nc\na\n", "CHECK-DAG: a\nCHECK-DAG: b\nCHECK: c")


def test_dag_not_dag():
    chk = "CHECK-DAG: a\nCHECK-NOT: x\nCHECK-DAG: b"
    assert ok("a\nb\n", chk)
    assert not ok("a\nx\nb\n", chk)


def test_label_blocks():
    inp = "ENTRY %f {\n  x = add\n}\nENTRY %g {\n  y = mul\n}\n"
    assert ok(inp, "CHECK-LABEL: %f\nCHECK: add\nCHECK-LABEL: %g\nCHECK: mul")
    # 'mul' must be found inside the %f block, not after the %g label
    assert not ok(inp, "CHECK-LABEL: %f\nCHECK: mul\nCHECK-LABEL: %g")
    assert not ok(inp, "CHECK-LABEL: %h\nCHECK: add")


def test_regex_blocks_and_posix():
    assert ok("u8[1024]{0}", "CHECK: u8[{{[0-9]+}}]{0}")
    assert ok("x = __cublas$lt$matmul", "CHECK: {{(__cublas\\$gemm|__cublas\\$lt\\$matmul)}}")
    assert ok("abc123", "CHECK: abc{{[[:digit:]]+}}")
    assert ok('custom_call_target="__cublas$gemm"', 'CHECK: custom_call_target="__cublas${{(gemm|lt\\$matmul)}}"')
    # alternation stays inside its block
    assert ok("abxdef", "CHECK: ab{{x|z}}def")
    assert not ok("abdef", "CHECK: ab{{x|z}}def")
    # a literal brace after a regex block
    assert ok("f32[2,3]{1,0}", "CHECK: f32[2,3]{{{.*}}}")


def test_anchors_at_search_start():
    assert ok("foo\nbar\n", "CHECK: foo\nCHECK: {{^}}bar{{$}}")
    assert not ok("foo\nxbar\n", "CHECK: foo\nCHECK: {{^}}bar")


def test_whitespace_canonicalization():
    assert ok("a    b\tc", "CHECK: a b  c")
    assert not ok("a    b", "CHECK: a b", strict_whitespace=True)


def test_prefixes_and_comments():
    chk = "// CHECK: a\n// LT: b\n// COM: CHECK: zzz\n// NOCHECK: zzz\n"
    assert ok("a\nb\n", chk, prefixes=("CHECK", "LT"))
    assert not ok("a\n", chk, prefixes=("CHECK", "LT"))
    assert ok("a\n", chk)  # LT is not active
    assert ok("a\nb\n", chk, prefixes="CHECK,LT")


def test_count_and_numeric():
    assert ok("x\nx\nx\n", "CHECK-COUNT-3: x")
    assert not ok("x\nx\n", "CHECK-COUNT-3: x")
    # numeric substitution blocks are not supported by the filecheck package (no XLA pass
    # test uses them): an error, never a wrong answer
    r = filecheck("N=41\nM=42\n", "CHECK: N=[[#N:]]\nCHECK: M=[[#N+1]]")
    assert not r and "substitution" in r.message


def test_same_line_backreference():
    assert ok("r1 = r1", "CHECK: [[R:r[0-9]]] = [[R]]")
    assert not ok("r1 = r2", "CHECK: [[R:r[0-9]]] = [[R]]")


def test_errors_are_reported_not_raised():
    for chk, msg in [("CHECK:", "empty check string"), ("CHECK: [[X]]", "referenced before assignment"),
                     ("x", "No check strings found"), ("CHECK: {{abc", "no }}"),
                     ("CHECK: [[#N+1]]", "substitution")]:
        r = filecheck("a\n", chk)
        assert not r and msg in r.message, (chk, r.message)


def test_literal_modifier():
    assert ok("a [[x]] {{y}}", "CHECK{LITERAL}: [[x]] {{y}}")


def test_has_checks():
    assert has_checks("// CHECK: a")
    assert not has_checks("HloModule m\nENTRY e { ROOT p = f32[] parameter(0) }")
    assert not has_checks("// LT: a")
    assert has_checks("// LT: a", prefixes=("LT",))
    assert has_checks("CHECK-NOT: a")


def test_failure_message_points_at_input():
    r = filecheck(HLO, "CHECK: copy\nCHECK: f32[8,3]{0,1} bitcast", check_name="t.hlo", input_name="out")
    assert not r
    assert "t.hlo:2: error: Couldn't match \"f32[8,3]{0,1} bitcast\"" in r.message
    assert "Current position at out:" in r.message
    assert "Possible intended match at:" in r.message and "ROOT %bitcast" in r.message


@pytest.mark.parametrize("prefix", ["1X", "A B", ""])
def test_bad_prefix(prefix):
    r = filecheck("a", "CHECK: a", prefixes=(prefix,))
    assert not r and "prefix" in r.message
