"""The benchmark scripts run (bench/ is not a package: run them as scripts)."""

from __future__ import annotations

import json
import subprocess
import sys

from .conftest import REPO, shared_path


def test_parse_bench_reports_speed_memory_and_summary(tmp_path):
    f = sorted(shared_path("xla-dumps", "cnn_fp16").glob("*gpu_after_optimizations.txt"))[0]
    out = tmp_path / "r.json"
    r = subprocess.run([sys.executable, str(REPO / "bench" / "parse.py"), str(f), "-n", "2",
                        "--no-xla", "--json", str(out)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert "kinstr/s" in r.stdout and r.stdout.splitlines()[-1].startswith("summary: 1 files")
    data = json.loads(out.read_text())
    row = data["rows"][0]
    assert row["instructions"] > 100 and row["parse_mb_s"] > 0 and row["print_mb_s"] > 0
    assert 100 < row["peak_bytes_per_instr"] < 20000
    assert "XLA's parser not measured" in r.stdout
