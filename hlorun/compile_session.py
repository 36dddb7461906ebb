"""What ``hlorun compile`` does, as a plain object (the click command only
parses flags): load the pipeline and the module, attach listeners (diffs,
dumps, reproducer), run, render the table/violations/summary or the JSON
report, write the module.  ``--check-numerics`` and other add-ons attach
their own listeners through :attr:`CompileSession.extra_listeners`."""

from __future__ import annotations

import json
import re
import shlex
import time
from dataclasses import dataclass, field
from typing import Any

from . import report
from .pipeline import Listener, PipelineResult, RunOptions, run_pipeline

#: The JSON report's schema identifier (bump on incompatible changes).
JSON_SCHEMA = "hlorun.compile/1"


class SessionCaptured(Exception):
    """Raised by :meth:`CompileSession.run` inside :func:`capture_session`:
    carries the fully configured session instead of running it."""

    def __init__(self, session: "CompileSession"):
        super().__init__("compile session captured")
        self.session = session


_capture = False


def capture_session(invoke) -> "CompileSession":
    """Call ``invoke()`` (e.g. the ``compile`` click callback with parsed
    flags) and return the session it would run, without running it.  This
    is how ``hlorun reduce -- compile ...`` honours every compile flag,
    including ones added later, through compile's own click parser."""
    global _capture
    _capture = True
    try:
        invoke()
    except SessionCaptured as c:
        return c.session
    finally:
        _capture = False
    raise RuntimeError("the compile command returned without building a session")


