"""The results file: JSON Lines, one record per module, appended as tasks
finish.

The first line is a header (``{"sweep": {...}}``: schema, the options that
shape the records); every other line is one module's record (it has a
``path``).  Each record is written with one ``write`` and flushed, so the
file is valid JSON Lines after Ctrl-C or a kill: at worst a last line cut
short by a crash, which :meth:`ResultsFile.open` drops on the next run.

Resume: running again with the same ``-o`` reads the file, skips the
modules it already holds (``--retry STATUS`` runs those with that status
again; the newer record wins) and appends.  A file written with other
options (another pipeline, check vs compile) is refused rather than mixed.
"""

from __future__ import annotations

import json
import os
from typing import Any, Iterable

from ..errors import UsageError
from .inputs import module_key
from .task import RECORD_SCHEMA


def read_records(path: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]], int]:
    """(header, module records, byte length of the valid prefix)."""
    header = None
    records: list[dict[str, Any]] = []
    good = 0
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos < len(data):
        end = data.find(b"\n", pos)
        if end < 0:
            break  # a last line cut short
        line = data[pos:end]
        try:
            doc = json.loads(line) if line.strip() else None
        except ValueError:
            if end + 1 >= len(data):
                break  # a garbled last line
            lineno = data.count(b"\n", 0, pos) + 1
            raise UsageError(f"{path}:{lineno}: not a JSON line; "
                             "is this a sweep results file?") from None
        if isinstance(doc, dict):
            if "sweep" in doc and header is None:
                header = doc["sweep"]
            elif "path" in doc:
                records.append(doc)
        pos = good = end + 1
    return header, records, good


def latest(records: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Module key -> its newest record."""
    out: dict[str, dict[str, Any]] = {}
    for r in records:
        out[module_key(r["path"])] = r
    return out


class ResultsFile:
    def __init__(self, path: str, identity: dict[str, Any]):
        self.path = path
        self.identity = identity
        self.previous: dict[str, dict[str, Any]] = {}
        self._f = None

    def open(self, restart: bool = False) -> dict[str, dict[str, Any]]:
        """Open for appending; returns the records already there (module key
        -> newest record), empty for a new file or with ``restart``.  The
        file's directory is created if needed."""
        try:
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
            return self._open(restart)
        except OSError as e:
            raise UsageError(f"{self.path}: cannot write the results: {e.strerror or e}") from None

    def _open(self, restart: bool) -> dict[str, dict[str, Any]]:
        exists = os.path.exists(self.path) and os.path.getsize(self.path) > 0
        if exists and not restart:
            header, records, good = read_records(self.path)
            if header is None and records:
                raise UsageError(f"{self.path}: has no sweep header; not resuming into it "
                                 "(use another -o, or --restart to overwrite)")
            if header is not None and header.get("options") != self.identity:
                raise UsageError(
                    f"{self.path} holds a sweep with other options ({_differs(header.get('options') or {}, self.identity)}); "
                    "use another -o, or --restart to overwrite it")
            if good != os.path.getsize(self.path):
                with open(self.path, "r+b") as f:
                    f.truncate(good)
            self.previous = latest(records)
            self._f = open(self.path, "a", encoding="utf-8")
            if header is None:
                self._write({"sweep": {"schema": RECORD_SCHEMA, "options": self.identity}})
        else:
            self._f = open(self.path, "w", encoding="utf-8")
            self._write({"sweep": {"schema": RECORD_SCHEMA, "options": self.identity}})
        return self.previous

    def _write(self, doc: dict[str, Any]) -> None:
        assert self._f is not None
        self._f.write(json.dumps(doc) + "\n")
        self._f.flush()

    def append(self, record: dict[str, Any]) -> None:
        self._write(record)

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None


def _differs(a: dict[str, Any], b: dict[str, Any]) -> str:
    keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    return ", ".join(f"{k}: {a.get(k)!r} there, {b.get(k)!r} now" for k in keys) or "?"


__all__ = ["ResultsFile", "latest", "read_records"]
