"""Run-to-run spread of XLA's autotuning measurements, per size class.

The calibration set (``dataset``) times some modules twice, in separate
processes: the same candidate's two run times give the measurement noise
of an idle GPU, which depends on how long the kernel runs (a 5 us kernel
varies by a larger fraction than a 1 ms one).  ``data/noise.json`` holds,
per class of run time, the robust standard deviation of ``log(t2/t1)/sqrt(2)``
(one measurement's spread) and the 90th percentile of ``|t2/t1 - 1|``.
``select`` uses it for ``--contention measured``: each candidate's samples
get the spread of its own size class instead of one constant.
"""

from __future__ import annotations

import json
import math
import statistics
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

DATA = Path(__file__).resolve().parent / "data" / "noise.json"

#: upper bounds of the run-time classes, microseconds
CLASSES_US = (10.0, 30.0, 100.0, 1000.0, float("inf"))


def size_class(ns: float) -> int:
    us = ns / 1e3
    for i, hi in enumerate(CLASSES_US):
        if us < hi:
            return i
    return len(CLASSES_US) - 1


def class_label(i: int) -> str:
    lo = 0.0 if i == 0 else CLASSES_US[i - 1]
    hi = CLASSES_US[i]
    return f"<{hi:g} us" if i == 0 else (f">={lo:g} us" if math.isinf(hi) else f"{lo:g}-{hi:g} us")


def spread(pairs: Iterable[tuple[float, float]]) -> list[dict[str, Any]]:
    """Per size class: count, sigma (one measurement, log scale) and p90."""
    by: dict[int, list[tuple[float, float]]] = {}
    for a, b in pairs:
        by.setdefault(size_class(a), []).append((a, b))
    out = []
    for i in range(len(CLASSES_US)):
        xs = by.get(i, [])
        if len(xs) < 10:
            continue
        logs = [math.log(b / a) for a, b in xs]
        mad = statistics.median(abs(x) for x in logs)
        rel = sorted(abs(b / a - 1) for a, b in xs)
        out.append({"class": class_label(i), "max_us": None if math.isinf(CLASSES_US[i]) else CLASSES_US[i],
                    "pairs": len(xs), "sigma": round(1.4826 * mad / math.sqrt(2), 5),
                    "p90_rel_diff": round(rel[int(0.9 * (len(rel) - 1))], 5)})
    return out


def measure_from_dataset(devices: Iterable[str]) -> dict[str, Any]:
    from .dataset import load
    doc: dict[str, Any] = {}
    for dev in devices:
        pairs = [(c.ns, c.ns_repeat) for g in load(dev) for c in g.candidates if c.ns_repeat]
        doc[dev] = spread(pairs)
    return doc


@lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    from importlib import resources  # package data: also inside a zipped wheel
    p = resources.files(__package__).joinpath("data", DATA.name)
    return json.loads(p.read_text()) if p.is_file() else {}


def measured_sigma(ns: float, device: str | None = None) -> float:
    """The measured spread of one timing of a kernel of about ``ns``: the
    device's own table, else the mean over the measured devices."""
    table = _table()
    rows = table.get((device or "").upper()) or None
    tables = [rows] if isinstance(rows, list) else [v for v in table.values() if isinstance(v, list)]
    if not tables:
        return 0.03
    vals = []
    for rows in tables:
        cand = [r for r in rows if (r["max_us"] or float("inf")) * 1e3 > ns]
        r = cand[0] if cand else rows[-1]
        vals.append(r["sigma"])
    return sum(vals) / len(vals)
