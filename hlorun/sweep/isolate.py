"""The worker side of a task: run it in a task process with a time and a
memory limit.

:func:`run_task` is the function the sweep submits to Dask.  In the Dask
worker it hands the module to a task process (:mod:`hlorun.sweep.child`,
one per worker thread, kept between tasks) and waits for its answer:

* over ``time_limit`` seconds: the task process is killed, the record says
  ``timeout``;
* over ``memory_limit`` MiB resident (polled): killed, ``crashed`` with
  the memory figure;
* the task process dies (a segfault, ``os._exit``, the kernel's OOM
  killer): ``crashed`` with its exit code or signal and the end of its
  stderr.

In every case only that module's task is lost: the Dask worker stays up
and starts a fresh task process for its next task.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

POLL_S = 0.1
#: seconds a task process may take to import hlorun, the plugins and the pipelines
STARTUP_S = 300.0
_local = threading.local()


def _python_path() -> str:
    parts = [p for p in sys.path if p and os.path.isdir(p)]
    old = os.environ.get("PYTHONPATH")
    return os.pathsep.join(parts + ([old] if old else []))


def _signal_name(rc: int) -> str:
    try:
        return signal.Signals(-rc).name
    except ValueError:
        return f"signal {-rc}"


class TaskProcess:
    """One ``python -m hlorun.sweep.child`` process and its pipes."""

    def __init__(self) -> None:
        self.err = tempfile.TemporaryFile()
        env = dict(os.environ, PYTHONPATH=_python_path(), PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "hlorun.sweep.child"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.err, env=env, start_new_session=True)
        self.buf = b""
        self.tasks = 0

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass

    def stderr_tail(self, lines: int = 15, limit: int = 3000) -> str:
        self.err.flush()
        size = self.err.seek(0, os.SEEK_END)
        self.err.seek(max(0, size - limit))
        text = self.err.read().decode("utf-8", "replace")
        return "\n".join(text.strip().splitlines()[-lines:])

    def _rss_mb(self) -> float:
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 1024
        except OSError:
            pass
        try:
            import psutil
            return psutil.Process(self.proc.pid).memory_info().rss / (1024 * 1024)
        except Exception:
            return 0.0

    def run(self, request: dict[str, Any], time_limit: float | None,
            memory_limit: float | None, startup_limit: float = STARTUP_S) -> tuple[str, Any]:
        """("ok", record) | ("timeout", seconds) | ("memory", rss MiB) |
        ("died", message).  ``time_limit`` counts from the task process's
        "started" line (after its imports and pipeline loading, which get
        ``startup_limit``)."""
        self.err.seek(0)
        self.err.truncate()
        self.tasks += 1
        try:
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return "died", self._death()
        started = self._line(startup_limit, memory_limit)
        if started[0] != "ok":
            return started
        if not started[1].get("started"):  # an answer without the started line
            return started
        return self._line(time_limit, memory_limit)

    def _line(self, limit: float | None, memory_limit: float | None) -> tuple[str, Any]:
        t0 = time.monotonic()
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            waited = time.monotonic() - t0
            if limit is not None and waited >= limit:
                self.kill()
                return "timeout", waited
            wait = POLL_S if limit is None else min(POLL_S, limit - waited)
            ready, _, _ = select.select([fd], [], [], max(wait, 0.0))
            if ready:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    return "died", self._death()
                self.buf += chunk
            if memory_limit is not None:
                rss = self._rss_mb()
                if rss > memory_limit:
                    self.kill()
                    return "memory", rss
        line, _, self.buf = self.buf.partition(b"\n")
        return "ok", json.loads(line)

    def _death(self) -> str:
        try:
            rc = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            rc = self.proc.returncode
        how = f"killed by {_signal_name(rc)}" if rc < 0 else f"exited with code {rc}"
        if rc == -signal.SIGKILL:
            how += " (out of memory?)"
        tail = self.stderr_tail()
        self.kill()
        return f"task process {how}" + (f"\n{tail}" if tail else "")


def _task_process() -> TaskProcess:
    tp = getattr(_local, "tp", None)
    if tp is None or not tp.alive():
        tp = _local.tp = TaskProcess()
    return tp


def _worker_name() -> str | None:
    try:
        from distributed import get_worker
        return get_worker().address
    except Exception:
        return None


def run_task(path: str, options: dict[str, Any], time_limit: float | None,
             memory_limit: float | None) -> dict[str, Any]:
    """Run one module (in a task process); always returns a record."""
    tp = _task_process()
    t0 = time.perf_counter()
    kind, value = tp.run({"options": options, "path": path}, time_limit, memory_limit)
    rec: dict[str, Any]
    if kind == "ok":
        rec = value
    else:
        rec = {"path": path, "exit_code": None, "seconds": round(time.perf_counter() - t0, 4)}
        if kind == "timeout":
            rec.update(status="timeout", error=f"over the time limit of {time_limit:g} s")
        elif kind == "memory":
            rec.update(status="crashed", peak_rss_mb=round(value, 1),
                       error=f"over the memory limit of {memory_limit:g} MiB "
                             f"(resident {value:.0f} MiB); task process killed")
        else:
            rec.update(status="crashed", error=value)
        _local.tp = None
    worker = _worker_name()
    if worker:
        rec["worker"] = worker
    return rec


def run_batch(paths: list[str] | tuple[str, ...], options: dict[str, Any],
              time_limit: float | None, memory_limit: float | None) -> list[dict[str, Any]]:
    """:func:`run_task` for each of a few small modules: one Dask task for
    all of them, each still with its own limits and task process."""
    return [run_task(p, options, time_limit, memory_limit) for p in paths]


__all__ = ["TaskProcess", "run_batch", "run_task"]
