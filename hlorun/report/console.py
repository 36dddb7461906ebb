"""Everything hlorun shows a person goes through here (the only module that
imports rich).  One stderr console with markup and highlighting off: HLO is
full of ``[ ] { }`` that rich would otherwise eat.  HLO text itself goes to
stdout or files, never through rich."""

from __future__ import annotations

import sys
from typing import Any, Iterable, Sequence

_console = None


def console():
    global _console
    if _console is None:
        from rich.console import Console
        _console = Console(stderr=True, markup=False, highlight=False, soft_wrap=True)
        if not _console.is_terminal and "COLUMNS" not in __import__("os").environ:
            # logs and CI: wide enough that tables keep one line per row
            _console = Console(stderr=True, markup=False, highlight=False, soft_wrap=True,
                               width=200)
    return _console


def error(message: str) -> None:
    console().print(message, style="bold red" if console().is_terminal else None)


def warn(message: str) -> None:
    console().print(message, style="yellow" if console().is_terminal else None)


def info(message: str) -> None:
    console().print(message)


def status(ok: bool, label: str, detail: str = "") -> None:
    mark = "ok  " if ok else "FAIL"
    style = None
    if console().is_terminal:
        style = "green" if ok else "red"
    console().print(f"{mark} {label}" + (f"  {detail}" if detail else ""), style=style)


def table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]],
          justify: Sequence[str] | None = None, names: Sequence[int] = (0,)) -> None:
    """A table on stderr.  Columns ``names`` (instruction/kernel names) get
    the room they need; other columns wrap.  Nothing is cut to "…"."""
    rows = [[str(x) for x in r] for r in rows]
    c = console()
    if not c.is_terminal:  # logs, CI: plain aligned columns, full cell text
        widths = [max([len(col)] + [len(r[i]) for r in rows]) for i, col in enumerate(columns)]
        if title:
            c.print(title)
        for cells in [list(columns)] + rows:
            c.print("  ".join(x.rjust(w) if justify and justify[i] == "right" else x.ljust(w)
                              for i, (x, w) in enumerate(zip(cells, widths))).rstrip())
        return
    from rich import box
    from rich.table import Table
    t = Table(title=title, show_lines=False, header_style="bold", box=box.SIMPLE_HEAD)
    for i, col in enumerate(columns):
        keep = i in names
        t.add_column(col, justify=(justify[i] if justify else "left"),  # type: ignore[arg-type]
                     overflow="fold", no_wrap=keep,
                     min_width=max([len(col)] + [len(r[i]) for r in rows]) if keep else None)
    for r in rows:
        t.add_row(*[str(x) for x in r])
    console().print(t)


