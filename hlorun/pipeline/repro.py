"""``--repro-dir DIR``: a reproducer bundle for the first violation or pass
failure.

The bundle holds ``before.hlo`` (the module as it was right before the
pass that failed, or after which the violation first appeared),
``repro.yaml`` (a pipeline with that one pass, inside a sub-pipeline of the
same name so ``pipeline/name`` patterns still apply, with the same target,
sections and checkers, the finding's checker included), ``command.txt``
(the original command line) and a README.  ``hlorun compile
DIR/before.hlo --pipeline DIR/repro.yaml`` then stops with the same
violation or failure.

Snapshots are the full print of the module, taken before a pass only when
the module changed since the last one (so unchanged passes cost nothing).
Findings of ``check:`` steps point at an earlier pass; when the pipeline
has such steps the snapshots of all changed passes are kept.
"""

from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..text.fileio import write_atomic
from ..ir.module import Module
from .run import Listener, PassEvent, PassFailureRecord, PipelineRunner, Violation
from .spec import CheckerSpec, CheckStep, PassStep, PipelineSpec, PipelineStep
from ..text.printer import print_module


class ReproListener(Listener):
    def __init__(self, directory: str, command: str | None = None):
        self.dir = Path(directory)
        #: the original command line (recorded in command.txt)
        self.command = command
        self.bundle: dict[str, Any] | None = None
        self._text: str | None = None
        self._dirty = True
        self._keep_history = False
        self._history: dict[int, str] = {}
        self._events: dict[int, PassEvent] = {}
        self._run: PipelineRunner | None = None

    def on_run_start(self, run: PipelineRunner, module: Module) -> None:
        self._run = run
        self._keep_history = any(isinstance(s, CheckStep) for _, s in run.spec.walk())
        self._text = print_module(module)
        self._dirty = False
        self._history[0] = self._text

    def on_before_pass(self, ev: PassEvent, module: Module) -> None:
        if self._dirty:
            self._text = print_module(module)
            self._dirty = False
        self._events[ev.index] = ev
        if self._keep_history:
            self._history[ev.index] = self._text  # type: ignore[assignment]

    def on_after_pass(self, ev: PassEvent, module: Module) -> None:
        if ev.changed:
            self._dirty = True

    def on_pass_failure(self, f: PassFailureRecord, module: Module) -> None:
        self._dirty = True
        if self.bundle is None:
            self._write(f.index, "pass failure", f"pass {f.path} (#{f.index}) failed: {f.message}"
                        + (f" [instruction {f.instruction}]" if f.instruction else ""), None)

    def on_violation(self, v: Violation, module: Module) -> None:
        if self.bundle is not None:
            return
        desc = (f"[{v.rule}] after #{v.pass_index} {v.after_pass}: {v.message}"
                + (f" [instruction {v.instruction}]" if v.instruction else ""))
        self._write(v.pass_index, "violation", desc, v)

    # -- the bundle ------------------------------------------------------------------
    def _spec_for(self, index: int, v: Violation | None) -> PipelineSpec:
        run = self._run
        assert run is not None
        spec = run.spec
        ev = self._events.get(index)
        checkers = list(spec.checkers)
        if v is not None and v.rule not in {c.name for c in checkers}:
            from ..verifier.checkers import CHECKERS
            extra = [s.checker for _, s in spec.walk()
                     if isinstance(s, (CheckStep,)) and s.checker.name == v.rule]
            extra += [c for _, s in spec.walk() if isinstance(s, PipelineStep)
                      for c in s.checkers if c.name == v.rule]
            if extra:
                checkers.append(extra[0])
            elif v.rule in CHECKERS:
                checkers.append(CheckerSpec(v.rule))
        steps: list = []
        if ev is not None and isinstance(ev.step, PassStep):
            step = replace(ev.step)
            scoped = [c for _, s in spec.walk() if isinstance(s, PipelineStep)
                      and s.name in ev.path.split("/")[:-1] for c in s.checkers
                      if c.name not in {x.name for x in checkers}]
            steps = [PipelineStep(ev.pipeline, [step], checkers=scoped)]
        return PipelineSpec(name=f"repro-{spec.name}", steps=steps, checkers=checkers,
                            target=run.target, sections=dict(spec.sections),
                            description=f"reproducer from {spec.name}")

    def _write(self, index: int, kind: str, desc: str, v: Violation | None) -> None:
        text = self._history.get(index) if self._keep_history else None
        if text is None:
            text = self._text
        if v is not None and index == 0:
            text = self._history.get(0, text)
        spec = self._spec_for(index, v)
        self.dir.mkdir(parents=True, exist_ok=True)
        before = self.dir / "before.hlo"
        pipe = self.dir / "repro.yaml"
        write_atomic(before, text or "")
        write_atomic(pipe, "# hlorun reproducer pipeline (generated)\n" + spec.dump_yaml())
        original = self.command or "hlorun compile ..."
        write_atomic(self.dir / "command.txt", original + "\n")
        command = (f"hlorun compile {shlex.quote(str(before))} --pipeline {shlex.quote(str(pipe))} "
                   f"--diff none")
        readme = (f"# hlorun reproducer\n\n{kind}: {desc}\n\n"
                  f"* `before.hlo`: the module right before that pass ran\n"
                  f"* `repro.yaml`: a pipeline that runs just that pass with the same checkers, "
                  f"target and sections\n"
                  f"* `command.txt`: the original command line\n\n"
                  f"Re-run (exits 2 with the same {kind}):\n\n    {command}\n\n"
                  f"Original command:\n\n    {original}\n")
        write_atomic(self.dir / "README.md", readme)
        self.bundle = {"dir": str(self.dir), "kind": kind, "description": desc,
                       "module": str(before), "pipeline": str(pipe), "command": command,
                       "original_command": original}
