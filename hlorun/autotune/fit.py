"""Fit the cost model's constants on measured GEMMs (``dataset.load``).

The model is :func:`cost.terms` evaluated on numpy arrays of
:class:`cost.Geometry` (one row per candidate), so the fit and the
estimates hlorun prints are the same formula.  Residuals, per GEMM (each
GEMM weighs the same whatever its candidate count):

* every Triton config XLA timed: ``log(est / measured)`` (level and shape),
  and the same relative to the GEMM's best config (the ranking);
* the best BLAS algorithm: ``log(model's best / measured best)``;
* the backend margin: ``log(best BLAS / best Triton)``, model vs measured
  (what decides the backend).

Needs scipy (``pip install scipy``); only refitting does, not using the
fitted constants.
"""

from __future__ import annotations

import math
from dataclasses import fields, replace
from typing import Sequence

import numpy as np

from . import blas as B
from .cost import CLASSES, PARAMS, CostParams, Geometry, Tile, eff_class, geometry, terms, tile_keys
from .dataset import MeasuredGemm
from .devices import DeviceSpec
from .triton import resources

SCALARS = ["launch_us", "blas_launch_us", "cta_us", "latency_us", "feed_bytes_per_clk", "tma_feed",
           "mma_sync", "epi_launch_us", "m_half", "n_half", "chain_ns", "iter_ns", "soft_p", "stage_fill_ns", "blas_cta_overlap"]
BOUNDS = {"launch_us": (0.5, 10), "blas_launch_us": (0.5, 12), "cta_us": (0.01, 5), "latency_us": (0.05, 5),
          "feed_bytes_per_clk": (8, 512), "tma_feed": (0.5, 3), "l2_factor": (1.0, 6.0), "mma_sync": (0.1, 1.0),
          "epi_launch_us": (0.1, 15), "m_half": (0.1, 256), "n_half": (0.1, 256), "chain_ns": (0.5, 200),
          "iter_ns": (0.5, 500), "soft_p": (1.0, 12.0), "stage_fill_ns": (1.0, 3000.0),
          "blas_cta_overlap": (0.01, 2.0)}
EFF_BOUNDS = (0.01, 1.0)
TILE_BOUNDS = (0.2, 5.0)
LAYOUT_BOUNDS = (0.5, 20.0)
MIN_KEY_COUNT = 20     # tile features seen fewer times keep factor 1
RIDGE = 2.0            # pull on log(tile factor) towards 0
W_BLAS, W_MARGIN, W_SHAPE = 1.5, 3.0, 4.0
KINDS = ("triton", "blas")
WIDTHS = ("8bit", "wide")


def _stack(geos: list[Geometry]) -> Geometry:
    return Geometry(**{f.name: np.array([getattr(g, f.name) for g in geos], dtype=float) for f in fields(Geometry)})


