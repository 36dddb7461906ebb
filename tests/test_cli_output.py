"""Output that fits a terminal: the default compile of a JAX 4-layer
transformer training step stays under 400 lines in all, what matters comes
first, tables are summarized (full one flag away) and names are never cut;
--diff means the same in every command."""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys

import pytest
from click.testing import CliRunner

from hlorun.cli import cli

from .conftest import REPO, TESTDATA

MODEL = TESTDATA / "transformer" / "jax_4layer_train_step.hlo.gz"
S0_CONSUMER = TESTDATA / "s0" / "jit_dot_general_consumer.hlo"


def _in_a_terminal(argv, columns=100, timeout=300) -> str:
    """Run hlorun with stdout and stderr on a pseudo-terminal; all it printed."""
    master, slave = os.openpty()
    env = dict(os.environ, PYTHONPATH=str(REPO), COLUMNS=str(columns), LINES="50", TERM="xterm",
               HLORUN_PROGRESS_DELAY="0")
    p = subprocess.Popen([sys.executable, "-m", "hlorun", *map(str, argv)], cwd=REPO, env=env,
                         stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        r, _, _ = select.select([master], [], [], timeout)
        if not r:
            p.kill()
            raise TimeoutError(argv)
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    p.wait(timeout=timeout)
    os.close(master)
    text = b"".join(chunks).decode("utf-8", "replace")
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text).replace("\r", "")


@pytest.fixture(scope="module")
def transformer_terminal_output():
    return _in_a_terminal(["compile", MODEL])


def test_default_compile_of_a_4_layer_transformer_fits_in_400_lines(transformer_terminal_output):
    out = transformer_terminal_output
    lines = out.rstrip("\n").split("\n")
    assert len(lines) <= 400, len(lines)
    assert "…" not in out, "a table cut a name"
    assert "not printed on a terminal" in out  # the 6k-line module is not dumped on the screen
    # order: header, (problems), pass table, autotuner, kernels, diffs, status line last
    pos = [out.index(s) for s in ("pipeline gpu-cuda on jit_step", "pipeline/pass",
                                  "autotuner on H100", "final kernels:", "diffs (",
                                  "full diffs: --diff changed")]
    assert pos == sorted(pos), pos
    assert any(re.match(r"(ok|VIOLATION|PASS FAILURE): \d+ passes run", ln) for ln in lines[-2:])
    assert "--full-tables lists all" in out
    assert re.search(r"gemm_fusion_dot\.\d+", out)
    assert re.search(r"gpu-cuda\s+\S*━\S*\s+\d+/\d+", out), "no progress bar on the terminal"


def test_full_tables_and_no_table(tmp_path):
    out = tmp_path / "o.hlo"
    r = CliRunner().invoke(cli, ["compile", str(MODEL), "--diff", "none", "-o", str(out),
                                 "--full-tables"])
    assert r.exit_code in (0, 2), r.output
    rows = re.findall(r"^\s*\d+\s+\S+/\S+", r.stderr, re.M)
    n = int(re.search(r"(\d+) passes run", r.stderr).group(1))
    assert len(rows) >= n  # every pass has its row
    gemms = int(re.search(r"autotuner on \S+: (\d+) GEMM", r.stderr).group(1))
    assert len(re.findall(r"^gemm_fusion_[\w.]*\s", r.stderr, re.M)) == gemms
    r = CliRunner().invoke(cli, ["compile", str(MODEL), "--diff", "none", "-o", str(out),
                                 "--no-table"], env={"HLORUN_PROGRESS_DELAY": "0"})
    assert "━" not in r.stderr  # no progress bar when stderr is not a terminal
    assert "pipeline/pass" not in r.stderr and "cands = considered" not in r.stderr
    assert "autotuner on H100" in r.stderr  # the one-line summary stays


