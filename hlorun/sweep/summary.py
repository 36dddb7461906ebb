"""What a sweep found, from its records: counts by status, the slowest
modules, and each distinct failure with the modules it hit.

Identical failures are grouped so that 300 modules failing one way are one
line with a count:

* a pass failure by (pass, exception type, innermost frame);
* a violation by (rule, the pass after which it first appeared);
* a crash of hlorun itself by (exception type, innermost frame); a task
  process that died or was killed by its message without numbers;
* bad input by its message with the location, names and numbers taken
  out; all timeouts are one group.

Each group names a representative (its smallest module by time) and the
next step for it: the ``hlorun reduce`` command that shrinks it while it
fails the same way (violations, pass failures), else the command that
reproduces it.
"""

from __future__ import annotations

import re
import shlex
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

from .task import STATUSES, SweepOptions


def _first_line(msg: str) -> str:
    """The message's first line without its ``file:line:col:`` prefix."""
    first = (msg or "").strip().splitlines()[0] if (msg or "").strip() else ""
    return re.sub(r"^\S+?:\d+:\d+:\s*", "", first)


def _norm_message(msg: str) -> str:
    first = _first_line(msg)
    first = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", first)
    first = re.sub(r"%?[\w.-]*\d[\w.-]*", "N", first)
    return first[:200]


def group_key(rec: dict[str, Any]) -> tuple[str, ...] | None:
    st = rec.get("status")
    if st == "ok":
        return None
    if st == "violation":
        v = (rec.get("violations") or [{}])[0]
        return (st, v.get("rule") or "?", v.get("after_pass") or "?",
                _norm_message(v.get("message") or ""))
    if st == "pass-failure":
        f = rec.get("failure") or {}
        return (st, f.get("path") or f.get("pass") or "?", f.get("exception") or "?",
                f.get("top_frame") or "?")
    if st == "crashed":
        f = rec.get("failure") or {}
        if f.get("top_frame"):
            return (st, f.get("exception") or "?", f["top_frame"])
        return (st, _norm_message(rec.get("error", "")))
    if st == "bad-input":
        return (st, _norm_message(rec.get("error", "")))
    return (st,)


def describe(key: tuple[str, ...], rec: dict[str, Any]) -> str:
    st = key[0]
    if st == "violation":
        where = "at pipeline start" if key[2] == "pipeline-start" else f"after {key[2]}"
        msg = _first_line((rec.get("violations") or [{}])[0].get("message") or "")
        return f"violation {key[1]} {where}: {msg}"[:160]
    if st == "pass-failure":
        return f"pass {key[1]} raised {key[2]} at {key[3]}"
    if st == "crashed" and len(key) == 3:
        return f"hlorun raised {key[1]} at {key[2]}"
    if st in ("crashed", "bad-input"):
        return f"{st}: {_first_line(rec.get('error') or '') or '?'}"[:160]
    return "over the time limit"


def _compile_argv(opts: SweepOptions, path: str) -> list[str]:
    argv = ["compile", path]
    if opts.pipeline:
        argv += ["--pipeline", opts.pipeline]
    for d in opts.disable:
        argv += ["--disable-passes", d]
    for e in opts.enable_only:
        argv += ["--enable-passes-only", e]
    return argv


def next_command(key: tuple[str, ...], rec: dict[str, Any], opts: SweepOptions) -> str:
    path = rec["path"]
    note = ""
    if opts.split_input_file:  # FILE:LINE: the commands take a whole file
        from .inputs import chunk_of
        try:
            path, line = chunk_of(path)
            note = f"  # the module at line {line} of the file (// ----- separated)"
        except ValueError:
            pass
    if opts.mode == "check":
        words = ["hlorun", "check", path] + (["--split-input-file"] if opts.split_input_file else [])
        note = ""
    elif key[0] == "violation":
        words = ["hlorun", "reduce", "--until", f"violation:{key[1]}", "--"] + _compile_argv(opts, path)
    elif key[0] == "pass-failure":
        name = (rec.get("failure") or {}).get("pass") or key[1]
        words = ["hlorun", "reduce", "--until", f"pass-fails:{name}", "--"] + _compile_argv(opts, path)
    else:
        words = ["hlorun"] + _compile_argv(opts, path)
    return " ".join(shlex.quote(w) for w in words) + note


@dataclass
class Group:
    key: tuple[str, ...]
    description: str
    records: list[dict[str, Any]] = field(default_factory=list)

    @property
    def status(self) -> str:
        return self.key[0]

    def representative(self) -> dict[str, Any]:
        return min(self.records, key=lambda r: (r.get("seconds") or 0.0, r["path"]))


