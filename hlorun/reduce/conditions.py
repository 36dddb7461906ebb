"""What makes a module "still interesting" for ``hlorun reduce`` and
``hlorun bisect``.

``--until`` takes one of:

* ``violation:RULE`` -- the compile reports a violation of checker RULE
  (e.g. ``reshape-is-bitcast``); a RULE the pipeline does not run is added
  to its checkers (run at the start and after every changed pass);
* ``pass-fails:NAME`` (or ``pass-fails``) -- pass NAME (a name or a
  ``pipeline/name`` path suffix; any pass without NAME) raises;
* ``backend:INSTR=BACKEND`` -- the autotuner picks BACKEND for the GEMM
  INSTR (a glob on the autotuned instruction's names); BACKEND is ``BLAS``
  (any BLAS library), ``triton``, or a library (``cublaslt``, ``hipblaslt``,
  ``cublas``, ``rocblas``);
* ``numerics`` -- the module evaluates differently before and after the
  compile (numpy evaluator, seeded inputs, per-dtype tolerances);
* ``output-differs-from:OTHER.hlo`` -- the compiled module evaluates
  differently from OTHER.hlo (same entry signature required);

and ``--until-cmd 'SCRIPT {}'`` runs a shell command on the candidate file
(exit 0 = interesting).

Each test gives a :class:`Verdict`.  Its ``signature`` identifies the bug
(the rule and the pass after which it appeared; the failing pass and its
exception type): by default the reducer keeps only candidates with the
original's signature, so a reduction cannot slip to a different bug.
"""

from __future__ import annotations

import fnmatch
import os
import shlex
import subprocess
import tempfile
from dataclasses import dataclass, replace
from typing import Any

from ..ir.module import Module
from ..errors import HloError, UsageError
from .compile_config import CompileConfig

BLAS_BACKENDS = ("cublas", "cublaslt", "rocblas", "hipblaslt")
BACKEND_WORDS = ("blas", "triton") + BLAS_BACKENDS
KINDS = ("violation:RULE", "pass-fails[:NAME]", "backend:INSTR=BLAS|triton|LIBRARY",
         "numerics", "output-differs-from:OTHER.hlo")


@dataclass
class Verdict:
    interesting: bool
    detail: str = ""
    signature: tuple | None = None
    result: Any = None  # the PipelineResult, when a compile ran

    def matches(self, pinned: tuple | None) -> bool:
        return self.interesting and (pinned is None or self.signature == pinned)


class Condition:
    """Base class: ``prepare`` once, then ``test`` per candidate."""

    text = ""
    #: Only semantics-preserving strategies may be used (the reference does
    #: not change with the candidate).
    needs_same_semantics = False
    needs_compile = True

    def prepare(self, cfg: CompileConfig | None) -> None:
        self.cfg = cfg

    def test(self, module: Module, text: str) -> Verdict:  # pragma: no cover - abstract
        raise NotImplementedError

    def describe(self) -> str:
        return self.text

    def _compile(self, module: Module):
        assert self.cfg is not None
        return self.cfg.run(module)


def _last(path: str) -> str:
    return path.rsplit("/", 1)[-1]