def test_violation_comes_first_and_names_the_culprit(tmp_path):
    r = CliRunner().invoke(cli, ["compile", "-p", "gpu-rocm-41481", str(S0_CONSUMER),
                                 "--force-backend", "hipblaslt", "-o", str(tmp_path / "o")])
    assert r.exit_code == 2
    err = r.stderr
    assert err.index("[reshape-is-bitcast]") < err.index("pipeline/pass") < err.index("diffs (")
    assert "first violated after #" in err and "autotuner/autotuner" in err


@pytest.mark.parametrize("command", ["compile", "opt", "replay", "diff-pipelines"])
def test_diff_has_one_meaning_everywhere(command):
    r = CliRunner().invoke(cli, [command, "--help"])
    assert "--diff [short|changed|all|none]" in r.output, r.output


def test_opt_diff_shows_what_the_passes_did(tmp_path):
    src = TESTDATA / "s0" / "jit_dot_general.hlo"
    r = CliRunner().invoke(cli, ["opt", str(src), "--passes", "dot_decomposer", "--diff", "changed",
                                 "-o", str(tmp_path / "o.hlo")])
    assert r.exit_code == 0, r.output
    assert "--- before #1 opt/dot_decomposer" in r.stderr and re.search(r"^\+.*transpose", r.stderr, re.M)
    r = CliRunner().invoke(cli, ["opt", str(src), "--passes", "dot_decomposer"])
    assert "---" not in r.stderr  # opt's default: no diff


def test_json_is_proportionate():
    r = CliRunner().invoke(cli, ["compile", str(MODEL), "--format", "json"])
    doc_size = len(r.stdout)
    assert doc_size < 600_000, doc_size  # was 5.4 MB: remarks and every candidate
    assert '"candidates": [' not in r.stdout and '"module_text"' not in r.stdout


def test_compact_diffs_keep_one_line_of_context_and_a_budget():
    from hlorun.report import textout
    d = ["@@ -1,9 +1,9 @@ main", " a", " b", " c", "-d", "+e", " f", " g", " h"]
    assert textout.tighten(d) == ["@@ -1,9 +1,9 @@ main", " c", "-d", "+e", " f"]
    shown = []
    orig = textout.report.diff_block, textout.report.info
    textout.report.diff_block = lambda h, lines: shown.append((h, list(lines)))
    textout.report.info = lambda m: shown.append((m, []))
    try:
        diffs = [(f"--- before #{i} p/x\n+++ after  #{i} p/x", ["@@ x"] + [f"+{j}" for j in range(40)])
                 for i in range(100)]
        textout.render_short(diffs)
    finally:
        textout.report.diff_block, textout.report.info = orig
    body = sum(len(lines) + 1 for _, lines in shown)
    assert body <= textout.DIFF_BUDGET + textout.DIFF_HEADERS + 20
    assert shown[1][0] == "--- #0 p/x  +40 -0" and shown[1][1][-1] == "... 31 more diff lines"
    assert any(h.startswith("... ") and "more changed passes" in h for h, _ in shown)
    assert shown[-1][0].startswith("full diffs: --diff changed")


def test_json_lines_stream_passes_then_the_report(tmp_path):
    import json
    r = CliRunner().invoke(cli, ["compile", "-p", "gpu-rocm-41481", "--force-backend", "hipblaslt",
                                 str(S0_CONSUMER), "--format", "jsonl", "-o", str(tmp_path / "o")])
    assert r.exit_code == 2
    docs = [json.loads(ln) for ln in r.stdout.splitlines()]
    kinds = [d["event"] for d in docs]
    n = kinds.count("pass")
    assert n > 10 and kinds[:n] == ["pass"] * n and kinds[-1] == "report"
    assert [d["index"] for d in docs[:n]] == list(range(1, n + 1))
    (v,) = [d for d in docs if d["event"] == "violation"]
    assert v["rule"] == "reshape-is-bitcast" and v["after_pass"] == "autotuner/autotuner"
    assert docs[-1]["status"] == "violation" and "passes" not in docs[-1]
    assert docs[-1]["summary"]["passes_run"] == n
