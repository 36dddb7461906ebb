"""Calibrate and check the autotuner's cost model against the real H200
autotuning logs (shared/xla-dumps/gemm_sweep).

    python bench/autotune_calibration.py            # agreement with the shipped constants
    python bench/autotune_calibration.py --json     # the same as JSON
    python bench/autotune_calibration.py --fit      # refit the constants (needs scipy), then
                                                    # leave-one-GEMM-out agreement

Figures: how often the model picks XLA's backend (XLA's PickBestConfig rule
applied to our estimates), the Spearman rank correlation between our
estimates and XLA's measured run times per GEMM (all Triton configs XLA
timed plus the best cuBLASLt algorithm), and the median relative error.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hlorun.autotune.calibrate import evaluate, evaluate_case  # noqa: E402
from hlorun.autotune.candidates import blas_candidates, triton_estimate  # noqa: E402
from hlorun.autotune.cost import PARAMS, CostParams  # noqa: E402
from hlorun.autotune.devices import H200  # noqa: E402
from hlorun.autotune.sweep import load_sweep  # noqa: E402

NAMES = ["launch_us", "blas_launch_us", "wave_latency_us", "feed_bytes_per_clk", "l2_factor",
         "pipe_c", "mma_sync", "tri_f16", "tri_tf32", "blas_f16", "blas_tf32"]


#: Physically plausible ranges (H100/H200): L2 bandwidth 2-4x HBM, the
#: legacy mma.sync path reaches at most ~80% of warp-group MMA, kernels at
#: most 95% of peak.
BOUNDS = [(1.0, 6.0), (1.0, 8.0), (0.1, 3.0), (16.0, 256.0), (2.0, 4.0), (0.0, 3.0), (0.3, 0.8),
          (0.3, 0.95), (0.1, 0.95), (0.3, 0.95), (0.1, 0.95)]


def to_params(x) -> CostParams:
    eff = dict(PARAMS.eff)
    eff[("triton", "f16")] = eff[("triton", "bf16")] = x[7]
    eff[("triton", "tf32")] = x[8]
    eff[("blas", "f16")] = eff[("blas", "bf16")] = x[9]
    eff[("blas", "tf32")] = x[10]
    return replace(PARAMS, launch_us=x[0], blas_launch_us=x[1], wave_latency_us=x[2],
                   feed_bytes_per_clk=x[3], l2_factor=x[4], pipe_c=x[5], mma_sync=x[6], eff=eff)


def from_params(p: CostParams):
    return [p.launch_us, p.blas_launch_us, p.wave_latency_us, p.feed_bytes_per_clk, p.l2_factor,
            p.pipe_c, p.mma_sync, p.eff[("triton", "f16")], p.eff[("triton", "tf32")],
            p.eff[("blas", "f16")], p.eff[("blas", "tf32")]]


def loss(x, cases) -> float:
    """Per GEMM: the level of the best Triton and the best BLAS estimate
    (what decides the backend), plus the shape of the Triton estimates
    relative to their best (what ranks the configs)."""
    if any(not lo <= v <= hi for v, (lo, hi) in zip(x, BOUNDS)):
        return 1e9
    p = to_params(x)
    err = 0.0
    for c in cases:
        meas = [(prof.config.triton, prof.run_time_ns) for prof in c.profiles.measured("triton")]
        est = [triton_estimate(cfg, c.problem, H200, params=p).ns for cfg, _ in meas]
        mt, et = min(t for _, t in meas), min(est)
        shape = sum((math.log(e / et) - math.log(t / mt)) ** 2 for e, (_, t) in zip(est, meas)) / len(est)
        bm = min(pr.run_time_ns for pr in c.profiles.measured() if pr.config.backend != "triton")
        be = min(x.ns for x in blas_candidates("cublaslt", c.problem, H200, p) if x.feasible)
        margin = math.log(be / et) - math.log(bm / mt)
        err += 3 * math.log(et / mt) ** 2 + 3 * math.log(be / bm) ** 2 + shape + 10 * margin ** 2
    return err / len(cases)


def fit(cases, x0):
    from scipy.optimize import minimize
    r = minimize(loss, x0, args=(cases,), method="Nelder-Mead",
                 options={"maxiter": 1500, "xatol": 1e-3, "fatol": 1e-6})
    return list(r.x), r.fun


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("sweep", nargs="?", default=str(Path(__file__).resolve().parents[2] / "shared/xla-dumps/gemm_sweep"))
    ap.add_argument("--fit", action="store_true")
    ap.add_argument("--loo", action="store_true", help="with --fit: leave-one-GEMM-out agreement")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    root = Path(a.sweep)
    if not root.exists():
        root = Path("/work/shared/xla-dumps/gemm_sweep")
    cases = load_sweep(root)
    params = PARAMS
    if a.fit:
        t = time.time()
        x, f = fit(cases, from_params(PARAMS))
        print(f"fit: loss {loss(from_params(PARAMS), cases):.4f} -> {f:.4f} in {time.time() - t:.0f} s")
        for n, v in zip(NAMES, x):
            print(f"  {n} = {v:.4f}")
        params = to_params(x)
        if a.loo:
            agree = 0
            for i, c in enumerate(cases):
                rest = cases[:i] + cases[i + 1:]
                xi, _ = fit(rest, x)
                r = evaluate_case(c, H200, to_params(xi))
                agree += r.agrees
                print(f"  leave-out {c.name}: model {r.model_pick}, XLA {r.xla_backend}")
            print(f"leave-one-GEMM-out backend agreement: {agree}/{len(cases)}")
    s = evaluate(cases, H200, params)
    if a.json:
        print(json.dumps(s.to_json(), indent=1))
        return 0
    print(f"{'GEMM':32s} {'shape':>18s} {'types':>9s} {'XLA':>8s} {'model':>8s} {'rho':>5s} "
          f"{'T meas/est us':>15s} {'BLAS meas/est us':>17s}")
    for c in s.cases:
        d = c.detail
        print(f"{c.name:32s} {c.shape:>18s} {c.types:>9s} {c.xla_backend:>8s} {c.model_pick:>8s} "
              f"{c.rho:5.2f} {d['best_triton_measured_ns'] / 1e3:7.1f}/{d['best_triton_estimate_ns'] / 1e3:<7.1f} "
              f"{d['best_blas_measured_ns'] / 1e3:8.1f}/{d['best_blas_estimate_ns'] / 1e3:<8.1f}")
    a_, n = s.agreement
    print(f"backend agreement with XLA: {a_}/{n}")
    print(f"median Spearman (Triton configs + best BLAS per GEMM): {s.median_rho:.2f}; Triton only: {s.median_rho_triton:.2f}")
    print(f"median |estimate/measured - 1|: all candidates {s.median_abs_err:.1%}, "
          f"best Triton and best BLAS per GEMM {s.median_best_err:.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
