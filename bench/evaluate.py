"""Evaluation speed of the numpy evaluator on training-step-sized modules.

    python bench/evaluate.py                 # bench/models + the shared dumps
    python bench/evaluate.py FILE.hlo ...    # any modules
    python bench/evaluate.py --repeat 5 --json out.json

Per module: instructions, estimated peak memory, parse time, evaluation time
(best of --repeat runs, seeded random inputs) and the evaluation's rate in
GFLOP/s of its dots and convolutions (2*M*N*K counted from the shapes).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hlorun.evaluate import Evaluator, random_inputs  # noqa: E402
from hlorun.evaluate.memory import estimate_peak_bytes, format_bytes  # noqa: E402
from hlorun.text.fileio import read_text  # noqa: E402
from hlorun.text.parser import parse_module  # noqa: E402

SHARED = ROOT.parent / "shared"


def default_modules() -> list[Path]:
    mods = sorted((ROOT / "bench" / "models").glob("*.hlo")) + sorted((ROOT / "bench" / "models" / "h200").glob("*.hlo"))
    for case in ("cnn_fp16", "gemm_bias_gelu_bf16"):
        d = SHARED / "xla-dumps" / case
        mods += sorted(d.glob("*before_optimizations.txt")) + sorted(d.glob("*gpu_after_optimizations.txt"))
    return [m for m in mods if m.exists()]


def matmul_flops(module) -> int:
    """2*M*N*K of every dot, GEMM custom call and convolution reached."""
    total = 0
    for ins in module.instructions():
        if ins.opcode == "dot":
            k = math.prod(ins.operands[0].shape.dimensions[d] for d in ins.int_list("lhs_contracting_dims"))
            total += 2 * ins.shape.element_count * k
        elif ins.opcode in ("convolution",) or (
                ins.opcode == "custom-call" and (ins.custom_call_target or "").startswith("__cudnn$conv")):
            out = ins.shape.tuple_shapes[0] if ins.shape.is_tuple else ins.shape
            kern = ins.operands[1].shape
            o = max(1, out.dimensions[-1]) if out.dimensions else 1
            total += 2 * out.element_count * (kern.element_count // o)
        elif ins.opcode == "custom-call" and (ins.custom_call_target or "").startswith("__cublas"):
            bc = ins.backend_config or {}
            cfg = bc.get("gemm_backend_config", {}) if isinstance(bc, dict) else {}
            dims = cfg.get("dot_dimension_numbers", {}).get("lhs_contracting_dimensions", [])
            k = math.prod(ins.operands[0].shape.dimensions[int(d)] for d in dims)
            out = ins.shape.tuple_shapes[0] if ins.shape.is_tuple else ins.shape
            total += 2 * out.element_count * k
    return total


def blas_baseline() -> float:
    """GFLOP/s of numpy's own f32 matmul here (256x1024 @ 1024x1024, best
    of 5): the ceiling for dot-bound modules on this machine."""
    import numpy as np
    a = np.random.default_rng(0).random((256, 1024), dtype=np.float32)
    b = np.random.default_rng(1).random((1024, 1024), dtype=np.float32)
    best = min(_timed(lambda: a @ b) for _ in range(5))
    return 2 * 256 * 1024 * 1024 / best / 1e9


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def bench_one(path: Path, repeat: int, seed: int) -> dict:
    text = read_text(path)
    t = time.perf_counter()
    module = parse_module(text, str(path))
    parse_s = time.perf_counter() - t
    args = random_inputs(module, seed)
    peak, _ = estimate_peak_bytes(module)
    times = []
    for _ in range(repeat):
        ev = Evaluator(module, max_bytes=None)
        t = time.perf_counter()
        ev.evaluate(args)
        times.append(time.perf_counter() - t)
    best = min(times)
    flops = matmul_flops(module)
    return {"module": str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path),
            "instructions": module.instruction_count, "estimated_peak_bytes": peak,
            "parse_seconds": round(parse_s, 4), "evaluate_seconds": round(best, 4),
            "evaluate_seconds_all": [round(x, 4) for x in times],
            "matmul_gflop": round(flops / 1e9, 3),
            "gflop_per_second": round(flops / 1e9 / best, 2) if best > 0 else None}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("modules", nargs="*", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    mods = a.modules or default_modules()
    rows = []
    base = blas_baseline()
    print(f"numpy f32 matmul on this machine: {base:.1f} GFLOP/s")
    print(f"{'module':70s} {'instr':>6s} {'peak':>10s} {'parse s':>8s} {'eval s':>8s} {'GFLOP':>7s} {'GFLOP/s':>8s}")
    for m in mods:
        r = bench_one(m, a.repeat, a.seed)
        rows.append(r)
        name = r["module"] if len(r["module"]) <= 70 else "..." + r["module"][-67:]
        print(f"{name:70s} {r['instructions']:6d} {format_bytes(r['estimated_peak_bytes']):>10s} "
              f"{r['parse_seconds']:8.3f} {r['evaluate_seconds']:8.3f} {r['matmul_gflop']:7.2f} "
              f"{(r['gflop_per_second'] or 0):8.1f}")
    if a.json:
        a.json.write_text(json.dumps({"repeat": a.repeat, "seed": a.seed, "numpy_matmul_gflops": round(base, 2),
                                      "results": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
