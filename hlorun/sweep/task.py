"""One sweep task: a module file in, one plain JSON record out.

:class:`SweepOptions` says what every task does (check, or compile with a
pipeline, maybe against a second one); :func:`execute` runs one module in
the current process and never raises for anything the module or a pass
does.  It runs inside a task process (:mod:`hlorun.sweep.child`), which
adds the time and peak memory; the worker side (:mod:`hlorun.sweep.isolate`)
adds ``timeout`` and ``crashed`` records when that process has to be
killed or dies.

Statuses: ``ok``, ``violation`` (a checker finding; for ``check`` a
verifier finding), ``pass-failure`` (a pass raised), ``bad-input`` (the
file cannot be read or parsed), ``timeout``, ``crashed`` (the task process
died, went over its memory limit, or hlorun itself raised outside a pass).
"""

from __future__ import annotations

import traceback
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

STATUSES = ("ok", "violation", "pass-failure", "bad-input", "timeout", "crashed")
EXIT_CODES = {"ok": 0, "bad-input": 1, "violation": 2, "pass-failure": 2}
#: record format (bump on incompatible changes)
RECORD_SCHEMA = "hlorun.sweep/1"


@dataclass(frozen=True)
class SweepOptions:
    mode: str = "compile"  # "compile" | "check"
    pipeline: str | None = None  # bundled name or absolute YAML path
    against: str | None = None
    disable: tuple[str, ...] = ()
    enable_only: tuple[str, ...] = ()
    #: Python modules each task process imports first (custom passes)
    plugins: tuple[str, ...] = ()
    #: items are ``FILE:LINE`` labels of ``// -----`` separated modules
    split_input_file: bool = False

    def to_json(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> "SweepOptions":
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in doc.items()})

    def identity(self) -> dict[str, Any]:
        """What must match for a results file to be resumed."""
        return {k: v for k, v in self.to_json().items() if k != "plugins"}


def _short_error(text: str, limit: int = 2000) -> str:
    return text if len(text) <= limit else text[:limit] + " ..."


def summarize_autotune(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The autotuner's decisions in a few numbers: GEMMs tuned, winners by
    backend and by configuration, candidates rejected, the closest call."""
    if not records:
        return None
    backends: Counter = Counter()
    configs: Counter = Counter()
    rejected = 0
    closest = None
    for r in records:
        w = r.get("winner") or {}
        backends[w.get("backend") or "none"] += 1
        configs[w.get("label") or "none"] += 1
        rejected += len(r.get("rejected") or ())
        m = r.get("margin")
        if m is not None and (closest is None or m < closest[0]):
            closest = (m, r.get("instruction"))
    return {"gemms": len(records), "backends": dict(sorted(backends.items())),
            "configs": dict(configs.most_common()), "rejected": rejected,
            "closest": None if closest is None else {"margin": closest[0],
                                                      "instruction": closest[1]}}


def _compiled_fields(c) -> dict[str, Any]:
    from .adapter import relative_frame
    failure = None
    if c.failure:
        failure = dict(c.failure)
        failure["top_frame"] = relative_frame(c.failure_traceback)
    return {"status": c.status, "exit_code": c.exit_code, "module": c.module_name,
            "instructions": list(c.instructions), "passes_run": c.passes_run,
            "violations": c.violations, "failure": failure,
            "kernels": dict(sorted(Counter(c.kernel_categories).items())),
            "autotune": summarize_autotune(c.autotune)}


def _check(module, text: str) -> dict[str, Any]:
    """``hlorun check``: the hlo-verifier's findings (``diagnostics`` as
    ``check --format json`` gives them, each also rendered)."""
    from ..verifier.checkers import verify
    diags = verify(module)
    return {"status": "violation" if diags else "ok", "exit_code": 2 if diags else 0,
            "module": module.name, "instructions": [module.instruction_count] * 2,
            "violations": [{"rule": d.rule, "message": d.message, "instruction": d.instruction,
                            "computation": d.computation, "after_pass": "pipeline-start",
                            "pass_index": 0} for d in diags],
            "diagnostics": [dict(d.to_json(), rendered=d.render(text)) for d in diags]}


def prepare(opts: SweepOptions) -> None:
    """Load what every task of ``opts`` needs (the pipelines, the parser),
    so that a module's time is its own, not the first task's imports.
    Errors are left for :func:`execute` to report."""
    from . import adapter
    try:
        adapter.parse("HloModule warm_up\nENTRY e { ROOT c = f32[] constant(0) }\n", "<warm-up>")
        if opts.mode == "compile":
            adapter.load_spec(opts.pipeline)
            if opts.against:
                adapter.load_spec(opts.against)
    except Exception:
        pass


def _chunk(label: str) -> tuple[str, str]:
    """The text of the module at ``FILE:LINE`` (line numbers kept, as
    ``hlorun check --split-input-file`` parses it) and FILE."""
    from ..text.parser import split_input_file
    from ..errors import UsageError
    from . import adapter
    from .inputs import chunk_of
    try:
        path, line = chunk_of(label)
    except ValueError as e:
        raise UsageError(str(e)) from None
    for start, chunk in split_input_file(adapter.read_module_text(path)):
        if start == line:
            return "\n" * (line - 1) + chunk, path
    raise UsageError(f"{path}: no module starts at line {line}")


def execute(opts: SweepOptions, path: str) -> dict[str, Any]:
    """The record of one module (without time and memory)."""
    from ..errors import HloError
    from . import adapter
    rec: dict[str, Any] = {"path": path}
    try:
        if opts.split_input_file:
            text, path = _chunk(path)
        else:
            text = adapter.read_module_text(path)
        module = adapter.parse(text, path)
    except HloError as e:
        rec.update(status="bad-input", exit_code=e.exit_code, error=_short_error(e.render()))
        if getattr(e, "line", None):
            rec.update(line=e.line, column=e.column)
        return rec
    except RecursionError as e:
        rec.update(status="bad-input", exit_code=1, error=f"{path}: too deeply nested: {e}")
        return rec
    try:
        if opts.mode == "check":
            rec.update(_check(module, text))
        elif opts.against:
            compiled, divergence = adapter.compare_pipelines(
                text, path, opts.pipeline, opts.against, opts.disable, opts.enable_only)
            rec.update(_compiled_fields(compiled))
            rec["against"] = divergence
        else:
            rec.update(_compiled_fields(adapter.compile_module(
                module, opts.pipeline, opts.disable, opts.enable_only)))
    except HloError as e:  # a pipeline that cannot be loaded, a bad option
        rec.update(status="bad-input", exit_code=e.exit_code, error=_short_error(e.render()))
    except Exception as e:  # hlorun itself failed outside a pass: a bug, kept as a crash
        tb = traceback.format_exc()
        rec.update(status="crashed", exit_code=None,
                   error=_short_error(f"{type(e).__name__}: {e}"),
                   failure={"exception": type(e).__name__, "message": _short_error(str(e), 500),
                            "top_frame": adapter.relative_frame(tb), "pass": None})
    return rec


__all__ = ["EXIT_CODES", "RECORD_SCHEMA", "STATUSES", "SweepOptions", "execute", "prepare",
           "summarize_autotune"]
