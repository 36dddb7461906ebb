"""Compare hlorun's final kernel list with XLA's after_optimizations for the
real dumps (S2 cnn_fp16, gemm_bias_gelu_bf16, S3 fp8_matmul_scaled): counts per
kernel category.

    python bench/kernel_lists.py [--pipeline gpu-cuda] [DUMP ...]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SHARED = Path(os.environ.get("HLORUN_SHARED", ROOT.parent / "shared"))
DUMPS = ("cnn_fp16", "gemm_bias_gelu_bf16", "fp8_matmul_scaled")


def compare(dump: str, pipeline: str = "gpu-cuda"):
    import hlorun
    from hlorun.kernels import compare_kernel_lists, kernel_list
    from hlorun.pipeline import RunOptions, run_pipeline
    from hlorun.pipeline_spec import load_pipeline
    d = SHARED / "xla-dumps" / dump
    before = next(d.glob("*.before_optimizations.txt"))
    after = next(d.glob("*gpu_after_optimizations.txt"))
    module = hlorun.load_module(before)
    res = run_pipeline(module, load_pipeline(pipeline).with_target(device="H200"), RunOptions())
    if res.exit_code:
        raise SystemExit(f"{dump}: pipeline failed: {res.failure or res.violations}")
    ours, theirs = kernel_list(module), kernel_list(hlorun.load_module(after))
    return ours, theirs, compare_kernel_lists(ours, theirs)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pipeline", default="gpu-cuda")
    ap.add_argument("dumps", nargs="*", default=list(DUMPS))
    args = ap.parse_args(argv)
    for dump in args.dumps:
        ours, theirs, rows = compare(dump, args.pipeline)
        print(f"## {dump}: {len(ours)} kernels (hlorun) vs {len(theirs)} (XLA)")
        print(f"{'category':48} {'hlorun':>6} {'XLA':>5}  ")
        for cat, a, b in rows:
            print(f"{cat:48} {a:6} {b:5}  {'match' if a == b else 'MISMATCH'}")
        print("hlorun:", ", ".join(f"{k.name}[{k.category}]" for k in ours))
        print("XLA:   ", ", ".join(f"{k.name}[{k.category}]" for k in theirs))
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