class ViolationCondition(Condition):
    def __init__(self, rule: str):
        from ..verifier.checkers import CHECKERS
        if rule not in CHECKERS:
            import difflib
            near = difflib.get_close_matches(rule, CHECKERS, n=3)
            raise UsageError(f"--until violation:{rule}: unknown checker"
                             + (f"; did you mean {', '.join(near)}?" if near else
                                f" (known: {', '.join(sorted(CHECKERS))})"))
        self.rule = rule
        self.text = f"violation:{rule}"

    def prepare(self, cfg: CompileConfig | None) -> None:
        super().prepare(cfg)
        assert cfg is not None
        from ..pipeline.spec import CheckerSpec, CheckStep, PipelineStep
        spec = cfg.spec()
        names = {c.name for c in spec.checkers}
        for _, s in spec.walk():
            if isinstance(s, CheckStep):
                names.add(s.checker.name)
            elif isinstance(s, PipelineStep):
                names.update(c.name for c in s.checkers)
        if self.rule not in names:
            cfg.set_spec(replace(spec, checkers=list(spec.checkers) + [CheckerSpec(self.rule)]))

    def test(self, module: Module, text: str) -> Verdict:
        res = self._compile(module)
        for v in res.violations:
            if v.rule == self.rule:
                where = f"after #{v.pass_index} {v.after_pass}" if v.pass_index else "at pipeline start"
                if v.precondition_of:
                    where = f"precondition of {v.precondition_of}, first violated {where}"
                inst = f" [instruction {v.instruction}]" if v.instruction else ""
                return Verdict(True, f"[{v.rule}] {where}{inst}: {v.message}",
                               (self.rule, _last(v.after_pass)), res)
        if res.stopped_by_limit and not res.violations and res.failure is None:
            # Bisection: the pipeline stopped at --pass-limit, perhaps before the
            # check step that would report it.  Does the module as it is now
            # violate the rule?
            from ..verifier.checkers import get_checker
            diags = get_checker(self.rule).check(module)
            if diags:
                d = diags[0]
                last = res.events[-1] if res.events else None
                where = f"after #{last.index} {last.path}" if last else "at pipeline start"
                inst = f" [instruction {d.instruction}]" if d.instruction else ""
                return Verdict(True, f"[{self.rule}] {where} (checked at --pass-limit){inst}: "
                                     f"{d.message}",
                               (self.rule, _last(last.path) if last else "pipeline-start"), res)
        other = res.failure.message if res.failure else (
            res.violations[0].message if res.violations else "no violation")
        return Verdict(False, other, None, res)


class PassFailsCondition(Condition):
    def __init__(self, name: str | None):
        self.name = name or None
        self.text = "pass-fails" + (f":{name}" if name else "")

    def prepare(self, cfg: CompileConfig | None) -> None:
        super().prepare(cfg)
        assert cfg is not None
        if self.name is not None:
            names = {s.name for s in cfg.spec().passes()}
            if self.name.split("/")[-1] not in names:
                import difflib
                near = difflib.get_close_matches(self.name, sorted(names), n=3)
                raise UsageError(f"--until pass-fails:{self.name}: no such pass in pipeline "
                                 f"{cfg.spec().name}" + (f"; did you mean {', '.join(near)}?" if near else ""))

    def test(self, module: Module, text: str) -> Verdict:
        res = self._compile(module)
        f = res.failure
        if f is not None and (self.name is None or f.name == self.name or f.path == self.name
                              or f.path.endswith("/" + self.name)):
            inst = f" [instruction {f.instruction}]" if f.instruction else ""
            return Verdict(True, f"pass #{f.index} {f.path} failed ({f.exception}){inst}: {f.message}",
                           (f.name, f.exception), res)
        return Verdict(False, f"no failure of {self.name or 'any pass'}"
                       + (f" ({f.path} failed instead)" if f else ""), None, res)


class BackendCondition(Condition):
    def __init__(self, instr: str, backend: str):
        if not instr or not backend:
            raise UsageError("--until backend:INSTR=BACKEND needs both, e.g. backend:dot.7=BLAS")
        b = backend.lower()
        if b not in BACKEND_WORDS:
            raise UsageError(f"--until backend:{instr}={backend}: backend must be one of BLAS, "
                             f"triton, {', '.join(BLAS_BACKENDS)}")
        self.instr, self.backend = instr, b
        self.text = f"backend:{instr}={backend}"

    def prepare(self, cfg: CompileConfig | None) -> None:
        super().prepare(cfg)
        assert cfg is not None
        from ..passes import REGISTRY
        if "autotuner" not in REGISTRY:
            raise UsageError(f"--until {self.text}: needs the autotuner pass, which this "
                             f"hlorun does not have")
        if not any(s.name == "autotuner" for s in cfg.spec().passes()):
            raise UsageError(f"--until {self.text}: pipeline {cfg.spec().name} has no autotuner "
                             f"step (pick one with --pipeline)")

    def _wanted(self, backend: str | None) -> bool:
        if backend is None:
            return False
        b = backend.lower()
        return b in BLAS_BACKENDS if self.backend == "blas" else b == self.backend

    def test(self, module: Module, text: str) -> Verdict:
        res = self._compile(module)
        seen = []
        # the autotuner's remarks name the dot each decided fusion came from
        derived: dict[str, list[str]] = {}
        for ev, r in res.remarks:
            if ev.name == "autotuner" and r.instruction:
                derived.setdefault(r.instruction, []).extend(r.derived_from)
        for rec in res.records("autotune"):
            names = [rec.get("instruction")] + list(rec.get("names") or ()) \
                + [rec.get("dot"), rec.get("origin")] + derived.get(rec.get("instruction") or "", [])
            if not any(n and fnmatch.fnmatchcase(str(n), self.instr) for n in names):
                continue
            winner = (rec.get("winner") or {}).get("backend")
            seen.append(f"{rec.get('instruction')}={winner}")
            if self._wanted(winner):
                return Verdict(True, f"autotuner chose {winner} for {rec.get('instruction')}"
                               + (f" ({(rec.get('winner') or {}).get('label')})"
                                  if (rec.get("winner") or {}).get("label") else ""),
                               None, res)
        why = ("no autotuner decision for " + self.instr) if not seen else \
            "autotuner chose " + ", ".join(seen)
        if res.failure is not None:
            why += f"; pass {res.failure.path} failed: {res.failure.message}"
        return Verdict(False, why, None, res)


