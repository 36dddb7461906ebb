"""Check the cost model against what the real autotuner measured: the
calibration set of ``hlorun/autotune/data`` (``dataset.load``) or the
``shared/xla-dumps/gemm_sweep`` programs (``sweep.load_sweep``).

Per GEMM: does the model pick the backend XLA picked, how well do its
estimates rank the candidates XLA timed (Spearman), and how far is its
estimate of the config XLA chose from that config's measured time.

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
from .cost import CostParams, params_for
from .devices import H200, DeviceSpec

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
    gflop: float
    xla_backend: str
    measured_pick: str          # PickBestConfig over XLA's measurements
    model_pick: str             # PickBestConfig over our estimates
    rho: float                  # Spearman over XLA-timed Triton configs + best BLAS
    rho_triton: float           # Spearman over the Triton configs only
    best_triton_err: float      # log(est / measured) of the best Triton config
    best_blas_err: float
    chosen_err: float           # log(est / measured) of the config XLA chose
    all_errs: list[float] = field(default_factory=list)
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def agrees(self) -> bool:
        return self.model_pick == self.xla_backend


def evaluate_gemm(g, device: DeviceSpec = H200, params: CostParams | None = None) -> CaseResult:
    """One ``dataset.MeasuredGemm`` against the model."""
    params = params or params_for(device)
    p = g.problem
    tri = [(c.triton, c.ns) for c in g.triton]
    blas_meas = [c.ns for c in g.blas]
    tri_est = [triton_estimate(cfg, p, device, params=params).ns for cfg, _ in tri]
    blas = [c for c in blas_candidates("cublaslt", p, device, params) if c.feasible]
    blas_best = min(c.ns for c in blas) if blas else float("inf")
    sc = {"triton": 0, "cublaslt": WORKSPACE_BYTES}
    meas_items = [("triton", t) for _, t in tri] + [("cublaslt", t) for t in blas_meas]
    measured_pick = pick_best(meas_items, lambda x: x[1], lambda x: sc[x[0]])[0]
    model_items = [("triton", e) for e in tri_est] + ([("cublaslt", blas_best)] if blas else [])
    model_pick = pick_best(model_items, lambda x: x[1], lambda x: sc[x[0]])[0]
    meas_all = [t for _, t in tri] + ([min(blas_meas)] if blas_meas else [])
    est_all = tri_est + ([blas_best] if blas_meas else [])
    errs = [math.log(e / m) for e, (_, m) in zip(tri_est, tri)]
    bt = min(range(len(tri)), key=lambda i: tri[i][1]) if tri else None
    blas_err = math.log(blas_best / min(blas_meas)) if blas_meas and blas else float("nan")
    # the config XLA chose: its Triton config, or the library's best algorithm
    chosen = pick_best(g.candidates, lambda c: c.ns, lambda c: c.scratch_bytes)
    if chosen.triton is not None:
        chosen_err = errs[next(i for i, (cfg, t) in enumerate(tri) if cfg == chosen.triton and t == chosen.ns)]
    else:
        chosen_err = math.log(blas_best / chosen.ns)
    return CaseResult(
        g.gemm, p.shape_text, p.types_text, p.flops / 1e9, g.xla_backend, measured_pick, model_pick,
        spearman(est_all, meas_all), spearman(tri_est, [t for _, t in tri]),
        math.log(min(tri_est) / tri[bt][1]) if tri else float("nan"), blas_err, chosen_err,
        errs + ([blas_err] if not math.isnan(blas_err) else []),
        {"best_triton_measured_ns": tri[bt][1] if tri else None,
         "best_triton_estimate_ns": round(min(tri_est)) if tri else None,
         "best_blas_measured_ns": min(blas_meas) if blas_meas else None,
         "best_blas_estimate_ns": round(blas_best) if blas else None,
         "chosen": chosen.label})


def _quantile(xs: Sequence[float], q: float) -> float:
    xs = sorted(xs)
    if not xs:
        return float("nan")
    pos = q * (len(xs) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass
class Summary:
    cases: list[CaseResult]

    @property
    def agreement(self) -> tuple[int, int]:
        return sum(c.agrees for c in self.cases), len(self.cases)

    def _rhos(self, small: bool | None = None) -> list[float]:
        return [c.rho for c in self.cases if not math.isnan(c.rho)
                and (small is None or (c.gflop < 1.0) == small)]

    @property
    def median_rho(self) -> float:
        return statistics.median(self._rhos())

    @property
    def median_rho_small(self) -> float:
        """Median Spearman over the GEMMs under 1 GFLOP."""
        r = self._rhos(small=True)
        return statistics.median(r) if r else float("nan")

    @property
    def worst_decile_rho(self) -> float:
        """The 10th percentile of the per-GEMM Spearman."""
        return _quantile(self._rhos(), 0.10)

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
                                 for e in (c.best_triton_err, c.best_blas_err) if not math.isnan(e))

    def chosen_within(self, tolerance: float = 0.25) -> float:
        """Fraction of GEMMs whose chosen config's estimate is within
        ``tolerance`` of its measured time."""
        return sum(abs(math.expm1(c.chosen_err)) <= tolerance for c in self.cases) / len(self.cases)

    def to_json(self) -> dict[str, Any]:
        a, n = self.agreement
        return {"gemms": n, "backend_agreement": f"{a}/{n}", "backend_agreement_pct": round(100 * a / n, 1),
                "median_spearman": round(self.median_rho, 3),
                "median_spearman_under_1_gflop": round(self.median_rho_small, 3),
                "worst_decile_spearman": round(self.worst_decile_rho, 3),
                "median_spearman_triton_only": round(self.median_rho_triton, 3),
                "chosen_config_within_25pct": round(self.chosen_within(0.25), 3),
                "median_abs_error_all_candidates": round(self.median_abs_err, 3),
                "median_abs_error_best_per_backend": round(self.median_best_err, 3),
                "cases": [{"name": c.name, "shape": c.shape, "types": c.types, "xla": c.xla_backend,
                           "xla_rule_on_measurements": c.measured_pick, "model": c.model_pick,
                           "spearman": round(c.rho, 3), "chosen_error": round(math.expm1(c.chosen_err), 3),
                           **c.detail} for c in self.cases]}


def evaluate(cases: Sequence[Any], device: DeviceSpec = H200, params: CostParams | None = None) -> Summary:
    """``cases``: ``dataset.MeasuredGemm`` or ``sweep.SweepCase`` objects."""
    from .sweep import SweepCase
    gemms = [c.as_measured() if isinstance(c, SweepCase) else c for c in cases]
    return Summary([evaluate_gemm(g, device, params) for g in gemms])
