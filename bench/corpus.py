"""Iterate the external oracles (XLA corpus and real XLA:GPU dumps) for the
benchmarks and conformance reports.  Paths follow tests/conftest.py: the
corpus is ``../shared`` beside the checkout, or ``$HLORUN_SHARED``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterator

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("HLORUN_SHARED", REPO.parent / "shared"))
CORPUS = SHARED / "corpus" / "xla"

#: Non-HLO text files that XLA writes next to its HLO dumps.
NOT_HLO = ("buffer-assignment", "memory-usage-report", "live-range", "thunk_",
           "priority_fusion_dump")


def dump_paths() -> list[Path]:
    """Every HLO ``.txt`` file of the real XLA:GPU dumps."""
    root = SHARED / "xla-dumps"
    return sorted(p for p in root.glob("**/*.txt") if not any(s in p.name for s in NOT_HLO))


def parser_cases() -> list[dict]:
    """XLA's parser test cases (manifest entries), with ``path`` added."""
    data = json.loads((CORPUS / "parser" / "manifest.json").read_text())
    for c in data["cases"]:
        c["path"] = CORPUS / "parser" / c["file"]
    return data["cases"]


def file_entries() -> list[dict]:
    """The ``.hlo`` files of XLA's tree that XLA's parser accepts."""
    data = json.loads((CORPUS / "files" / "manifest.json").read_text())
    return [f for f in data["files"] if f.get("stored") and f.get("format") == "hlo_text"
            and (f["xla_parse"].get("parses") or f["xla_parse"].get("chunks_parsed"))]


def file_chunks(entry: dict) -> Iterator[tuple[str, int, str]]:
    """(label, first line, text) of each input of a corpus file (split on
    ``// -----`` where the file is a split-input file)."""
    from hlorun.text.fileio import read_text
    from hlorun.text.parser import split_input_file
    text = read_text(CORPUS / "files" / entry["stored"])
    if entry.get("split_input_file_chunks"):
        for line, chunk in split_input_file(text):
            yield f"{entry['stored']}:{line}", line, chunk
    else:
        yield entry["stored"], 1, text


def pass_modules() -> list[dict]:
    """HLO modules from XLA's pass tests that XLA's parser accepts."""
    data = json.loads((CORPUS / "passes" / "manifest.json").read_text())
    out = []
    for m in data["modules"]:
        if m.get("file") and (m.get("xla_parse") or {}).get("parses"):
            m["path"] = CORPUS / "passes" / m["file"]
            out.append(m)
    return out