@dataclass
class CompileSession:
    file: str
    pipeline: str | None = None
    output: str | None = None
    fmt: str = "text"
    diff_mode: str = "changed"
    diff_filter: str | None = None
    diff_form: str = "diff"
    verify_each: bool = True
    check_changed: bool = False
    keep_going: bool = False
    disable: list[str] = field(default_factory=list)
    enable_only: list[str] = field(default_factory=list)
    disable_all: bool = False
    pass_limit: int | None = None
    dump_to: str | None = None
    dump_pass_re: str | None = None
    repro_dir: str | None = None
    table: bool = True
    remarks: bool = False
    traceback: bool = False
    target_overrides: dict[str, Any] = field(default_factory=dict)
    #: overrides of the pipeline's ``autotune:`` section (compile's autotune flags)
    autotune: dict[str, Any] = field(default_factory=dict)
    argv: list[str] = field(default_factory=list)
    #: --bug-report PATH (.tar.gz/.tgz or a directory), --reduce, its time budget.
    bug_report: str | None = None
    bug_report_reduce: bool = False
    bug_report_timeout: float | None = 300.0
    extra_listeners: list[Listener] = field(default_factory=list)
    #: --explain: None (off) or a kernel / instruction name or regex (".*": all);
    #: also lists the rejected autotuning candidates of the matching GEMMs
    explain: str | None = None
    #: Filled when explain is on: the lineage tracker and the explanations.
    lineage: Any = None
    explanations: list[Any] = field(default_factory=list)
    #: Clock for all timings (bench/compile.py uses time.process_time).
    clock: Any = time.perf_counter
    #: Checkers re-examine only what changed (RunOptions.incremental_checks).
    incremental_checks: bool = True
    #: Filled by run(): the result and the repro bundle (if written).
    result: PipelineResult | None = None
    repro: dict[str, Any] | None = None
    parse_seconds: float = 0.0

    def command_line(self) -> str:
        """The hlorun command line equivalent to this session."""
        parts = ["hlorun", "compile", self.file]
        if self.pipeline:
            parts += ["--pipeline", self.pipeline]
        for d in self.disable:
            parts += ["--disable-passes", d]
        for e in self.enable_only:
            parts += ["--enable-passes-only", e]
        if self.disable_all:
            parts.append("--xla_disable_all_hlo_passes")
        if self.pass_limit is not None:
            parts += ["--pass-limit", str(self.pass_limit)]
        if not self.verify_each:
            parts.append("--no-verify-each")
        if self.check_changed:
            parts.append("--check-changed")
        for k, v in self.target_overrides.items():
            if v is not None:
                parts += ["--" + k.replace("_", "-"), str(v)]
        if self.autotune:
            from .cli._autotune import command_flags
            parts += command_flags(self.autotune)
        return " ".join(shlex.quote(p) for p in parts)

    # -- pieces other commands reuse (reduce, bisect, bug reports) ----------------------
    def load_spec(self):
        """The effective pipeline: ``--pipeline`` with the target overrides."""
        from .pipeline_spec import load_pipeline
        spec = load_pipeline(self.pipeline).with_target(**self.target_overrides)
        if self.autotune:
            from dataclasses import replace as _replace
            merged = dict(spec.section("autotune") or {}, **self.autotune)
            spec = _replace(spec, sections=dict(spec.sections, autotune=merged))
        return spec

    def run_options(self, listeners: list[Listener]) -> RunOptions:
        """RunOptions for this session's flags, with ``listeners`` and the
        session's extra listeners."""
        return RunOptions(verify_each=self.verify_each, check_changed=self.check_changed,
                          disable=self.disable, enable_only=self.enable_only,
                          disable_all=self.disable_all, pass_limit=self.pass_limit,
                          keep_going=self.keep_going, clock=self.clock,
                          incremental_checks=self.incremental_checks,
                          listeners=list(listeners) + list(self.extra_listeners))

    # -- running ---------------------------------------------------------------------
    def _check_regexes(self) -> None:
        from .source import UsageError
        for flag, rx in (("--diff-filter", self.diff_filter), ("--dump-pass-re", self.dump_pass_re)):
            if rx:
                try:
                    re.compile(rx)
                except re.error as e:
                    raise UsageError(f"{flag}: bad regex: {e}") from None

    def run(self) -> int:
        import sys
        self._check_regexes()
        from .parser import parse_module
        if _capture:
            raise SessionCaptured(self)
        spec = self.load_spec()
        if self.file == "-":
            text, name = sys.stdin.read(), "<stdin>"
        else:
            from .fileio import read_text
            text, name = read_text(self.file), self.file
        t = self.clock()
        module = parse_module(text, name)
        self.parse_seconds = self.clock() - t
        # The parsed module lives until the end: keep the cyclic GC from
        # rescanning its objects on every collection (a third of the time
        # on big modules otherwise).  New objects are still collected.
        import gc
        gc.freeze()
        try:
            return self._run(module, text, spec)
        finally:
            gc.unfreeze()  # let a long-lived process (tests, tools) collect it later

    def _run(self, module, text: str, spec) -> int:
        from .snapshots import SnapshotCache
        listeners: list[Listener] = []
        text_mode = self.fmt == "text"
        cache = SnapshotCache()  # diffs, dumps and the output share computation prints
        if text_mode and self.diff_mode != "none":
            from .diffs import DiffListener
            listeners.append(DiffListener(report.diff_block, self.diff_mode, self.diff_filter,
                                          self.diff_form, cache=cache))
        dumper = None
        if self.dump_to:
            from .dump import DumpListener
            dumper = DumpListener(self.dump_to, self.dump_pass_re, input_path=self.file,
                                  cache=cache)
            listeners.append(dumper)
        repro = None
        staging = None
        if self.bug_report:
            from .bugreport import staging_dir
            staging = staging_dir(self.bug_report)
            if not self.repro_dir:
                self.repro_dir = str(staging / "repro")
                self._repro_in_bundle = True
        if self.repro_dir:
            from .repro import ReproListener
            repro = ReproListener(self.repro_dir, command=self.command_line())
            listeners.append(repro)
        if self.explain is not None:
            from .lineage import LineageTracker
            self.lineage = LineageTracker()
            listeners.append(self.lineage)
        options = self.run_options(listeners)
        result = self.result = run_pipeline(module, spec, options)
        if repro is not None:
            self.repro = repro.bundle
        if self.lineage is not None:
            from .explain import explain_kernels
            self.explanations = explain_kernels(module, self.lineage, pattern=self.explain)
        module_text = None
        stop = result.exit_code != 0 and not self.keep_going
        if not stop and (self.output or text_mode):
            module_text = cache.module_text(module)
            if self.output and self.output != "-":
                from .fileio import write_atomic
                write_atomic(self.output, module_text)
        if text_mode:
            self._render_text(result, text)
            if module_text is not None and (not self.output or self.output == "-"):
                report.write_stdout(module_text)
        else:
            doc = self.to_json(result)
            report.write_stdout(json.dumps(doc, indent=2) + "\n")
        if dumper is not None and text_mode:
            report.info(f"dumps: {dumper.count} files in {self.dump_to}")
        if staging is not None:
            from .bugreport import write_bundle
            argv = self.argv[1:] if self.argv[:1] == ["compile"] else list(self.argv)
            write_bundle(self.bug_report, staging, self, argv, self.bug_report_reduce,
                         self.bug_report_timeout)
            report.info(f"bug report: {self.bug_report}")
        # Add-on listeners (--check-numerics) may fail the run too.
        return max([result.exit_code] + [getattr(lst, "exit_code", 0) for lst in self.extra_listeners])

    # -- rendering -----------------------------------------------------------------
    def _render_text(self, res: PipelineResult, source: str) -> None:
        if self.table:
            rows = []
            fail_idx = res.failure.index if res.failure else None
            for e in res.events:
                changed = "FAILED" if e.index == fail_idx else (
                    "LIED" if e.changed_mismatch else ("yes" if e.changed else "-"))
                it = f" [{e.iteration}]" if e.iteration else ""
                fp = f" x{e.fixed_point_iterations}" if e.fixed_point_iterations else ""
                rows.append((e.index, e.path + it + fp, changed,
                             f"{e.instructions_before} -> {e.instructions_after}",
                             f"{e.seconds * 1000:.1f} ms"))
            report.pass_table(rows, title=f"pipeline {res.spec.name} on {res.module.name}")
        if self.remarks:
            for e, r in res.remarks:
                where = f" {r.instruction}:" if r.instruction else ""
                report.info(f"#{e.index} {e.path} [{r.kind}]{where} {r.message}")
        if self.explain is not None:
            from .explain import render_text
            report.info(f"kernels ({len(self.explanations)}"
                        + (f" matching {self.explain}" if self.explain != ".*" else "") + "):")
            report.info(render_text(self.explanations))
        autotune = res.records("autotune")
        if autotune:
            from .autotune.view import render
            render(autotune, self.explain)
        for note in res.notes:
            report.warn(note)
        if res.failure:
            f = res.failure
            body = [f"pass #{f.index} {f.path} failed ({f.exception})",
                    f"  {f.message}"]
            if f.instruction:
                body.append(f"  instruction: {f.computation + '/' if f.computation else ''}{f.instruction}")
            if self.traceback:
                body.append(f.traceback.rstrip())
            elif f.exception != "PassError":
                body.append("  (an unexpected exception: a bug in the pass; --traceback shows where)")
            report.panel("pass failure", "\n".join(body))
        if res.violations:
            body = []
            for v in res.violations:
                where = f"after #{v.pass_index} {v.after_pass}" if v.pass_index else "at pipeline start"
                if v.precondition_of:
                    where = f"precondition of {v.precondition_of}, first violated {where}"
                body.append(f"[{v.rule}] {where}")
                d = v.diagnostic
                if d is not None:
                    inst = f"{d.computation + '/' if d.computation else ''}{d.instruction}" \
                        if d.instruction else "-"
                    body.append(f"  instruction: {inst}")
                body.append(f"  {v.message}")
            report.panel(f"{len(res.violations)} violation(s)", "\n".join(body))
        if self.repro and not getattr(self, "_repro_in_bundle", False):
            report.info(f"reproducer: {self.repro['dir']}")
            report.info(f"  {self.repro['command']}")
        for lst in self.extra_listeners:  # add-ons' own sections (--check-numerics)
            if hasattr(lst, "render_text"):
                lst.render_text(report)
        n_changed = sum(1 for e in res.events if e.changed)
        status = {"ok": "ok", "violation": "VIOLATION", "pass-failure": "PASS FAILURE"}[res.status]
        limit = f", stopped at --pass-limit {self.pass_limit}" if res.stopped_by_limit else ""
        report.summary(
            f"{status}: {len(res.events)} passes run, {n_changed} changed, "
            f"{res.instructions_before} -> {res.module.instruction_count} instructions, "
            f"{res.seconds:.2f} s (passes {res.pass_seconds:.2f} s, checkers "
            f"{res.checker_seconds:.2f} s){limit}", res.status == "ok")

    def to_json(self, res: PipelineResult) -> dict[str, Any]:
        """The CI report (schema documented in README, "JSON report")."""
        doc = self._json(res)
        for lst in self.extra_listeners:  # add-ons' sections (--check-numerics: "numerics")
            if hasattr(lst, "update_report"):
                lst.update_report(doc)
        return doc

    def _json(self, res: PipelineResult) -> dict[str, Any]:
        t = res.target
        return {
            "schema": JSON_SCHEMA,
            "input": self.file,
            "module": res.module.name,
            "pipeline": {"name": res.spec.name, "file": res.spec.path},
            "target": {"platform": t.platform, "device": t.device,
                       "compute_capability": t.compute_capability},
            "status": res.status,
            "exit_code": res.exit_code,
            "passes": [e.to_json() for e in res.events],
            "violations": [v.to_json() for v in res.violations],
            "failure": res.failure.to_json() if res.failure else None,
            "remarks": [dict(r.to_json(), index=e.index) for e, r in res.remarks],
            "autotune": res.records("autotune"),
            "disabled": {"mode": res.selection.mode, "matched": res.selection.matched},
            "stopped_by_pass_limit": res.stopped_by_limit,
            "notes": list(res.notes),
            "summary": {
                "passes_run": len(res.events),
                "passes_changed": sum(1 for e in res.events if e.changed),
                "instructions_before": res.instructions_before,
                "instructions_after": res.module.instruction_count,
                "seconds": {"total": round(res.seconds, 6), "parse": round(self.parse_seconds, 6),
                            "passes": round(res.pass_seconds, 6),
                            "checkers": round(res.checker_seconds, 6),
                            "fingerprints": round(res.fingerprint_seconds, 6),
                            "listeners": {k: round(v, 6) for k, v in res.listener_seconds.items()}},
            },
            "output": self.output,
            "dump_dir": self.dump_to,
            "repro": self.repro,
            **({"kernels": [e.to_json() for e in self.explanations]}
               if self.explain is not None else {}),
        }
