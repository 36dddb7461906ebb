"""A small FileCheck (LLVM's) for pass fixtures.

Directives (``// CHECK...:`` comment lines in a fixture): ``CHECK`` (the
pattern appears at or after the current position), ``CHECK-NEXT`` (on the
next line), ``CHECK-SAME`` (later on the same line), ``CHECK-NOT`` (not
between the surrounding matches), ``CHECK-DAG`` (a group, any order),
``CHECK-LABEL`` (like CHECK; splits the input for the checks between
labels), ``CHECK-EMPTY`` (the next line is empty).

Patterns are literal text with ``{{regex}}`` pieces, ``[[NAME:regex]]``
captures and ``[[NAME]]`` uses; runs of horizontal whitespace match any run
of horizontal whitespace.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_DIRECTIVE = re.compile(r"^\s*//\s*(CHECK(?:-NEXT|-SAME|-NOT|-DAG|-LABEL|-EMPTY)?):(.*)$")


@dataclass
class Check:
    kind: str
    pattern: str
    line: int  # in the fixture


class FileCheckError(AssertionError):
    pass


def parse_checks(text: str, first_line: int = 1) -> list[Check]:
    out = []
    for i, ln in enumerate(text.split("\n")):
        m = _DIRECTIVE.match(ln)
        if m:
            out.append(Check(m.group(1), m.group(2).strip(), first_line + i))
    return out


def _compile(pattern: str, env: dict[str, str]) -> tuple[re.Pattern, list[str]]:
    out = []
    names: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("{{", i):
            j = pattern.index("}}", i + 2)
            out.append("(?:" + pattern[i + 2:j] + ")")
            i = j + 2
        elif pattern.startswith("[[", i):
            j = pattern.index("]]", i + 2)
            body = pattern[i + 2:j]
            if ":" in body:
                name, rx = body.split(":", 1)
                out.append(f"(?P<{name}>{rx})")
                names.append(name)
            else:
                if body not in env:
                    raise FileCheckError(f"undefined variable [[{body}]]")
                out.append(re.escape(env[body]))
            i = j + 2
        elif pattern[i] in " \t":
            j = i
            while j < len(pattern) and pattern[j] in " \t":
                j += 1
            out.append(r"[ \t]+")
            i = j
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out)), names


def filecheck(output: str, checks: list[Check]) -> None:
    """Raise FileCheckError (with the failing directive's line) unless
    ``output`` satisfies ``checks``."""
    env: dict[str, str] = {}
    pos = 0  # offset in output after the last match
    pending_not: list[Check] = []
    dag: list[Check] = []

    def search(check: Check, start: int, end: int | None = None):
        rx, names = _compile(check.pattern, env)
        m = rx.search(output, start, len(output) if end is None else end)
        return m, names

    def bind(m, names):
        for n in names:
            env[n] = m.group(n)

    def flush_nots(end: int) -> None:
        for c in pending_not:
            m, _ = search(c, pos, end)
            if m:
                raise FileCheckError(f"line {c.line}: CHECK-NOT: '{c.pattern}' found: "
                                     f"{_line_at(output, m.start())!r}")
        pending_not.clear()

    def flush_dag() -> None:
        nonlocal pos
        if not dag:
            return
        end_pos = pos
        used: list[tuple[int, int]] = []
        for c in dag:
            start = pos
            while True:
                m, names = search(c, start)
                if not m:
                    raise FileCheckError(f"line {c.line}: CHECK-DAG: '{c.pattern}' not found")
                if any(a < m.end() and m.start() < b for a, b in used):
                    start = m.start() + 1
                    continue
                break
            bind(m, names)
            used.append((m.start(), m.end()))
            end_pos = max(end_pos, m.end())
        flush_nots(min(a for a, _ in used))
        pos = end_pos
        dag.clear()

    for c in checks:
        if c.kind == "CHECK-DAG":
            dag.append(c)
            continue
        if c.kind == "CHECK-NOT":
            if dag:
                flush_dag()
            pending_not.append(c)
            continue
        flush_dag()
        if c.kind in ("CHECK", "CHECK-LABEL"):
            m, names = search(c, pos)
            if not m:
                raise FileCheckError(f"line {c.line}: {c.kind}: '{c.pattern}' not found after "
                                     f"{_line_at(output, pos)!r}")
        elif c.kind in ("CHECK-NEXT", "CHECK-EMPTY"):
            nl = output.find("\n", pos)
            if nl < 0:
                raise FileCheckError(f"line {c.line}: {c.kind}: no next line")
            end = output.find("\n", nl + 1)
            end = len(output) if end < 0 else end
            if c.kind == "CHECK-EMPTY":
                if output[nl + 1:end].strip():
                    raise FileCheckError(f"line {c.line}: CHECK-EMPTY: next line is "
                                         f"{output[nl + 1:end]!r}")
                flush_nots(nl + 1)
                pos = end
                continue
            m, names = search(c, nl + 1, end)
            if not m:
                raise FileCheckError(f"line {c.line}: CHECK-NEXT: '{c.pattern}' not on the next "
                                     f"line {output[nl + 1:end]!r}")
        else:  # CHECK-SAME
            end = output.find("\n", pos)
            end = len(output) if end < 0 else end
            m, names = search(c, pos, end)
            if not m:
                raise FileCheckError(f"line {c.line}: CHECK-SAME: '{c.pattern}' not on line "
                                     f"{_line_at(output, pos)!r}")
        flush_nots(m.start())
        bind(m, names)
        pos = m.end()
    flush_dag()
    flush_nots(len(output))


def _line_at(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return text[start:end if end >= 0 else len(text)]
