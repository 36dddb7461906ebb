"""Run XLA's own pass tests (``corpus/xla/passes``) through our passes.

The corpus manifest gives, per (test, module): the module file and
``checks``: the test's FileCheck lines followed by its C++ assertion
statements.  :func:`plan_case` reads those statements into a :class:`Plan`
(which passes to run, whether ``changed`` must be true or false, whether the
FileCheck pattern must match, whether the verifier must accept the result);
a statement it cannot interpret makes the case *skipped* with that
statement as the reason, never silently passed.  Per-file settings (which
pass, which helper functions mean "run the pass and FileCheck", known skips
with reasons, extra statement handlers) are :class:`XlaSuite` entries in
:mod:`hlorun.testing.xla_suites`.
"""

from __future__ import annotations

import json
import re
import traceback
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from ..ir.module import Module
from ..errors import HloError
from .fixtures import CaseResult, run_passes

__all__ = ["Plan", "SuiteReport", "XlaCase", "XlaSuite", "load_cases", "plan_case", "run_case",
           "split_args"]


@dataclass
class XlaCase:
    """One manifest entry (a test and one of its modules)."""

    corpus: Path
    entry: dict[str, Any]

    @property
    def test(self) -> str:
        return self.entry.get("test") or f"<shared {self.entry.get('file')}>"

    @property
    def name(self) -> str:
        n = self.entry.get("modules_in_test") or 1
        return self.test + (f"#{self.entry.get('module_index')}" if n > 1 else "")

    @property
    def checks(self) -> list[str]:
        return list(self.entry.get("checks") or [])

    @property
    def pattern_lines(self) -> list[str]:
        return [c for c in self.checks if is_pattern_line(c)]

    @property
    def statements(self) -> list[str]:
        return [c for c in self.checks if not is_pattern_line(c)]

    @property
    def pattern(self) -> str:
        return "\n".join(self.pattern_lines) + "\n"

    def hlo_text(self) -> str:
        return (self.corpus / "passes" / self.entry["file"]).read_text()


_PATTERN_LINE = re.compile(r"^\s*(?://|;|[A-Z][A-Z0-9_-]*\s*(?:\{LITERAL\})?:)")


def is_pattern_line(line: str) -> bool:
    return bool(_PATTERN_LINE.match(line))


@lru_cache(maxsize=4)
def _manifest(corpus: str) -> dict:
    return json.loads((Path(corpus) / "passes" / "manifest.json").read_text())


def load_cases(corpus: Path, test_file: str) -> list[XlaCase]:
    """The manifest entries of one test file that belong to a test."""
    m = _manifest(str(corpus))
    return [XlaCase(corpus, e) for e in m["modules"]
            if e["test_file"] == test_file and e.get("test")]


# ---------------------------------------------------------------------------
# Statement interpretation
# ---------------------------------------------------------------------------


def split_args(text: str) -> list[str]:
    """Split a C++ argument list at top-level commas (parens, brackets,
    braces, string literals and raw strings respected)."""
    args, depth, cur, i = [], 0, [], 0
    while i < len(text):
        c = text[i]
        if text.startswith('R"(', i):
            end = text.find(')"', i + 3)
            end = len(text) if end < 0 else end + 2
            cur.append(text[i:end])
            i = end
            continue
        if c == '"':
            j = i + 1
            while j < len(text) and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            cur.append(text[i:j + 1])
            i = j + 1
            continue
        if c in "([{<" and not (c == "<" and text[i - 1:i] == " "):
            depth += 1
        elif c in ")]}>" and depth and not (c == ">" and text[i - 1:i] in ("-", " ")):
            depth -= 1
        elif c == "," and depth == 0:
            args.append("".join(cur).strip())
            cur = []
            i += 1
            continue
        cur.append(c)
        i += 1
    if "".join(cur).strip():
        args.append("".join(cur).strip())
    return args


_CALL = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_:.>-]*)\s*\((.*)\)\s*;?\s*$", re.S)
_NULLOPT = re.compile(r"^(?:/\*\s*expected\s*=\s*\*/\s*)?std::nullopt$")
_PATTERN_ARG = re.compile(r'^(?:/\*\s*expected\s*=\s*\*/\s*)?R"\(<FileCheck pattern>\)"$')


@dataclass
class Plan:
    """What a case asks for, read from its statements."""

    passes: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    run: bool = False
    expect_changed: bool | None = None
    filecheck: bool = False
    verify: bool = True
    prefixes: tuple[str, ...] = ("CHECK",)
    after_checks: list[Callable[[Module], str | None]] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)
    #: names given to the pass's result and FileCheck's result in the test
    changed_vars: set[str] = field(default_factory=set)
    filecheck_vars: set[str] = field(default_factory=set)
    #: the Target to run under (None: the suite's)
    target: dict[str, str] | None = None
    #: passes the test runs first whose ``changed`` it does not check
    setup: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    #: the FileCheck pattern to use instead of all the case's pattern lines
    #: (the manifest merges the patterns of a test's platform branches)
    pattern: str | None = None
    #: printer form FileCheck reads ("long" = XLA's print_operand_shape)
    print_form: str = "full"
    #: checks run on the result whether or not the pass changed anything
    #: (assertions on the module itself, e.g. a GmockMatch of the root)
    final_checks: list[Callable[[Module], str | None]] = field(default_factory=list)


