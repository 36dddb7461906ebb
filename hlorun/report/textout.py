"""Output that fits a terminal: the compact forms of the pass table, the
autotuner's decisions, the final kernels and the per-pass diffs, plus the
pass progress bar.  Everything is written through :mod:`hlorun.report.console`.

Budgets (defaults): the pass table shows the passes that failed, lied or
tripped a checker and the slowest changed ones (``TABLE_ROWS``); the
autotuner table the closest calls (``AUTOTUNE_ROWS``); each diff at most
``DIFF_LINES`` lines and all diffs together ``DIFF_BUDGET`` lines, then one
header line per further pass.  ``--full-tables`` / ``--diff changed|all``
lift them, ``--dump-to DIR`` writes every step to files.

``--diff`` means the same in every command that shows module diffs
(compile, opt, replay, diff-pipelines): ``short`` compact and truncated,
``changed`` the full diff of every pass that changed the module, ``all``
also an entry for passes that did not, ``none`` no diffs.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, Iterable, Sequence

from . import console as report
from ..pipeline.events import Listener

DIFF_MODES = ("short", "changed", "all", "none")
DIFF_HELP = ("Module diffs per pass: short (compact, truncated; after the summary), changed "
             "(full diff of each pass that changed the module), all (also passes that did "
             "not), none.")
TABLE_ROWS = 15
AUTOTUNE_ROWS = 10
DIFF_LINES = 10
DIFF_BUDGET = 150
DIFF_HEADERS = 30


# ---------------------------------------------------------------------------
# Pass table
# ---------------------------------------------------------------------------


def pass_rows(events, failure_index: int | None, violation_passes: set[int],
              full: bool, limit: int = TABLE_ROWS) -> tuple[list[tuple], str | None]:
    """(rows, footnote).  Short form: every pass that failed, lied or was
    followed by a violation, then the slowest changed passes up to
    ``limit`` rows, in pipeline order; the footnote counts the rest."""
    def row(e):
        changed = "FAILED" if e.index == failure_index else (
            "LIED" if e.changed_mismatch else ("yes" if e.changed else "-"))
        it = f" [{e.iteration}]" if e.iteration else ""
        fp = f" x{e.fixed_point_iterations}" if e.fixed_point_iterations else ""
        return (e.index, e.path + it + fp, changed,
                f"{e.instructions_before} -> {e.instructions_after}", f"{e.seconds * 1000:.1f} ms")
    events = list(events)
    if full or len(events) <= limit:
        return [row(e) for e in events], None
    must = {e.index for e in events if e.index == failure_index or e.changed_mismatch
            or e.index in violation_passes}
    by_time = sorted((e for e in events if e.changed and e.index not in must),
                     key=lambda e: -e.seconds)
    keep = set(must) | {e.index for e in by_time[:max(0, limit - len(must))]}
    shown = [e for e in events if e.index in keep]
    hidden = [e for e in events if e.index not in keep]
    n_changed = sum(1 for e in hidden if e.changed)
    secs = sum(e.seconds for e in hidden)
    note = (f"... {len(hidden)} more passes not shown ({n_changed} changed, "
            f"{len(hidden) - n_changed} unchanged, {secs:.2f} s together); "
            f"--full-tables lists all {len(events)}")
    return [row(e) for e in shown], note


# ---------------------------------------------------------------------------
# Autotuner decisions
# ---------------------------------------------------------------------------


def render_autotune(records: list[dict[str, Any]], explain: str | None, full: bool,
                    show_table: bool, limit: int = AUTOTUNE_ROWS) -> None:
    """A one-line summary of the winners, then (unless ``--no-table``) the
    GEMMs whose decision was closest (smallest margin) or forced/flipping,
    ``limit`` rows unless ``full``."""
    from ..autotune.view import COLUMNS, explain_lines, force_lines, rows
    if not records:
        return
    wins = Counter((r.get("winner") or {}).get("backend", "NONE") for r in records)
    srcs = Counter(r.get("source", "?") for r in records)
    report.info(f"autotuner on {records[0].get('device', '?')}: {len(records)} GEMM(s); winners "
                + ", ".join(f"{b} {n}" for b, n in wins.most_common())
                + "; decided by " + ", ".join(f"{s} {n}" for s, n in srcs.most_common()))
    for line in force_lines(records):  # a forced backend that could not run a GEMM
        report.warn(line)
    if show_table:
        shown = records
        note = None
        if not full and len(records) > limit:
            def closeness(r):
                special = r.get("source") == "forced" or (r.get("flip_rate") or 0) > 0 \
                    or not r.get("winner")
                m = r.get("margin")
                return (not special, abs(m) if m is not None else float("inf"))
            keep = {id(r) for r in sorted(records, key=closeness)[:limit]}
            shown = [r for r in records if id(r) in keep]
            note = (f"... {len(records) - len(shown)} more GEMMs (shown: the closest calls, forced "
                    f"and flipping ones); --full-tables lists all {len(records)}")
        report.table("cands = considered/feasible/rejected; margin = runner-up vs winner",
                     COLUMNS, rows(shown))
        if note:
            report.info(note)
    if explain is not None:
        for line in explain_lines(records, explain):
            report.info(line)


# ---------------------------------------------------------------------------
# Final kernels
# ---------------------------------------------------------------------------


def kernel_summary(module) -> str | None:
    """``final kernels: 123 (gemm-fusion 40, loop-fusion 50, ...)``."""
    try:
        from ..analysis.kernels import kernel_counts, kernel_list
        counts = kernel_counts(kernel_list(module))
    except Exception:  # a module the kernel lister cannot read: no summary line
        return None
    if not counts:
        return None
    total = sum(counts.values())
    return (f"final kernels: {total} (" + ", ".join(f"{k} {n}" for k, n in counts.most_common())
            + ")")


# ---------------------------------------------------------------------------
# Diffs
# ---------------------------------------------------------------------------


class DiffCollector:
    """A DiffListener sink that keeps the diffs to print them after the
    summary: compact (``short``) or in full."""

    def __init__(self) -> None:
        self.diffs: list[tuple[str, list[str]]] = []

    def __call__(self, header: str, lines: Iterable[str]) -> None:
        self.diffs.append((header, list(lines)))

    def render(self, mode: str, hint: str = "") -> None:
        if not self.diffs:
            return
        if mode != "short":
            for header, lines in self.diffs:
                report.diff_block(header, lines)
            return
        render_short(self.diffs, hint)


def _title(header: str) -> str:
    """'--- before #3 p/x\\n+++ after  #3 p/x  (file)' -> '#3 p/x  (file)'."""
    second = header.split("\n")[-1]
    return second.split("after", 1)[-1].strip()


def tighten(lines: Sequence[str], context: int = 1) -> list[str]:
    """A unified diff with at most ``context`` unchanged lines around each
    change (hunk headers kept): more change per line of screen."""
    keep = [False] * len(lines)
    for i, ln in enumerate(lines):
        if ln.startswith(("+", "-", "@@")):
            keep[i] = True
            if not ln.startswith("@@"):
                for j in range(max(0, i - context), min(len(lines), i + context + 1)):
                    keep[j] = True
    return [ln for ln, k in zip(lines, keep) if k]


def render_short(diffs: Sequence[tuple[str, list[str]]], hint: str = "",
                 per_pass: int = DIFF_LINES, budget: int = DIFF_BUDGET,
                 headers: int = DIFF_HEADERS) -> None:
    used = 0
    listed = 0
    truncated = False
    report.info(f"diffs ({len(diffs)} passes, compact):")
    for i, (header, lines) in enumerate(diffs):
        lines = tighten(lines)
        plus = sum(1 for ln in lines if ln.startswith("+"))
        minus = sum(1 for ln in lines if ln.startswith("-"))
        title = f"{_title(header)}  +{plus} -{minus}"
        if used < budget:
            body = lines[:min(per_pass, budget - used)]
            if len(body) < len(lines):
                truncated = True
                body = body + [f"... {len(lines) - len(body)} more diff lines"]
            report.diff_block(f"--- {title}", body)
            used += len(body) + 1
        elif listed < headers:
            report.info(f"--- {title}")
            listed += 1
            truncated = True
        else:
            report.info(f"... {len(diffs) - i} more changed passes")
            truncated = True
            break
    if truncated:
        report.info("full diffs: --diff changed (every changed pass) or --diff all; "
                    "every step as files: --dump-to DIR" + (f"; {hint}" if hint else ""))


# ---------------------------------------------------------------------------
# Progress
# ---------------------------------------------------------------------------


class PassProgress(Listener):
    """A progress bar on stderr (passes done / planned, the running pass)
    that appears once a run has taken ``delay`` seconds, only when stderr
    is a terminal; it disappears when the run ends."""

    def __init__(self, total: int = 0, title: str = "", delay: float | None = None):
        import os
        self.total = max(1, total)
        self.title = title
        # HLORUN_PROGRESS_DELAY: seconds before the bar appears (tests use 0)
        self.delay = delay if delay is not None else float(os.environ.get("HLORUN_PROGRESS_DELAY", 2.0))
        self.enabled = report.console().is_terminal
        self.t0 = time.monotonic()
        self.done = 0
        self._live = None
        self._task = None

    def _tick(self, description: str) -> None:
        if not self.enabled:
            return
        if self._live is None:
            if time.monotonic() - self.t0 < self.delay:
                return
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                       TimeElapsedColumn)
            self._live = Progress(TextColumn(self.title), BarColumn(), MofNCompleteColumn(),
                                  TimeElapsedColumn(), TextColumn("{task.description}"),
                                  console=report.console(), transient=True)
            self._live.start()
            self._task = self._live.add_task(description, total=self.total, completed=self.done)
        self._live.update(self._task, completed=min(self.done, self.total),
                          total=max(self.total, self.done), description=description)

    def on_run_start(self, run, module) -> None:
        self.t0 = time.monotonic()
        spec = getattr(run, "spec", None)
        if spec is not None:  # planned passes (fixed-point loops may add some)
            self.total = max(1, len(spec.passes()))
            self.title = self.title or spec.name

    def _fit(self, path: str) -> str:
        """The pass path, cut at '/' boundaries from the left (then cropped)
        to the width the bar's other columns leave: rich would otherwise
        squeeze the count and time columns into ellipses."""
        # title, bar (40), "done/total" (the total may grow by a digit),
        # elapsed "0:00:00", four gaps and a margin
        counts = 2 * len(str(self.total)) + 3
        room = max(8, report.console().width - len(self.title) - 40 - counts - 7 - 4 - 2)
        if len(path) <= room:
            return path
        parts = path.split("/")
        while len(parts) > 1 and len("/".join(parts)) > room:
            parts.pop(0)
        return "/".join(parts)[-room:]

    def on_before_pass(self, ev, module) -> None:
        self._tick(self._fit(ev.path))

    def on_after_pass(self, ev, module) -> None:
        self.done += 1
        self._tick(self._fit(ev.path))

    def on_run_end(self, result, module) -> None:
        self.close()

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None


class JsonLines(Listener):
    """``--format jsonl``: one JSON object per line on stdout as the
    pipeline runs (``{"event": "pass", ...}``, ``"violation"``,
    ``"failure"``), so a big model's report streams instead of arriving as
    one document at the end."""

    def __init__(self, write) -> None:
        self.write = write

    def _emit(self, kind: str, doc: dict) -> None:
        import json
        self.write(json.dumps({"event": kind, **doc}) + "\n")

    def on_after_pass(self, ev, module) -> None:
        self._emit("pass", ev.to_json())

    def on_violation(self, v, module) -> None:
        self._emit("violation", v.to_json())

    def on_pass_failure(self, f, module) -> None:
        self._emit("failure", f.to_json())

    def summary(self, doc: dict) -> None:
        self._emit("report", {k: v for k, v in doc.items() if k != "passes"})


class Stepper:
    """The same bar for loops outside a pipeline (check on many files,
    explore's reruns): ``with Stepper(n, "check") as s: ... s.step(label)``."""

    def __init__(self, total: int, title: str, delay: float | None = None):
        self.p = PassProgress(total, title, delay)

    def __enter__(self) -> "Stepper":
        self.p.t0 = time.monotonic()
        return self

    def step(self, label: str = "") -> None:
        self.p.done += 1
        self.p._tick(label)

    def __exit__(self, *exc) -> None:
        self.p.close()
