"""A whole sweep: modules in, a results file and a summary out.

:func:`run_sweep` opens (or resumes) the results file, sends the modules it
does not hold yet to the engine, appends each record as it arrives, and
returns the :class:`~hlorun.sweep.summary.Summary` of every record of the
modules asked for.  Ctrl-C stops it cleanly: the file keeps every record
written so far and the summary says ``interrupted``.
"""

from __future__ import annotations

import os
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

from .engine import Engine, Limits, crash_record
from .inputs import module_key
from .isolate import run_batch
from .results import ResultsFile
from .summary import Summary
from .task import STATUSES, SweepOptions


@dataclass
class SweepRun:
    summary: Summary
    interrupted: bool = False
    engine: str = ""
    records: list[dict[str, Any]] = field(default_factory=list)


#: A Dask task takes a few small modules (about this many bytes of HLO, at
#: most BATCH_MAX of them): a module of the corpus checks in ~10 ms, about
#: the cost of one round trip through the scheduler.
BATCH_BYTES = 256 * 1024
BATCH_MAX = 32


def _weight(path: str) -> int:
    try:
        return os.path.getsize(path) * (8 if path.endswith((".gz", ".xz")) else 1)
    except OSError:  # a FILE:LINE chunk, or not visible here (a remote cluster's path)
        return 0


def batches(files: Sequence[str], threads: int) -> list[tuple[str, ...]]:
    """The files as Dask tasks: largest first (so that the big modules do
    not start last and leave the other workers idle at the end), small ones
    grouped (up to BATCH_BYTES and BATCH_MAX modules per task, and never
    fewer than about four tasks per worker thread)."""
    cap = max(1, min(BATCH_MAX, len(files) // max(1, 4 * threads)))
    weighted = sorted(((_weight(f), i, f) for i, f in enumerate(files)), key=lambda t: (-t[0], t[1]))
    out: list[tuple[str, ...]] = []
    cur: list[str] = []
    total = 0
    for size, _, f in weighted:
        if cur and (len(cur) >= cap or total + size > BATCH_BYTES):
            out.append(tuple(cur))
            cur, total = [], 0
        cur.append(f)
        total += size
    if cur:
        out.append(tuple(cur))
    return out


def stream(engine: Engine, files: Sequence[str], options: SweepOptions, limits: Limits,
           stats: dict[str, int] | None = None) -> Iterator[dict[str, Any]]:
    """The record of each module, in completion order.  A batch whose
    worker died is split and its modules run again one per task, so that
    only the module that kills its worker is reported ``crashed``."""
    queue: deque[tuple[str, ...]] = deque(batches(files, engine.threads()))
    args = (options.to_json(), limits.time, limits.memory)
    for batch, out in engine.map_unordered(run_batch, queue, args=args):
        if stats is not None:
            stats["tasks"] = stats.get("tasks", 0) + 1
        if isinstance(out, BaseException):
            if len(batch) > 1:
                queue.extend((p,) for p in batch)
                continue
            yield crash_record(batch[0], out)
            continue
        if not isinstance(out, list) or len(out) != len(batch):
            out = [RuntimeError(f"the worker answered {str(out)[:200]!r}")] * len(batch)
        for path, rec in zip(batch, out):
            if not isinstance(rec, dict) or rec.get("status") not in STATUSES:
                yield crash_record(path, RuntimeError(f"the worker answered {str(rec)[:200]!r}"))
            else:
                rec["path"] = path
                yield rec


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
    cpu0 = time.process_time()
    t_ready = None
    ran = 0
    stats: dict[str, int] = {}
    try:
        if todo:
            engine = engine_factory(workers=workers, scheduler=scheduler)
            if scheduler:
                engine.wait_for_workers(1)
                engine.check_workers()
            where = engine.describe()
            t_ready = time.perf_counter()
        else:
            where = "no workers (nothing left to run)"
        if progress is not None:
            progress.start(len(files), Counter(r.get("status") for r in done.values()), where)
        if todo:
            assert engine is not None
            for rec in stream(engine, todo, options, limits, stats):
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
                      startup_seconds=(t_ready - t0) if (ran and t_ready) else None,
                      tasks=stats.get("tasks", 0),
                      client_cpu_seconds=time.process_time() - cpu0 if ran else None)
    return SweepRun(summary, interrupted, records=records)


def run_unordered(files: Sequence[str], options: SweepOptions, *, workers: int | None = None,
                  scheduler: str | None = None, limits: Limits | None = None,
                  progress: Any = None) -> Iterator[dict[str, Any]]:
    """The records of ``files`` in completion order, with no results file
    (``hlorun check -j N``); Ctrl-C propagates after the cluster is closed."""
    limits = limits or Limits()
    engine = Engine(workers=workers, scheduler=scheduler)
    try:
        if scheduler:
            engine.wait_for_workers(1)
            engine.check_workers()
        if progress is not None:
            progress.start(len(files), Counter(), engine.describe())
        for rec in stream(engine, files, options, limits):
            if progress is not None:
                progress.advance(rec)
            yield rec
    finally:
        if progress is not None:
            progress.close()
        engine.close()


__all__ = ["SweepRun", "run_sweep", "run_unordered", "stream"]
