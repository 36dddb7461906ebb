"""Check the cost model against what the real autotuner measured
(``shared/xla-dumps/gemm_sweep``): does the model pick the backend XLA
picked, how well do its estimates rank the candidates XLA timed, and how
far off are they.

XLA's selection rule (``PickBestConfig``, backends/autotuner/config_selector.cc)
is applied to both sides: the fastest candidate, except that any candidate
within ``scratch_bytes_window_size_us`` (2 us) of it that needs less scratch
memory wins (cuBLASLt needs a 32 MiB workspace, Triton none).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence, TypeVar

from .blas import WORKSPACE_BYTES
from .candidates import blas_candidates, triton_estimate
from .cost import PARAMS, CostParams
from .devices import H200, DeviceSpec
from .sweep import SweepCase

T = TypeVar("T")
SCRATCH_WINDOW_US = 2.0


def pick_best(items: Sequence[T], ns: Callable[[T], float], scratch: Callable[[T], int],
              window_us: float = SCRATCH_WINDOW_US) -> T:
    """XLA's PickBestConfig over ``items``."""
    fastest = min(items, key=ns)
    limit = ns(fastest) + window_us * 1e3
    best = fastest
    best_key = (scratch(fastest), ns(fastest))
    for it in items:
        if ns(it) <= limit:
            key = (scratch(it), ns(it))
            if key < best_key:
                best, best_key = it, key
    return best


def _ranks(xs: Sequence[float]) -> list[float]:
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    r = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2.0
        i = j + 1
    return r


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    if len(a) < 3:
        return float("nan")
    ra, rb = _ranks(a), _ranks(b)
    ma, mb = statistics.fmean(ra), statistics.fmean(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = math.sqrt(sum((x - ma) ** 2 for x in ra))
    vb = math.sqrt(sum((y - mb) ** 2 for y in rb))
    return cov / (va * vb) if va and vb else float("nan")


@dataclass
class CaseResult:
    name: str
    shape: str
    types: str
    xla_backend: str
    measured_pick: str          # PickBestConfig over XLA's measurements
    model_pick: str             # PickBestConfig over our estimates
    rho: float                  # Spearman over XLA-timed Triton configs + best BLAS
    rho_triton: float           # Spearman over the Triton configs only
    best_triton_err: float      # log(est / measured) of the best Triton config
    best_blas_err: float
    all_errs: list[float] = field(default_factory=list)
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def agrees(self) -> bool:
        return self.model_pick == self.xla_backend


def evaluate_case(case: SweepCase, device: DeviceSpec = H200, params: CostParams = PARAMS) -> CaseResult:
    p = case.problem
    tri = [(prof.config.triton, prof.run_time_ns) for prof in case.profiles.measured("triton")]
    blas_meas = [prof.run_time_ns for prof in case.profiles.measured() if prof.config.backend != "triton"]
    tri_est = [triton_estimate(cfg, p, device, params=params).ns for cfg, _ in tri]
    blas = [c for c in blas_candidates("cublaslt", p, device, params) if c.feasible]
    blas_best = min(c.ns for c in blas)
    # XLA's decision on its own measurements
    meas_items = [("triton", t) for _, t in tri] + [("cublaslt", t) for t in blas_meas]
    sc = {"triton": 0, "cublaslt": WORKSPACE_BYTES}
    measured_pick = pick_best(meas_items, lambda x: x[1], lambda x: sc[x[0]])[0]
    # ours: the same rule over our estimates of the same candidates
    model_items = [("triton", e) for e in tri_est] + [("cublaslt", c.ns) for c in blas]
    model_pick = pick_best(model_items, lambda x: x[1], lambda x: sc[x[0]])[0]
    meas_all = [t for _, t in tri] + [min(blas_meas)]
    est_all = tri_est + [blas_best]
    errs = [math.log(e / m) for e, m in zip(tri_est, (t for _, t in tri))]
    bt = min(range(len(tri)), key=lambda i: tri[i][1])
    return CaseResult(
        case.name, p.shape_text, p.types_text, case.xla_backend, measured_pick, model_pick,
        spearman(est_all, meas_all), spearman(tri_est, [t for _, t in tri]),
        math.log(min(tri_est) / tri[bt][1]), math.log(blas_best / min(blas_meas)), errs + [math.log(blas_best / min(blas_meas))],
        {"best_triton_measured_ns": tri[bt][1], "best_triton_estimate_ns": round(min(tri_est)),
         "best_blas_measured_ns": min(blas_meas), "best_blas_estimate_ns": round(blas_best)})


@dataclass
class Summary:
    cases: list[CaseResult]

    @property
    def agreement(self) -> tuple[int, int]:
        return sum(c.agrees for c in self.cases), len(self.cases)

    @property
    def median_rho(self) -> float:
        return statistics.median(c.rho for c in self.cases if not math.isnan(c.rho))

    @property
    def median_rho_triton(self) -> float:
        return statistics.median(c.rho_triton for c in self.cases if not math.isnan(c.rho_triton))

    @property
    def median_abs_err(self) -> float:
        """Median |estimate/measured - 1| over every candidate, as a fraction."""
        return statistics.median(math.expm1(abs(e)) for c in self.cases for e in c.all_errs)

    @property
    def median_best_err(self) -> float:
        """Median |estimate/measured - 1| of each GEMM's best Triton and best BLAS."""
        return statistics.median(math.expm1(abs(e)) for c in self.cases
                                 for e in (c.best_triton_err, c.best_blas_err))

    def to_json(self) -> dict[str, Any]:
        a, n = self.agreement
        return {"backend_agreement": f"{a}/{n}", "median_spearman": round(self.median_rho, 3),
                "median_spearman_triton_only": round(self.median_rho_triton, 3),
                "median_abs_error_all_candidates": round(self.median_abs_err, 3),
                "median_abs_error_best_per_backend": round(self.median_best_err, 3),
                "cases": [{"name": c.name, "shape": c.shape, "types": c.types, "xla": c.xla_backend,
                           "xla_rule_on_measurements": c.measured_pick, "model": c.model_pick,
                           "spearman": round(c.rho, 3), **c.detail} for c in self.cases]}


def evaluate(cases: Sequence[SweepCase], device: DeviceSpec = H200, params: CostParams = PARAMS) -> Summary:
    return Summary([evaluate_case(c, device, params) for c in cases])
