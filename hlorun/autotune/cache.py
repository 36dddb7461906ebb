"""Autotuning decisions that outlive a run.

* ``--autotune-cache FILE``: hlorun's JSON cache.  Keyed like XLA's
  autotune cache: the device plus a fingerprint of the GEMM (the canonical
  print of the fused computation: names, metadata and backend configs
  stripped), so a decision carries over between modules and runs.
* ``--autotune-results FILE``: XLA's ``autotune_results.textproto``.  Its
  entries are keyed by XLA's 128-bit HLO fingerprint (``GetHloFingerprint``,
  :mod:`hlorun.autotune.fingerprint`: FarmHash Fingerprint128 of XLA's
  canonical print of the fusion); entries are bound to GEMMs by (1) that
  fingerprint (with ``pyfarmhash`` installed) -- it matches only where
  hlorun's GEMM fusion is XLA's byte for byte, body order and backend
  config included; then, for the GEMMs left, (2) the legacy format's HLO
  text when present, compared in canonical form, else (3) when one GEMM
  entry and one GEMM are left, or N identical entries for N GEMMs.
  Unmatched entries are reported, never guessed.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..text.fileio import read_text, write_atomic
from ..ir.module import Instruction
from ..errors import UsageError
from .triton import TritonConfig
from .xla_logs import ResultEntry, read_results

CACHE_VERSION = 1


def canonical_body(instr: Instruction) -> str:
    from ..text.printer import PRESETS, print_computation
    comp = instr.fused_computation
    if comp is None:
        from ..text.printer import print_instruction
        return print_instruction(instr, PRESETS["canonical"])
    text = print_computation(comp, PRESETS["canonical"])
    return text.split("\n", 1)[1] if "\n" in text else text


def gemm_key(instr: Instruction, device: str) -> str:
    h = hashlib.sha256()
    h.update(device.encode())
    h.update(b"\0")
    h.update(str(instr.shape).encode())
    h.update(b"\0")
    h.update(canonical_body(instr).encode())
    return h.hexdigest()[:32]


@dataclass
class CachedChoice:
    backend: str
    config: TritonConfig | None = None
    algorithm: int | None = None
    info: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        d = {"backend": self.backend, "config": self.config.to_json() if self.config else None,
             "algorithm": self.algorithm}
        d.update(self.info)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "CachedChoice":
        cfg = d.get("config")
        info = {k: v for k, v in d.items() if k not in ("backend", "config", "algorithm")}
        return cls(str(d["backend"]), TritonConfig.from_dict(cfg) if cfg else None,
                   d.get("algorithm"), info)


class Cache:
    def __init__(self, path: str | None):
        self.path = path
        self.entries: dict[str, CachedChoice] = {}
        self.loaded = 0
        if path and Path(path).exists():
            try:
                data = json.loads(read_text(path))
                if data.get("hlorun_autotune_cache") != CACHE_VERSION:
                    raise ValueError("not an hlorun autotune cache (version key missing)")
                for k, v in data.get("entries", {}).items():
                    self.entries[k] = CachedChoice.from_json(v)
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                raise UsageError(f"{path}: cannot read autotune cache: {e}") from None
            self.loaded = len(self.entries)

    def get(self, key: str) -> CachedChoice | None:
        return self.entries.get(key)

    def put(self, key: str, choice: CachedChoice) -> None:
        self.entries[key] = choice

    def save(self) -> None:
        if not self.path:
            return
        data = {"hlorun_autotune_cache": CACHE_VERSION,
                "entries": {k: v.to_json() for k, v in sorted(self.entries.items())}}
        write_atomic(self.path, json.dumps(data, indent=1, sort_keys=True) + "\n")


def _norm(text: str) -> str:
    return " ".join(text.replace("%", "").split())


@dataclass
class XlaResults:
    """XLA's autotune results, matched to the module's GEMMs."""

    path: str
    entries: list[ResultEntry]
    matched: dict[str, ResultEntry] = field(default_factory=dict)
    #: how each matched GEMM was bound ("hlo_fingerprint <hex>", ...)
    bound_by: dict[str, str] = field(default_factory=dict)
    unmatched: list[ResultEntry] = field(default_factory=list)
    how: str = ""

    @classmethod
    def load(cls, path: str) -> "XlaResults":
        if not Path(path).exists():
            raise UsageError(f"{path}: no such autotune results file")
        return cls(path, read_results(path))

    @property
    def gemm_entries(self) -> list[ResultEntry]:
        return [e for e in self.entries if e.config.is_gemm]

    def match(self, gemms: list[Instruction]) -> None:
        """Bind entries to GEMM instructions (see the module docstring)."""
        entries = self.gemm_entries
        self.matched, self.unmatched, self.bound_by = {}, [], {}
        self.how = ""
        keyed = [e for e in entries if e.fingerprint]
        if keyed:
            from .fingerprint import available, xla_fingerprint
            if available():
                by_fp = {e.fingerprint: e for e in keyed}
                used = set()
                for g in gemms:
                    e = by_fp.get(xla_fingerprint(g))
                    if e is not None:
                        self.matched[g.name] = e
                        self.bound_by[g.name] = f"hlo_fingerprint {e.fingerprint}"
                        used.add(id(e))
                entries = [e for e in entries if id(e) not in used]
                self.how = f"{len(self.matched)} by XLA's HLO fingerprint"
                gemms = [g for g in gemms if g.name not in self.matched]
                if not gemms:
                    self.unmatched.extend(entries)
                    return
            else:
                self.how = "pyfarmhash not installed: no fingerprints"
        legacy = [e for e in entries if e.hlo]
        if legacy:
            bodies = {g.name: _norm(canonical_body(g)) for g in gemms}
            for e in legacy:
                hit = [n for n, b in bodies.items() if b and b in _norm(e.hlo or "")]
                if len(hit) == 1:
                    self.matched[hit[0]] = e
                    self.bound_by[hit[0]] = "the legacy entry's HLO text"
                else:
                    self.unmatched.append(e)
            self.how = (self.how + ", " if self.how else "") + "legacy HLO text"
            entries = [e for e in entries if not e.hlo]
        if entries:
            free = [g for g in gemms if g.name not in self.matched]
            same = len({e.config.label for e in entries}) == 1
            if len(entries) == len(free) and (len(free) == 1 or same):
                for g, e in zip(free, entries):
                    self.matched[g.name] = e
                    self.bound_by[g.name] = ("the only GEMM entry left for the only GEMM left"
                                             if len(free) == 1 else "identical entries")
                self.how = (self.how + ", " if self.how else "") + (
                    "the only GEMM entry and the only GEMM" if len(free) == 1 else
                    f"{len(free)} identical GEMM entries for {len(free)} GEMMs")
            else:
                self.unmatched.extend(entries)
                self.how = (self.how + ", " if self.how else "") + (
                    f"not matched: {len(entries)} GEMM entries keyed by XLA fingerprints "
                    f"vs {len(free)} GEMMs")

    def summary(self) -> dict[str, Any]:
        from collections import Counter
        return {"file": self.path, "entries": len(self.entries),
                "backends": dict(Counter(e.config.xla_backend for e in self.entries)),
                "gemm_entries": len(self.gemm_entries), "matched": sorted(self.matched),
                "unmatched": len(self.unmatched), "how": self.how}