def write_stdout(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


# ---------------------------------------------------------------------------
# Pipeline output: pass table, diffs, violations, summary
# ---------------------------------------------------------------------------


def _styled(text: str, style: str | None) -> None:
    c = console()
    c.print(text, style=style if c.is_terminal else None)


def pass_table(rows: Iterable[Sequence[Any]], title: str | None = None,
               columns: Sequence[str] = ("#", "pipeline/pass", "changed", "instructions", "time")) -> None:
    """The per-pass table: rows of (index, path, changed, 'before -> after',
    time).  Plain aligned text when stderr is not a terminal (logs, CI)."""
    c = console()
    rows = [[str(x) for x in r] for r in rows]
    right = {"#", "time", "instructions"}
    if not c.is_terminal:
        widths = [max([len(col)] + [len(r[i]) for r in rows]) for i, col in enumerate(columns)]

        def fmt(cells):
            return "  ".join(x.rjust(w) if columns[i] in right else x.ljust(w)
                             for i, (x, w) in enumerate(zip(cells, widths))).rstrip()
        if title:
            c.print(title)
        c.print(fmt(columns))
        for r in rows:
            c.print(fmt(r))
        return
    from rich.table import Table
    t = Table(title=title, header_style="bold", box=None, pad_edge=False)
    for i, col in enumerate(columns):  # numbers keep their width; names fold, never "…"
        width = max([len(col)] + [len(r[i]) for r in rows if i < len(r)])
        t.add_column(col, justify="right" if col in right else "left", overflow="fold",
                     no_wrap=col != "pipeline/pass", min_width=width if col != "pipeline/pass" else None)
    for cells in rows:
        style = "dim"
        if len(cells) > 2:
            style = "bold" if cells[2] == "yes" else ("red" if cells[2] in ("FAILED", "LIED") else "dim")
        t.add_row(*cells, style=style)
    c.print(t)


def diff_block(header: str, lines: Iterable[str]) -> None:
    """A unified diff, colored like ``git diff`` on a terminal (one write
    for the whole block: diffs of big modules have thousands of lines)."""
    c = console()
    lines = list(lines)
    if not c.is_terminal:
        c.file.write(header + "\n" + "".join(ln + "\n" for ln in lines))
        return
    from rich.text import Text
    t = Text(header + "\n", style="bold cyan")
    for ln in lines:
        if ln.startswith("@@"):
            style = "cyan"
        elif ln.startswith("+"):
            style = "green"
        elif ln.startswith("-"):
            style = "red"
        else:
            style = None
        t.append(ln + "\n", style=style)
    c.print(t, end="")


def panel(title: str, body: str, style: str = "red") -> None:
    """A highlighted box (violations, pass failures)."""
    from rich.panel import Panel
    from rich.text import Text
    c = console()
    if c.is_terminal:
        c.print(Panel(Text(body), title=title, border_style=style, expand=False))
    else:
        c.print(f"== {title} ==")
        c.print(body)


def summary(text: str, ok: bool) -> None:
    _styled(text, ("bold green" if ok else "bold red"))


# ---------------------------------------------------------------------------
# Timelines (hlorun buffers): live ranges as horizontal bars
# ---------------------------------------------------------------------------

_KIND_STYLES = {"parameter": "blue", "output": "green", "constant": "magenta",
                "thread-local": "white", "temp": "yellow"}
_SPARK = " ▁▂▃▄▅▆▇█"


def timeline(title: str, rows: Sequence[tuple[str, str, str, int, int, str]], end: int,
             curve: Sequence[int] | None = None, curve_label: str = "live bytes",
             width: int | None = None) -> None:
    """A Gantt chart over logical time ``0..end``: one bar per row
    (label, size, where, start, end, kind), colored by kind, under an
    optional sparkline of ``curve`` (e.g. live bytes per time step).  Plain
    characters when stderr is not a terminal."""
    c = console()
    label_w = min(40, max([len(r[0]) for r in rows] + [len(curve_label), 5]))
    size_w = max([len(r[1]) for r in rows] + [4])
    where_w = max([len(r[2]) for r in rows] + [5])
    total_w = width or max(60, min(c.width if c.is_terminal else 120, 200))
    bar_w = max(20, total_w - label_w - size_w - where_w - 8)
    span = max(end, 1)

    def cells(start: int, stop: int) -> str:
        out = []
        for i in range(bar_w):
            lo = span * i / bar_w
            hi = span * (i + 1) / bar_w
            out.append("█" if start < hi and stop + 1 > lo else "·")
        return "".join(out)

    color = c.is_terminal
    if title:
        _styled(title, "bold" if color else None)
    if curve:
        peak = max(curve) or 1
        spark = []
        for i in range(bar_w):
            lo = int(len(curve) * i / bar_w)
            hi = max(lo + 1, int(len(curve) * (i + 1) / bar_w))
            v = max(curve[lo:hi])
            spark.append(_SPARK[min(8, (v * 8 + peak - 1) // peak)] if v else " ")
        line = f"{curve_label[:label_w].ljust(label_w)}  {'peak'.rjust(size_w)}  {''.ljust(where_w)}  "
        c.print(line + "".join(spark), style="cyan" if color else None)
    head = f"{'value'.ljust(label_w)}  {'size'.rjust(size_w)}  {'where'.ljust(where_w)}  0{('t=' + str(end)).rjust(bar_w - 1)}"
    c.print(head, style="bold" if color else None)
    for label, size, where, start, stop, kind in rows:
        lab = label if len(label) <= label_w else label[: label_w - 1] + "…"
        prefix = f"{lab.ljust(label_w)}  {size.rjust(size_w)}  {where.ljust(where_w)}  "
        if color:
            from rich.text import Text
            t = Text(prefix)
            t.append(cells(start, stop), style=_KIND_STYLES.get(kind, "white"))
            c.print(t)
        else:
            c.print(prefix + cells(start, stop))


# ---------------------------------------------------------------------------
# Shrinking progress (hlorun reduce)
# ---------------------------------------------------------------------------


class ShrinkProgress:
    """A progress bar for work that shrinks a module: the bar is the share
    of bytes removed so far; the text shows instructions and bytes (start
    -> now), tests run and the current step.  Without a terminal, one plain
    line per improvement (logs, CI).  ``enabled=False``: silent."""

    def __init__(self, title: str, instructions: int, nbytes: int, enabled: bool = True):
        self.title = title
        self.start = (instructions, nbytes)
        self.enabled = enabled
        self._live = None
        self._task = None
        self._last = (instructions, nbytes)
        if enabled and console().is_terminal:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
            self._live = Progress(TextColumn("{task.description}"), BarColumn(),
                                  TextColumn("{task.fields[size]}"), TextColumn("{task.fields[tests]}"),
                                  TimeElapsedColumn(), console=console(), transient=False)
            self._live.start()
            self._task = self._live.add_task(title, total=max(1, nbytes), completed=0,
                                             size=self._size(instructions, nbytes), tests="")

    def _size(self, instructions: int, nbytes: int) -> str:
        return (f"{self.start[0]} -> {instructions} instructions, "
                f"{self.start[1]} -> {nbytes} bytes")

    def update(self, instructions: int, nbytes: int, tests: int, step: str = "") -> None:
        if not self.enabled:
            return
        if self._live is not None:
            self._live.update(self._task, completed=self.start[1] - nbytes,
                              description=f"{self.title} [{step}]" if step else self.title,
                              size=self._size(instructions, nbytes), tests=f"{tests} tests")
            return
        if (instructions, nbytes) != self._last:
            self._last = (instructions, nbytes)
            console().print(f"{self.title}: {self._size(instructions, nbytes)} ({tests} tests"
                            + (f", {step}" if step else "") + ")")

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