def _evaluator():
    try:
        from .. import evaluate  # noqa: F401
    except ImportError:
        raise UsageError("this condition needs the numpy evaluator (hlorun.evaluate), "
                         "which this hlorun does not have") from None
    return evaluate


class NumericsCondition(Condition):
    text = "numerics"

    def __init__(self, seed: int = 0):
        self.seed = seed

    def prepare(self, cfg: CompileConfig | None) -> None:
        super().prepare(cfg)
        self.ev = _evaluator()

    def test(self, module: Module, text: str) -> Verdict:
        ev = self.ev
        try:
            args = ev.random_inputs(module, self.seed)
            before = ev.evaluate(module, args)
        except ev.EvaluationError as e:
            return Verdict(False, f"cannot evaluate the input: {e}")
        types = ev.output_types(module)
        tol = ev.tolerance_types(module)
        res = self._compile(module)
        if res.failure is not None or res.violations:
            return Verdict(False, f"the compile did not finish ({res.status})", None, res)
        try:
            after = ev.evaluate(module, args)
        except ev.EvaluationError as e:
            return Verdict(False, f"cannot evaluate the compiled module: {e}", None, res)
        cmp = ev.compare_values(before, after, types, tolerance_types=tol)
        if cmp.ok:
            return Verdict(False, "outputs match", None, res)
        return Verdict(True, "outputs differ before/after the compile: " + _worst(cmp), None, res)


def _worst(cmp) -> str:
    w = cmp.worst()
    if w is None:
        return "?"
    if getattr(w, "message", ""):
        return w.message
    idx = "{" + ",".join(map(str, w.index)) + "}"
    return (f"output {idx} {w.element_type}{list(w.shape)}: {w.mismatches} mismatches, "
            f"max abs error {w.max_abs_error:.4g}")


class OutputDiffersCondition(Condition):
    needs_same_semantics = True

    def __init__(self, other: str, seed: int = 0):
        if not other:
            raise UsageError("--until output-differs-from:OTHER.hlo needs a file")
        self.other_path = other
        self.seed = seed
        self.text = f"output-differs-from:{other}"

    def prepare(self, cfg: CompileConfig | None) -> None:
        super().prepare(cfg)
        self.ev = _evaluator()
        from ..text.parser import load_module
        self.other = load_module(self.other_path)
        self._ref: dict[str, Any] = {}

    def _signature(self, m: Module) -> str:
        params = ",".join(p.shape.to_string(False) for p in m.entry.parameters if p is not None)
        return f"({params})->{m.entry.root.shape.to_string(False)}"

    def test(self, module: Module, text: str) -> Verdict:
        ev = self.ev
        want = self._signature(self.other)
        if self._signature(module) != want:
            return Verdict(False, f"entry signature {self._signature(module)} differs from "
                                  f"{self.other_path}'s {want}")
        res = self._compile(module)
        if res.failure is not None or res.violations:
            return Verdict(False, f"the compile did not finish ({res.status})", None, res)
        try:
            args = ev.random_inputs(module, self.seed)
            if want not in self._ref:
                self._ref[want] = ev.evaluate(self.other, args)
            got = ev.evaluate(module, args)
        except ev.EvaluationError as e:
            return Verdict(False, f"cannot evaluate: {e}", None, res)
        cmp = ev.compare_values(self._ref[want], got, ev.output_types(self.other),
                                tolerance_types=ev.tolerance_types(self.other))
        if cmp.ok:
            return Verdict(False, f"outputs match {self.other_path}", None, res)
        return Verdict(True, f"outputs differ from {self.other_path}: " + _worst(cmp), None, res)


