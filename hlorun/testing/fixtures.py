"""Pass fixture files: loading and running their cases (and ``run_passes``,
which XLA's pass tests use too).

Fixture files (``testdata/passes/<pass-name>/*.hlo``, and
``testdata/checkers/<checker-name>/*.hlo`` for invariant checkers) hold
cases separated by ``// -----``.  Each case is an HLO module plus FileCheck
directives; a case without directives must come out unchanged with
``changed=False``.  Directives read by the harness (``//`` comments; those
in the first case before its ``HloModule`` line apply to every case, a case
may override them):

``// PASS: name [key=value ...]``
    the pass to run (default: the directory name); several PASS lines run
    in order; values are YAML scalars (``cublaslt=true``).
``// TARGET: platform=rocm compute_capability=gfx942``
    the :class:`~hlorun.passes.Target`.
``// PREFIXES: CHECK,LT``
    FileCheck prefixes (``--check-prefixes``).
``// CHANGED: true|false``
    the expected ``changed`` (default: true iff the case has directives).
``// EXPECT-ERROR: text``
    the pass must fail with a PassError whose message contains ``text``.
``// VERIFY: false``
    skip the hlo-verifier run on the result.

Every case's input and output must also be printing fixed points
(print(parse(print(m))) == print(m)), and ``changed`` must tell the truth
(the canonical print differs iff changed).  Checker fixtures match the
checker's findings, one per line as ``rule: instruction: message``, against
the directives; no directives means no findings.

XLA's pass tests are run by :mod:`hlorun.testing.xla_cases`;
``python -m hlorun.testing.passcases`` prints the conformance table.
"""

from __future__ import annotations

import re
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ..ir.module import Module
from ..errors import HloError

__all__ = ["CaseResult", "FixtureCase", "load_fixture_file", "run_fixture_case",
           "fixture_files", "run_passes", "fixed_point_error"]

_DIRECTIVE = re.compile(r"^\s*//\s*(PASS|TARGET|PREFIXES|CHANGED|EXPECT-ERROR|VERIFY):(.*)$", re.M)


@dataclass
class CaseResult:
    """The outcome of one case: status "passed", "failed" or "skipped"."""

    name: str
    status: str
    reason: str = ""
    output: str = ""

    @property
    def ok(self) -> bool:
        return self.status != "failed"


@dataclass
class FixtureCase:
    path: Path
    index: int
    line: int
    text: str
    kind: str                      # "pass" or "checker"
    passes: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    target: dict[str, str] = field(default_factory=dict)
    prefixes: tuple[str, ...] = ("CHECK",)
    changed: bool | None = None
    expect_error: str | None = None
    verify: bool = True

    @property
    def name(self) -> str:
        return f"{self.path.parent.name}/{self.path.name}#{self.index}"


