"""XLA's own pass steps (testdata/xla-pass-steps/PASS/*.before/after.txt.gz,
cut from XLA:GPU pass-by-pass dumps): run our pass on XLA's input and
compare with XLA's output in canonical form (names renumbered)."""

from __future__ import annotations

from pathlib import Path

import hlorun
from hlorun.testing.fixtures import run_passes

STEPS = Path(__file__).resolve().parents[2] / "testdata" / "xla-pass-steps"


def check_xla_step(folder: str, stem: str, pass_name: str) -> None:
    """``STEPS/folder/stem.before.txt.gz`` through ``pass_name`` must print
    as ``stem.after.txt.gz`` does, and XLA's step must change something."""
    module = hlorun.load_module(STEPS / folder / f"{stem}.before.txt.gz")
    expected = hlorun.load_module(STEPS / folder / f"{stem}.after.txt.gz")
    module.compact_gte = expected.compact_gte
    want = hlorun.print_module(expected, canonical=True)
    assert hlorun.print_module(module, canonical=True) != want
    run_passes(module, [(pass_name, {})])
    assert hlorun.print_module(module, canonical=True) == want
