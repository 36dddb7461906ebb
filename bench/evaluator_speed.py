"""Dot and convolution speed of the numpy evaluator against numpy's own f32
matmul on the same work, in one run (so both see the same machine load).

    python bench/evaluator_speed.py [--repeat 5] [--threads 1] [--only NAME] [--json out.json]

For each case: an HLO module with one dot or convolution, evaluated by
``hlorun.evaluate.Evaluator`` on seeded inputs, and the equivalent f32 GEMM
(same batch, M, N, K; a convolution's im2col GEMM) as one ``np.matmul`` on
contiguous f32 arrays: the BLAS ceiling.  The two are timed alternately,
best of --repeat each.  Prints GFLOP/s (2*M*N*K per second) of both and
the ratio evaluator / numpy (1.0 = the evaluator adds nothing to BLAS).
For bf16/f16 cases a second baseline adds what numpy itself must do around
that GEMM: widen the operands to f32 and round the result back (column
``+conv``, ratio ``ev/+conv``).

Times are CPU seconds of this process (``time.process_time``) with BLAS on
--threads threads (default 1, set through OPENBLAS_NUM_THREADS /
OMP_NUM_THREADS / MKL_NUM_THREADS before numpy loads): on a machine shared
with other jobs, wall time mostly measures the other jobs.  With one thread
CPU time is the work itself; wall-clock GFLOP/s are printed too.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _threads_from_argv(argv) -> str:
    """BLAS reads its thread count when numpy loads: set it before that."""
    argv = list(sys.argv[1:] if argv is None else argv)
    for i, arg in enumerate(argv):
        if arg.startswith("--threads="):
            return arg.split("=", 1)[1]
        if arg == "--threads" and i + 1 < len(argv):
            return argv[i + 1]
    return "1"


def _dot(name, ty, lhs, rhs, out, dims, gemm):
    text = (f"HloModule {name}\n\nENTRY e {{\n  a = {ty}[{','.join(map(str, lhs))}] parameter(0)\n"
            f"  b = {ty}[{','.join(map(str, rhs))}] parameter(1)\n"
            f"  ROOT d = {ty}[{','.join(map(str, out))}] dot(a, b), {dims}\n}}\n")
    return name, text, gemm


def _conv(name, ty, lhs, rhs, out, attrs, gemm):
    text = (f"HloModule {name}\n\nENTRY e {{\n  x = {ty}[{','.join(map(str, lhs))}] parameter(0)\n"
            f"  w = {ty}[{','.join(map(str, rhs))}] parameter(1)\n"
            f"  ROOT c = {ty}[{','.join(map(str, out))}] convolution(x, w), {attrs}\n}}\n")
    return name, text, gemm


#: (name, HLO text, (batch, M, N, K) of the equivalent GEMM)
CASES = [
    _dot("dot_f32_1024", "f32", (1024, 1024), (1024, 1024), (1024, 1024),
         "lhs_contracting_dims={1}, rhs_contracting_dims={0}", (1, 1024, 1024, 1024)),
    _dot("dot_f32_1024_transposed", "f32", (1024, 1024), (1024, 1024), (1024, 1024),
         "lhs_contracting_dims={0}, rhs_contracting_dims={1}", (1, 1024, 1024, 1024)),
    _dot("dot_bf16_batched", "bf16", (32, 256, 128), (32, 128, 256), (32, 256, 256),
         "lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}",
         (32, 256, 256, 128)),
    _dot("dot_bf16_attention_bthd", "bf16", (4, 256, 8, 64), (4, 256, 8, 64), (4, 8, 256, 256),
         "lhs_batch_dims={0,2}, lhs_contracting_dims={3}, rhs_batch_dims={0,2}, rhs_contracting_dims={3}",
         (32, 256, 256, 64)),
    _conv("conv_f32_nhwc_3x3", "f32", (8, 56, 56, 64), (3, 3, 64, 64), (8, 56, 56, 64),
          "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f", (1, 8 * 56 * 56, 64, 64 * 9)),
    _conv("conv_bf16_nchw_3x3_stride2", "bf16", (16, 64, 64, 64), (128, 64, 3, 3), (16, 128, 32, 32),
          "window={size=3x3 stride=2x2 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01",
          (1, 16 * 32 * 32, 128, 64 * 9)),
]


def _timed(fn) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one call."""
    c, t = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - c, time.perf_counter() - t