#: A handler gets (plan, suite, statement) and returns True if it took it.
Handler = Callable[[Plan, "XlaSuite", str], bool]


@dataclass
class XlaSuite:
    """How to run one XLA test file."""

    pass_name: str
    options: dict[str, Any] = field(default_factory=dict)
    target: dict[str, str] = field(default_factory=dict)
    prefixes: tuple[str, ...] = ("CHECK",)
    #: test-fixture helpers equivalent to RunAndFilecheckHloRewrite(hlo,
    #: <our pass>, expected[, after_pass_checks])
    check_calls: tuple[str, ...] = ()
    #: a check the helper itself makes after the pass (None = fine)
    after_check: Callable[[Module], str | None] | None = None
    #: test name (without fixture) -> why we do not run it
    skips: dict[str, str] = field(default_factory=dict)
    handlers: tuple[Handler, ...] = ()
    #: C++ pass constructor regex -> (pass name, options), for
    #: RunAndFilecheckHloRewrite(hlo, Ctor(...), ...) and RunHloPass(Ctor(...), ...)
    pass_ctors: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    #: per-case adjustments after the statements were read (target, pass
    #: options, prefixes, ...) for facts that live in the test's C++ code
    configure: Callable[[XlaCase, Plan], None] | None = None

    def resolve_ctor(self, expr: str) -> tuple[str, dict[str, Any]] | None:
        for rx, spec in self.pass_ctors.items():
            if re.search(rx, expr):
                return spec
        return None


def _scatter_simplifier_runs(module: Module) -> str | None:
    """``CHECK_OK(ScatterSimplifier().Run(module))`` after the pass; we also
    require every scatter to come out simplified."""
    from ..passes.scatter_simplifier import ScatterSimplifier, is_simplified_scatter
    try:
        ScatterSimplifier().run(module)
    except Exception as err:  # a crash is the failure this check looks for
        return f"scatter_simplifier fails on the output: {err}"
    for comp in module.computations:
        for i in comp.instructions:
            if i.opcode == "scatter" and i.operands[0].shape.rank and not is_simplified_scatter(i):
                return f"scatter_simplifier left {i.name} unsimplified"
    from ..verifier.checkers import HloVerifier
    diags = HloVerifier(allow_mixed_precision=True).check(module)
    if diags:
        return "hlo-verifier rejects the module after scatter_simplifier: " + \
            "; ".join(d.render() for d in diags)
    return None


def _bare(var: str) -> str:
    """``bool changed`` / ``auto status`` / ``changed`` -> the variable name."""
    return var.split()[-1].lstrip("*&")


def _generic(plan: Plan, suite: XlaSuite, st: str) -> bool:
    m = _CALL.match(st)
    if not m:
        return False
    fn, args = m.group(1), split_args(m.group(2))
    if fn in suite.check_calls or fn == "RunAndFilecheckHloRewrite":
        if fn == "RunAndFilecheckHloRewrite":
            if len(args) < 3:
                return False
            spec = suite.resolve_ctor(args[1])
            if spec is None and suite.pass_ctors:
                plan.unsupported.append(f"pass constructor {args[1]}")
                return True
            if spec is not None:
                plan.passes = [spec]
            args = [args[0]] + args[2:]
        if len(args) < 2:
            return False
        plan.run = True
        if _NULLOPT.match(args[1]):
            plan.expect_changed = False
        elif _PATTERN_ARG.match(args[1]):
            plan.expect_changed = True
            plan.filecheck = True
        else:
            plan.unsupported.append(f"expected-argument {args[1]}")
        if suite.after_check is not None and fn in suite.check_calls:
            plan.after_checks.append(suite.after_check)
        for extra in args[2:]:
            # the after-pass callback running XLA's ScatterSimplifier
            # (layout_normalization_test's scatter cases; it runs after
            # FileCheck): our pass must run on the output
            if re.search(r"ScatterSimplifier\(\)\.Run\(\s*module\s*\)", extra):
                # the pass leaves unsorted update_window_dims, which the
                # verifier rejects until ScatterSimplifier has run (XLA's
                # gpu_compiler comment); the check verifies after it
                plan.verify = False
                plan.after_checks.append(_scatter_simplifier_runs)
            else:
                plan.unsupported.append(f"after-pass check {extra}")
        return True
    if fn in ("TF_ASSERT_OK_AND_ASSIGN", "ASSERT_OK_AND_ASSIGN") and len(args) == 2:
        var, expr = _bare(args[0]), args[1]
        if "ParseAndReturnVerifiedModule" in expr or "ParseAndReturnUnverifiedModule" in expr:
            return True
        if re.search(r"RunFileCheck\s*\(\s*(?:module|m)->ToString", expr):
            plan.filecheck_vars.add(var)
            return True
        rm = re.search(r"RunHloPass\s*\((.*)\)\s*$", expr)
        if rm or re.search(r"\.Run\s*\(\s*module(?:\.get\(\))?\s*\)(?:\.status\(\))?$", expr) \
                or re.search(r"RunPass\s*\(", expr):
            if rm:
                ctor = split_args(rm.group(1))[0]
                spec = suite.resolve_ctor(ctor)
                if spec is not None:
                    plan.passes = [spec]
            plan.run = True
            plan.changed_vars.add(var)
            return True
        return False
    if fn in ("EXPECT_TRUE", "EXPECT_FALSE", "ASSERT_TRUE", "ASSERT_FALSE") and len(args) == 1:
        var = args[0].strip()
        value = fn.endswith("TRUE")
        if var in plan.changed_vars:
            plan.expect_changed = value
            return True
        if var in plan.filecheck_vars and value:
            plan.filecheck = True
            return True
        return False
    if fn in ("CHECK_OK", "TF_ASSERT_OK", "TF_EXPECT_OK", "ASSERT_OK", "EXPECT_OK") and len(args) == 1:
        if re.fullmatch(r"(?:module|m)->Verify\(\)|verifier\(\)\.Run\(module(?:\.get\(\))?\)\.status\(\)",
                        args[0].strip()):
            plan.verify = True
            return True
    return False


