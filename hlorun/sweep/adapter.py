"""The one place where a sweep task calls the compiler library.

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

from ..source import UsageError

_SPECS: dict[str | None, Any] = {}


def read_module_text(path: str) -> str:
    """The text of a module file (.gz / .xz decompressed)."""
    if path.endswith(".xz"):
        import lzma
        try:
            with lzma.open(path, "rt", encoding="utf-8") as f:
                return f.read()
        except FileNotFoundError:
            raise UsageError(f"{path}: no such file") from None
        except (OSError, lzma.LZMAError, UnicodeDecodeError, EOFError) as e:
            raise UsageError(f"{path}: cannot read: {e}") from None
    from ..fileio import read_text
    return read_text(path)


def load_spec(pipeline: str | None):
    """The pipeline (bundled name or YAML path), loaded once per process."""
    spec = _SPECS.get(pipeline)
    if spec is None:
        from ..pipeline_spec import load_pipeline
        spec = _SPECS[pipeline] = load_pipeline(pipeline)
    return spec


def parse(text: str, path: str):
    from ..parser import parse_module
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
    kernels: list[Any]  # hlorun.kernels.Kernel
    autotune: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)


def _compiled(module, result) -> Compiled:
    from ..kernels import kernel_list
    kernels = kernel_list(module) if result.failure is None else []
    return Compiled(
        module_name=module.name, status=result.status, exit_code=result.exit_code,
        instructions=(result.instructions_before, module.instruction_count),
        passes_run=len(result.events),
        violations=[v.to_json() for v in result.violations],
        failure=result.failure.to_json() if result.failure else None,
        failure_traceback=result.failure.traceback if result.failure else "",
        kernels=kernels, autotune=result.records("autotune"), notes=list(result.notes))


def compile_module(module, pipeline: str | None, disable: tuple[str, ...],
                   enable_only: tuple[str, ...]) -> Compiled:
    """Run ``pipeline`` on ``module`` (in place), stopping at the first
    violation or pass failure like ``hlorun compile``."""
    from ..pipeline import RunOptions, run_pipeline
    options = RunOptions(disable=list(disable), enable_only=list(enable_only))
    result = run_pipeline(module, load_spec(pipeline), options)
    return _compiled(module, result)


def _config(path: str, pipeline: str | None, disable: tuple[str, ...],
            enable_only: tuple[str, ...]):
    from ..compile_session import CompileSession
    from ..reduce.compile_config import CompileConfig
    session = CompileSession(file=path, pipeline=pipeline, disable=list(disable),
                             enable_only=list(enable_only))
    argv = [path] + (["--pipeline", pipeline] if pipeline else [])
    for d in disable:
        argv += ["--disable-passes", d]
    for e in enable_only:
        argv += ["--enable-passes-only", e]
    cfg = CompileConfig(session=session, argv=argv)
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
    from ..kernel_diff import compare_kernels
    from ..lineage import LineageTracker
    from ..reduce.bisect import first_difference
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
    return _compiled(d.module_b, d.result_b), doc


#: helpers that raise on a pass's behalf (``Pass.fail``): the frame that
#: called them says where the failure is
_RAISERS = ("hlorun/passes/base.py", "hlorun/source.py")


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
