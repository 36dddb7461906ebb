"""The one place where a sweep task calls the compiler library
(:func:`hlorun.compile` and :class:`hlorun.result.CompileResult`).

A task needs: read a module file, parse it, run a pipeline on it (with
``--disable-passes`` / ``--enable-passes-only``), and from the result its
status, violations, pass failure, final kernels and autotuning records;
with ``--against``, the first diverging pass and the final-kernel diff of
two pipelines (``hlorun diff-pipelines``' library code).  Everything else
in :mod:`hlorun.sweep` only sees the plain values returned here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

_SPECS: dict[str | None, Any] = {}


def read_module_text(path: str) -> str:
    """The text of a module file (gzip / xz decompressed)."""
    from ..text.fileio import read_text
    return read_text(path)


def load_spec(pipeline: str | None):
    """The pipeline (bundled name or YAML path), loaded once per process."""
    spec = _SPECS.get(pipeline)
    if spec is None:
        from ..api import resolve_spec
        from ..options import CompileOptions
        spec = _SPECS[pipeline] = resolve_spec(pipeline, CompileOptions())
    return spec


def parse(text: str, path: str):
    from ..text.parser import parse_module
    return parse_module(text, path)


@dataclass
class Compiled:
    """What a sweep records about one compile."""

    module_name: str
    status: str  # ok | violation | pass-failure
    exit_code: int
    instructions: tuple[int, int]
    passes_run: int
    violations: list[dict[str, Any]]
    failure: dict[str, Any] | None
    failure_traceback: str
    kernel_categories: list[str]
    autotune: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)


def _compiled(result) -> Compiled:
    """From a :class:`hlorun.result.CompileResult`."""
    failure = result.failures[0] if result.failures else None
    kernels = [k.kernel.category for k in result.kernels] if failure is None else []
    return Compiled(
        module_name=result.module.name, status=result.status, exit_code=result.exit_code,
        instructions=(result.run.instructions_before, result.module.instruction_count),
        passes_run=len(result.passes),
        violations=[v.to_json() for v in result.violations],
        failure=failure.to_json() if failure else None,
        failure_traceback=failure.traceback if failure else "",
        kernel_categories=kernels, autotune=[d.record for d in result.autotune],
        notes=list(result.notes))


def compile_module(module, pipeline: str | None, disable: tuple[str, ...],
                   enable_only: tuple[str, ...]) -> Compiled:
    """Run ``pipeline`` on ``module`` (in place), stopping at the first
    violation or pass failure like ``hlorun compile``; no lineage (the
    kernels are counted, not explained)."""
    import hlorun
    result = hlorun.compile(module, load_spec(pipeline), copy=False, lineage=False,
                            disable_passes=list(disable), enable_passes_only=list(enable_only))
    return _compiled(result)


def _config(path: str, pipeline: str | None, disable: tuple[str, ...],
            enable_only: tuple[str, ...]):
    from ..reduce.compile_config import CompileConfig
    cfg = CompileConfig.for_file(path, pipeline=pipeline, disable_passes=list(disable),
                                 enable_passes_only=list(enable_only))
    cfg.set_spec(load_spec(pipeline))
    return cfg


def compare_pipelines(text: str, path: str, pipeline: str | None, against: str,
                      disable: tuple[str, ...], enable_only: tuple[str, ...]
                      ) -> tuple[Compiled, dict[str, Any]]:
    """Run ``against`` (side a, the reference) and ``pipeline`` (side b,
    the version under test) on the module, both to the end and watched by
    lineage trackers: ``pipeline``'s outcome, and as JSON the first
    diverging step (``hlorun bisect --between``) with the final kernel diff
    (``hlorun diff-pipelines --a AGAINST --b PIPELINE``)."""
    from ..analysis.kernel_diff import compare_kernels
    from ..analysis.lineage import LineageTracker
    from ..reduce.bisect import first_difference
    from ..result import CompileResult
    cfg_a = _config(path, against, disable, enable_only)
    cfg_b = _config(path, pipeline, disable, enable_only)
    tracker_a, tracker_b = LineageTracker(), LineageTracker()
    d = first_difference(text, path, cfg_a, cfg_b, [tracker_a], [tracker_b])
    kd = compare_kernels(d.module_a, tracker_a, d.module_b, tracker_b)
    doc = d.to_json()
    doc.pop("diff", None)
    kdoc = kd.to_json()
    for side in ("kernels_a", "kernels_b"):  # the counts per category say it
        kdoc.pop(side, None)
    for side in ("only_a", "only_b"):  # the kernels, without their stories
        kdoc[side] = [{k: e.get(k) for k in ("name", "category", "shape", "hero")}
                      for e in kdoc[side]]
    doc["kernels"] = kdoc
    result_b = CompileResult(module=d.module_b, run=d.result_b, options=cfg_b.options,
                             input_name=path, lineage=tracker_b)
    return _compiled(result_b), doc


#: helpers that raise on a pass's behalf (``Pass.fail``): the frame that
#: called them says where the failure is
_RAISERS = ("hlorun/passes/base.py", "hlorun/errors.py")


def relative_frame(tb: str) -> str | None:
    """The innermost frame of a formatted traceback, as
    ``hlorun/passes/x.py:12 in f`` (paths below the package root relative
    to it, others by file name; raising helpers such as ``Pass.fail``
    skipped), or None."""
    import re
    frames = []
    for file, line, func in re.findall(r'File "([^"]+)", line (\d+), in (\S+)', tb or ""):
        norm = file.replace(os.sep, "/")
        k = norm.rfind("/hlorun/")
        frames.append((norm[k + 1:] if k >= 0 else os.path.basename(norm), line, func))
    if not frames:
        return None
    inner = [f for f in frames if f[0] not in _RAISERS] or frames
    short, line, func = inner[-1]
    return f"{short}:{line} in {func}"


__all__ = ["Compiled", "compare_pipelines", "compile_module", "load_spec", "parse",
           "read_module_text", "relative_frame"]
