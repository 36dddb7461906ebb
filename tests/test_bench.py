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


def test_pipeline_scale_bench_generates_and_measures(tmp_path):
    """bench/pipeline_scale.py: a 1- and 2-layer JAX training step generated
    (bench extra), gpu-cuda run in child processes, a row each with the
    ratio to XLA's C++ parse and the cost growth between them."""
    import pytest
    pytest.importorskip("jax")
    r = subprocess.run([sys.executable, str(REPO / "bench" / "pipeline_scale.py"),
                        "--layers", "1,2", "--dir", str(tmp_path)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [ln for ln in r.stdout.splitlines() if ln.startswith("| transformer_L")]
    assert len(rows) == 2 and "FAILED" not in r.stdout
    cells = rows[1].split("|")
    assert int(cells[2].replace(",", "")) > int(rows[0].split("|")[2].replace(",", ""))
    assert "x XLA" not in rows[1] and "x)" in cells[4]  # the pipeline's ratio to XLA's parse
    assert "priority-fusion" in rows[1]
    assert "per-instruction cost growth" in r.stdout
    assert (tmp_path / "transformer_L2_bf16_train_step.hlo").read_text().startswith("HloModule")


def test_priority_fusion_dump_check_compares_first_updates(tmp_path):
    """bench/priority_fusion_dump_check.py reads XLA's pre-fusion module and
    priority_fusion_dump: the first update_priority of each producer (before
    any fusion in its computation) is compared, later ones are not."""
    (tmp_path / "m.0054.fusion.after_pipeline-start.before_variadic-op-splitter.txt").write_text(
        """HloModule t
ENTRY %main (x: f32[1024,1024]) -> f32[1024,1024] {
  %x = f32[1024,1024]{1,0} parameter(0)
  %c = f32[] constant(2)
  %b = f32[1024,1024]{1,0} broadcast(%c), dimensions={}
  %m = f32[1024,1024]{1,0} multiply(%x, %b)
  ROOT %n = f32[1024,1024]{1,0} negate(%m)
}
""")
    step = ('fusion_steps {{\n  update_priority {{\n    producer_name: "{p}"\n'
            '    consumer_names: "{c}"\n    us_fused: 99\n    us_unfused: 1\n  }}\n}}\n')
    (tmp_path / "m.priority_fusion_dump.txt").write_text(
        step.format(p="b", c="m") + step.format(p="m", c="n")
        + 'fusion_steps {\n  fusion {\n    fusion_name: "f"\n    producer_name: "b"\n'
          '    consumer_name: "m"\n  }\n}\n' + step.format(p="n", c="x"))
    r = subprocess.run([sys.executable, str(REPO / "bench" / "priority_fusion_dump_check.py"),
                        str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == "2 producers compared, 2 differ by more than 1%"
    assert "xla    1.0000 ->   99.0000" in r.stdout
