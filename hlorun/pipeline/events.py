"""What the pipeline tells its listeners and returns: pass events,
violations, failures, the result, and the :class:`Listener` base class
(see :mod:`hlorun.pipeline.run`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..ir.module import Module
from ..passes.base import Remark, Target
from .select import Selection
from .spec import PipelineSpec, PipelineStep, Step
from ..errors import Diagnostic

if TYPE_CHECKING:
    from .run import PipelineRunner


@dataclass
class PassEvent:
    """One pass execution (``kind == "pass"``), or a finished sub-pipeline
    (``kind == "pipeline"``, only in ``on_pipeline_end``)."""

    index: int  # 1-based execution number (--pass-limit counts these); 0 for pipelines
    name: str
    pipeline: str  # the enclosing pipeline's name
    path: str  # enclosing pipelines and name, joined by '/'
    step: Step
    kind: str = "pass"
    iteration: int | None = None  # of the innermost fixed-point sub-pipeline
    next_name: str = "pipeline-end"  # next enabled step in the same pipeline
    changed: bool = False
    seconds: float = 0.0
    instructions_before: int = 0
    instructions_after: int = 0
    remarks: list[Remark] = field(default_factory=list)
    records: list[tuple[str, dict]] = field(default_factory=list)
    fixed_point_iterations: int | None = None
    changed_mismatch: str | None = None  # --check-changed finding

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "name": self.name, "pipeline": self.pipeline,
                "path": self.path, "iteration": self.iteration, "changed": self.changed,
                "seconds": round(self.seconds, 6),
                "instructions_before": self.instructions_before,
                "instructions_after": self.instructions_after,
                "remarks": len(self.remarks), "changed_mismatch": self.changed_mismatch}


@dataclass
class PipelineEvent:
    """A (sub-)pipeline starting an iteration."""

    name: str
    path: str
    parent: str | None  # enclosing pipeline name, None at the top level
    step: PipelineStep
    iteration: int | None
    first_name: str  # first enabled step, or "pipeline-end"


@dataclass
class Violation:
    rule: str
    message: str
    instruction: str | None
    computation: str | None
    after_pass: str  # path of the pass after which it appeared, or "pipeline-start"
    pass_index: int  # 0 for pipeline-start
    precondition_of: str | None = None  # for check steps: the step that follows
    checked_at: str | None = None  # where it was detected (for check steps)
    diagnostic: Diagnostic | None = None

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "message": self.message, "instruction": self.instruction,
                "computation": self.computation, "after_pass": self.after_pass,
                "pass_index": self.pass_index, "precondition_of": self.precondition_of,
                "checked_at": self.checked_at}


@dataclass
class PassFailureRecord:
    index: int
    name: str
    path: str
    message: str
    instruction: str | None
    computation: str | None
    exception: str  # "PassError" or the exception class
    traceback: str
    step: Step | None = None

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "pass": self.name, "path": self.path,
                "message": self.message, "instruction": self.instruction,
                "computation": self.computation, "exception": self.exception}


@dataclass
class PipelineResult:
    spec: PipelineSpec
    module: Module
    selection: Selection
    target: Target
    events: list[PassEvent] = field(default_factory=list)
    pipeline_events: list[PassEvent] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    failure: PassFailureRecord | None = None
    changed: bool = False
    seconds: float = 0.0
    checker_seconds: float = 0.0
    fingerprint_seconds: float = 0.0
    listener_seconds: dict[str, float] = field(default_factory=dict)
    stopped_by_limit: bool = False
    notes: list[str] = field(default_factory=list)
    instructions_before: int = 0

    @property
    def pass_seconds(self) -> float:
        return sum(e.seconds for e in self.events)

    @property
    def machinery_seconds(self) -> float:
        return self.checker_seconds + self.fingerprint_seconds + sum(self.listener_seconds.values())

    @property
    def remarks(self) -> list[tuple[PassEvent, Remark]]:
        return [(e, r) for e in self.events for r in e.remarks]

    def records(self, section: str) -> list[dict]:
        return [dict(rec, pass_index=e.index) for e in self.events
                for sec, rec in e.records if sec == section]

    @property
    def exit_code(self) -> int:
        return 2 if (self.violations or self.failure) else 0

    @property
    def status(self) -> str:
        if self.failure:
            return "pass-failure"
        if self.violations:
            return "violation"
        return "ok"


class Listener:
    """Pipeline events; override what you need (all default to no-ops)."""

    def on_run_start(self, run: "PipelineRunner", module: Module) -> None: ...
    def on_pipeline_start(self, ev: PipelineEvent, module: Module) -> None: ...
    def on_before_pass(self, ev: PassEvent, module: Module) -> None: ...
    def on_after_pass(self, ev: PassEvent, module: Module) -> None: ...
    def on_pipeline_end(self, ev: PassEvent, module: Module) -> None: ...
    def on_violation(self, v: Violation, module: Module) -> None: ...
    def on_pass_failure(self, f: PassFailureRecord, module: Module) -> None: ...
    def on_run_end(self, result: PipelineResult, module: Module) -> None: ...
