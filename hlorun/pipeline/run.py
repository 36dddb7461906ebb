"""Running a pipeline: passes, invariant checkers and listener events.

``run_pipeline(module, spec, RunOptions(...)) -> PipelineResult`` runs the
steps of a :class:`~hlorun.pipeline.spec.PipelineSpec` in order, the way
XLA's HloPassPipeline does:

* each sub-pipeline runs its enabled steps; a fixed-point one (HloPassFix)
  reruns them until an iteration changes nothing (``max_iterations``,
  default 25);
* the pipeline's checkers (top-level ``checkers:``) run at the start and
  after every pass that reported a change (``verify_each``; otherwise only
  at the start and the end); a sub-pipeline's own ``checkers:`` run at its
  start and after its changed passes; inside a ``checkers_at_end`` sub-pipeline
  (an XLA pipeline without invariant checkers) they run once, when it ends,
  if it changed the module; a ``check:`` step runs its checker at
  that point, and the finding names the pass after which it first appeared;
* a pass that raises (``PassError`` or anything else) stops the run with a
  :class:`PassFailureRecord`; a violation stops it too unless ``keep_going``;
* with ``check_changed`` the module is scanned (:class:`~hlorun.ir.changes.
  ModuleTracker`: everything the printer and the verifier read) after each
  pass, and a pass whose ``changed`` disagrees is a ``pass-changed-report``
  violation.

The runner's :class:`~hlorun.ir.changes.ModuleTracker` (``tracker``) is
shared by everything that looks at the module between passes: checkers get
it through ``check_changes`` and re-examine only what changed since their
last run (the verifier does; others run ``check``), listeners' snapshot
caches reprint only changed instructions, and ``--check-changed`` compares
its scans.  Everybody scans with ``scan_token`` (the number of passes run
so far), so one module state is scanned once.

Passes never print, dump, time or verify.  The pipeline does that around
them and tells :class:`Listener` objects (pass table, diffs, dumps,
reproducers, numerics checks): ``on_run_start``, ``on_pipeline_start``,
``on_before_pass``, ``on_after_pass``, ``on_pipeline_end``,
``on_violation``, ``on_pass_failure``, ``on_run_end``.  Time spent in
listeners is measured per listener class (``result.listener_seconds``).
The event and result types live in :mod:`hlorun.pipeline.events` and are
re-exported here.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .gc_policy import pipeline_gc
from ..ir.changes import ModuleTracker
from ..ir.module import Module
from ..passes.base import Pass, Target
from ..passes.remark_log import RemarkLog
from .events import Listener, PassEvent, PassFailureRecord, PipelineEvent, PipelineResult, Violation
from .select import select
from .spec import CheckerSpec, CheckStep, PassStep, PipelineSpec, PipelineStep, Step
from ..errors import Diagnostic, PassError


@dataclass
class RunOptions:
    verify_each: bool = True
    check_changed: bool = False
    disable: Sequence[str] = ()
    enable_only: Sequence[str] = ()
    disable_all: bool = False
    pass_limit: int | None = None
    keep_going: bool = False
    #: Checkers re-examine only what changed since their last run
    #: (``Checker.check_changes``); False runs ``check`` on the whole module.
    incremental_checks: bool = True
    #: Overrides the pipeline's ``target:`` when given.
    target: Target | None = None
    listeners: Sequence["Listener"] = ()
    #: The clock for all timings (``time.process_time`` for CPU seconds on a
    #: busy machine, as bench/compile.py does).
    clock: Callable[[], float] = time.perf_counter
    #: The garbage-collector policy while the pipeline runs
    #: (:mod:`hlorun.pipeline.gc_policy`): "pipeline" (freeze what exists, rare
    #: young collections) or "default" (leave the interpreter's settings).
    gc_policy: str = "pipeline"


class _Stop(Exception):
    pass


class PipelineRunner:
    def __init__(self, spec: PipelineSpec, options: RunOptions | None = None):
        self.spec = spec
        self.options = options or RunOptions()
        self.selection = select(spec, self.options.disable, self.options.enable_only,
                                self.options.disable_all)
        self.target = self.options.target or spec.target
        self.listeners = list(self.options.listeners)
        self.clock = self.options.clock
        self._passes: dict[int, Pass] = {}
        self._checkers: dict[int, Any] = {}
        self._global = [self._checker(c) for c in spec.checkers]
        # Checkers of check: steps, one instance per (name, options): they run
        # after every changed pass to record when each finding first appeared.
        self._tracked: dict[tuple, Any] = {}
        self._step_key: dict[int, tuple] = {}
        for _, s in spec.walk():
            if isinstance(s, CheckStep):
                key = (s.checker.name, repr(sorted(s.checker.options.items())))
                self._step_key[id(s.checker)] = key
                if key not in self._tracked:
                    self._tracked[key] = self._checker(s.checker)
        self._tracked_findings: dict[tuple, list[Diagnostic]] = {}
        self._changes = 0  # passes that reported a change so far
        self._tracked_at = -1  # value of _changes when the tracked checkers last ran
        self._deferred = 0  # depth of enclosing checkers_at_end sub-pipelines
        self._first_seen: dict[tuple, tuple[str, int]] = {}
        self.tracker = ModuleTracker()
        self._runs = 0
        self.index = 0
        #: A token for "the module as it is now": bumped by every pass that
        #: reports a change (corrected by ``check_changed``) or fails.
        #: Listeners key caches on it (:class:`hlorun.pipeline.snapshots.SnapshotCache`):
        #: like XLA's dumps, they trust ``changed``.
        self.state = 0
        self.result: PipelineResult | None = None

    @property
    def scan_token(self) -> int:
        """Changes whenever a pass may have changed the module (the number
        of times a pass's ``run`` was called): the token for
        ``tracker.scan``."""
        return self._runs

    # -- helpers ---------------------------------------------------------------------
    def _checker(self, cs: CheckerSpec):
        got = self._checkers.get(id(cs))
        if got is None:
            got = self._checkers[id(cs)] = cs.instantiate(self.spec)
        return got

    def _emit(self, method: str, *args) -> None:
        assert self.result is not None
        for lst in self.listeners:
            t = self.clock()
            getattr(lst, method)(*args)
            key = type(lst).__name__
            self.result.listener_seconds[key] = self.result.listener_seconds.get(key, 0.0) \
                + self.clock() - t

    def _run_checkers(self, checkers, module: Module) -> list[Diagnostic]:
        assert self.result is not None
        t = self.clock()
        out: list[Diagnostic] = []
        tracker = self.tracker
        if self.options.incremental_checks:
            tracker.scan(module, self.scan_token)
        for ch in checkers:
            try:
                check = getattr(ch, "check_changes", None) if self.options.incremental_checks \
                    else None
                out.extend(check(module, tracker) if check is not None else ch.check(module))
            except Exception as e:  # the contract says never raise; report, don't crash
                out.append(Diagnostic(rule=getattr(ch, "name", type(ch).__name__),
                                      message=f"checker crashed: {e!r}"))
        if self.options.incremental_checks:
            tracker.trim()  # the step just checked holds the removed instructions' graphs
        self.result.checker_seconds += self.clock() - t
        return out

    def _violations(self, diags: list[Diagnostic], after: str, index: int, module: Module,
                    precondition_of: str | None = None, checked_at: str | None = None) -> None:
        assert self.result is not None
        if not diags:
            return
        for d in diags:
            first = self._first_seen.get((d.rule, d.computation, d.instruction))
            a, i = (first if (precondition_of and first) else (after, index))
            v = Violation(d.rule, d.message, d.instruction, d.computation, a, i,
                          precondition_of, checked_at, d)
            self.result.violations.append(v)
            self._emit("on_violation", v, module)
        if not self.options.keep_going:
            raise _Stop()

    def _track(self, module: Module, after: str, index: int) -> None:
        """Record when each finding of a check step's checker first appears."""
        if not self._tracked:
            return
        for key, checker in self._tracked.items():
            diags = self._run_checkers([checker], module)
            self._tracked_findings[key] = diags
            for d in diags:
                self._first_seen.setdefault((d.rule, d.computation, d.instruction), (after, index))
        self._tracked_at = self._changes

    def _check_step(self, step: CheckStep, module: Module) -> list[Diagnostic]:
        """Findings of a check: step (reused from the last tracking run when
        no pass has reported a change since)."""
        key = self._step_key[id(step.checker)]
        if self._tracked_at == self._changes and key in self._tracked_findings:
            return self._tracked_findings[key]
        return self._run_checkers([self._tracked[key]], module)

    def _scan_changed(self, module: Module) -> bool:
        """Scan the module (``check_changed``); did it change since the
        previous scan?"""
        assert self.result is not None
        t = self.clock()
        gen = self.tracker.gen
        self.tracker.scan(module, self.scan_token)
        self.result.fingerprint_seconds += self.clock() - t
        return self.tracker.gen != gen

    def _disabled(self, step: Step) -> bool:
        return not isinstance(step, CheckStep) and self.selection.is_disabled(step)

    # -- running -----------------------------------------------------------------------
    def run(self, module: Module) -> PipelineResult:
        with pipeline_gc(self.options.gc_policy):
            return self._run(module)

    def _run(self, module: Module) -> PipelineResult:
        t0 = self.clock()
        self.result = res = PipelineResult(self.spec, module, self.selection, self.target,
                                           instructions_before=module.instruction_count)
        self._emit("on_run_start", self, module)
        try:
            self._violations(self._run_checkers(self._global, module), "pipeline-start", 0, module)
            self._track(module, "pipeline-start", 0)
            if self.options.check_changed:
                self._scan_changed(module)
            for group in self._top_level():
                res.changed |= self._run_pipeline(group, module, None, (), [], None)
            if not self.options.verify_each and self._global:
                last = res.events[-1] if res.events else None
                self._violations(self._run_checkers(self._global, module),
                                 last.path if last else "pipeline-start",
                                 last.index if last else 0, module)
        except _Stop:
            pass
        res.seconds = self.clock() - t0
        self._emit("on_run_end", res, module)
        return res

    def _top_level(self) -> list[PipelineStep]:
        """Top-level sub-pipelines run as XLA's separate pipelines; runs of
        top-level passes form a pipeline named after the spec."""
        out: list[PipelineStep] = []
        loose: list[Step] = []
        for s in self.spec.steps:
            if isinstance(s, PipelineStep):
                if loose:
                    out.append(PipelineStep(self.spec.name, loose))
                    loose = []
                out.append(s)
            else:
                loose.append(s)
        if loose:
            out.append(PipelineStep(self.spec.name, loose))
        return out

    def _run_pipeline(self, ps: PipelineStep, module: Module, parent: str | None,
                      prefix: tuple[str, ...], scoped: list, iteration: int | None) -> bool:
        assert self.result is not None
        if self._disabled(ps):
            return False
        path = prefix + (ps.name,)
        steps = [s for s in ps.steps if not self._disabled(s)]
        own = [self._checker(c) for c in ps.checkers]
        scoped = scoped + own
        names = [s.name for s in steps if not isinstance(s, CheckStep)]
        args = (ps, parent, steps, names, module, path, own, scoped, iteration)
        if not ps.checkers_at_end:
            return self._run_steps(*args)
        self._deferred += 1
        try:
            changed = self._run_steps(*args)
        finally:
            self._deferred -= 1
        if changed and not self._deferred:
            # XLA: the pipeline has no invariant checker; the next one checks
            # the module at its start
            self._violations(self._run_checkers(self._global + scoped, module),
                             self._last_path("pipeline-start"), self._last_index(), module)
        return changed

    def _run_steps(self, ps: PipelineStep, parent: str | None, steps: list, names: list[str],
                   module: Module, path: tuple[str, ...], own: list, scoped: list,
                   iteration: int | None) -> bool:
        assert self.result is not None
        changed_any = False
        it = 0
        while True:
            it += 1
            inner_iter = it if ps.fixed_point else iteration
            self._emit("on_pipeline_start", PipelineEvent(
                ps.name, "/".join(path), parent, ps, inner_iter,
                names[0] if names else "pipeline-end"), module)
            if own:
                self._violations(self._run_checkers(own, module),
                                 self._last_path("pipeline-start"), self._last_index(), module)
            changed_iter = False
            k = 0  # position among non-check steps
            for s in steps:
                if isinstance(s, CheckStep):
                    nxt = names[k] if k < len(names) else "pipeline-end"
                    self._violations(self._check_step(s, module),
                                     self._last_path("pipeline-start"), self._last_index(), module,
                                     precondition_of="/".join(path + (nxt,)),
                                     checked_at="/".join(path))
                    continue
                k += 1
                nxt = names[k] if k < len(names) else "pipeline-end"
                if isinstance(s, PipelineStep):
                    before = module.instruction_count
                    ch = self._run_pipeline(s, module, ps.name, path, scoped, inner_iter)
                    ev = PassEvent(0, s.name, ps.name, "/".join(path + (s.name,)), s, "pipeline",
                                   inner_iter, nxt, ch, instructions_before=before,
                                   instructions_after=module.instruction_count)
                    self.result.pipeline_events.append(ev)
                    self._emit("on_pipeline_end", ev, module)
                else:
                    ch = self._run_pass(s, module, ps.name, path, scoped, inner_iter, nxt)
                changed_iter |= ch
            changed_any |= changed_iter
            if not ps.fixed_point or not changed_iter:
                break
            if it >= ps.max_iterations:
                self.result.notes.append(
                    f"fixed-point pipeline {'/'.join(path)} still changing after "
                    f"{ps.max_iterations} iterations; stopped (as XLA's HloPassFix)")
                break
        return changed_any

    def _last_path(self, default: str) -> str:
        assert self.result is not None
        return self.result.events[-1].path if self.result.events else default

    def _last_index(self) -> int:
        assert self.result is not None
        return self.result.events[-1].index if self.result.events else 0

    def _instance(self, step: PassStep) -> Pass:
        got = self._passes.get(id(step))
        if got is None:
            got = self._passes[id(step)] = step.instantiate(self.target, self.spec)
        return got

    def _run_pass(self, step: PassStep, module: Module, pipeline: str, prefix: tuple[str, ...],
                  scoped: list, iteration: int | None, nxt: str) -> bool:
        res = self.result
        assert res is not None
        limit = self.options.pass_limit
        if limit is not None and self.index >= limit:
            res.stopped_by_limit = True
            raise _Stop()
        self.index += 1
        path = "/".join(prefix + (step.name,))
        ev = PassEvent(self.index, step.name, pipeline, path, step, "pass", iteration, nxt,
                       instructions_before=module.instruction_count)
        inst = self._instance(step)
        self._emit("on_before_pass", ev, module)
        t = self.clock()
        try:
            if step.fixed_point:
                n = 0
                changed = False
                while n < step.max_iterations:
                    n += 1
                    self._runs += 1
                    # a rerun on the module the previous run left: skipped
                    # when the pass knows it would change nothing
                    c = False if n > 1 and inst.converged(module) else bool(inst.run(module))
                    changed |= c
                    if not c:
                        break
                ev.fixed_point_iterations = n
            else:
                self._runs += 1
                changed = bool(inst.run(module))
        except Exception as e:  # PassError or a bug: report, never a traceback by default
            self.state += 1
            ev.seconds = self.clock() - t
            self._collect(inst, ev)
            res.events.append(ev)
            is_pe = isinstance(e, PassError)
            msg = e.message if is_pe else f"{type(e).__name__}: {e}"
            res.failure = PassFailureRecord(ev.index, step.name, path, msg,
                                      getattr(e, "instruction", None),
                                      getattr(e, "computation", None),
                                      "PassError" if is_pe else type(e).__name__,
                                      traceback.format_exc(), step)
            self._emit("on_pass_failure", res.failure, module)
            raise _Stop() from None
        ev.seconds = self.clock() - t
        ev.changed = changed
        self._collect(inst, ev)
        if self.options.check_changed:
            really = self._scan_changed(module)
            if really != changed:
                ev.changed_mismatch = ("reported changed=False but the module changed" if really
                                       else "reported changed=True but the module is unchanged")
                ev.changed = changed = changed or really
        if changed:
            self.state += 1
        ev.instructions_after = module.instruction_count
        res.events.append(ev)
        self._emit("on_after_pass", ev, module)
        if ev.changed_mismatch:
            self._violations([Diagnostic(rule="pass-changed-report",
                                         message=f"pass {step.name} {ev.changed_mismatch}")],
                             path, ev.index, module)
        if changed:
            self._changes += 1
            self._track(module, path, ev.index)
            if self.options.verify_each and not self._deferred:
                self._violations(self._run_checkers(self._global + scoped, module), path,
                                 ev.index, module)
        return changed

    @staticmethod
    def _collect(inst: Pass, ev: PassEvent) -> None:
        got = getattr(inst, "remarks", None)
        if isinstance(got, RemarkLog):
            ev.remarks = got.take()  # packed: remarks are ~14% of a big run's memory
        elif got is not None:
            ev.remarks = RemarkLog(got).take()
            got.clear()
        recs = getattr(inst, "records", None)
        if recs:
            ev.records = list(recs)
            recs.clear()


def run_pipeline(module: Module, spec: PipelineSpec,
                 options: RunOptions | None = None) -> PipelineResult:
    """Run ``spec`` on ``module`` (in place); see the module docstring."""
    return PipelineRunner(spec, options).run(module)


__all__ = ["Listener", "PassEvent", "PassFailureRecord", "PipelineEvent", "PipelineResult",
           "PipelineRunner", "RunOptions", "Violation", "run_pipeline"]
