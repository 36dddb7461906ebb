"""Compare hlorun's final kernel list with XLA's after_optimizations, program
by program, for real XLA:GPU dumps.

A kernel is what :func:`hlorun.analysis.kernels.kernel_list` lists (an instruction
of the entry or a control-flow computation other than parameter, constant,
tuple, get-tuple-element, bitcast ...); kernels match *kind for kind*
(:func:`hlorun.analysis.kernels.kind`: fusion kind with the backend kind of
``kCustom`` fusions, custom-call target, or opcode).  Targets (issue 14):
per program our count within +-10% of XLA's, and over all programs at least
90% of XLA's kernels matched kind for kind.

    python bench/kernel_lists.py [--pipeline gpu-cuda] [--json] [DUMP ...]

DUMP is a folder holding ``*before_optimizations.txt`` and
``*gpu_after_optimizations.txt`` (a path, or a name under
``../shared/xla-dumps`` or ``testdata/xla-dumps``); default: every such
folder there.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SHARED = Path(os.environ.get("HLORUN_SHARED", ROOT.parent / "shared"))
DUMP_ROOTS = (SHARED / "xla-dumps", ROOT / "testdata" / "xla-dumps")
DUMPS = ("cnn_fp16", "gemm_bias_gelu_bf16", "fp8_matmul_scaled")


def _one(d: Path, pattern: str, exclude: tuple[str, ...] = ()) -> Path | None:
    got = sorted(p for p in d.glob(pattern) if not any(x in p.name for x in exclude))
    return got[0] if got else None


def dump_files(d: Path) -> tuple[Path, Path] | None:
    """(before_optimizations, after_optimizations) of a dump folder."""
    before = _one(d, "*before_optimizations.txt*")
    after = _one(d, "*after_optimizations.txt*", ("buffer-assignment", "memory-usage", "live-range"))
    if before is None or after is None:
        return None
    return before, after


def resolve(name: str) -> Path:
    p = Path(name)
    if p.is_dir():
        return p
    for r in DUMP_ROOTS:
        if (r / name).is_dir():
            return r / name
    raise SystemExit(f"{name}: no such dump folder (looked in {', '.join(map(str, DUMP_ROOTS))})")


def all_dumps() -> list[Path]:
    out = []
    for r in DUMP_ROOTS:
        if r.is_dir():
            out += [d for d in sorted(r.iterdir()) if d.is_dir() and dump_files(d)]
    return out


@dataclass
class Row:
    program: str
    ours: list
    theirs: list
    matched: int
    kinds: list  # (kind, ours, theirs)
    failure: str | None = None

    @property
    def count_ok(self) -> bool:
        return abs(len(self.ours) - len(self.theirs)) <= 0.1 * len(self.theirs)

    def differences(self) -> str:
        if self.failure:
            return f"pipeline failed: {self.failure}"
        diff = [f"{k} {a}/{b}" for k, a, b in self.kinds if a != b]
        return "; ".join(diff) or "-"

    def to_json(self) -> dict:
        return {"program": self.program, "failure": self.failure,
                "ours": len(self.ours), "xla": len(self.theirs),
                "matched": self.matched, "count_within_10pct": self.count_ok,
                "kinds": [{"kind": k, "ours": a, "xla": b} for k, a, b in self.kinds]}


def _flag_disables(d: Path) -> list[str]:
    """The passes the dump's own XLA_FLAGS (info.json) switch off
    (``--xla_gpu_enable_triton_gemm=false`` ...), as ``hlorun compile
    --xla-flags`` applies them."""
    from hlorun.pipeline.select import parse_xla_flags
    info = d / "info.json"
    if not info.is_file():
        return []
    flags = json.loads(info.read_text()).get("xla_flags") or ""
    return list(parse_xla_flags(flags)["disable"])


def compare(dump: str | Path, pipeline: str = "gpu-cuda"):
    """(our kernels, XLA's kernels, per-category rows) for one dump."""
    row = compare_row(dump, pipeline)
    if row.failure:
        raise SystemExit(f"{row.program}: pipeline failed: {row.failure}")
    from hlorun.analysis.kernels import compare_kernel_lists
    return row.ours, row.theirs, compare_kernel_lists(row.ours, row.theirs)


def compare_row(dump: str | Path, pipeline: str = "gpu-cuda") -> Row:
    import hlorun
    from hlorun.analysis.kernels import compare_kinds, kernel_list, kinds_matched
    from hlorun.pipeline.run import RunOptions, run_pipeline
    from hlorun.pipeline.loader import load_pipeline
    d = resolve(str(dump))
    files = dump_files(d)
    if files is None:
        raise SystemExit(f"{d}: no before/after_optimizations modules")
    before, after = files
    module = hlorun.load_module(before)
    spec = load_pipeline(pipeline)
    res = run_pipeline(module, spec, RunOptions(disable=_flag_disables(d)))
    theirs = kernel_list(hlorun.load_module(after))
    if res.exit_code:
        f = res.failure
        why = f"{f.path}: {f.message}" if f is not None else str(res.violations)[:200]
        return Row(d.name, [], theirs, 0, compare_kinds([], theirs), why)
    ours = kernel_list(module)
    return Row(d.name, ours, theirs, kinds_matched(ours, theirs), compare_kinds(ours, theirs))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pipeline", default="gpu-cuda")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    ap.add_argument("--details", action="store_true", help="list every kernel")
    ap.add_argument("dumps", nargs="*")
    args = ap.parse_args(argv)
    dumps = [resolve(x) for x in args.dumps] if args.dumps else all_dumps()
    rows = [compare_row(d, args.pipeline) for d in dumps]
    total = sum(len(r.theirs) for r in rows)
    matched = sum(r.matched for r in rows)
    if args.json:
        print(json.dumps({"programs": [r.to_json() for r in rows], "xla_kernels": total,
                          "matched": matched}, indent=1))
        return 0
    print(f"| program | kernels ours/XLA | kinds matched | count +-10% | differences (kind ours/XLA) |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r.program} | {len(r.ours)}/{len(r.theirs)} | {r.matched}/{len(r.theirs)} | "
              f"{'yes' if r.count_ok else 'NO'} | {r.differences()} |")
    print(f"\nall programs: {matched}/{total} of XLA's kernels matched kind for kind "
          f"({100 * matched / max(1, total):.1f}%); "
          f"{sum(r.count_ok for r in rows)}/{len(rows)} programs within +-10% in count")
    if args.details:
        for r in rows:
            print(f"\n## {r.program}")
            print("hlorun:", ", ".join(f"{k.name}[{k.kind}]" for k in r.ours))
            print("XLA:   ", ", ".join(f"{k.name}[{k.kind}]" for k in r.theirs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