def _scalar(text: str) -> Any:
    import yaml
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def _parse_kv(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in text.split():
        key, eq, value = item.partition("=")
        if not eq:
            raise ValueError(f"expected key=value, got '{item}'")
        out[key.replace("-", "_")] = _scalar(value)
    return out


def _directives(text: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for m in _DIRECTIVE.finditer(text):
        found.setdefault(m.group(1), []).append(m.group(2).strip())
    return found


def _apply(case: FixtureCase, d: dict[str, list[str]]) -> None:
    if "PASS" in d:
        case.passes = []
        for spec in d["PASS"]:
            name, _, rest = spec.partition(" ")
            case.passes.append((name.strip(), _parse_kv(rest)))
    if "TARGET" in d:
        case.target = {k: str(v) for k, v in _parse_kv(d["TARGET"][-1]).items()}
    if "PREFIXES" in d:
        case.prefixes = tuple(p.strip() for p in d["PREFIXES"][-1].split(",") if p.strip())
    if "CHANGED" in d:
        case.changed = bool(_scalar(d["CHANGED"][-1]))
    if "EXPECT-ERROR" in d:
        case.expect_error = d["EXPECT-ERROR"][-1]
    if "VERIFY" in d:
        case.verify = bool(_scalar(d["VERIFY"][-1]))


def _changed_form(module: Module) -> str:
    """What ``changed`` is judged on: the canonical print plus backend
    configs (a pass that only rewrites backend configs, like the autotuner,
    changes the module: XLA's contract)."""
    from dataclasses import replace as _replace

    from ..text.printer import PRESETS, print_module
    return print_module(module, form=_replace(PRESETS["canonical"], backend_config=True))


def load_fixture_file(path: str | Path) -> list[FixtureCase]:
    """The cases of one fixture file, directives resolved."""
    from ..text.parser import split_input_file
    path = Path(path)
    kind = "checker" if path.parent.parent.name == "checkers" else "pass"
    text = path.read_text()
    chunks = split_input_file(text)
    defaults = FixtureCase(path, 0, 1, "", kind)
    if kind == "pass":
        defaults.passes = [(path.parent.name, {})]
    if chunks:
        head = chunks[0][1]
        m = re.search(r"^\s*HloModule\b", head, re.M)
        _apply(defaults, _directives(head[:m.start()] if m else head))
    cases = []
    for i, (line, chunk) in enumerate(chunks):
        c = FixtureCase(path, i, line, chunk, kind, list(defaults.passes), dict(defaults.target),
                        defaults.prefixes, defaults.changed, defaults.expect_error, defaults.verify)
        _apply(c, _directives(chunk))
        cases.append(c)
    return cases


def fixture_files(root: str | Path) -> list[Path]:
    """Every fixture file under ``root`` (``testdata``): passes and checkers."""
    root = Path(root)
    return sorted(list(root.glob("passes/*/*.hlo")) + list(root.glob("checkers/*/*.hlo")))


# ---------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------


def run_passes(module: Module, passes: Iterable[tuple[str, dict[str, Any]]],
               target: dict[str, str] | None = None) -> bool:
    """Instantiate each pass from the registry with its options and run it
    on ``module``; True if any changed it."""
    from ..passes import Target, pass_class
    tgt = Target(**(target or {}))
    changed = False
    for name, options in passes:
        cls = pass_class(name)
        p = cls(target=tgt, **options)
        if p.run(module):
            changed = True
    return changed


def fixed_point_error(module: Module, what: str) -> str | None:
    """None if printing ``module`` is a fixed point of parse+print."""
    from ..text.parser import parse_module
    from ..text.printer import print_module
    first = print_module(module)
    try:
        second = print_module(parse_module(first, f"<{what}>"))
    except HloError as e:
        return f"{what} does not parse back: {e.render() if hasattr(e, 'render') else e}"
    if first != second:
        import difflib
        diff = "\n".join(difflib.unified_diff(first.splitlines(), second.splitlines(),
                                              "printed", "reprinted", lineterm="", n=1))
        return f"{what} is not a printing fixed point:\n{diff}"
    return None


def _verify(module: Module) -> str | None:
    from ..verifier.checkers import HloVerifier
    diags = HloVerifier().check(module)
    return "\n".join(d.render() for d in diags) if diags else None


def run_fixture_case(case: FixtureCase) -> CaseResult:
    from ..text.parser import parse_module
    from ..text.printer import print_module
    from .filecheck import filecheck, has_checks
    try:
        module = parse_module(case.text, str(case.path))
    except HloError as e:
        return CaseResult(case.name, "failed", "input does not parse", e.render())
    err = fixed_point_error(module, "input")
    if err:
        return CaseResult(case.name, "failed", "round trip", err)
    checks = has_checks(case.text, case.prefixes)
    # (blank lines before the case: check line numbers are the file's)
    pattern = "\n" * (case.line - 1) + case.text

    if case.kind == "checker":
        from ..verifier.checkers import get_checker
        name = case.path.parent.name
        diags = get_checker(name).check(module)
        out = "\n".join(f"{d.rule}: {d.instruction}: {d.message}" for d in diags) + "\n"
        if not checks:
            return (CaseResult(case.name, "passed") if not diags else
                    CaseResult(case.name, "failed", "unexpected findings", out))
        r = filecheck(out, pattern, case.prefixes, check_name=str(case.path), input_name="<findings>")
        return CaseResult(case.name, "passed" if r else "failed", "" if r else "FileCheck", r.message + "\n" + out)

    before = _changed_form(module)
    try:
        changed = run_passes(module, case.passes, case.target)
    except HloError as e:
        msg = getattr(e, "message", str(e))
        if case.expect_error is not None and case.expect_error in msg:
            return CaseResult(case.name, "passed")
        return CaseResult(case.name, "failed", f"pass failed: {msg}", e.render())
    except Exception:  # a crash is a failure with its traceback
        return CaseResult(case.name, "failed", "pass crashed", traceback.format_exc())
    if case.expect_error is not None:
        return CaseResult(case.name, "failed", f"expected error '{case.expect_error}' not raised")
    after_text = print_module(module)
    expect = case.changed if case.changed is not None else checks
    if changed != expect:
        return CaseResult(case.name, "failed", f"changed={changed}, expected {expect}", after_text)
    if changed != (_changed_form(module) != before):
        return CaseResult(case.name, "failed",
                          f"pass reported changed={changed} but the module "
                          f"{'did not change' if changed else 'changed'}", after_text)
    if case.verify:
        err = _verify(module)
        if err:
            return CaseResult(case.name, "failed", "hlo-verifier rejects the output", err + "\n" + after_text)
    err = fixed_point_error(module, "output")
    if err:
        return CaseResult(case.name, "failed", "round trip", err)
    if checks:
        r = filecheck(after_text, pattern, case.prefixes, check_name=str(case.path), input_name="<output>")
        if not r:
            return CaseResult(case.name, "failed", "FileCheck", r.message + "\n\n" + after_text)
    return CaseResult(case.name, "passed", output=after_text)
