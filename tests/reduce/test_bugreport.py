"""``hlorun compile ... --bug-report``: the bundle's contents, that it
reproduces on its own, and that no local absolute path is inside."""

from __future__ import annotations

import json
import os
import re
import shutil
import tarfile
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from hlorun.cli import cli
from hlorun.pipeline.loader import load_pipeline

from ..conftest import REPO, TESTDATA

S0 = TESTDATA / "s0" / "jit_dot_general_consumer.hlo"
ATTENTION = TESTDATA / "reduce" / "s0_attention_block.hlo"

#: Absolute paths of this machine (and any /home, /tmp ... path at all).
_ABS = re.compile(r"(?<![\w.~<>)\]/])/(home|Users|tmp|work|root|var|private|usr|opt|mnt|srv)/")


def run(*args, cwd=None):
    old = os.getcwd()
    if cwd:
        os.chdir(cwd)
    try:
        return CliRunner().invoke(cli, [str(a) for a in args])
    finally:
        os.chdir(old)


def untar(path: Path, into: Path) -> Path:
    with tarfile.open(path) as t:
        names = t.getnames()
        assert all(n.startswith("hlorun-bug-report/") for n in names)
        for m in t.getmembers():
            assert m.mtime == 0 and m.uid == 0 and not m.uname
        t.extractall(into, filter="data")
    return into / "hlorun-bug-report"


def assert_no_local_paths(bundle: Path, extra: list[str]) -> None:
    local = [str(REPO), os.path.expanduser("~"), tempfile.gettempdir(), os.getcwd()] + extra
    for f in bundle.rglob("*"):
        if not f.is_file():
            continue
        text = f.read_text()
        for p in local:
            if len(p) > 1:
                assert p not in text, (f.name, p)
        m = _ABS.search(text)
        assert m is None, (f.name, text[max(0, m.start() - 60): m.end() + 60])


@pytest.fixture
def model(tmp_path):
    """The S0 module with an absolute source path in its metadata, in a
    directory of its own (as a user's would be)."""
    d = tmp_path / "home" / "someone" / "project"
    d.mkdir(parents=True)
    text = S0.read_text().replace(
        "rhs_contracting_dims={0,3}",
        f'rhs_contracting_dims={{0,3}}, metadata={{op_name="jit(f)/dot_general" '
        f'source_file="{d}/attention.py" source_line=12}}')
    p = d / "model.hlo"
    p.write_text(text)
    return p


