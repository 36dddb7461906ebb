"""move_copy_to_users on XLA's own MoveCopyToUsers steps: XLA:GPU pass
dumps taken on an H200 in session 7 (layout_normalization, after
reshape-decomposer -> after move_copy_to_users) of two held-out programs,
stored in testdata/xla-pass-steps/move_copy_to_users.  Our pass on XLA's
input must give XLA's output (canonical form: names renumbered).

* fp8_delayed_scaling_mlp: ``convert(copy(weight))`` of both fp8 weights
  becomes ``copy(convert(weight))`` (the convert runs in the parameter's
  layout, the copy moves the f32 value);
* hmm_forward_scan_f32: three reduces of copies read the copied values
  directly (column reductions instead of transposes)."""

from __future__ import annotations

import pytest

from .xla_steps import check_xla_step


@pytest.mark.parametrize("program", ["fp8_delayed_scaling_mlp", "hmm_forward_scan_f32"])
def test_move_copy_to_users_matches_xla_step(program):
    check_xla_step("move_copy_to_users", program, "move_copy_to_users")
