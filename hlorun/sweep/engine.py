"""Run many tasks on Dask distributed and hand back their records as they
finish.

* ``workers=N`` (default): a :class:`distributed.LocalCluster` of N worker
  processes with one thread each, on this machine (127.0.0.1, no
  dashboard).  Its scheduler (:data:`LOCAL_CONFIG`) gives each worker one
  task at a time and gives up on a task whose worker died while running
  it (``allowed-failures: 0``): that task alone is reported ``crashed``,
  the nanny restarts the worker, the sweep goes on.
* ``scheduler="tcp://host:8786"``: an existing cluster (``dask scheduler``
  and ``dask worker`` processes, dask-jobqueue, dask-kubernetes ...); the
  workers need hlorun installed and the module files at the same paths.

Tasks are submitted in a moving window (a few per worker thread), so the
scheduler never holds more than that many futures however large the
sweep, and Ctrl-C stops promptly: the pending window is cancelled and
the records already handed back stay.  Each task runs
:func:`hlorun.sweep.isolate.run_task` (time and memory limits).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from collections import deque
from typing import Any, Callable, Iterator

from ..errors import UsageError

INSTALL_HINT = ("parallel runs (hlorun sweep, check -j) need Dask distributed: "
                "pip install 'hlorun[sweep]' (or pip install 'dask[distributed]')")


def import_distributed():
    try:
        import distributed
    except ImportError:
        raise UsageError(INSTALL_HINT) from None
    return distributed


#: The local cluster's scheduler: one task per worker thread at a time
#: (nothing waits on a worker, so a worker that dies takes only the task it
#: was running), and a task whose worker died is failed at once rather
#: than retried on the next worker (``crashed``).
LOCAL_CONFIG = {"distributed.scheduler.worker-saturation": 1.0,
                "distributed.scheduler.allowed-failures": 0}


@dataclass
class Limits:
    time: float | None = 600.0  # seconds per task
    memory: float | None = None  # MiB per task process


class Engine:
    """A Dask client (and the LocalCluster it owns, if any)."""

    def __init__(self, workers: int | None = None, scheduler: str | None = None,
                 connect_timeout: float = 30.0):
        distributed = import_distributed()
        import dask
        self.cluster = None
        if scheduler:
            try:
                self.client = distributed.Client(scheduler, timeout=connect_timeout)
            except (OSError, TimeoutError) as e:
                raise UsageError(f"--scheduler {scheduler}: cannot connect: {e}") from None
        else:
            n = workers or 1
            import warnings
            with dask.config.set(LOCAL_CONFIG), warnings.catch_warnings():
                # the scheduler's HTTP port falls back to a free one; say nothing
                warnings.filterwarnings("ignore", message=r"Port \d+ is already in use")
                self.cluster = distributed.LocalCluster(
                    n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1",
                    dashboard_address=None, silence_logs=logging.CRITICAL)
            self.client = distributed.Client(self.cluster)

    # -- facts -------------------------------------------------------------------------
    def threads(self) -> int:
        return sum(self.client.nthreads().values())

    def describe(self) -> str:
        info = self.client.scheduler_info()
        w = info.get("workers", {})
        where = "local cluster" if self.cluster is not None else f"scheduler {info.get('address')}"
        return f"{len(w)} workers ({self.threads()} threads), {where}"

    def check_workers(self) -> None:
        """Every worker of an existing cluster must import this hlorun
        (same version): else every task would fail the same way."""
        from .. import __version__

        def probe():  # pickled by value: runs even where hlorun is missing
            import importlib
            try:
                importlib.import_module("hlorun.sweep.isolate")
                return importlib.import_module("hlorun").__version__
            except Exception as e:
                return f"cannot import hlorun: {type(e).__name__}: {e}"
        try:
            found = self.client.run(probe)
        except Exception as e:
            raise UsageError(f"the Dask workers cannot run hlorun tasks: {e}") from None
        bad = {w: v for w, v in found.items() if v != __version__}
        if bad:
            lines = [f"  {w}: {v if v.startswith('cannot') else f'hlorun {v}'}"
                     for w, v in sorted(bad.items())]
            raise UsageError(f"{len(bad)} of {len(found)} Dask workers do not have hlorun "
                             f"{__version__} (pip install 'hlorun[sweep]' there):\n"
                             + "\n".join(lines))

    def wait_for_workers(self, n: int = 1, timeout: float = 60.0) -> None:
        try:
            self.client.wait_for_workers(n, timeout=timeout)
        except TimeoutError:
            raise UsageError(f"no Dask worker joined the scheduler within {timeout:g} s") from None

    # -- running -----------------------------------------------------------------------
    def map_unordered(self, fn: Callable[..., Any], queue: "deque[Any]", args: tuple = (),
                      window: int | None = None) -> Iterator[tuple[Any, Any]]:
        """``fn(item, *args)`` on the cluster for the items of ``queue``,
        taken from its left as room frees up in the window.  Yield (item,
        result or the exception Dask raised for the task) in completion
        order; the consumer may append items to ``queue`` meanwhile (they
        run too).  Closing the iterator cancels what is pending."""
        distributed = import_distributed()
        tag = uuid.uuid4().hex[:8]
        counter = iter(range(1 << 62))
        futures: dict[str, tuple[Any, Any]] = {}
        ac = distributed.as_completed()

        def size() -> int:
            return window or max(8, 4 * max(self.threads(), 1))

        def fill(limit: int) -> None:
            while len(futures) < limit and queue:
                item = queue.popleft()
                fut = self.client.submit(fn, item, *args, key=f"hlorun-sweep-{tag}-{next(counter)}",
                                         pure=False, retries=0)
                futures[fut.key] = (fut, item)
                ac.add(fut)

        limit = size()
        fill(limit)
        done = 0
        it = iter(ac)
        try:
            while futures:
                fut = next(it)
                _, item = futures.pop(fut.key)
                if fut.status == "finished":
                    out: Any = fut.result()
                else:
                    out = _exception(fut)
                fut.release()
                done += 1
                if done % 64 == 0:
                    limit = size()
                fill(limit)
                yield item, out
                fill(limit)  # what the consumer queued
        finally:
            if futures:
                self.client.cancel([f for f, _ in futures.values()], force=True)
                futures.clear()

    def close(self) -> None:
        try:
            self.client.close(timeout=10)
        except Exception:
            pass
        if self.cluster is not None:
            try:
                self.cluster.close(timeout=10)
            except Exception:
                pass


def _exception(fut) -> BaseException:
    try:
        exc = fut.exception(timeout=10)
    except Exception as e:  # cancelled, lost
        return e
    return exc if exc is not None else RuntimeError(f"task {fut.key} ended as {fut.status}")


def crash_record(path: str, exc: BaseException) -> dict[str, Any]:
    """The record of a task Dask could not finish (its worker died: the
    scheduler's KilledWorker message names the worker)."""
    name = type(exc).__name__
    msg = str(exc).strip() or name
    return {"path": path, "status": "crashed", "exit_code": None,
            "error": f"{name}: {msg}" if name not in msg else msg}


__all__ = ["Engine", "INSTALL_HINT", "Limits", "crash_record", "import_distributed"]
