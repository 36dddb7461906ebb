"""Cost of ``hlorun compile --check-numerics=each`` against the plain
compile of the same module, in one run (interleaved, so both see the same
machine load).

    python bench/check_numerics_cost.py [MODULE] [--rounds 2] [--pipeline gpu-cuda]

MODULE defaults to XLA's 2-layer bf16 transformer training step
(testdata/xla-dumps/transformer_2l_bf16, before optimizations).  Each round
runs the plain compile, then the checked one, as separate ``hlorun``
processes writing to a temporary file.  Prints wall seconds and CPU seconds
(user + system of the child, ``RUSAGE_CHILDREN``) of each run, the best of
each kind and the ratios checked / plain.  CPU time is the figure to trust
on a machine shared with other jobs (wall time there mostly measures them).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = next((ROOT / "testdata" / "xla-dumps" / "transformer_2l_bf16").glob(
    "*before_optimizations*"), None)


def _run(cmd: list[str]) -> tuple[float, float, int, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, r.returncode, r.stderr[-2000:]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("module", nargs="?", default=str(DEFAULT))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--pipeline", default="gpu-cuda")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "out.hlo")
        base = [sys.executable, "-m", "hlorun", "compile", a.module, "-p", a.pipeline, "-o", out,
                "--diff", "none"]
        for rnd in range(a.rounds):
            for kind, extra in (("plain", []), ("check-numerics=each", ["--check-numerics=each"])):
                wall, cpu, rc, err = _run(base + extra)
                rows.append({"round": rnd, "kind": kind, "wall_s": round(wall, 2),
                             "cpu_s": round(cpu, 2), "exit": rc})
                print(f"round {rnd}  {kind:22s} wall {wall:7.2f} s  cpu {cpu:7.2f} s  exit {rc}",
                      flush=True)
                if rc != 0:
                    print(err, file=sys.stderr)
    best = {}
    for kind in ("plain", "check-numerics=each"):
        mine = [r for r in rows if r["kind"] == kind]
        best[kind] = (min(r["wall_s"] for r in mine), min(r["cpu_s"] for r in mine))
    (pw, pc), (cw, cc) = best["plain"], best["check-numerics=each"]
    summary = {"module": a.module, "plain_wall_s": pw, "plain_cpu_s": pc, "checked_wall_s": cw,
               "checked_cpu_s": cc, "wall_ratio": round(cw / pw, 2), "cpu_ratio": round(cc / pc, 2),
               "runs": rows}
    print(f"best: plain wall {pw} s / cpu {pc} s; checked wall {cw} s / cpu {cc} s; "
          f"ratio wall {summary['wall_ratio']}x, cpu {summary['cpu_ratio']}x")
    if a.json:
        Path(a.json).write_text(json.dumps(summary, indent=1))
    return 0 if all(r["exit"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
