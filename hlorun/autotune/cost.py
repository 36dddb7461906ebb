"""The deterministic GEMM cost model.

A kernel runs ``ctas = batch x ceil(m/bm) x ceil(n/bn) x split_k`` CTAs,
``occ`` of them resident per SM/CU (limited by shared memory, registers and
threads), so ``waves = ceil(ctas / (cores x occ))``.  Its time is

    launch + waves x wave_latency
           + max(compute, dram, l2)                       (roofline)
           + split-K reduction + unfused prologue/epilogue kernels

* ``compute = waves x occ x 2*bm*bn*(k/split_k) / (peak_per_core x eff)``:
  tile and wave quantisation are in the wave count (a 129-row GEMM with
  128-row tiles pays for 256 rows); ``eff`` multiplies the backend's base
  efficiency per compute type, the tile's operand reuse (a tile needs
  ``2*bm*bn / ((bm+bn)*bytes)`` FLOP per byte fed to the core; below the
  core's feed rate it starves), the MMA instruction (Hopper's warp-group
  MMA needs >= 4 warps and bm >= 64; otherwise mma.sync at a fraction of
  peak) and the pipeline depth (``1 / (1 + c/stages^2)``).
* ``dram``: every input and output byte once (fused epilogue operands
  included), plus split-K partials written and read back in f32.
* ``l2``: each CTA streams its A panel and B panel: ``|A| ceil(n/bn) +
  |B| ceil(m/bm)`` at ``l2_factor x`` HBM bandwidth.
* Epilogue fusion savings: a Triton fusion does its prologue and epilogue
  in registers; a BLAS fission leaves them as separate kernels (one launch
  plus a read and write of the tensor each), and a split-K Triton kernel
  needs a reduction kernel.

The constants in :data:`PARAMS` were calibrated on the real H200
measurements in ``shared/xla-dumps/gemm_sweep`` (``bench/autotune_calibration.py``
refits them and prints the agreement figures).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from .devices import DeviceSpec
from .problem import GemmProblem


@dataclass(frozen=True)
class CostParams:
    launch_us: float = 3.40           # Triton kernel launch + event timing floor
    blas_launch_us: float = 4.38      # BLAS call: launch + library dispatch
    wave_latency_us: float = 0.589     # pipeline fill + epilogue store per wave
    feed_bytes_per_clk: float = 68.9  # L2 -> SM operand feed per core per clock
    l2_factor: float = 2.00           # L2 bandwidth / HBM bandwidth
    pipe_c: float = 0.213              # pipeline efficiency 1 / (1 + c / stages^2)
    mma_sync: float = 0.80            # Hopper mma.sync vs warp-group MMA
    #: base efficiency per backend kind and compute type
    eff: dict = field(default_factory=lambda: {
        # calibrated on gemm_sweep (f16 and f32/TF32 on H200):
        ("triton", "f16"): 0.779, ("triton", "bf16"): 0.779, ("triton", "tf32"): 0.347,
        ("blas", "f16"): 0.835, ("blas", "bf16"): 0.835, ("blas", "tf32"): 0.767,
        # not in the sweep (assumed, same ratios as f16):
        ("triton", "fp8"): 0.70, ("triton", "f32"): 0.779, ("triton", "f64"): 0.779,
        ("blas", "fp8"): 0.80, ("blas", "f32"): 0.835, ("blas", "f64"): 0.835,
    })

    def base_eff(self, kind: str, compute_type: str) -> float:
        return self.eff.get((kind, compute_type), self.eff.get((kind, "f16"), 0.8))


PARAMS = CostParams()


@dataclass(frozen=True)
class Tile:
    block_m: int
    block_n: int
    block_k: int
    stages: int
    warps: int
    split_k: int = 1


@dataclass
class Estimate:
    ns: float
    parts: dict[str, float]     # microseconds per term
    waves: int
    occupancy: int
    bound: str                  # compute | dram | l2

    def to_json(self) -> dict[str, Any]:
        return {"ns": round(self.ns, 1), "waves": self.waves, "occupancy": self.occupancy,
                "bound": self.bound, "parts_us": {k: round(v, 3) for k, v in self.parts.items()}}


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


def kernel_time(problem: GemmProblem, device: DeviceSpec, tile: Tile, kind: str,
                smem: int, regs_per_thread: int, params: CostParams = PARAMS) -> Estimate:
    """Estimated time of one GEMM kernel (``kind``: triton | blas)."""
    p, d = problem, device
    bm, bn, bk = tile.block_m, tile.block_n, tile.block_k
    sk = max(1, tile.split_k)
    threads = tile.warps * d.threads_per_warp
    occ = occupancy(d, smem, threads, regs_per_thread)
    tiles_mn = p.batch * _ceil_div(p.m, bm) * _ceil_div(p.n, bn)
    ctas = tiles_mn * sk
    slots = d.core_count * occ
    waves = _ceil_div(ctas, slots)
    k_cta = _ceil_div(p.k, sk)
    op_bytes = max(1, (p.operand_bits + 7) // 8)

    peak_core = d.peak(p.compute_type) / d.core_count
    eff = params.base_eff(kind, p.compute_type)
    # operand reuse of the tile vs the core's feed rate
    intensity = 2.0 * bm * bn / ((bm + bn) * op_bytes)
    needed = peak_core / (params.feed_bytes_per_clk * d.clock_ghz * 1e9)
    eff *= min(1.0, intensity / needed)
    if d.wgmma and (tile.warps < 4 or bm < 64) and p.compute_type in ("f16", "bf16", "fp8", "tf32"):
        eff *= params.mma_sync
    eff *= 1.0 / (1.0 + params.pipe_c / max(1, tile.stages) ** 2)
    # a CTA computes its whole tile even where it hangs over the edge
    flops_cta = 2.0 * bm * bn * k_cta
    # CTAs sharing a core split its throughput; quantised by waves
    busy = min(occ, _ceil_div(ctas, d.core_count))
    t_compute = waves * busy * flops_cta / (peak_core * eff)

    a_bytes = p.batch * p.m * p.k * op_bytes
    b_bytes = p.batch * p.k * p.n * op_bytes
    partial = 2 * sk * p.batch * p.m * p.n * 4 if sk > 1 else 0
    dram = p.input_bytes + p.output_bytes + partial
    l2 = a_bytes * _ceil_div(p.n, bn) + b_bytes * _ceil_div(p.m, bm)
    t_dram = dram / d.hbm_bandwidth
    t_l2 = l2 / (params.l2_factor * d.hbm_bandwidth)
    body = max(t_compute, t_dram, t_l2)
    bound = "compute" if body == t_compute else ("dram" if body == t_dram else "l2")
    launch = params.blas_launch_us if kind == "blas" else params.launch_us
    parts = {"launch": launch, "waves": waves * params.wave_latency_us,
             "compute": t_compute * 1e6, "dram": t_dram * 1e6, "l2": t_l2 * 1e6}
    total = launch * 1e-6 + waves * params.wave_latency_us * 1e-6 + body
    if sk > 1 and kind == "triton":
        # XLA's split-K: partial results in f32 and a reduction kernel
        red = params.launch_us * 1e-6 + (sk * p.batch * p.m * p.n * 4 + p.output_bytes) / d.hbm_bandwidth
        parts["split_k_reduce"] = red * 1e6
        total += red
    return Estimate(total * 1e9, parts, waves, occ, bound)


def unfused_kernels(problem: GemmProblem, device: DeviceSpec, params: CostParams = PARAMS) -> tuple[float, int]:
    """Extra time (ns) and kernel count when the GEMM leaves a fusion: the
    fused prologue (per operand that had elementwise work) and epilogue
    become separate kernels, each reading and writing its tensor."""
    p, d = problem, device
    extra = 0.0
    kernels = 0
    if p.prologue_ops:
        kernels += 1
        extra += params.launch_us * 1e-6 + 2 * (p.input_bytes) / d.hbm_bandwidth
    if p.epilogue_ops or p.epilogue_operands:
        kernels += 1
        epi_in = sum(e.bytes for e in p.epilogue_operands)
        # the GEMM writes its raw result, the epilogue reads it back
        raw = p.batch * p.m * p.n * p.acc_bytes
        extra += params.launch_us * 1e-6 + (2 * raw + epi_in + p.output_bytes) / d.hbm_bandwidth
    return extra * 1e9, kernels


def blas_warps(bm: int, bn: int) -> int:
    return 8 if bm * bn >= 128 * 256 else 4


def blas_time(problem: GemmProblem, device: DeviceSpec, bm: int, bn: int, bk: int, stages: int,
              split_k: int, params: CostParams = PARAMS) -> Estimate:
    op_bytes = max(1, (problem.operand_bits + 7) // 8)
    smem = stages * (bm * bk + bk * bn) * op_bytes
    warps = blas_warps(bm, bn)
    regs = min(device.max_registers_per_thread, bm * bn // (warps * device.threads_per_warp) + 40)
    est = kernel_time(problem, device, Tile(bm, bn, bk, stages, warps, split_k), "blas", smem, regs, params)
    extra, n = unfused_kernels(problem, device, params)
    if n:
        est.parts["unfused_kernels"] = extra / 1e3
        est.ns += extra
    return est


def with_params(**kw) -> CostParams:
    return replace(PARAMS, **kw)


def log_error(est_ns: float, measured_ns: float) -> float:
    return abs(math.log(est_ns / measured_ns))
