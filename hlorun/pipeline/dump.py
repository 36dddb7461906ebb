"""``--dump-to DIR``: dump files named exactly as XLA names them
(xla/service/dump.cc, hlo_pass_pipeline.cc).

* ``module_NNNN.NAME.before_optimizations.txt`` at the start;
* ``module_NNNN.NAME.SSSS.<pipeline>.after_pipeline-start.before_<first>.txt``
  when a (sub-)pipeline starts (each iteration of a fixed-point one);
* ``module_NNNN.NAME.SSSS.<pipeline>.after_<pass>.before_<next>.txt`` after a
  pass (or a nested pipeline) that changed the module; with a pass regex
  (XLA's ``--xla_dump_hlo_pass_re`` other than ``.*``) after every pass
  whose name or next pass's name matches, changed or not;
* ``module_NNNN.NAME.<sm_CC|gfxNNN>_gpu_after_optimizations.txt`` (or
  ``cpu_after_optimizations``) at the end;
* ``module_NNNN.NAME.metadata.json``: hlorun's pass timeline with the dump
  file of each step (XLA writes a metadata.textproto; this is its JSON
  counterpart).

``NNNN`` is the module id (taken from an input named like an XLA dump,
else 0), ``SSSS`` the dump step counter of the module.  Names are passed
through XLA's SanitizeFileName (``/ \\ [ ] space`` become ``_``) and the
module name is dropped when a name would exceed 255 characters.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from ..text.fileio import write_atomic
from ..ir.module import Module
from .run import Listener, PassEvent, PipelineEvent, PipelineResult
from .snapshots import SnapshotCache

_SANITIZE = re.compile(r"[/\\\[\] ]")
_XLA_NAME = re.compile(r"module_(\d+)\.")


def sanitize_file_name(name: str) -> str:
    return _SANITIZE.sub("_", name)


def filename_for(unique_id: int, module_name: str, suffix: str, prefix: str = "") -> str:
    """XLA's FilenameFor (OSS build: no changelist)."""
    name = (prefix + "." if prefix else "") + f"module_{unique_id:04d}"
    if module_name:
        name += "." + module_name
    name += "." + suffix
    if module_name and len(name) > 255:
        return filename_for(unique_id, "", suffix, prefix)
    return name


def after_optimizations_suffix(platform: str, compute_capability: str) -> str:
    """``sm_9.0_gpu_after_optimizations`` (CUDA), ``gfx942_gpu_...`` (ROCm)."""
    if platform == "cuda":
        return f"sm_{compute_capability}_gpu_after_optimizations"
    if platform == "rocm":
        return f"{compute_capability}_gpu_after_optimizations"
    if platform == "cpu":
        return "cpu_after_optimizations"
    return f"{platform}_gpu_after_optimizations"


def module_id_from_path(path: str | None) -> int:
    m = _XLA_NAME.match(os.path.basename(path or ""))
    return int(m.group(1)) if m else 0


class DumpListener(Listener):
    def __init__(self, directory: str, pass_re: str | None = None, module_id: int | None = None,
                 input_path: str | None = None, cache: SnapshotCache | None = None):
        self.dir = Path(directory)
        self.pass_re = re.compile(pass_re) if pass_re else None
        self.dump_all_changed_only = pass_re is None or pass_re == ".*"
        self.module_id = module_id
        self.input_path = input_path
        self.step = 0
        self.count = 0
        self.files: list[str] = []
        self._timeline: list[dict] = []
        self._module_name = "module"
        self._target = None
        self.cache = cache or SnapshotCache()
        self._run = None

    # -- helpers ---------------------------------------------------------------------
    def _should_dump_pass(self, name: str) -> bool:
        return self.pass_re is None or bool(self.pass_re.search(name))

    def _write(self, module: Module, suffix: str, text: str | None = None) -> str:
        name = sanitize_file_name(filename_for(self.module_id or 0, self._module_name, suffix))
        if text is None:
            text = self.cache.module_text(module, getattr(self._run, "state", None))
        write_atomic(self.dir / name, text)
        self.count += 1
        self.files.append(name)
        return name

    def _between(self, module: Module, pipeline: str, after: str, before: str) -> str | None:
        if not (self._should_dump_pass(before) or self._should_dump_pass(after)):
            return None
        name = self._write(module, f"{self.step:04d}.{pipeline}.after_{after}.before_{before}.txt")
        self.step += 1
        return name

    # -- events --------------------------------------------------------------------------
    def on_run_start(self, run, module: Module) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self._run = run
        self.cache.attach(run)
        self._module_name = module.name
        self._target = run.target
        if self.module_id is None:
            self.module_id = module_id_from_path(self.input_path or module.filename)
        self._write(module, "before_optimizations.txt")

    def on_pipeline_start(self, ev: PipelineEvent, module: Module) -> None:
        f = self._between(module, ev.name, "pipeline-start", ev.first_name)
        self._timeline.append({"pipeline": ev.name, "path": ev.path, "event": "pipeline-start",
                               "iteration": ev.iteration, "dump": f})

    def _after(self, ev: PassEvent, module: Module) -> str | None:
        if self.dump_all_changed_only and not ev.changed:
            return None
        if not self.dump_all_changed_only and not (
                self._should_dump_pass(ev.name) or self._should_dump_pass(ev.next_name)):
            return None
        return self._between(module, ev.pipeline, ev.name, ev.next_name)

    def on_after_pass(self, ev: PassEvent, module: Module) -> None:
        f = self._after(ev, module)
        self._timeline.append(dict(ev.to_json(), event="pass", dump=f))

    def on_pipeline_end(self, ev: PassEvent, module: Module) -> None:
        f = self._after(ev, module)
        self._timeline.append({"pipeline": ev.pipeline, "path": ev.path, "event": "pipeline",
                               "name": ev.name, "changed": ev.changed, "dump": f})

    def on_run_end(self, result: PipelineResult, module: Module) -> None:
        final = None
        if result.exit_code == 0 or result.stopped_by_limit:
            t = self._target or result.target
            final = self._write(module, after_optimizations_suffix(t.platform, t.compute_capability)
                                + ".txt")
        meta = {"module": self._module_name, "module_id": self.module_id,
                "pipeline": result.spec.name, "status": result.status,
                "before_optimizations": self.files[0] if self.files else None,
                "after_optimizations": final, "steps": self._timeline,
                "violations": [v.to_json() for v in result.violations],
                "failure": result.failure.to_json() if result.failure else None}
        name = sanitize_file_name(filename_for(self.module_id or 0, self._module_name, "metadata.json"))
        write_atomic(self.dir / name, json.dumps(meta, indent=1) + "\n")
        self.count += 1
        self.files.append(name)
