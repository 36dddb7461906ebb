"""Triton configs XLA's autotuner compiles but then discards, measured per
device from its own autotune logs (``data/discards_<device>.json``, written
by ``bench/autotune_discards.py``).

XLA times a candidate only if it compiled and its output agreed with the
others. Its Triton backend throws a kernel away when it spills registers
(COMPILATION_FAILED: "Discarding compilation due to register spilling") or
when its output disagrees with the cluster of agreeing outputs
(WRONG_RESULTS). Neither is visible from the config's resources alone.
Examples on the H200 are every f32 (HIGHEST) 128x64x32/s3/w2, and every int8
config with block_k 16, whose outputs came out doubled. A config that failed
in at least ``min_share`` of at least ``min_compiles`` compiles of its
compute class is listed, and ``triton.check`` rejects it on that device.
Devices without logs get no such verdict. The H100 is the same sm_90
target, but its logs were not kept.
"""

from __future__ import annotations

import json
from functools import lru_cache

from .bundled import DATA_DIR, data_file
#: a config is listed when it failed in at least this share of at least
#: this many compiles of its compute class
MIN_COMPILES = 10
MIN_SHARE = 0.9


@lru_cache(maxsize=8)
def _load(device: str, data_dir: str) -> dict | None:
    p = data_file(data_dir, f"discards_{device}.json")
    if not p.is_file():
        return None
    return json.loads(p.read_text())


def listed(counts: dict) -> bool:
    total = sum(counts.values())
    return total >= MIN_COMPILES and (total - counts.get("ran", 0)) >= MIN_SHARE * total


def reason(device: str, cls: str, label: str) -> str | None:
    """Why XLA would not time this Triton config on ``device`` (None: it
    would, or the device has no logs). ``cls``: the compute class
    (``cost.eff_class``)."""
    table = _load(device.upper(), str(DATA_DIR))
    if table is None:
        return None
    counts = table.get("configs", {}).get(cls, {}).get(label)
    if not counts or not listed(counts):
        return None
    total = sum(counts.values())
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]) if k != "ran")
    return (f"XLA discarded this {cls} config in {total - counts.get('ran', 0)} of {total} compiles on "
            f"{device} ({kinds}; its autotune logs)")
