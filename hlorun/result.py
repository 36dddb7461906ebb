"""What :func:`hlorun.compile` returns: :class:`CompileResult` and the
records it is made of (:class:`PassRecord`, :class:`AutotuneDecision`).

The result wraps the pipeline run (:class:`hlorun.pipeline.run.PipelineResult`)
and the listeners the compile attached (lineage, numerics, dumps,
reproducer, diffs).  ``to_json()`` is the documented CI report
(``hlorun compile --format json``, schema in :mod:`hlorun.report.schema`);
``_repr_html_()`` renders it in a notebook."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .ir.module import Module
    from .pipeline.events import PassEvent, PipelineResult

#: The JSON report's schema identifier (bump on incompatible changes).
JSON_SCHEMA = "hlorun.compile/1"


@dataclass
class PassRecord:
    """One pass execution: what ran, whether it changed the module, how
    long it took, the instruction counts around it and (when the compile
    kept diffs) its unified diff."""

    event: "PassEvent"
    _diff: list[str] | None = None

    index = property(lambda self: self.event.index)
    name = property(lambda self: self.event.name)
    path = property(lambda self: self.event.path)
    pipeline = property(lambda self: self.event.pipeline)
    iteration = property(lambda self: self.event.iteration)
    changed = property(lambda self: self.event.changed)
    seconds = property(lambda self: self.event.seconds)
    instructions_before = property(lambda self: self.event.instructions_before)
    instructions_after = property(lambda self: self.event.instructions_after)
    remarks = property(lambda self: self.event.remarks)
    changed_mismatch = property(lambda self: self.event.changed_mismatch)

    def diff(self) -> list[str]:
        """The unified diff lines of this pass (empty when it changed nothing).
        Needs ``compile(..., diffs="changed")`` (or "all")."""
        if self._diff is None:
            if not self.changed:
                return []
            from .errors import UsageError
            raise UsageError(f"no diff kept for pass #{self.index} {self.path}: compile with "
                             f"diffs='changed' (or 'all')")
        return list(self._diff)

    def to_json(self) -> dict[str, Any]:
        return self.event.to_json()

    def __repr__(self) -> str:
        return (f"PassRecord(#{self.index} {self.path}, changed={self.changed}, "
                f"{self.instructions_before}->{self.instructions_after}, {self.seconds * 1e3:.1f} ms)")


@dataclass
class AutotuneDecision:
    """One GEMM the autotuner decided: the winner, the runner-up and their
    margin, every candidate, the rejected ones with reasons."""

    record: dict[str, Any]

    instruction = property(lambda self: self.record["instruction"])
    winner = property(lambda self: self.record.get("winner"))
    runner_up = property(lambda self: self.record.get("runner_up"))
    margin = property(lambda self: self.record.get("margin"))
    candidates = property(lambda self: self.record.get("candidates", []))
    rejected = property(lambda self: self.record.get("rejected", []))
    source = property(lambda self: self.record.get("source"))
    pass_index = property(lambda self: self.record.get("pass_index"))

    def to_json(self) -> dict[str, Any]:
        return dict(self.record)

    def __repr__(self) -> str:
        w = (self.winner or {}).get("label", "NONE")
        return (f"AutotuneDecision({self.instruction}: {w}, margin={self.margin}, "
                f"{len(self.candidates)} candidates, {len(self.rejected)} rejected)")


@dataclass
class CompileResult:
    """The outcome of :func:`hlorun.compile`."""

    #: the compiled module (the final state, or where the run stopped)
    module: "Module"
    run: "PipelineResult"
    options: Any  # hlorun.options.CompileOptions
    input_name: str = "<module>"
    parse_seconds: float = 0.0
    lineage: Any = None  # hlorun.analysis.lineage.LineageTracker when diagnostics.lineage
    numerics: Any = None  # hlorun.evaluate.numerics.NumericsListener when check_numerics
    dump_files: list[str] = field(default_factory=list)
    repro: dict[str, Any] | None = None
    #: assignment of the final module (``compile(..., buffers=True)``)
    buffers: Any = None
    diffs: dict[int, list[str]] = field(default_factory=dict)
    snapshots: Any = None  # the run's SnapshotCache (hlorun.pipeline.snapshots)
    _passes: list[PassRecord] | None = None
    _kernels: list[Any] | None = None

    # -- the run ---------------------------------------------------------------------
    @property
    def pipeline(self) -> str:
        return self.run.spec.name

    @property
    def spec(self):
        return self.run.spec

    @property
    def target(self):
        return self.run.target

    @property
    def passes(self) -> list[PassRecord]:
        if self._passes is None:
            self._passes = [PassRecord(e, self.diffs.get(e.index)) for e in self.run.events]
        return self._passes

    @property
    def violations(self):
        """Checker findings: ``rule``, ``instruction``, ``after_pass`` (the
        pass that caused it) with ``pass_index``, ``message``."""
        return list(self.run.violations)

    @property
    def failures(self):
        """Pass failures (at most one: a failing pass stops the run)."""
        return [self.run.failure] if self.run.failure is not None else []

    @property
    def remarks(self):
        return [r for _, r in self.run.remarks]

    @property
    def notes(self) -> list[str]:
        return list(self.run.notes) + (list(self.numerics.notes) if self.numerics else [])

    @property
    def status(self) -> str:
        """ok, violation, pass-failure or numerics-mismatch."""
        if self.run.status == "ok" and self.numerics is not None and self.numerics.exit_code:
            return "numerics-mismatch"
        return self.run.status

    @property
    def exit_code(self) -> int:
        return 0 if self.status == "ok" else 2

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def seconds(self) -> float:
        return self.run.seconds

    def raise_for_status(self) -> "CompileResult":
        """Raise :class:`hlorun.PassFailure`, :class:`hlorun.ViolationError`
        or :class:`hlorun.NumericsMismatch` unless the compile succeeded."""
        from .errors import NumericsMismatch, PassFailure, ViolationError
        if self.run.failure is not None:
            f = self.run.failure
            raise PassFailure(f"pass #{f.index} {f.path} failed: {f.message}", self)
        if self.run.violations:
            v = self.run.violations[0]
            raise ViolationError(f"[{v.rule}] after #{v.pass_index} {v.after_pass}: {v.message}"
                                 + (f" ({len(self.run.violations)} violations)"
                                    if len(self.run.violations) > 1 else ""), self)
        if self.status == "numerics-mismatch":
            m = self.numerics.first_mismatch or {}
            raise NumericsMismatch(f"numerics mismatch after #{m.get('index')} {m.get('pass')}: "
                                   f"{m.get('message', '')}", self)
        return self

    # -- what came out ---------------------------------------------------------------
    @property
    def kernels(self):
        """The final kernels (fusions, library calls) with the original
        instructions each came from and the pass decisions that formed it
        (``kernel.formed_by``: pass paths); see :mod:`hlorun.analysis.explain`."""
        if self._kernels is None:
            from .analysis.explain import explain_kernels, plain_kernels
            d = self.options.diagnostics
            if self.lineage is not None:
                self._kernels = explain_kernels(self.module, self.lineage, pattern=d.explain)
            else:
                self._kernels = plain_kernels(self.module, pattern=d.explain)
        return self._kernels

    @property
    def autotune(self) -> list[AutotuneDecision]:
        return [AutotuneDecision(r) for r in self.run.records("autotune")]

    def text(self, form: str = "full") -> str:
        """The compiled module printed (``form``: a printer preset)."""
        if self.snapshots is not None:  # reuses the prints of diffs and dumps
            return self.snapshots.module_text(self.module, form=form)
        from .text.printer import print_module
        return print_module(self.module, form=form)

    # -- reports ---------------------------------------------------------------------
    def to_json(self, input: str | None = None, output: str | None = None) -> dict[str, Any]:
        """The CI report (schema ``hlorun.compile/1``, :mod:`hlorun.report.schema`)."""
        res = self.run
        t = res.target
        o = self.options
        doc: dict[str, Any] = {
            "schema": JSON_SCHEMA,
            "input": input if input is not None else self.input_name,
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
            "output": output,
            "dump_dir": o.output.dump_to,
            "repro": self.repro,
        }
        if o.diagnostics.explain is not None:
            doc["kernels"] = [k.to_json() for k in self.kernels]
        if self.numerics is not None:
            self.numerics.update_report(doc)
        return doc

    def _repr_html_(self) -> str:
        from .report.notebook import render
        return render(self)

    def __repr__(self) -> str:
        n_changed = sum(1 for e in self.run.events if e.changed)
        return (f"<CompileResult {self.status}: pipeline {self.pipeline} on {self.module.name}, "
                f"{len(self.run.events)} passes ({n_changed} changed), "
                f"{self.run.instructions_before} -> {self.module.instruction_count} instructions, "
                f"{len(self.violations)} violations, {len(self.failures)} failures>")


__all__ = ["AutotuneDecision", "CompileResult", "JSON_SCHEMA", "PassRecord"]
