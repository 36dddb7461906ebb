"""Corpus sweeps on Dask distributed: ``hlorun sweep`` and ``hlorun check -j``.

    from hlorun.sweep import SweepOptions, discover, run_sweep
    run = run_sweep(discover(["models/"]), SweepOptions(pipeline="gpu-cuda"),
                    "results.jsonl", workers=2)
    run.summary.to_json()

Modules: :mod:`.inputs` (which files), :mod:`.task` (one module -> one
record, in a task process), :mod:`.child` / :mod:`.isolate` (the task
process and its time and memory limits), :mod:`.engine` (Dask),
:mod:`.results` (the JSON Lines file, resume), :mod:`.summary` (counts,
failure groups), :mod:`.view` (progress bar and summary on the terminal),
:mod:`.run` (all of it together).  Dask is imported only when a sweep runs.
"""

from __future__ import annotations

from .engine import Engine, Limits
from .inputs import discover, module_key
from .run import SweepRun, run_sweep
from .summary import Summary
from .task import STATUSES, SweepOptions
from .view import Progress, render_summary

__all__ = ["Engine", "Limits", "Progress", "STATUSES", "Summary", "SweepOptions", "SweepRun",
           "discover", "module_key", "render_summary", "run_sweep"]
