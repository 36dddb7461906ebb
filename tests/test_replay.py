"""``hlorun replay`` on every folder of the shared XLA dumps."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from hlorun.cli import cli
from hlorun.pipeline.replay import dump_dirs, scan

from .conftest import SHARED, shared_path

FOLDERS = sorted(p.name for p in (SHARED / "xla-dumps").iterdir() if p.is_dir()) \
    if (SHARED / "xla-dumps").is_dir() else ["cnn_fp16"]


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.mark.parametrize("folder", FOLDERS)
def test_replay_every_dump_folder(folder):
    d = shared_path("xla-dumps", folder)
    r = run("replay", d, "--format", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["schema"] == "hlorun.pipeline.replay/1" and doc["modules"]
    for sub, m in zip(dump_dirs(d), doc["modules"]):
        mod = scan(sub)[0]
        names = [p.name for p in sub.iterdir()]
        n_steps = len([n for n in names if re.match(r"module_\d+\.[^.]+\.\d{4}\.", n)])
        assert len(mod.steps) == n_steps
        # one replay step per file after before_optimizations (steps + after_optimizations)
        assert len(m["steps"]) == n_steps + 1
        assert [s["index"] for s in m["steps"]] == list(range(1, n_steps + 2))
        seqs = [s["seq"] for s in m["steps"] if s["seq"] is not None]
        assert seqs == sorted(seqs)
        assert any(s["changed"] for s in m["steps"])
    text = run("replay", d, "--diff", "none")
    assert text.exit_code == 0 and "changed the module" in text.stderr


def test_replay_s0_shows_xla_layout_and_gemm_steps():
    d = shared_path("xla-dumps", "dot_general_gqa_cublaslt")
    r = run("replay", d, "--format", "json")
    steps = json.loads(r.stdout)["modules"][0]["steps"]
    changed = [s["path"] for s in steps if s["changed"]]
    for p in ("optimization/dot_decomposer", "layout_assignment/layout-assignment",
              "layout_normalization/reshape-decomposer", "layout_normalization/layout_normalization",
              "hlo_normalization/cublas-gemm-rewriter"):
        assert p in changed
    assert "layout_normalization/pipeline-start" not in changed
    r = run("replay", d, "--diff-filter", "reshape-decomposer", "--diff", "changed")
    assert "--- before #21 layout_normalization/reshape-decomposer" in r.stderr
    assert "+  %bitcast.2 = f16[2,512,128]{2,1,0} bitcast(%copy)" in r.stderr
    assert r.stderr.count("--- before #") == 1


def test_replay_module_filter_and_errors(tmp_path):
    d = shared_path("xla-dumps", "gemm_sweep")
    r = run("replay", d, "--format", "json", "--module", "jit_f")
    assert r.exit_code == 0 and len(json.loads(r.stdout)["modules"]) == 28
    r = run("replay", shared_path("xla-dumps", "cnn_fp16"), "--module", "nomatch")
    assert r.exit_code == 1 and "no module matched" in r.stderr
    r = run("replay", tmp_path)
    assert r.exit_code == 1 and "no XLA dump files" in r.stderr


def test_replay_no_table_hides_the_table_like_compile():
    d = shared_path("xla-dumps", "dot_general_gqa_cublaslt")
    r = run("replay", d, "--no-table", "--diff", "none")
    assert r.exit_code == 0
    assert "pipeline/pass -> next" not in r.stderr and "64 dumped steps" in r.stderr
    r = run("replay", d, "--diff", "none")
    assert "pipeline/pass -> next" in r.stderr