class CommandCondition(Condition):
    """``--until-cmd``: a shell command; ``{}`` is replaced by the candidate's
    path (appended when absent); exit status 0 means interesting."""

    needs_compile = False

    def __init__(self, command: str, timeout: float = 300.0, name: str = "candidate.hlo"):
        if not command.strip():
            raise UsageError("--until-cmd: empty command")
        self.command = command
        self.timeout = timeout
        self.name = name
        self.text = f"cmd:{command}"
        self._dir: tempfile.TemporaryDirectory | None = None

    def prepare(self, cfg: CompileConfig | None) -> None:
        super().prepare(cfg)
        self._dir = tempfile.TemporaryDirectory(prefix="hlorun-reduce-")

    def close(self) -> None:
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def test(self, module: Module, text: str, timeout: float | None = None) -> Verdict:
        assert self._dir is not None
        path = os.path.join(self._dir.name, self.name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        q = shlex.quote(path)
        cmd = self.command.replace("{}", q) if "{}" in self.command else f"{self.command} {q}"
        limit = self.timeout if timeout is None else min(self.timeout, timeout)
        try:
            p = subprocess.run(cmd, shell=True, capture_output=True, text=True,
                               timeout=max(limit, 0.1), cwd=os.getcwd())
        except subprocess.TimeoutExpired:
            return Verdict(False, f"--until-cmd timed out after {limit:.0f} s")
        out = (p.stdout + p.stderr).strip().splitlines()
        tail = out[-1] if out else ""
        return Verdict(p.returncode == 0, f"exit {p.returncode}" + (f": {tail}" if tail else ""))


def parse_condition(text: str | None, command: str | None = None,
                    command_timeout: float = 300.0) -> Condition:
    """``--until TEXT`` or ``--until-cmd COMMAND`` (exactly one)."""
    if command is not None and text:
        raise UsageError("give either --until or --until-cmd, not both")
    if command is not None:
        return CommandCondition(command, command_timeout)
    if not text:
        raise UsageError("missing --until CONDITION (or --until-cmd 'SCRIPT {}'); conditions: "
                         + ", ".join(KINDS))
    kind, _, arg = text.partition(":")
    kind = kind.strip().lower()
    if kind == "violation":
        if not arg:
            raise UsageError("--until violation:RULE needs a checker name, e.g. violation:reshape-is-bitcast")
        return ViolationCondition(arg.strip())
    if kind in ("pass-fails", "pass-failure"):
        return PassFailsCondition(arg.strip() or None)
    if kind == "backend":
        instr, eq, backend = arg.rpartition("=")
        if not eq:
            raise UsageError(f"--until {text}: expected backend:INSTR=BACKEND (e.g. backend:dot.1=BLAS)")
        return BackendCondition(instr.strip(), backend.strip())
    if kind == "numerics":
        return NumericsCondition()
    if kind == "output-differs-from":
        return OutputDiffersCondition(arg.strip())
    import difflib
    near = difflib.get_close_matches(kind, ["violation", "pass-fails", "backend", "numerics",
                                            "output-differs-from"], n=2)
    raise UsageError(f"--until {text}: unknown condition" + (f"; did you mean {', '.join(near)}?" if near
                                                             else f" (known: {', '.join(KINDS)})"))


__all__ = ["BackendCondition", "CommandCondition", "Condition", "NumericsCondition",
           "OutputDiffersCondition", "PassFailsCondition", "Verdict", "ViolationCondition",
           "parse_condition"]
