"""convert-mover on XLA's own ConvertMover steps: the session-7 H200 pass
dumps of fp8_delayed_scaling_mlp (stored in testdata/xla-pass-steps/
convert-mover) run ConvertMover at both of XLA's sites, the
"simplification-2" fixed point and "simplify_after_conv_canonicalization".
Our pass on XLA's input must give XLA's output (canonical form)."""

from __future__ import annotations

import pytest

from .xla_steps import check_xla_step


@pytest.mark.parametrize("site", ["simplification-2", "simplify_after_conv_canonicalization"])
def test_convert_mover_matches_xla_step(site):
    check_xla_step("convert-mover", f"fp8_delayed_scaling_mlp.{site}", "convert-mover")
