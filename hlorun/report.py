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
          justify: Sequence[str] | None = None) -> None:
    from rich.table import Table
    t = Table(title=title, show_lines=False, header_style="bold")
    for i, c in enumerate(columns):
        t.add_column(c, justify=(justify[i] if justify else "left"))  # type: ignore[arg-type]
    for r in rows:
        t.add_row(*[str(x) for x in r])
    console().print(t)


def write_stdout(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()