def plan_case(case: XlaCase, suite: XlaSuite) -> Plan:
    plan = Plan(passes=[(suite.pass_name, dict(suite.options))], prefixes=suite.prefixes)
    for st in case.statements:
        if any(h(plan, suite, st) for h in suite.handlers):
            continue
        if not _generic(plan, suite, st):
            plan.unsupported.append(st)
    if suite.configure is not None:
        suite.configure(case, plan)
    return plan


# ---------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------


def run_case(case: XlaCase, suite: XlaSuite) -> CaseResult:
    from ..text.parser import parse_module
    from ..text.printer import print_module
    from ..verifier.checkers import HloVerifier
    from .filecheck import filecheck
    e = case.entry
    short = case.test.split(".", 1)[-1]
    if short in suite.skips or case.test in suite.skips:
        return CaseResult(case.name, "skipped", suite.skips.get(short) or suite.skips[case.test])
    if not e.get("file"):
        return CaseResult(case.name, "skipped", "the test builds its module in C++ "
                          f"({e.get('note', 'no HLO text')})")
    if e.get("unresolved_placeholders"):
        return CaseResult(case.name, "skipped", "module template with unresolved placeholders "
                          f"{e['unresolved_placeholders']}")
    plan = plan_case(case, suite)
    if plan.unsupported:
        return CaseResult(case.name, "skipped", "unsupported: " + "; ".join(plan.unsupported))
    if not plan.run:
        return CaseResult(case.name, "skipped", "the test does not run the pass on this module")
    try:
        module = parse_module(case.hlo_text(), e["file"])
    except HloError as err:
        if not e.get("xla_parse", {}).get("parses", True):
            return CaseResult(case.name, "skipped", "XLA does not parse this module either")
        return CaseResult(case.name, "failed", "does not parse", err.render())
    try:
        target = {**(suite.target if plan.target is None else plan.target)}
        run_passes(module, plan.setup, target)
        changed = run_passes(module, plan.passes, target)
    except HloError as err:
        return CaseResult(case.name, "failed", f"pass failed: {getattr(err, 'message', err)}",
                          err.render())
    except Exception:
        return CaseResult(case.name, "failed", "pass crashed", traceback.format_exc())
    text = print_module(module, form=plan.print_form)
    if plan.expect_changed is not None and changed != plan.expect_changed:
        return CaseResult(case.name, "failed", f"changed={changed}, test expects {plan.expect_changed}", text)
    if plan.verify:
        # XLA's test base verifies with allow_mixed_precision (HloTestBase).
        diags = HloVerifier(allow_mixed_precision=True).check(module)
        if diags:
            return CaseResult(case.name, "failed", "hlo-verifier rejects the output",
                              "\n".join(d.render() for d in diags) + "\n" + text)
    if plan.filecheck:
        if not case.pattern_lines:
            return CaseResult(case.name, "skipped", "test has a FileCheck pattern the manifest does not hold")
        pattern = case.pattern if plan.pattern is None else plan.pattern
        r = filecheck(text, pattern, plan.prefixes, check_name=case.test, input_name="<output>")
        if not r:
            return CaseResult(case.name, "failed", "FileCheck", r.message + "\n\n" + text)
    for check in (plan.after_checks if changed else []) + plan.final_checks:
        msg = check(module)
        if msg:
            return CaseResult(case.name, "failed", msg, text)
    return CaseResult(case.name, "passed", output=text)


@dataclass
class SuiteReport:
    test_file: str
    results: list[CaseResult]

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.results)

    @property
    def passed(self) -> int:
        return self.count("passed")

    @property
    def failed(self) -> int:
        return self.count("failed")

    @property
    def skipped(self) -> int:
        return self.count("skipped")

    @property
    def total(self) -> int:
        return len(self.results)

    @property
    def rate_text(self) -> str:
        run = self.passed + self.failed
        return f"{self.passed}/{run}"