def run_case(name, text, gemm, repeat):
    import numpy as np

    from hlorun.evaluate import Evaluator, random_inputs
    from hlorun.text.parser import parse_module
    module = parse_module(text, f"{name}.hlo")
    args = random_inputs(module, 0)
    b, m, n, k = gemm
    rng = np.random.default_rng(0)
    a32 = rng.standard_normal((b, m, k), dtype=np.float32)
    b32 = rng.standard_normal((b, k, n), dtype=np.float32)
    if b == 1:
        a32, b32 = a32[0], b32[0]
    flop = 2.0 * b * m * n * k
    ev = lambda: Evaluator(module, max_bytes=None).evaluate(args)  # noqa: E731
    mm = lambda: np.matmul(a32, b32)  # noqa: E731
    out_dtype = ev().dtype

    def mm_narrow():
        """numpy's least work for a narrow-float op: widen the operands,
        one f32 GEMM, round the result (as many elements as the op's)."""
        for x in args:
            x.astype(np.float32)
        r = np.matmul(a32, b32)
        return r.reshape(-1)[:res_size].astype(out_dtype)
    res_size = int(np.prod(ev().shape))
    narrow = out_dtype != np.float32
    mm(), mm_narrow()  # warm up (allocator, BLAS threads)
    inf = float("inf")
    t_np, t_ev, w_np, w_ev, t_nn = inf, inf, inf, inf, inf
    for _ in range(repeat):  # alternate, so all see the same load
        c, w = _timed(mm)
        t_np, w_np = min(t_np, c), min(w_np, w)
        if narrow:
            t_nn = min(t_nn, _timed(mm_narrow)[0])
        c, w = _timed(ev)
        t_ev, w_ev = min(t_ev, c), min(w_ev, w)
    t_np, t_ev = max(t_np, 1e-6), max(t_ev, 1e-6)
    t_nn = t_np if not narrow else max(t_nn, 1e-6)
    return {"case": name, "gflop": round(flop / 1e9, 3),
            "numpy_cpu_ms": round(t_np * 1e3, 2), "numpy_gflops": round(flop / t_np / 1e9, 1),
            "evaluator_cpu_ms": round(t_ev * 1e3, 2), "evaluator_gflops": round(flop / t_ev / 1e9, 1),
            "ratio": round(t_np / t_ev, 3),
            "numpy_with_conversions_cpu_ms": round(t_nn * 1e3, 2),
            "ratio_with_conversions": round(t_nn / t_ev, 3),
            "numpy_wall_gflops": round(flop / w_np / 1e9, 1),
            "evaluator_wall_gflops": round(flop / w_ev / 1e9, 1),
            "wall_ratio": round(w_np / w_ev, 3)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", default="1", help="BLAS threads (default 1)")
    ap.add_argument("--only", help="run the cases whose name contains this")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    rows = []
    print(f"BLAS threads {os.environ.get('OPENBLAS_NUM_THREADS')}; CPU-time GFLOP/s "
          "(wall-clock in the last two columns)")
    print(f"{'case':30s} {'GFLOP':>7s} {'numpy ms':>9s} {'GFLOP/s':>8s} {'eval ms':>9s} "
          f"{'GFLOP/s':>8s} {'eval/numpy':>10s} {'+conv ms':>9s} {'ev/+conv':>8s} "
          f"{'wall np':>8s} {'wall ev':>8s}")
    for name, text, gemm in CASES:
        if a.only and a.only not in name:
            continue
        r = run_case(name, text, gemm, a.repeat)
        rows.append(r)
        print(f"{name:30s} {r['gflop']:7.2f} {r['numpy_cpu_ms']:9.1f} {r['numpy_gflops']:8.1f} "
              f"{r['evaluator_cpu_ms']:9.1f} {r['evaluator_gflops']:8.1f} {r['ratio']:10.2f} "
              f"{r['numpy_with_conversions_cpu_ms']:9.1f} {r['ratio_with_conversions']:8.2f} "
              f"{r['numpy_wall_gflops']:8.1f} {r['evaluator_wall_gflops']:8.1f}", flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    _n = _threads_from_argv(None)
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_var] = _n
    sys.exit(main())
