"""compile --full-checks: checkers verify the whole module after every
changed pass instead of what changed (same findings, only slower)."""

from __future__ import annotations

from click.testing import CliRunner

from hlorun.cli import cli
from hlorun.cli.compile_options import options_from_params

from .conftest import REPO


def test_flag_reaches_the_options():
    opts, _ = options_from_params({"incremental_checks": False})
    assert opts.diagnostics.incremental_checks is False
    opts, _ = options_from_params({"incremental_checks": True})
    assert opts.diagnostics.incremental_checks is True


def test_full_and_incremental_checks_agree(tmp_path):
    src = REPO / "testdata" / "s2" / "cnn_fp16.hlo"
    outs = []
    for flag in ("--full-checks", "--incremental-checks"):
        out = tmp_path / f"out{flag}.hlo"
        r = CliRunner().invoke(cli, ["compile", str(src), flag, "-o", str(out), "--no-table",
                                      "--diff", "none"])
        assert r.exit_code == 0, r.output
        outs.append(out.read_text())
    assert outs[0] == outs[1]
