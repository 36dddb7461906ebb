"""A whole sweep: modules in, a results file and a summary out.

:func:`run_sweep` opens (or resumes) the results file, sends the modules it
does not hold yet to the engine, appends each record as it arrives, and
returns the :class:`~hlorun.sweep.summary.Summary` of every record of the
modules asked for.  Ctrl-C stops it cleanly: the file keeps every record
written so far and the summary says ``interrupted``.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

from .engine import Engine, Limits, crash_record
from .inputs import module_key
from .isolate import run_task
from .results import ResultsFile
from .summary import Summary
from .task import SweepOptions


@dataclass
class SweepRun:
    summary: Summary
    interrupted: bool = False
    engine: str = ""
    records: list[dict[str, Any]] = field(default_factory=list)


def stream(engine: Engine, files: Sequence[str], options: SweepOptions, limits: Limits
           ) -> Iterator[dict[str, Any]]:
    """The record of each module, in completion order."""
    for path, out in engine.map_unordered(run_task, files,
                                          args=(options.to_json(), limits.time, limits.memory)):
        yield out if isinstance(out, dict) else crash_record(path, out)


def run_sweep(files: Sequence[str], options: SweepOptions, output: str, *,
              workers: int | None = None, scheduler: str | None = None,
              limits: Limits | None = None, restart: bool = False,
              retry: Sequence[str] = (), progress: Any = None,
              engine_factory: Callable[..., Engine] = Engine) -> SweepRun:
    limits = limits or Limits()
    results = ResultsFile(output, options.identity())
    previous = results.open(restart=restart)
    keys = [module_key(f) for f in files]
    done: dict[str, dict[str, Any]] = {}
    todo: list[str] = []
    for f, k in zip(files, keys):
        rec = previous.get(k)
        if rec is not None and rec.get("status") not in retry:
            done[k] = rec
        else:
            todo.append(f)
    interrupted = False
    engine = None
    t0 = time.perf_counter()
    t_ready = None
    ran = 0
    try:
        if todo:
            engine = engine_factory(workers=workers, scheduler=scheduler)
            if scheduler:
                engine.wait_for_workers(1)
            where = engine.describe()
            t_ready = time.perf_counter()
        else:
            where = "no workers (nothing left to run)"
        if progress is not None:
            progress.start(len(files), Counter(r.get("status") for r in done.values()), where)
        if todo:
            assert engine is not None
            for rec in stream(engine, todo, options, limits):
                results.append(rec)
                done[module_key(rec["path"])] = rec
                ran += 1
                if progress is not None:
                    progress.advance(rec)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        results.close()
        if progress is not None:
            progress.close()
        if engine is not None:
            engine.close()
    end = time.perf_counter()
    records = [done[k] for k in dict.fromkeys(keys) if k in done]
    summary = Summary(options, records, end - t0 if ran else None, ran,
                      startup_seconds=(t_ready - t0) if (ran and t_ready) else None)
    return SweepRun(summary, interrupted, records=records)


__all__ = ["SweepRun", "run_sweep", "stream"]
