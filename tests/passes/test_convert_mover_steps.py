"""convert-mover on XLA's own ConvertMover steps: the session-7 H200 pass
dumps of fp8_delayed_scaling_mlp (stored in testdata/xla-pass-steps/
convert-mover) run ConvertMover at both of XLA's sites, the
"simplification-2" fixed point and "simplify_after_conv_canonicalization".
Our pass on XLA's input must give XLA's output (canonical form)."""

from __future__ import annotations

from pathlib import Path

import pytest

import hlorun
from hlorun.testing.fixtures import run_passes

STEPS = Path(__file__).resolve().parents[2] / "testdata" / "xla-pass-steps" / "convert-mover"


@pytest.mark.parametrize("site", ["simplification-2", "simplify_after_conv_canonicalization"])
def test_convert_mover_matches_xla_step(site):
    module = hlorun.load_module(STEPS / f"fp8_delayed_scaling_mlp.{site}.before.txt.gz")
    expected = hlorun.load_module(STEPS / f"fp8_delayed_scaling_mlp.{site}.after.txt.gz")
    module.compact_gte = expected.compact_gte
    assert hlorun.print_module(module, canonical=True) != \
        hlorun.print_module(expected, canonical=True)
    run_passes(module, [("convert-mover", {})])
    assert hlorun.print_module(module, canonical=True) == \
        hlorun.print_module(expected, canonical=True)