def blas_tiles(problem, device: DeviceSpec) -> list[tuple[int, int, int, int, int]]:
    """The catalogue tiles the BLAS model chooses its best algorithm from."""
    op_bytes = max(1, (problem.operand_bits + 7) // 8)
    out = []
    for (bm, bn, bk, st) in B.CATALOGUE:
        if st * (bm * bk + bk * bn) * op_bytes > device.shared_memory_per_block:
            continue
        for sk in B.SPLITS:
            if sk > 1 and problem.k // sk < 2 * bk:
                continue
            out.append((bm, bn, bk, st, sk))
    return out


def _blas_geometry(problem, device, t):
    from .cost import blas_warps
    bm, bn, bk, st, sk = t
    op_bytes = max(1, (problem.operand_bits + 7) // 8)
    smem = st * (bm * bk + bk * bn) * op_bytes
    warps = blas_warps(bm, bn)
    regs = min(device.max_registers_per_thread, bm * bn // (warps * device.threads_per_warp) + 40)
    return geometry(problem, device, Tile(bm, bn, bk, st, warps, sk, tma=True), "blas", smem, regs)


class Problemset:
    """The candidates of many GEMMs as arrays."""

    def __init__(self, gemms: Sequence[MeasuredGemm], device: DeviceSpec):
        self.gemms = [g for g in gemms if g.triton and g.blas]
        tg, tcls, tmeas, tgemm, tkeys = [], [], [], [], []
        bg, bcls, bgemm = [], [], []
        self.blas_meas, self.tri_best = [], []
        for gi, g in enumerate(self.gemms):
            p = g.problem
            cls = CLASSES.index(eff_class(p))
            for c in g.triton:
                res = resources(c.triton, p, device)
                cfg = c.triton
                tile = Tile(cfg.block_m, cfg.block_n, cfg.block_k, cfg.num_stages, cfg.num_warps,
                            cfg.split_k, cfg.is_tma_allowed)
                tg.append(geometry(p, device, tile, "triton", res.smem, res.registers_per_thread))
                tkeys.append(tile_keys(cfg.block_m, cfg.block_n, cfg.block_k, cfg.num_stages, cfg.num_warps,
                                       cfg.is_tma_allowed and device.tma))
                tcls.append(cls)
                tmeas.append(c.ns_mean)
                tgemm.append(gi)
            for t in blas_tiles(p, device):
                bg.append(_blas_geometry(p, device, t))
                bcls.append(len(CLASSES) + cls)
                bgemm.append(gi)
            self.blas_meas.append(min(c.ns_mean for c in g.blas))
        self.tri = _stack(tg)
        from collections import Counter
        cnt = Counter(k for ks in tkeys for k in ks)
        self.keys = sorted(k for k, c in cnt.items() if c >= MIN_KEY_COUNT)
        kidx = {k: i for i, k in enumerate(self.keys)}
        self.onehot = np.zeros((len(tkeys), len(self.keys)))
        for i, ks in enumerate(tkeys):
            for k in ks:
                if k in kidx:
                    self.onehot[i, kidx[k]] = 1.0
        self.tri_cls = np.array(tcls)
        self.tri_meas = np.array(tmeas) * 1e-9
        self.tri_gemm = np.array(tgemm)
        self.bl = _stack(bg)
        self.bl_cls = np.array(bcls)
        self.bl_gemm = np.array(bgemm)
        self.blas_meas = np.array(self.blas_meas) * 1e-9
        n = len(self.gemms)
        self.tri_meas_best = np.full(n, np.inf)
        np.minimum.at(self.tri_meas_best, self.tri_gemm, self.tri_meas)
        counts = np.bincount(self.tri_gemm, minlength=n)
        self.tri_w = 1.0 / np.sqrt(counts[self.tri_gemm])

    def predict(self, P: CostParams):
        effv = np.array([P.base_eff(k, c) for k in KINDS for c in CLASSES])
        theta = np.log(np.array([P.tile_factors.get(k, 1.0) for k in self.keys]))
        tri = terms(self.tri, P, effv[self.tri_cls], np, np.exp(self.onehot @ theta))["total"]
        bl = terms(self.bl, P, effv[self.bl_cls], np)["total"]
        n = len(self.gemms)
        bl_best = np.full(n, np.inf)
        np.minimum.at(bl_best, self.bl_gemm, bl)
        tri_best = np.full(n, np.inf)
        np.minimum.at(tri_best, self.tri_gemm, tri)
        return tri, tri_best, bl_best

    def residuals(self, P: CostParams, w_blas: float = W_BLAS, w_margin: float = W_MARGIN, w_shape: float = W_SHAPE):
        tri, tri_best, bl_best = self.predict(P)
        r_lvl = np.log(tri / self.tri_meas) * self.tri_w
        r_shape = (np.log(tri / tri_best[self.tri_gemm]) - np.log(self.tri_meas / self.tri_meas_best[self.tri_gemm]))
        r_shape = r_shape * self.tri_w * w_shape
        r_bl = np.log(bl_best / self.blas_meas) * w_blas
        r_m = ((np.log(bl_best) - np.log(tri_best)) - (np.log(self.blas_meas) - np.log(self.tri_meas_best))) * w_margin
        ridge = RIDGE * np.log(np.array([P.tile_factors.get(k, 1.0) for k in self.keys]))
        return np.concatenate([r_lvl, r_shape, r_bl, r_m, ridge])


def _vector(P: CostParams, keys: Sequence[str]) -> np.ndarray:
    x = [getattr(P, n) for n in SCALARS] + [P.base_eff(k, c) for k in KINDS for c in CLASSES]
    x += [P.transpose[k] for k in KINDS] + [P.unaligned[k] for k in KINDS] + [P.masked_k[w] for w in WIDTHS]
    x += [P.fma_rhs_k_major[k] for k in KINDS] + [(P.unaligned_fma or P.unaligned)[k] for k in KINDS]
    x += [P.tile_factors.get(k, 1.0) for k in keys]
    return np.log(np.array(x, dtype=float))


def _params(x: np.ndarray, base: CostParams, source: str, keys: Sequence[str]) -> CostParams:
    v = np.exp(x)
    kw = {n: float(v[i]) for i, n in enumerate(SCALARS)}
    eff = dict(base.eff)
    i = len(SCALARS)
    for k in KINDS:
        for c in CLASSES:
            eff[(k, c)] = float(v[i])
            i += 1
    tr = {k: float(v[i + j]) for j, k in enumerate(KINDS)}
    i += len(KINDS)
    un = {k: float(v[i + j]) for j, k in enumerate(KINDS)}
    i += len(KINDS)
    mk = {w: float(v[i + j]) for j, w in enumerate(WIDTHS)}
    i += len(WIDTHS)
    fr = {k: float(v[i + j]) for j, k in enumerate(KINDS)}
    i += len(KINDS)
    uf = {k: float(v[i + j]) for j, k in enumerate(KINDS)}
    i += len(KINDS)
    tf = {k: float(v[i + j]) for j, k in enumerate(keys)}
    return replace(base, **kw, eff=eff, transpose=tr, unaligned=un, masked_k=mk, fma_rhs_k_major=fr,
                   unaligned_fma=uf, tile_factors=tf, source=source)


def fit(gemms: Sequence[MeasuredGemm], device: DeviceSpec, start: CostParams = PARAMS,
        max_nfev: int = 400, source: str = "") -> tuple[CostParams, dict]:
    from scipy.optimize import least_squares
    ps = Problemset(gemms, device)
    present = {eff_class(g.problem) for g in ps.gemms}
    nk = len(ps.keys)
    lo = [math.log(BOUNDS[n][0]) for n in SCALARS] + [math.log(EFF_BOUNDS[0])] * (2 * len(CLASSES)) \
        + [math.log(LAYOUT_BOUNDS[0])] * 10 + [math.log(TILE_BOUNDS[0])] * nk
    hi = [math.log(BOUNDS[n][1]) for n in SCALARS] + [math.log(EFF_BOUNDS[1])] * (2 * len(CLASSES)) \
        + [math.log(LAYOUT_BOUNDS[1])] * 10 + [math.log(TILE_BOUNDS[1])] * nk
    x0 = np.clip(_vector(start, ps.keys), np.array(lo) + 1e-9, np.array(hi) - 1e-9)
    # classes without data keep their start value
    frozen = [len(SCALARS) + ki * len(CLASSES) + ci for ki in range(2) for ci, c in enumerate(CLASSES)
              if c not in present]
    free = [i for i in range(len(x0)) if i not in frozen]

    def full(xf):
        x = x0.copy()
        x[free] = xf
        return x

    def fun(xf):
        return ps.residuals(_params(full(xf), start, source, ps.keys))
    r0 = float(np.mean(fun(x0[free]) ** 2))
    res = least_squares(fun, x0[free], bounds=(np.array(lo)[free], np.array(hi)[free]),
                        max_nfev=max_nfev, x_scale=1.0, diff_step=1e-3, ftol=1e-10, xtol=1e-10)
    P = _params(full(res.x), start, source or f"fitted on {len(ps.gemms)} GEMMs", ps.keys)
    return P, {"gemms": len(ps.gemms), "triton_candidates": int(len(ps.tri_meas)),
               "loss_start": r0, "loss": float(np.mean(res.fun ** 2)), "nfev": int(res.nfev)}


def fit_some(gemms: Sequence[MeasuredGemm], device: DeviceSpec, start: CostParams, names: Sequence[str],
             max_nfev: int = 30) -> tuple[CostParams, dict]:
    """Refit only ``names`` (``"iter_ns"``, ``"unaligned_fma.blas"``, ...:
    a scalar, or a key of one of the layout dicts), every other constant held
    at ``start`` -- the same loss as :func:`fit`, seconds instead of the
    full fit's minutes; how a new term is added to an existing fit."""
    from scipy.optimize import least_squares
    ps = Problemset(gemms, device)

    def get(P, n):
        if "." not in n:
            return getattr(P, n)
        a, b = n.split(".", 1)
        return (getattr(P, a) or getattr(P, a.replace("_fma", "")))[b]

    def put(P, x):
        kw: dict = {}
        for n, v in zip(names, np.exp(x)):
            if "." not in n:
                kw[n] = float(v)
                continue
            a, b = n.split(".", 1)
            d = kw.setdefault(a, dict(getattr(P, a) or getattr(P, a.replace("_fma", ""))))
            d[b] = float(v)
        return replace(P, **kw)
    bounds = [BOUNDS.get(n, LAYOUT_BOUNDS) for n in names]
    lo, hi = np.log([b[0] for b in bounds]), np.log([b[1] for b in bounds])
    x0 = np.clip(np.log([get(start, n) for n in names]), lo + 1e-9, hi - 1e-9)
    r0 = float(np.mean(ps.residuals(put(start, x0)) ** 2))
    res = least_squares(lambda x: ps.residuals(put(start, x)), x0, bounds=(lo, hi), max_nfev=max_nfev,
                        diff_step=1e-3)
    return put(start, res.x), {"gemms": len(ps.gemms), "refitted": list(names), "loss_start": r0,
                               "loss": float(np.mean(res.fun ** 2)), "nfev": int(res.nfev)}


def residual_rows(gemms: Sequence[MeasuredGemm], device: DeviceSpec, P: CostParams) -> list[dict]:
    """The neighbour-correction table (``neighbours.py``) of ``P`` on
    ``gemms`` (the train split), per GEMM: the level ``a`` (median of
    ``log(measured / estimate)`` over the Triton configs XLA timed), and
    that residual minus ``a`` for every Triton config and for the best
    BLAS algorithm."""
    ps = Problemset(gemms, device)
    tri, _, bl_best = ps.predict(P)
    r_tri = np.log(ps.tri_meas / tri)
    r_bl = np.log(ps.blas_meas / bl_best)
    rows = []
    j = 0
    for gi, g in enumerate(ps.gemms):
        p = g.problem
        shape = {"cls": eff_class(p), "batch": p.batch, "m": p.m, "n": p.n, "k": p.k,
                 "lhs_k_major": int(p.lhs_k_major), "rhs_k_major": int(p.rhs_k_major)}
        r = r_tri[j:j + len(g.triton)]
        a = float(np.median(r))
        rows.append({"kind": "level", "label": "", **shape, "residual": a})
        for c, x in zip(g.triton, r):
            rows.append({"kind": "triton", "label": c.triton.label, **shape, "residual": float(x) - a})
        j += len(g.triton)
        rows.append({"kind": "blas", "label": "", **shape, "residual": float(r_bl[gi]) - a})
    return rows