def test_bug_report_tarball_contents(model, tmp_path):
    out = tmp_path / "out" / "report.tar.gz"
    pipe = tmp_path / "pipes" / "historical.yaml"
    pipe.parent.mkdir()
    shutil.copy(REPO / "hlorun" / "pipelines" / "gpu-rocm-41481.yaml", pipe)
    r = run("compile", model, "--pipeline", pipe, "--disable-passes", "cse,triton-gemm-rewriter",
            "--bug-report", out,
            "--reduce", "--diff", "none")
    assert r.exit_code == 2, r.output  # the compile's own verdict is kept
    assert f"bug report: {out}" in r.stderr
    b = untar(out, tmp_path / "x")
    names = sorted(str(f.relative_to(b)) for f in b.rglob("*") if f.is_file())
    for want in ["README.md", "input.hlo", "reduced.hlo", "pipeline.yaml", "command.txt",
                 "failure.txt", "target.json", "result.json", "reduce.json", "versions.json",
                 "repro/before.hlo", "repro/repro.yaml"]:
        assert want in names, names
    readme = (b / "README.md").read_text()
    assert "Invariant **reshape-is-bitcast** is violated" in readme
    assert "hlo_normalization/cublas-gemm-rewriter" in readme
    assert "    hlorun compile input.hlo --pipeline pipeline.yaml\n" in readme
    assert "--xla_disable_hlo_passes=cse" in readme and "run_hlo_module --platform=ROCM" in readme
    assert "run reshape-decomposer before layout_normalization" in readme
    cmd = (b / "command.txt").read_text()
    assert "hlorun compile model.hlo --pipeline historical.yaml" in cmd and "--disable-passes cse" in cmd
    assert "# disabled by this command" in (b / "pipeline.yaml").read_text()
    assert load_pipeline(str(b / "pipeline.yaml")).name == "gpu-rocm-41481"
    assert json.loads((b / "target.json").read_text())["device"] == "MI300X"
    v = json.loads((b / "versions.json").read_text())
    assert v["hlorun"] and v["python"] and "numpy" in v["packages"]
    assert "ReshapeIsBitcast" in (b / "failure.txt").read_text()
    red = json.loads((b / "reduce.json").read_text())
    assert red["end"]["bytes"] < red["start"]["bytes"] and not red["flaky"]["flaky"]
    assert 'source_file="attention.py"' in (b / "input.hlo").read_text()
    assert_no_local_paths(b, [str(model.parent), str(tmp_path)])
    # the one-line command reproduces inside the bundle, as do the reduced and
    # single-pass modules
    for args in (["input.hlo", "--pipeline", "pipeline.yaml"],
                 ["reduced.hlo", "--pipeline", "pipeline.yaml"],
                 ["repro/before.hlo", "--pipeline", "repro/repro.yaml"]):
        rr = run("compile", *args, "--diff", "none", cwd=b)
        assert rr.exit_code == 2 and "reshape-is-bitcast" in rr.stderr, args


def test_bug_report_directory_and_pass_failure(tmp_path):
    d = tmp_path / "bundle"
    r = run("compile", ATTENTION, "--pipeline", "gpu-rocm-41481", "--keep-going",
            "--disable-passes", "triton-gemm-rewriter",
            "--bug-report", d, "--diff", "none", "--no-table")
    assert r.exit_code == 2, r.output
    readme = (d / "README.md").read_text()
    assert "Pass **layout_normalization**" in readme and "RET_CHECK" in readme
    assert "--keep-going" in readme  # compile flags that matter stay in the reproducer
    assert not (d / "reduced.hlo").exists()
    assert_no_local_paths(d, [str(tmp_path)])


def test_bug_report_flags_are_checked():
    r = run("compile", S0, "--reduce")
    assert r.exit_code == 1 and "--reduce needs --bug-report" in r.stderr


def test_bug_report_with_autotuner_decisions_and_cache(tmp_path):
    cache = tmp_path / "cache" / "autotune.json"
    pipe = tmp_path / "forced.yaml"
    pipe.write_text(f"name: forced\ninclude: [{TESTDATA / 'reduce' / 's0_autotune_41481.yaml'}]\n"
                    f"autotune: {{force_backend: hipblaslt, cache: {cache}}}\n")
    d = tmp_path / "bundle"
    r = run("compile", ATTENTION, "--pipeline", pipe, "--bug-report", d, "--diff", "none", "--no-table")
    assert r.exit_code == 2, r.output
    decisions = json.loads((d / "autotune.json").read_text())["decisions"]
    assert [x["winner"]["backend"] for x in decisions] == ["hipblaslt", "hipblaslt"]
    assert "gemm_fusion_dot" in (d / "autotune_cache.json").read_text()
    assert "cache: autotune_cache.json" in (d / "pipeline.yaml").read_text()
    readme = (d / "README.md").read_text()
    assert "--xla_gpu_enable_triton_gemm=false --xla_gpu_enable_cublaslt=true" in readme
    assert "first after pass #" in readme and "autotuner/autotuner" in readme
    assert_no_local_paths(d, [str(tmp_path)])
    rr = run("compile", "input.hlo", "--pipeline", "pipeline.yaml", "--diff", "none", cwd=d)
    assert rr.exit_code == 2 and "reshape-is-bitcast" in rr.stderr
