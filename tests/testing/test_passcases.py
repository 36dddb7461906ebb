"""The pass-test harness: fixture directives, the unchanged/changed rules,
and reading XLA's test statements.  A harness that cannot fail is useless,
so most cases here are ones that must fail."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from hlorun.ir.module import Module
from hlorun.passes import REGISTRY
from hlorun.passes.base import Pass
from hlorun.testing.fixtures import load_fixture_file, run_fixture_case
from hlorun.testing.xla_cases import XlaCase, XlaSuite, plan_case, run_case, split_args


@dataclass(frozen=True)
class _Negate(Pass):
    """Test pass: negate -> abs; with lie=True it claims no change."""

    name = "test-negate-to-abs"
    lie: bool = False

    def run(self, module: Module) -> bool:
        changed = False
        for comp in module.computations:
            for i in comp.instructions:
                if i.opcode == "negate":
                    i.opcode = "abs"
                    changed = True
        return changed and not self.lie


@pytest.fixture
def negate_pass(monkeypatch):
    monkeypatch.setitem(REGISTRY, "test-negate-to-abs", f"{__name__}:_Negate")


def fixture(tmp_path: Path, text: str, kind: str = "passes", name: str = "test-negate-to-abs") -> Path:
    d = tmp_path / kind / name
    d.mkdir(parents=True)
    p = d / "cases.hlo"
    p.write_text(text)
    return p


MOD = """HloModule m

ENTRY %e (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} negate(%p)
}
"""


def results(path):
    return [run_fixture_case(c) for c in load_fixture_file(path)]


def test_checks_pass_and_fail(tmp_path, negate_pass):
    good = fixture(tmp_path, "// CHECK: ROOT %n = f32[4]{0} abs(%p)\n" + MOD)
    assert [r.status for r in results(good)] == ["passed"]
    bad = fixture(tmp_path / "b", "// CHECK: ROOT %n = f32[4]{0} negate(%p)\n" + MOD)
    r = results(bad)[0]
    assert r.status == "failed" and r.reason == "FileCheck" and "cases.hlo:1:" in r.output


def test_case_without_checks_must_be_unchanged(tmp_path, negate_pass):
    r = results(fixture(tmp_path, MOD))[0]
    assert r.status == "failed" and "changed=True, expected False" in r.reason


def test_changed_must_tell_the_truth(tmp_path, negate_pass):
    p = fixture(tmp_path, "// PASS: test-negate-to-abs lie=true\n// CHANGED: false\n" + MOD)
    r = results(p)[0]
    assert r.status == "failed" and "reported changed=False but the module changed" in r.reason


def test_directives_apply_per_file_and_per_case(tmp_path, negate_pass):
    text = ("// PREFIXES: LT\n" + "// LT: abs\n" + MOD + "// -----\n"
            + "// PREFIXES: CHECK\n// CHECK: abs\n" + MOD)
    cases = load_fixture_file(fixture(tmp_path, text))
    assert [c.prefixes for c in cases] == [("LT",), ("CHECK",)]
    assert [c.passes for c in cases] == [[("test-negate-to-abs", {})]] * 2
    assert all(run_fixture_case(c).status == "passed" for c in cases)


def test_expect_error(tmp_path):
    p = fixture(tmp_path, "// PASS: no-such-pass\n// EXPECT-ERROR: unknown pass\n" + MOD, name="x")
    assert results(p)[0].status == "passed"


def test_checker_fixtures(tmp_path):
    bad = """HloModule m
ENTRY %e (p: f32[4,2]) -> f32[8] {
  %p = f32[4,2]{0,1} parameter(0)
  ROOT %r = f32[8]{0} reshape(%p)
}
"""
    p = fixture(tmp_path, bad, kind="checkers", name="reshape-is-bitcast")
    r = results(p)[0]
    assert r.status == "failed" and r.reason == "unexpected findings" and "%r from %p" in r.output
    p2 = fixture(tmp_path / "2", "// CHECK: reshape-is-bitcast: r: RET_CHECK\n" + bad,
                 kind="checkers", name="reshape-is-bitcast")
    assert results(p2)[0].status == "passed"


# -- XLA statements -------------------------------------------------------------


def test_split_args():
    assert split_args('hlo, R"(<FileCheck pattern>)", [](HloModule* m) { f(a, b); }') == [
        "hlo", 'R"(<FileCheck pattern>)"', "[](HloModule* m) { f(a, b); }"]
    assert split_args("a, f(b, c), \"x,y\"") == ["a", "f(b, c)", '"x,y"']


def _case(checks, file="reshape_decomposer_test/ReshapeDecomposerTest.IsBitcast.hlo"):
    return XlaCase(Path("/nonexistent"), {"test": "T.t", "file": file, "checks": checks,
                                          "test_file": "x_test.cc"})


SUITE = XlaSuite(pass_name="reshape-decomposer", check_calls=("CheckX",))


def test_plan_expected_pattern_and_nullopt():
    p = plan_case(_case(["// CHECK: x", 'CheckX(hlo, R"(<FileCheck pattern>)")']), SUITE)
    assert p.run and p.expect_changed is True and p.filecheck and not p.unsupported
    p = plan_case(_case(["CheckX(hlo, /*expected=*/std::nullopt)"]), SUITE)
    assert p.run and p.expect_changed is False and not p.filecheck


def test_plan_explicit_run_and_expect():
    p = plan_case(_case(["TF_ASSERT_OK_AND_ASSIGN(auto module, ParseAndReturnVerifiedModule(hlo))",
                         "TF_ASSERT_OK_AND_ASSIGN(bool changed, RunHloPass(&pass, module.get()))",
                         "EXPECT_FALSE(changed)"]), SUITE)
    assert p.run and p.expect_changed is False and not p.unsupported


def test_plan_unknown_statement_is_a_skip_reason():
    p = plan_case(_case(['MatchOptimizedHlo(hlo, R"(<FileCheck pattern>)")']), SUITE)
    assert p.unsupported == ['MatchOptimizedHlo(hlo, R"(<FileCheck pattern>)")']
    p = plan_case(_case(['CheckX(hlo, R"(<FileCheck pattern>)", [](HloModule* m) { g(); })']), SUITE)
    assert any("after-pass check" in u for u in p.unsupported)


def test_run_case_fails_on_wrong_pattern(shared):
    corpus = shared / "corpus" / "xla"
    case = XlaCase(corpus, {"test": "ReshapeDecomposerTest.IsBitcast", "test_file": "x",
                            "file": "reshape_decomposer_test/ReshapeDecomposerTest.IsBitcast.hlo",
                            "checks": ["// CHECK: f32[4,2]{0,1} bitcast",
                                       'CheckX(hlo, R"(<FileCheck pattern>)")']})
    r = run_case(case, SUITE)
    assert r.status == "failed" and r.reason == "FileCheck"
    case.entry["checks"] = ["CheckX(hlo, std::nullopt)"]
    r = run_case(case, SUITE)
    assert r.status == "failed" and "changed=True" in r.reason
