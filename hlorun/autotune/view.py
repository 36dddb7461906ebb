"""What a person sees of the autotuner's decisions (rendered through
hlorun.report.console): one row per GEMM, and with ``--explain`` every rejected
candidate with its reason.  Works on the JSON records the pass emits, so the
text and ``--format json`` say the same thing."""

from __future__ import annotations

import re
from typing import Any, Iterable

COLUMNS = ("GEMM", "problem", "cands", "winner", "runner-up", "margin", "flips", "source")


def _us(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1e3:.2f}us"


def _est(c: dict[str, Any] | None) -> float | None:
    if not c or not c.get("estimate"):
        return None
    return c["estimate"]["ns"]


def short(c: dict[str, Any] | None) -> str:
    """``triton 128x64x32/s3/w4 7.10us`` / ``cublaslt#3 8.00us``."""
    if not c:
        return "-"
    if c.get("config"):
        name = "triton " + c["label"].split(" ", 1)[1]
    elif c.get("algorithm") is not None:
        name = f"{c['backend']}#{c['algorithm']}"
    else:
        name = c["backend"]
    return f"{name} {_us(_est(c))}"


def rows(records: Iterable[dict[str, Any]]) -> list[tuple]:
    out = []
    for r in records:
        flips = "-" if r.get("flip_rate") is None else f"{r['flip_rate']:.0%} of {r['flip_seeds']}"
        margin = "-" if r.get("margin") is None else f"{r['margin']:+.1%}"
        out.append((r["instruction"], f"{r.get('shape')} {r.get('types')}",
                    f"{r['considered']}/{r['feasible']}/{len(r['rejected'])}",
                    short(r.get("winner")) if r.get("winner") else "NONE", short(r.get("runner_up")),
                    margin, flips, r.get("source", "?") + (" (force infeasible)"
                                                          if r.get("force_infeasible") else "")))
    return out


def force_lines(records: Iterable[dict[str, Any]]) -> list[str]:
    """One line per GEMM a forced backend could not run: which, why, and
    what the autotuner chose instead."""
    out = []
    for r in records:
        fi = r.get("force_infeasible")
        if fi:
            out.append(f"{fi['force']} not applied to {fi['instruction']} [{fi['problem']}]: "
                       f"{'; '.join(fi['reasons'])}; autotuned instead: {fi['instead']}")
    return out


def explain_lines(records: Iterable[dict[str, Any]], pattern: str | None = None) -> list[str]:
    """Per GEMM (matching ``pattern``): its device, notes, rejection cost
    and every rejected candidate with its reasons."""
    rx = re.compile(pattern) if pattern and pattern != ".*" else None
    lines: list[str] = []
    for r in records:
        if rx is not None and not rx.search(r["instruction"]):
            continue
        lines.append(f"{r['instruction']} [{r.get('shape')} {r.get('types')}] on {r.get('device', '?')}: "
                     f"{r['considered']} candidates, {r['feasible']} feasible, {len(r['rejected'])} rejected")
        for n in r.get("notes", []):
            lines.append(f"  note: {n}")
        w = r.get("winner")
        if w:
            est = w.get("estimate") or {}
            if est.get("why"):
                lines.append(f"  winner {w.get('label', '')}: {_us(est.get('ns'))}, {est['why']}")
            for n in w.get("notes", []):
                lines.append(f"  winner: {n}")
        rc = r.get("rejection_cost")
        if rc:
            lines.append(f"  cost of rejection: {rc['label']} would take {_us(rc['would_take_ns'])} vs the "
                         f"winner's {_us(rc['winner_ns'])} ({rc['slowdown']:.0%} slower without it"
                         + (f"; {rc['tflops_rejected']} vs {rc['tflops_winner']} TFLOP/s" if rc.get("tflops_winner") else "")
                         + ")")
        for rej in r["rejected"]:
            lines.append(f"  rejected {rej['label']}: {'; '.join(rej['reasons'])}")
    return lines


def render(records: list[dict[str, Any]], explain: str | None = None) -> None:
    from ..report import console as report
    if not records:
        return
    report.table(f"autotuner on {records[0].get('device', '?')}: {len(records)} GEMM(s) "
                 f"(cands = considered/feasible/rejected)", COLUMNS, rows(records))
    for line in force_lines(records):
        report.warn(line)
    if explain is not None:
        for line in explain_lines(records, explain):
            report.info(line)
