"""The task process: ``python -m hlorun.sweep.child``.

A Dask worker (:mod:`hlorun.sweep.isolate`) keeps one of these per worker
thread and sends it tasks, one JSON line each on stdin:
``{"options": {...}, "path": "..."}``.  The answer is two JSON lines on the
original stdout: ``{"started": true}`` once the plugins and pipelines are
loaded (the task's time limit starts there), then the record of :func:`hlorun.sweep.task.execute` plus
``seconds`` (wall), ``cpu_seconds``, ``peak_rss_mb`` (the process's peak
resident memory during the task: the kernel's high-water mark is reset
before each task) and ``rss_before_mb`` (what the process held when the
task started: Python keeps freed memory, so the module's own need is about
the difference).
Anything else the process prints goes to stderr, which the worker keeps
to explain a crash.

The process lives across tasks so that the imports (about a second) are
paid once per worker, not once per module; the worker kills and replaces
it when a task goes over its time or memory limit, or when it dies.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time

_CLEAR_REFS = "/proc/self/clear_refs"


def reset_peak() -> None:
    """Reset the kernel's peak-RSS mark (Linux >= 4.0); elsewhere the peak
    is the process's lifetime peak."""
    try:
        with open(_CLEAR_REFS, "w") as f:
            f.write("5")
    except OSError:
        pass


def _status_mb(field: str) -> float | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def rss_mb() -> float | None:
    """Resident memory now (Linux), or None."""
    return _status_mb("VmRSS:")


def peak_rss_mb() -> float:
    peak = _status_mb("VmHWM:")
    if peak is not None:
        return peak
    import resource
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def _watch_parent(parent: int) -> None:
    """Exit when the worker that started us is gone (killed without
    closing our stdin first)."""
    while True:
        time.sleep(1.0)
        if os.getppid() != parent:
            os._exit(3)


def _import_plugins(names, done: set) -> None:
    from importlib import import_module
    for name in names:
        if name not in done:
            import_module(name)
            done.add(name)


def serve(inp, out) -> None:
    from .task import SweepOptions, execute, prepare
    plugins: set[str] = set()
    prepared: set[str] = set()
    for line in inp:
        if not line.strip():
            continue
        req = json.loads(line)
        opts = SweepOptions.from_json(req["options"])
        path = req["path"]
        try:
            _import_plugins(opts.plugins, plugins)
        except Exception as e:
            rec = {"path": path, "status": "crashed", "exit_code": None,
                   "error": f"plugin import failed: {type(e).__name__}: {e}"}
        else:
            key = json.dumps(req["options"], sort_keys=True)
            if key not in prepared:  # load the pipelines before the clock starts
                prepare(opts)
                prepared.add(key)
            out.write('{"started": true}\n')  # the worker's clock starts now
            out.flush()
            reset_peak()
            before = rss_mb()
            t0, c0 = time.perf_counter(), time.process_time()
            rec = execute(opts, path)
            rec["seconds"] = round(time.perf_counter() - t0, 4)
            rec["cpu_seconds"] = round(time.process_time() - c0, 4)
            if before is not None:
                rec["rss_before_mb"] = round(before, 1)
        rec["peak_rss_mb"] = round(peak_rss_mb(), 1)
        out.write(json.dumps(rec) + "\n")
        out.flush()


def main() -> None:
    # Ctrl-C at the terminal is the sweep's to handle, not ours.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # stray prints go to stderr, never into the protocol
    serve(sys.stdin, out)


if __name__ == "__main__":
    main()
