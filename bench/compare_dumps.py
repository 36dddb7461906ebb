"""`hlorun compare` of XLA's own before/after optimization modules, with the
default inputs and tolerances, for every program in the XLA dump folders.
XLA's optimized module is correct by definition, so anything but MATCH is
an evaluator or tolerance problem (or a program the evaluator refuses).

    python bench/compare_dumps.py [DIR ...] [--timeout 600] [--json out.json]

DIR defaults to ../shared/xla-dumps and testdata/xla-dumps; every folder
below them holding a ``*before_optimizations*`` and a
``*gpu_after_optimizations*`` module (``.txt`` or ``.txt.gz``) is one
program.  Prints one line per program (MATCH / DIFFER / NOT EVALUABLE /
TIMEOUT, seconds) and the counts.  Exit 0 only when every program matches.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DIRS = [ROOT.parent / "shared" / "xla-dumps", ROOT / "testdata" / "xla-dumps",
                ROOT / "testdata" / "xla-dumps-holdout"]


def _pick(folder: Path, pattern: str) -> Path | None:
    for p in sorted(folder.glob(pattern)):
        if p.name.endswith((".txt", ".txt.gz")) and "buffer-assignment" not in p.name \
                and "memory-usage" not in p.name and "live-range" not in p.name:
            return p
    return None


def programs(dirs) -> list[tuple[str, Path, Path]]:
    out = []
    for base in dirs:
        base = Path(base)
        for folder in sorted({p.parent for p in base.rglob("*before_optimizations*")}):
            before = _pick(folder, "*before_optimizations*")
            after = _pick(folder, "*gpu_after_optimizations*")
            if before and after:
                out.append((str(folder.relative_to(base.parent.parent)), before, after))
    return out


def compare(before: Path, after: Path, timeout: float) -> tuple[str, str]:
    cmd = [sys.executable, "-m", "hlorun", "compare", str(before), str(after), "--format", "json"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return "TIMEOUT", f"over {timeout:g} s"
    if r.returncode == 1:
        last = [ln for ln in r.stderr.splitlines() if "error" in ln]
        return "NOT EVALUABLE", (last[0] if last else r.stderr.strip()[-200:])
    try:
        doc = json.loads(r.stdout)
    except json.JSONDecodeError:
        return "CRASH", r.stderr.strip()[-300:]
    if doc.get("ok"):
        return "MATCH", ""
    bad = [o for o in doc.get("outputs", []) if not o.get("ok")]
    return "DIFFER", "; ".join(f"output{o['output']}: {o.get('worst_ratio_to_tolerance', 0):.2g}x tol"
                               for o in bad[:4])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="*", default=DEFAULT_DIRS)
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    rows, counts = [], {}
    for name, before, after in programs(args.dirs):
        t0 = time.perf_counter()
        verdict, detail = compare(before, after, args.timeout)
        dt = time.perf_counter() - t0
        counts[verdict] = counts.get(verdict, 0) + 1
        rows.append({"program": name, "verdict": verdict, "seconds": round(dt, 2), "detail": detail})
        print(f"{verdict:14s} {dt:7.1f}s  {name}  {detail}", flush=True)
    total = len(rows)
    print(f"\n{total} programs: " + ", ".join(f"{v} {n}" for v, n in sorted(counts.items())))
    if args.json:
        Path(args.json).write_text(json.dumps({"programs": rows, "counts": counts}, indent=1))
    return 0 if counts.get("MATCH", 0) == total else 1


if __name__ == "__main__":
    sys.exit(main())
