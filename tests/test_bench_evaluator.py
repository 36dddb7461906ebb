"""The evaluator's benchmark scripts run and classify what they measure:
bench/compare_dumps.py (MATCH / DIFFER / NOT EVALUABLE per program),
bench/evaluator_speed.py and bench/check_numerics_cost.py."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

from .conftest import REPO, TESTDATA

DUMPS = TESTDATA / "xla-dumps"


def _program(root, name, before_text, after_text):
    d = root / "xla-dumps" / name
    d.mkdir(parents=True)
    (d / "m.before_optimizations.txt").write_text(before_text)
    (d / "m.sm_9.0a_gpu_after_optimizations.txt").write_text(after_text)


def test_compare_dumps_gives_one_verdict_per_program(tmp_path):
    src = DUMPS / "attention_dpa_cudnn"
    before = next(src.glob("*before_optimizations*")).read_text()
    after = next(src.glob("*gpu_after_optimizations*")).read_text()
    root = tmp_path / "dumps"
    shutil.copytree(src, root / "xla-dumps" / "attention_dpa_cudnn")
    # a wrong attention scale in the optimized module: XLA's result would differ
    _program(root, "wrong_scale", before, after.replace('"fmha_scale":0.125', '"fmha_scale":0.5'))
    # dropout cannot be reproduced: refused, not guessed
    _program(root, "dropout", before.replace('"dropout_rate":0.0', '"dropout_rate":0.1'),
             after.replace('"dropout_rate":0.0', '"dropout_rate":0.1'))
    out = tmp_path / "r.json"
    r = subprocess.run([sys.executable, str(REPO / "bench" / "compare_dumps.py"),
                        str(root / "xla-dumps"), "--json", str(out)],
                       capture_output=True, text=True, timeout=600)
    verdicts = {row["program"].split("/")[-1]: row["verdict"]
                for row in json.loads(out.read_text())["programs"]}
    assert verdicts == {"attention_dpa_cudnn": "MATCH", "wrong_scale": "DIFFER",
                        "dropout": "NOT EVALUABLE"}, r.stdout
    assert r.returncode == 1 and "3 programs: DIFFER 1, MATCH 1, NOT EVALUABLE 1" in r.stdout


def test_evaluator_speed_reports_ratios(tmp_path):
    out = tmp_path / "s.json"
    r = subprocess.run([sys.executable, str(REPO / "bench" / "evaluator_speed.py"), "--only",
                        "attention", "--repeat", "1", "--json", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    (row,) = json.loads(out.read_text())
    assert row["case"] == "dot_bf16_attention_bthd" and row["gflop"] > 0.2
    assert 0 < row["ratio"] <= row["ratio_with_conversions"] * 1.5
    assert "BLAS threads 1" in r.stdout


def test_check_numerics_cost_compares_plain_and_checked_compiles(tmp_path):
    module = next((DUMPS / "mixed_dtype_dot").glob("*before_optimizations*"))
    out = tmp_path / "c.json"
    r = subprocess.run([sys.executable, str(REPO / "bench" / "check_numerics_cost.py"), str(module),
                        "--rounds", "1", "--json", str(out)], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(out.read_text())
    assert [row["kind"] for row in doc["runs"]] == ["plain", "check-numerics=each"]
    assert doc["plain_cpu_s"] > 0 and doc["checked_cpu_s"] > 0
    assert doc["cpu_ratio"] == round(doc["checked_cpu_s"] / doc["plain_cpu_s"], 2)
    assert "ratio wall" in r.stdout and "cpu" in r.stdout
