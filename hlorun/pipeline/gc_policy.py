"""The garbage-collector policy while a pipeline runs.

CPython's cyclic collector is triggered by allocation counts: with the
default thresholds (700, 10, 10) a pass that creates a few hundred
thousand objects (new instructions, shapes, attribute dicts) runs the
young collection hundreds of times, and every collection of the oldest
generation walks the whole module -- tens of thousands of instructions
with their dicts and lists.  On a 52k-instruction module that was about a
fifth of the pipeline's time, and almost none of it frees anything: the
IR keeps its cycles (operands <-> users, instruction <-> computation) alive
on purpose, and removed instructions are unlinked (operands dropped,
parent cleared), so refcounting frees most of them.

:func:`pipeline_gc` is the deliberate policy:

* ``gc.freeze()`` at the start: everything alive then (the parsed module,
  the pipeline spec, imported code) moves to the permanent generation and
  is never scanned during the run;
* the young-generation threshold is raised (``threshold0``, default 200_000
  allocations) so collections are rare and each one amortizes over many
  allocations; the older thresholds stay, so cyclic garbage made by the
  passes is still collected (memory stays bounded);
* on exit the previous thresholds come back and ``gc.unfreeze()`` returns
  the frozen objects to the oldest generation, so dead parts of the input
  module are collectable again afterwards.

``RunOptions.gc_policy`` selects it (``"pipeline"``, the default),
only the raised threshold (``"thresholds"``) or leaves the interpreter's
settings alone (``"default"``).  Measured on a 16-layer transformer step
(6.8k instructions, gpu-cuda): "pipeline" 7.1 s CPU and 177 MB peak RSS,
"thresholds" 6.8 s / 177 MB, "default" 8.9 s / 163 MB: rarer collections
leave some cyclic garbage around longer (+8% memory) for 20% less time.
On a 64-layer step (26k instructions, 2026-11-25, with the change journal):
"default" 29.5 s CPU with 6.7 s in 2,698 collections; "pipeline" at a
threshold of 50_000 24.7 s with 1.6 s in 49 collections (235 MB peak).
Run back to back: threshold 50_000 1.44 s in 49 collections, 235 MB;
200_000 0.60 s in 28, 239 MB (the default since).  Policies nest:
an inner pipeline run inside an outer one changes nothing.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator

POLICIES = ("pipeline", "thresholds", "default")

_depth = 0


@contextmanager
def pipeline_gc(policy: str = "pipeline", threshold0: int = 200_000) -> Iterator[None]:
    """Apply ``policy`` for the duration of the ``with`` block."""
    global _depth
    if policy not in POLICIES:
        raise ValueError(f"unknown gc policy {policy!r} (expected one of {', '.join(POLICIES)})")
    if policy == "default" or _depth:
        yield
        return
    old = gc.get_threshold()
    _depth += 1
    freeze = policy == "pipeline"
    if freeze:
        gc.freeze()
    gc.set_threshold(max(old[0], threshold0), *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)
        if freeze:
            gc.unfreeze()
        _depth -= 1


__all__ = ["POLICIES", "pipeline_gc"]
