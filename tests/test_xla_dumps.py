"""Every HLO .txt file in the real XLA:GPU dumps parses and prints back byte
for byte (XLA's own printing, compact GTE operands included)."""

from __future__ import annotations

import pytest

import hlorun

from .conftest import SHARED

NOT_HLO = ("buffer-assignment", "memory-usage-report", "live-range", "thunk_",
           "priority_fusion_dump")
DUMPS = sorted(p for p in (SHARED / "xla-dumps").glob("**/*.txt")
               if not any(s in p.name for s in NOT_HLO)) if (SHARED / "xla-dumps").exists() else []


def test_dumps_present(shared):
    assert len(DUMPS) > 400


@pytest.mark.slow
@pytest.mark.parametrize("path", DUMPS, ids=lambda p: f"{p.parent.name}/{p.name[:60]}")
def test_dump_round_trips_exactly(path):
    text = path.read_text()
    module = hlorun.parse_module(text, str(path))
    assert hlorun.print_module(module).strip() == text.strip()