@dataclass
class Summary:
    options: SweepOptions
    records: list[dict[str, Any]]
    wall_seconds: float | None = None  # this run
    ran: int = 0  # modules run by this invocation (the rest were resumed)
    startup_seconds: float | None = None  # of wall_seconds: starting/joining the cluster
    tasks: int = 0  # Dask tasks this run submitted (small modules share one)
    #: CPU time of the sweep process: the Dask client, and for a local
    #: cluster its scheduler too (they share the process)
    client_cpu_seconds: float | None = None

    def counts(self) -> dict[str, int]:
        c = Counter(r.get("status", "crashed") for r in self.records)
        return {s: c.get(s, 0) for s in STATUSES if c.get(s)}

    def groups(self) -> list[Group]:
        out: dict[tuple[str, ...], Group] = {}
        for r in self.records:
            key = group_key(r)
            if key is None:
                continue
            g = out.get(key)
            if g is None:
                g = out[key] = Group(key, describe(key, r))
            g.records.append(r)
        return sorted(out.values(), key=lambda g: (-len(g.records), STATUSES.index(g.status),
                                                   g.description))

    def slowest(self, n: int = 10) -> list[dict[str, Any]]:
        timed = [r for r in self.records if r.get("seconds") is not None]
        return sorted(timed, key=lambda r: -r["seconds"])[:n]

    def divergences(self) -> list[tuple[str, list[dict[str, Any]]]]:
        """With --against: the first diverging step -> the modules."""
        by: dict[str, list[dict[str, Any]]] = {}
        for r in self.records:
            a = r.get("against")
            if a and a.get("found"):
                by.setdefault(a.get("summary") or "?", []).append(r)
        return sorted(by.items(), key=lambda kv: -len(kv[1]))

    def rate(self) -> float | None:
        """Modules per second of this run, cluster start-up excluded."""
        if not self.wall_seconds or not self.ran:
            return None
        busy = self.wall_seconds - (self.startup_seconds or 0.0)
        return round(self.ran / busy, 3) if busy > 0 else None

    def totals(self) -> dict[str, Any]:
        """Across the compiled modules: kernels by kind, GEMMs tuned and
        their winning backends, candidates rejected."""
        kernels: Counter = Counter()
        backends: Counter = Counter()
        gemms = rejected = 0
        for r in self.records:
            kernels.update(r.get("kernels") or {})
            a = r.get("autotune") or {}
            gemms += a.get("gemms", 0)
            rejected += a.get("rejected", 0)
            backends.update(a.get("backends") or {})
        return {"kernels": dict(kernels.most_common()),
                "autotune": {"gemms": gemms, "backends": dict(backends.most_common()),
                             "rejected": rejected}}

    def exit_code(self) -> int:
        """2 if a module failed (violation, pass failure, timeout, crash),
        else 1 if one was bad input, else 0."""
        c = self.counts()
        if any(c.get(s) for s in ("violation", "pass-failure", "timeout", "crashed")):
            return 2
        return 1 if c.get("bad-input") else 0

    def to_json(self, max_modules: int = 50) -> dict[str, Any]:
        total_s = sum(r.get("seconds") or 0.0 for r in self.records)
        doc: dict[str, Any] = {
            "schema": "hlorun.sweep-summary/1",
            "options": self.options.identity(),
            "modules": len(self.records),
            "ran": self.ran,
            "counts": self.counts(),
            "wall_seconds": None if self.wall_seconds is None else round(self.wall_seconds, 3),
            "startup_seconds": (None if self.startup_seconds is None
                                else round(self.startup_seconds, 3)),
            "modules_per_second": self.rate(),
            "task_seconds": round(total_s, 3),
            "dask_tasks": self.tasks,
            "client_cpu_seconds": (None if self.client_cpu_seconds is None
                                   else round(self.client_cpu_seconds, 3)),
            "slowest": [{"path": r["path"], "seconds": r["seconds"], "status": r.get("status"),
                         "peak_rss_mb": r.get("peak_rss_mb")} for r in self.slowest()],
            "totals": self.totals(),
            "failures": [],
            "exit_code": self.exit_code(),
        }
        for g in self.groups():
            rep = g.representative()
            doc["failures"].append({
                "status": g.status, "key": list(g.key), "description": g.description,
                "count": len(g.records),
                "modules": [r["path"] for r in g.records[:max_modules]],
                "representative": rep["path"],
                "next": next_command(g.key, rep, self.options)})
        if self.options.against:
            doc["divergences"] = [{"first_difference": k, "count": len(rs),
                                   "modules": [r["path"] for r in rs[:max_modules]]}
                                  for k, rs in self.divergences()]
            doc["kernels_differ"] = sum(1 for r in self.records
                                        if r.get("against") and not r["against"]["kernels"]["same"])
        return doc


def summarize(options: SweepOptions, records: Iterable[dict[str, Any]],
              wall_seconds: float | None = None, ran: int = 0) -> Summary:
    return Summary(options, list(records), wall_seconds, ran)


__all__ = ["Group", "Summary", "describe", "group_key", "next_command", "summarize"]
