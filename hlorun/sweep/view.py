"""How a sweep looks on the terminal: a progress bar with counts by status
while it runs, then the summary (counts, slowest modules, one line per
distinct failure with its count, modules and next command).  Everything
goes to the shared stderr console of :mod:`hlorun.report.console`."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..report import console as report
from .task import STATUSES

_STYLE = {"ok": "green", "violation": "yellow", "pass-failure": "red", "bad-input": "magenta",
          "timeout": "cyan", "crashed": "bold red"}


def _counts_text(c: Counter) -> str:
    return "  ".join(f"{s} {c[s]}" for s in STATUSES if c.get(s))


class Progress:
    """A rich progress bar: done/total, elapsed, remaining, counts by status."""

    def __init__(self, enabled: bool = True, label: str = "sweep"):
        self.enabled = enabled
        self.label = label
        self.counts: Counter = Counter()
        self._p = None
        self._task = None

    def start(self, total: int, resumed: Counter, engine: str) -> None:
        self.counts = Counter(resumed)
        done = sum(resumed.values())
        if resumed:
            report.info(f"resuming: {done} modules already in the results file "
                        f"({_counts_text(self.counts)})")
        report.info(f"{self.label}: {total - done} modules to run on {engine}")
        if not self.enabled:
            return
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress as RichProgress,
                                   TextColumn, TimeElapsedColumn, TimeRemainingColumn)
        self._p = RichProgress(TextColumn(self.label), BarColumn(), MofNCompleteColumn(),
                               TimeElapsedColumn(), TimeRemainingColumn(),
                               TextColumn("{task.fields[counts]}"),
                               console=report.console(), transient=False)
        self._p.start()
        self._task = self._p.add_task("sweep", total=total, completed=done,
                                      counts=_counts_text(self.counts))

    def advance(self, rec: dict[str, Any]) -> None:
        self.counts[rec.get("status", "crashed")] += 1
        if self._p is not None:
            self._p.update(self._task, advance=1, counts=_counts_text(self.counts))

    def close(self) -> None:
        if self._p is not None:
            self._p.stop()
            self._p = None


def render_summary(doc: dict[str, Any], results_path: str | None, interrupted: bool,
                   max_list: int = 5, max_groups: int = 15) -> None:
    """The summary of :meth:`hlorun.sweep.summary.Summary.to_json`."""
    counts = doc["counts"]
    rate = doc.get("modules_per_second")
    head = f"{doc['modules']} modules"
    if doc.get("wall_seconds") is not None:
        head += f"; this run: {doc['ran']} in {doc['wall_seconds']:.1f} s"
        if rate:
            head += f" ({rate:.2f} modules/s)"
    report.table(head, ["status", "modules"],
                 [(s, str(n)) for s, n in counts.items()])
    t = doc.get("totals") or {}
    if t.get("kernels"):
        kinds = ", ".join(f"{k} {n}" for k, n in list(t["kernels"].items())[:8])
        report.info(f"final kernels: {kinds}")
    a = t.get("autotune") or {}
    if a.get("gemms"):
        report.info(f"autotuned GEMMs: {a['gemms']} ("
                    + ", ".join(f"{b} {n}" for b, n in a["backends"].items())
                    + f"), {a['rejected']} candidates rejected")
    if doc["slowest"]:
        report.table("slowest modules", ["seconds", "peak MiB", "status", "module"],
                     [(f"{r['seconds']:.2f}", "-" if r.get("peak_rss_mb") is None
                       else f"{r['peak_rss_mb']:.0f}", r["status"], r["path"])
                      for r in doc["slowest"][:max_list]])
    for g in doc["failures"][:max_groups]:
        more = g["count"] - min(len(g["modules"]), max_list)
        lines = [f"  {m}" for m in g["modules"][:max_list]]
        if more > 0:
            lines.append(f"  (+{more} more)")
        lines.append(f"  next: {g['next']}")
        report.panel(f"{g['count']} x {g['description']}", "\n".join(lines),
                     style=_STYLE.get(g["status"], "red"))
    if len(doc["failures"]) > max_groups:
        rest = doc["failures"][max_groups:]
        report.info(f"(+{len(rest)} more distinct failures of {sum(g['count'] for g in rest)} "
                    "modules; --format json lists them all)")
    for d in doc.get("divergences", []):
        report.info(f"{d['count']} x {d['first_difference']}")
        for m in d["modules"][:max_list]:
            report.info(f"  {m}")
    if "kernels_differ" in doc:
        report.info(f"final kernels differ on {doc['kernels_differ']} modules")
    if results_path:
        report.info(f"results: {results_path}")
    if interrupted:
        report.warn("interrupted: the results file holds every module finished so far; "
                    "run the same command again to resume")
    ok = doc["exit_code"] == 0 and not interrupted
    report.summary(f"{counts.get('ok', 0)}/{doc['modules']} modules ok", ok)


__all__ = ["Progress", "render_summary"]
