"""Every HLO file of XLA's tree that XLA's parser accepts (incl. the large
gzip'd model dumps) must parse, and printing must be a fixed point."""

from __future__ import annotations

import json

import pytest

import hlorun
from hlorun.text.fileio import read_text
from hlorun.text.parser import split_input_file

from .conftest import SHARED

MANIFEST = SHARED / "corpus/xla/files/manifest.json"
FILES = json.loads(MANIFEST.read_text())["files"] if MANIFEST.exists() else []
ACCEPTED = [f for f in FILES if f.get("stored") and f["format"] == "hlo_text"
            and (f["xla_parse"].get("parses") or f["xla_parse"].get("chunks_parsed"))]


@pytest.mark.slow
@pytest.mark.parametrize("entry", ACCEPTED, ids=lambda f: f["stored"])
def test_file_parses_and_prints_to_a_fixed_point(entry):
    text = read_text(SHARED / "corpus/xla/files" / entry["stored"])
    chunks = split_input_file(text) if entry.get("split_input_file_chunks") else [(1, text)]
    for _, chunk in chunks:
        m = hlorun.parse_module(chunk, entry["stored"])
        p1 = hlorun.print_module(m)
        assert hlorun.print_module(hlorun.parse_module(p1)) == p1


def test_corpus_size(shared):
    assert len(ACCEPTED) >= 400
