"""The deterministic GEMM cost model, fitted per device on measured data.

A kernel runs ``ctas = batch x ceil(m/bm) x ceil(n/bn) x split_k`` CTAs,
``occ`` of them resident per SM/CU (shared memory, registers, threads), so
``waves = ceil(ctas / (cores x occ))`` and ``r = min(occ, ceil(ctas/cores))``
CTAs share a core at a time -- in a partial last wave only ``ceil(its CTAs /
cores)``, so its K steps are faster (wave quantization).  Each CTA walks
``iters = ceil(k/split_k/bk)`` K steps; one step costs the slowest of

* ``mma``: ``r x 2*bm*bn*bk / (peak_per_core x eff)`` -- the matrix units,
  ``eff`` the backend's efficiency for the compute type, times ``mma_sync``
  where Hopper's warp-group MMA cannot be used (< 4 warps or bm < 64);
* ``feed``: ``r x (bm+bn)*bk*bytes / (feed_bytes_per_clk x clock)`` -- operand
  tiles from L2 into shared memory (``tma_feed`` faster with TMA);
* ``latency``: ``load_latency / stages`` -- a load in flight per pipeline stage;

times fitted layout factors: an operand not K-major where the MMA needs it,
rows not a multiple of 16 bytes (``unaligned_rows``; its own factor for a
dot on the FMA units, whose 4-byte loads have no vector width to lose), a masked K loop
(Triton, K not a multiple of block_k x split_k), and a K-major rhs of a dot
on the FMA units (f32 at HIGHEST precision).

    time = launch + max((waves - 1) x (iters x step + cta_overhead)
                        + iters x last-wave step + cta_overhead,   (per-CTA work)
                        dram bytes / HBM bandwidth,                (roofline)
                        L2 panel traffic / (l2_factor x HBM bandwidth))
           + unfused prologue/epilogue kernels (BLAS fission)

Each term is reported in ``Estimate.parts`` (microseconds), so ``--explain``
and the autotuner table can say which one bounds a candidate.  On a measured
device the total is then multiplied by the measured neighbour correction
(``neighbours.py``: the terms' residual on the nearest calibrated GEMMs that
timed the same config), reported as ``Estimate.correction``.

The constants of NVIDIA H100 and H200 are fitted (``hlorun.autotune.fit``,
``bench/autotune_calibration.py --fit``) on the calibration set of
``hlorun/autotune/data`` -- XLA's own measurements of every Triton config and
cuBLASLt algorithm it tried -- and loaded from ``data/params_<device>.json``.
Devices without measurements (A100, MI300X, MI355X, PVC) keep spec-sheet
models: peaks, bandwidths, clocks, shared memory and registers from
``devices.py``, with the efficiencies and latencies of the H100 fit carried
over (``FALLBACK_FIT``) -- not measured on those parts -- except a documented
GEMM efficiency where one is published (``DOCUMENTED_EFF``: PVC).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from typing import Any

from .bundled import DATA_DIR, data_file
from .devices import DeviceSpec
from .problem import GemmProblem
from .traffic import unaligned_rows, unfused_traffic

#: efficiency classes (the compute type, integers apart)
CLASSES = ("f16", "tf32", "f32", "fp8", "int8", "f64")


@dataclass(frozen=True)
class CostParams:
    launch_us: float = 3.4            # Triton kernel launch + event timing floor
    blas_launch_us: float = 4.4       # BLAS call: launch + library dispatch
    cta_us: float = 0.6               # per CTA: prologue, epilogue store, scheduling
    latency_us: float = 1.0           # one operand load, L2/HBM -> shared memory
    feed_bytes_per_clk: float = 64.0  # L2 -> shared memory per core per clock
    tma_feed: float = 1.2             # TMA's feed rate vs pointer loads
    l2_factor: float = 2.0            # L2 bandwidth / HBM bandwidth
    mma_sync: float = 0.6             # Hopper mma.sync vs warp-group MMA
    epi_launch_us: float = 3.4        # an unfused prologue/epilogue kernel
    m_half: float = 8.0               # MMA shape: eff x 1 / (1 + m_half/bm + n_half/bn)
    n_half: float = 8.0
    chain_ns: float = 10.0            # one dependent MMA on the accumulator (32 B of K)
    iter_ns: float = 20.0             # per K step: address math, barriers, loop
    soft_p: float = 4.0               # soft maximum (sum of p-th powers) of overlapping terms
    stage_fill_ns: float = 100.0      # per CTA and extra pipeline stage: prologue loads, barriers
    blas_cta_overlap: float = 1.0     # share of the per-CTA overhead a (persistent) BLAS kernel pays
    #: per K step, per backend kind: an operand that is not K-major for a
    #: type whose MMA needs it (8-bit, TF32), and rows not 16-byte aligned
    transpose: dict = field(default_factory=lambda: {"triton": 1.3, "blas": 1.3})
    unaligned: dict = field(default_factory=lambda: {"triton": 1.5, "blas": 1.5})
    #: the same for a dot on the FMA units (f32 at HIGHEST: 4-byte scalar
    #: operand loads, no TMA or 16-byte vectors to lose); None: ``unaligned``
    unaligned_fma: dict | None = None
    #: per K step of a Triton kernel whose K is not a multiple of block_k x
    #: split_k: XLA's emitter then masks both operand tiles in every K step
    #: (``need_masking``), per operand width (8-bit, wider)
    masked_k: dict = field(default_factory=lambda: {"8bit": 1.0, "wide": 1.0})
    #: per K step of a dot on the FMA units (f32 at HIGHEST precision: no tensor
    #: cores) whose rhs is K-major: the outer-product loop reads a row of the
    #: rhs tile per k, so a K-major rhs tile is read across its minor
    #: dimension (strided shared-memory loads / a layout conversion)
    fma_rhs_k_major: dict = field(default_factory=lambda: {"triton": 1.0, "blas": 1.0})
    #: efficiency per backend kind and class (x the device's peak)
    eff: dict = field(default_factory=lambda: {
        ("triton", "f16"): 0.75, ("triton", "tf32"): 0.5, ("triton", "f32"): 0.5,
        ("triton", "fp8"): 0.6, ("triton", "int8"): 0.3, ("triton", "f64"): 0.5,
        ("blas", "f16"): 0.8, ("blas", "tf32"): 0.75, ("blas", "f32"): 0.5,
        ("blas", "fp8"): 0.7, ("blas", "int8"): 0.4, ("blas", "f64"): 0.8,
    })
    #: measured per-K-step factor of a Triton tile feature ("bm:16",
    #: "bk:256", "st:1", "w:8", "tma:1"): what the roofline terms miss
    #: (instruction mix, register pressure, layout conversions)
    tile_factors: dict = field(default_factory=dict)
    source: str = "spec-sheet defaults"
    #: the measured device whose neighbour correction applies (``neighbours.py``);
    #: empty for spec-sheet and carried-over constants
    measured_device: str = ""

    def base_eff(self, kind: str, cls: str) -> float:
        return self.eff.get((kind, cls), self.eff.get((kind, "f16"), 0.7))

    def tile_factor(self, tile: "Tile") -> float:
        f = 1.0
        for key in tile_keys(tile.block_m, tile.block_n, tile.block_k, tile.stages, tile.warps, tile.tma):
            f *= self.tile_factors.get(key, 1.0)
        return f

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["eff"] = {f"{k}:{c}": v for (k, c), v in self.eff.items()}
        d["tile_factors"] = dict(sorted(self.tile_factors.items()))
        d["transpose"], d["unaligned"] = dict(self.transpose), dict(self.unaligned)
        if self.unaligned_fma is None:
            d.pop("unaligned_fma")
        else:
            d["unaligned_fma"] = dict(self.unaligned_fma)
        d["masked_k"] = dict(self.masked_k)
        d["fma_rhs_k_major"] = dict(self.fma_rhs_k_major)
        d.pop("measured_device", None)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "CostParams":
        d = dict(d)
        eff = {tuple(k.split(":", 1)): float(v) for k, v in d.pop("eff", {}).items()}
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in known}, eff={**cls().eff, **eff})


def tile_keys(bm: int, bn: int, bk: int, stages: int, warps: int, tma: bool) -> tuple[str, ...]:
    return (f"bm:{bm}", f"bn:{bn}", f"bk:{bk}", f"st:{stages}", f"w:{warps}", f"tma:{int(bool(tma))}",
            f"cfg:{bm}x{bn}x{bk}/s{stages}/w{warps}{'/tma' if tma else ''}")


PARAMS = CostParams()
#: whose fitted constants unmeasured devices borrow (on their own spec-sheet peaks)
FALLBACK_FIT = "H100"
#: documented GEMM efficiencies of unmeasured devices (x the device's spec-sheet
#: peak), used instead of the borrowed fit's (which are Hopper's)
DOCUMENTED_EFF: dict[str, tuple[dict, str]] = {
    "PVC": ({("triton", "f16"): 250.0 / 838.9, ("triton", "tf32"): 250.0 / 838.9},
            "Triton f16/bf16 GEMM efficiency 0.30 of the 839 TFLOP/s XMX peak: Intel's Triton backend "
            "reaches about 250 TFLOP/s on a Max 1550 (intel-xpu-backend-for-triton issue 1765)"),
}


@lru_cache(maxsize=16)
def _load_params(name: str, data_dir: str) -> CostParams | None:
    p = data_file(data_dir, f"params_{name}.json")
    if not p.is_file():
        return None
    return replace(CostParams.from_json(json.loads(p.read_text())["params"]), measured_device=name)


def params_for(device: DeviceSpec | str) -> CostParams:
    """The cost constants for ``device``: fitted on measured data where the
    calibration set has the device (``data/params_<name>.json``), else the
    spec-sheet defaults."""
    name = device if isinstance(device, str) else device.name
    own = _load_params(name.upper(), str(DATA_DIR))
    if own is not None:
        return own
    hopper = _load_params(FALLBACK_FIT, str(DATA_DIR))
    if hopper is None:
        return PARAMS
    source = (f"{FALLBACK_FIT} fit carried over (no measurements on {name}); "
              f"peaks, bandwidth and clock from {name}'s spec sheet")
    eff = dict(hopper.eff)
    doc = DOCUMENTED_EFF.get(name.upper())
    if doc is not None:
        eff.update(doc[0])
        source += f"; {doc[1]}"
    return replace(hopper, measured_device="", eff=eff, source=source)


@dataclass(frozen=True)
class Tile:
    block_m: int
    block_n: int
    block_k: int
    stages: int
    warps: int
    split_k: int = 1
    tma: bool = False


@dataclass
class Estimate:
    ns: float
    parts: dict[str, float]     # microseconds per term
    waves: int
    occupancy: int
    bound: str                  # mma | feed | latency | dram | l2
    correction: Any = None      # neighbours.Correction: measured factor on the nearest calibrated GEMMs

    def to_json(self) -> dict[str, Any]:
        return {"ns": round(self.ns, 1), "waves": self.waves, "occupancy": self.occupancy,
                "bound": self.bound, "parts_us": {k: round(v, 3) for k, v in self.parts.items()},
                "why": self.why(),
                "measured_correction": None if self.correction is None else {
                    "factor": round(self.correction.factor, 4), "neighbours": self.correction.neighbours,
                    "nearest": self.correction.nearest,
                    "neighbours_with_same_k_masking": self.correction.same_masking}}

    def why(self) -> str:
        """One line: what bounds the estimate, and the terms behind it."""
        p = self.parts
        terms_us = [(k, p[k]) for k in ("mma", "feed", "latency", "k_loop") if p.get(k, 0) > 0]
        terms_us.sort(key=lambda kv: -kv[1])
        s = (f"{self.bound}-bound: {self.waves} wave(s) x {int(p.get('k_iters', 0))} K steps "
             f"({self.occupancy} CTA(s)/core); " + ", ".join(f"{k} {v:.1f}" for k, v in terms_us[:3])
             + f", DRAM {p.get('dram', 0):.1f}, launch {p.get('launch', 0):.1f}")
        if p.get("unfused_kernels"):
            s += f", unfused epilogue {p['unfused_kernels']:.1f}"
        s += " us"
        if abs(p.get("tile_factor", 1.0) - 1.0) > 0.05:
            s += f"; measured tile factor x{p['tile_factor']:.2f}"
        if self.correction is not None:
            s += "; " + self.correction.describe()
        return s


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def occupancy(device: DeviceSpec, smem: int, threads: int, regs_per_thread: int) -> int:
    occ = 32
    if smem > 0:
        occ = min(occ, device.shared_memory_per_core // smem)
    if threads > 0:
        occ = min(occ, max(1, 2048 // threads) if device.vendor != "intel" else max(1, 1024 // threads))
        if regs_per_thread > 0:
            occ = min(occ, device.registers_per_core // max(1, threads * regs_per_thread))
    return max(1, occ)


def eff_class(problem: GemmProblem) -> str:
    if problem.lhs_type.startswith(("s", "u")):
        return "int8"
    ct = problem.compute_type
    return "f16" if ct == "bf16" else ct


@dataclass
class Geometry:
    """Everything about a (problem, tile, device) that the fitted constants
    do not change.  Fields are numbers, or numpy arrays of them when the
    fitter evaluates many candidates at once."""

    ctas: Any
    waves: Any
    occ: Any
    share: Any            # CTAs sharing a core at a time
    last_share: Any       # CTAs sharing a core in the last wave (<= share: a partial wave)
    iters: Any
    flops_iter: Any       # 2*bm*bn*bk
    bytes_iter: Any       # (bm+bn)*bk*operand bytes
    k_chain: Any          # dependent MMAs per K step: bk*operand bytes / 32
    bm: Any
    bn: Any
    stages: Any
    wgmma: Any            # 1 where warp-group MMA applies (or the device has none)
    tma: Any
    peak_core: Any        # FLOP/s per core for the compute type
    clock_hz: Any
    hbm: Any              # bytes/s
    dram_bytes: Any
    l2_bytes: Any
    blas: Any             # 1 for a BLAS kernel
    transposed: Any       # 1: an operand is not K-major and the MMA needs it
    unaligned: Any        # 1: an operand's or the output's rows are not a multiple of 16 bytes
    masked_k: Any         # 1: a Triton kernel whose K steps are masked (K % (block_k*split_k) != 0)
    fma_rhs: Any          # 1: FMA-unit dot (f32 at HIGHEST) with a K-major rhs
    fma: Any              # 1: FMA-unit dot (f32 at HIGHEST)
    narrow: Any           # 1: 8-bit operands
    unfused_kernels: Any  # separate prologue/epilogue kernels (BLAS)
    unfused_bytes: Any


def geometry(problem: GemmProblem, device: DeviceSpec, tile: Tile, kind: str,
             smem: int, regs_per_thread: int) -> Geometry:
    p, d = problem, device
    bm, bn, bk = tile.block_m, tile.block_n, tile.block_k
    sk = max(1, tile.split_k)
    occ = occupancy(d, smem, tile.warps * d.threads_per_warp, regs_per_thread)
    ctas = p.batch * _ceil_div(p.m, bm) * _ceil_div(p.n, bn) * sk
    waves = _ceil_div(ctas, d.core_count * occ)
    last = ctas - (waves - 1) * d.core_count * occ
    op_bytes = max(1, (p.operand_bits + 7) // 8)
    wg = 1
    if d.wgmma and (tile.warps < 4 or bm < 64) and eff_class(p) in ("f16", "fp8", "tf32", "int8"):
        wg = 0
    partial = 2 * sk * p.batch * p.m * p.n * 4 if sk > 1 else 0
    a_bytes = p.batch * p.m * p.k * op_bytes
    b_bytes = p.batch * p.k * p.n * op_bytes
    n_unf, unf_bytes = 0, 0
    if kind == "blas":
        n_unf, unf_bytes = unfused_traffic(p)
    return Geometry(
        ctas=ctas, waves=waves, occ=occ,
        share=min(occ, _ceil_div(ctas, d.core_count)), last_share=min(occ, _ceil_div(last, d.core_count)),
        iters=_ceil_div(_ceil_div(p.k, sk), bk),
        flops_iter=2.0 * bm * bn * bk, bytes_iter=float((bm + bn) * bk * op_bytes),
        k_chain=bk * op_bytes / 32.0, bm=float(bm), bn=float(bn),
        stages=max(1, tile.stages), wgmma=wg, tma=int(bool(tile.tma and d.tma)),
        peak_core=d.peak(p.compute_type) / d.core_count, clock_hz=d.clock_ghz * 1e9,
        hbm=d.hbm_bandwidth, dram_bytes=float(p.input_bytes + p.output_bytes + partial),
        l2_bytes=float(a_bytes * _ceil_div(p.n, bn) + b_bytes * _ceil_div(p.m, bm)),
        blas=int(kind == "blas"), unfused_kernels=n_unf, unfused_bytes=float(unf_bytes),
        transposed=int(eff_class(p) in ("fp8", "int8", "tf32") and not (p.lhs_k_major and p.rhs_k_major)),
        unaligned=int(unaligned_rows(p)), masked_k=int(kind == "triton" and p.k % (bk * sk) != 0),
        narrow=int(op_bytes == 1), fma_rhs=int(eff_class(p) == "f32" and p.rhs_k_major),
        fma=int(eff_class(p) == "f32"))


def terms(g: Geometry, P: CostParams, eff, xp=math, tf=1.0) -> dict[str, Any]:
    """The model's terms in seconds.  ``xp``: ``math``-like module for
    scalars, or numpy for arrays (the fitter); ``eff`` the base efficiency,
    ``tf`` the tile factor of each K step."""
    sel = (lambda c, a, b: a if c else b) if xp is math else xp.where
    q = P.soft_p

    def mx(a, b):
        # overlapping limits: neither hides the other completely
        return (a ** q + b ** q) ** (1.0 / q)
    e = eff * sel(g.wgmma, 1.0, P.mma_sync) / (1.0 + P.m_half / g.bm + P.n_half / g.bn)
    feed = P.feed_bytes_per_clk * g.clock_hz * sel(g.tma, P.tma_feed, 1.0)

    def shared(share):
        # the matrix units and the operand feed of a core are shared by its resident CTAs
        return (mx(share * g.flops_iter / (g.peak_core * e), g.k_chain * P.chain_ns * 1e-9),
                share * g.bytes_iter / feed)
    t_mma, t_feed = shared(g.share)
    # a pipeline cannot run more stages ahead than there are K steps
    t_lat = P.latency_us * 1e-6 / (g.stages if xp is math and g.iters >= g.stages
                                   else (min(g.stages, g.iters) if xp is math else xp.minimum(g.stages, g.iters)))
    ua_fma = P.unaligned_fma or P.unaligned
    layout = sel(g.transposed, sel(g.blas, P.transpose["blas"], P.transpose["triton"]), 1.0) \
        * sel(g.unaligned, sel(g.fma, sel(g.blas, ua_fma["blas"], ua_fma["triton"]),
                               sel(g.blas, P.unaligned["blas"], P.unaligned["triton"])), 1.0) \
        * sel(g.masked_k, sel(g.narrow, P.masked_k["8bit"], P.masked_k["wide"]), 1.0) \
        * sel(g.fma_rhs, sel(g.blas, P.fma_rhs_k_major["blas"], P.fma_rhs_k_major["triton"]), 1.0)
    step = (mx(mx(t_mma, t_feed), t_lat) + P.iter_ns * 1e-9) * tf * layout
    fixed = (P.cta_us * 1e-6 + P.latency_us * 1e-6 + (g.stages - 1) * P.stage_fill_ns * 1e-9) \
        * sel(g.blas, P.blas_cta_overlap, 1.0)
    cta = g.iters * step + fixed
    # the last wave of a multi-wave kernel may be partial: fewer CTAs share
    # each core, so its K steps are as fast as that sharing allows
    l_mma, l_feed = shared(g.last_share)
    cta_last = g.iters * (mx(mx(l_mma, l_feed), t_lat) + P.iter_ns * 1e-9) * tf * layout + fixed
    body = (g.waves - 1) * cta + cta_last
    t_dram = g.dram_bytes / g.hbm
    t_l2 = g.l2_bytes / (P.l2_factor * g.hbm)
    launch = sel(g.blas, P.blas_launch_us, P.launch_us) * 1e-6
    unf = g.unfused_kernels * P.epi_launch_us * 1e-6 + g.unfused_bytes / g.hbm
    total = launch + mx(body, t_dram) + unf
    return {"total": total, "launch": launch, "mma": ((g.waves - 1) * t_mma + l_mma) * g.iters * tf,
            "feed": ((g.waves - 1) * t_feed + l_feed) * g.iters * tf, "latency": g.waves * g.iters * t_lat * tf,
            "k_loop": g.waves * g.iters * P.iter_ns * 1e-9 * tf, "tile_factor": tf,
            "cta_overhead": g.waves * (P.cta_us + P.latency_us) * 1e-6,
            "body": body, "dram": t_dram, "l2": t_l2, "unfused_kernels": unf}


def kernel_time(problem: GemmProblem, device: DeviceSpec, tile: Tile, kind: str,
                smem: int, regs_per_thread: int, params: CostParams | None = None) -> Estimate:
    """Estimated time of one GEMM kernel (``kind``: triton | blas)."""
    P = params or params_for(device)
    g = geometry(problem, device, tile, kind, smem, regs_per_thread)
    tf = P.tile_factor(tile) if kind == "triton" else 1.0
    t = terms(g, P, P.base_eff(kind, eff_class(problem)), tf=tf)
    per_iter = {"mma": t["mma"], "feed": t["feed"], "latency": t["latency"]}
    bound = max(per_iter, key=per_iter.get)
    if t["dram"] > t["body"]:
        bound = "dram"
    parts = {"launch": t["launch"] * 1e6, "waves": float(g.waves), "k_iters": float(g.iters),
             "mma": t["mma"] * 1e6, "feed": t["feed"] * 1e6, "latency": t["latency"] * 1e6,
             "k_loop": t["k_loop"] * 1e6, "cta_overhead": t["cta_overhead"] * 1e6, "dram": t["dram"] * 1e6,
             "l2": t["l2"] * 1e6, "tile_factor": tf}
    if g.unfused_kernels:
        parts["unfused_kernels"] = t["unfused_kernels"] * 1e6
    corr = None
    if P.measured_device:
        from . import neighbours
        tab = neighbours.table(P.measured_device)
        if tab is not None:
            corr = tab.lookup(kind, tile_label(tile), eff_class(problem), problem.batch, problem.m,
                              problem.n, problem.k, (int(problem.lhs_k_major), int(problem.rhs_k_major)))
    total = t["total"] * (corr.factor if corr is not None else 1.0)
    if corr is not None:
        parts["measured_correction"] = corr.factor
    return Estimate(total * 1e9, parts, g.waves, g.occ, bound, corr)


def tile_label(tile: Tile) -> str:
    """The Triton config's label (``TritonConfig.label``) of a tile."""
    s = f"{tile.block_m}x{tile.block_n}x{tile.block_k}"
    if tile.split_k > 1:
        s += f"/sk{tile.split_k}"
    return s + f"/s{tile.stages}/w{tile.warps}" + ("/tma" if tile.tma else "")


def blas_warps(bm: int, bn: int) -> int:
    return 8 if bm * bn >= 128 * 256 else 4


def blas_time(problem: GemmProblem, device: DeviceSpec, bm: int, bn: int, bk: int, stages: int,
              split_k: int, params: CostParams | None = None) -> Estimate:
    op_bytes = max(1, (problem.operand_bits + 7) // 8)
    smem = stages * (bm * bk + bk * bn) * op_bytes
    warps = blas_warps(bm, bn)
    regs = min(device.max_registers_per_thread, bm * bn // (warps * device.threads_per_warp) + 40)
    return kernel_time(problem, device, Tile(bm, bn, bk, stages, warps, split_k, tma=True), "blas",
                       smem, regs, params)
