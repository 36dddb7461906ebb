"""Triton GEMM candidates: XLA's config space, and what each config costs in
shared memory and registers.

The space is a port of XLA's ``TritonDotFusionSearchSpace``
(xla/backends/gpu/autotuner/triton/dot_search_space.cc): output tilings
from the register budget and problem size (square-ish tiles), low-occupancy
elimination, warps per CTA, contracting tile sizes from the shared-memory
budget, pipelining stages, TMA variants on Hopper, ``waves_per_eu`` on ROCm;
then ``OptimizeConfigSet`` keeps the configs that match the platform's
default list (clamped to the problem), as XLA does unless
``xla_gpu_exhaustive_tiling_search``.  ``split_k`` > 1 is an optional legacy
extension (XLA's current Triton backend rejects split_k > 1; older
autotuners searched it).

``resources(config, problem, device)`` computes the shared memory a config
needs (operand tiles per pipeline stage, TMA barriers, plus the epilogue's
layout-conversion scratch when an epilogue operand is loaded in another
layout: the S4 mechanism) and its registers; ``check(...)`` turns a limit
violation into a rejection *with its reason*.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable

from .devices import DeviceSpec
from .problem import GemmProblem
from . import triton_defaults


@dataclass(frozen=True, order=True)
class TritonConfig:
    block_m: int
    block_n: int
    block_k: int
    split_k: int = 1
    num_stages: int = 1
    num_warps: int = 4
    num_ctas: int = 1
    is_tma_allowed: bool = False
    is_warp_specialization_allowed: bool = False
    waves_per_eu: int = 0

    # -- names -----------------------------------------------------------------
    @property
    def label(self) -> str:
        s = f"{self.block_m}x{self.block_n}x{self.block_k}"
        if self.split_k > 1:
            s += f"/sk{self.split_k}"
        s += f"/s{self.num_stages}/w{self.num_warps}"
        if self.num_ctas > 1:
            s += f"/c{self.num_ctas}"
        if self.is_tma_allowed:
            s += "/tma"
        if self.is_warp_specialization_allowed:
            s += "/ws"
        if self.waves_per_eu:
            s += f"/wpe{self.waves_per_eu}"
        return s

    def __str__(self) -> str:
        return self.label

    # -- XLA formats -------------------------------------------------------------
    def to_backend_json(self) -> dict[str, Any]:
        """``triton_gemm_config`` as XLA prints it in a fusion's backend
        config (proto3 JSON: int64 as strings; split_k 0 when not split,
        since XLA's TritonGemmConfig no longer sets it)."""
        return {"block_k": str(self.block_k), "block_m": str(self.block_m),
                "block_n": str(self.block_n), "group_size": "1",
                "is_tma_allowed": self.is_tma_allowed,
                "is_warp_specialization_allowed": self.is_warp_specialization_allowed,
                "num_ctas": str(self.num_ctas), "num_stages": str(self.num_stages),
                "num_warps": str(self.num_warps),
                "split_k": str(self.split_k if self.split_k > 1 else 0),
                "waves_per_eu": str(self.waves_per_eu)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TritonConfig":
        """From backend-config JSON or a parsed textproto ``triton {}``."""
        def num(key: str, default: int) -> int:
            v = d.get(key, default)
            return int(v) if v not in (None, "") else default

        def flag(key: str) -> bool:
            v = d.get(key, False)
            return v is True or str(v).lower() == "true"
        return cls(block_m=num("block_m", 16), block_n=num("block_n", 16),
                   block_k=num("block_k", 16), split_k=max(1, num("split_k", 1)),
                   num_stages=num("num_stages", 1), num_warps=num("num_warps", 4),
                   num_ctas=max(1, num("num_ctas", 1)), is_tma_allowed=flag("is_tma_allowed"),
                   is_warp_specialization_allowed=flag("is_warp_specialization_allowed"),
                   waves_per_eu=num("waves_per_eu", 0))

    def to_json(self) -> dict[str, Any]:
        return {"block_m": self.block_m, "block_n": self.block_n, "block_k": self.block_k,
                "split_k": self.split_k, "num_stages": self.num_stages,
                "num_warps": self.num_warps, "num_ctas": self.num_ctas,
                "is_tma_allowed": self.is_tma_allowed,
                "is_warp_specialization_allowed": self.is_warp_specialization_allowed,
                "waves_per_eu": self.waves_per_eu}

    @classmethod
    def parse(cls, text: str) -> "TritonConfig":
        """A config on the command line: ``128x64x32/s3/w4[/sk2][/tma]``,
        ``128,64,32,1,3,4`` (m,n,k,split_k,stages,warps) or
        ``block_m=128,block_n=64,...``."""
        t = text.strip()
        if "=" in t:
            d = dict(p.split("=", 1) for p in t.replace(";", ",").split(",") if p)
            return cls.from_dict({k.strip(): v.strip() for k, v in d.items()})
        if "," in t:
            xs = [int(x) for x in t.split(",")]
            if len(xs) < 3:
                raise ValueError(f"need at least block_m,block_n,block_k: {text!r}")
            names = ["block_m", "block_n", "block_k", "split_k", "num_stages", "num_warps", "num_ctas"]
            return cls.from_dict(dict(zip(names, xs)))
        parts = t.split("/")
        mnk = parts[0].split("x")
        if len(mnk) != 3:
            raise ValueError(f"expected MxNxK[/sS][/wW]...: {text!r}")
        d: dict[str, Any] = {"block_m": mnk[0], "block_n": mnk[1], "block_k": mnk[2]}
        for p in parts[1:]:
            if p == "tma":
                d["is_tma_allowed"] = True
            elif p == "ws":
                d["is_warp_specialization_allowed"] = True
            elif p.startswith("sk"):
                d["split_k"] = p[2:]
            elif p.startswith("wpe"):
                d["waves_per_eu"] = p[3:]
            elif p.startswith("s"):
                d["num_stages"] = p[1:]
            elif p.startswith("w"):
                d["num_warps"] = p[1:]
            elif p.startswith("c"):
                d["num_ctas"] = p[1:]
            else:
                raise ValueError(f"unknown config part {p!r} in {text!r}")
        return cls.from_dict(d)


# ---------------------------------------------------------------------------
# The search space (port of TritonDotFusionSearchSpace)
# ---------------------------------------------------------------------------

def _next_pow2(x: int) -> int:
    return 1 if x <= 0 else 1 << (int(x) - 1).bit_length()


def _prev_pow2(x: int) -> int:
    return 1 if x <= 0 else 1 << (int(x).bit_length() - 1)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


K_MIN_WARPS_OCCUPANCY = 2
K_MIN_WARPS_WGMMA = 4
K_MAX_WARPS_PER_SCHEDULER = 5


def _with(c: TritonConfig, **changes: Any) -> TritonConfig:
    """``dataclasses.replace(c, **changes)`` for a TritonConfig (every field
    an init field, no ``__post_init__``): the same object, built without
    ``replace``'s per-field introspection (the search space makes tens of
    thousands per autotuner run)."""
    new = _new(TritonConfig)
    d = new.__dict__
    d.update(c.__dict__)
    d.update(changes)
    return new


_new = object.__new__


@dataclass
class _Noted:
    config: TritonConfig
    not_enough_tiles: bool = False


class SearchSpace:
    """XLA's Triton dot search space for one problem on one device."""

    def __init__(self, problem: GemmProblem, device: DeviceSpec, exhaustive: bool = False,
                 split_k: bool = False):
        self.p = problem
        self.d = device
        self.exhaustive = exhaustive
        self.split_k_search = split_k
        self.k = problem.k
        self.batch = problem.batch
        self.lhs = problem.m
        self.rhs = problem.n
        self.op_bits = problem.operand_bits
        self.compute_bits = problem.compute_bits
        self.hopper = device.wgmma
        self.desired_total_warps = K_MAX_WARPS_PER_SCHEDULER * 4 * device.core_count
        self.max_out = self._max_output_tile()
        self.occupancy = self._should_optimize_for_occupancy()
        self.min_out = (64, 8) if (self.hopper and not self.occupancy) else (16, 8)
        self.min_warps = self._min_warps()
        self.min_k = max(128 // self.op_bits, 16)
        self.max_out = (max(self.min_out[0], self.max_out[0]), max(self.min_out[1], self.max_out[1]))

    # -- limits ---------------------------------------------------------------------
    def _max_output_tile(self) -> tuple[int, int]:
        max_elems = self.d.registers_per_block * 32 // self.compute_bits

        def other(this: int) -> int:
            return _prev_pow2(max_elems // this)
        lhs_dim = _prev_pow2(int(math.sqrt(max_elems)))
        rhs_dim = other(lhs_dim)
        lhs_lim, rhs_lim = _next_pow2(self.lhs), _next_pow2(self.rhs)
        if lhs_lim < lhs_dim:
            lhs_dim = lhs_lim
            rhs_dim = min(other(lhs_lim), rhs_lim)
        if rhs_lim < rhs_dim:
            lhs_dim = min(other(rhs_lim), lhs_lim)
            rhs_dim = rhs_lim
        return lhs_dim, rhs_dim

    def num_result_tiles(self, tile: tuple[int, int]) -> int:
        return self.batch * _ceil_div(self.lhs, tile[0]) * _ceil_div(self.rhs, tile[1])

    def _should_optimize_for_occupancy(self) -> bool:
        return self.desired_total_warps // K_MIN_WARPS_WGMMA > self.num_result_tiles(self.max_out)

    def _min_warps(self) -> int:
        if self.op_bits >= 32:
            return K_MIN_WARPS_OCCUPANCY
        if self.hopper and not self.occupancy:
            return K_MIN_WARPS_WGMMA
        return K_MIN_WARPS_OCCUPANCY

    def max_warps(self, tile: tuple[int, int]) -> int:
        max_w = self.d.threads_per_block // max(self.d.threads_per_warp, 1)
        lw, rw = _ceil_div(tile[0], 16), _ceil_div(tile[1], 8)
        return max(self.min_warps, min(max_w, lw * rw))

    def _k_limit_smem(self, tile: tuple[int, int]) -> int:
        return 8 * self.d.shared_memory_per_block // self.compute_bits // (tile[0] + tile[1])

    def max_k(self, tile: tuple[int, int]) -> int:
        max_size = min(_next_pow2(self.k), _prev_pow2(self._k_limit_smem(tile)))
        return max(self.min_k, max_size)

    def max_stages(self, tile: tuple[int, int], k_tile: int) -> int:
        available = _ceil_div(self.k, k_tile)
        limit = max(1, _ceil_div(self._k_limit_smem(tile), k_tile))
        return min(available, limit, K_MAX_WARPS_PER_SCHEDULER)

    # -- generation -------------------------------------------------------------------
    def generate(self) -> list[TritonConfig]:
        cfgs = [_Noted(TritonConfig(0, 0, 0))]
        cfgs = self._extend(cfgs, self._output_tilings)
        cfgs = self._eliminate_low_occupancy(cfgs)
        cfgs = self._extend(cfgs, self._cta_sizes)
        cfgs = self._extend(cfgs, self._contracting)
        if self.split_k_search:
            cfgs = self._extend(cfgs, self._split_k)
        cfgs = self._extend(cfgs, self._stages)
        if self.d.tma:
            cfgs = self._extend(cfgs, self._tma)
        if self.d.is_rocm:
            cfgs = self._extend(cfgs, self._waves_per_eu)
        return [_with(c.config, num_ctas=1) for c in cfgs]

    @staticmethod
    def _extend(cfgs: list[_Noted], fn) -> list[_Noted]:
        out: list[_Noted] = []
        for c in cfgs:
            fn(c, out)
        return out

    def _output_tilings(self, c: _Noted, out: list[_Noted]) -> None:
        m = self.min_out[0]
        while m <= self.max_out[0]:
            min_n, max_n = self.min_out[1], self.max_out[1]
            if m < self.lhs and not (m * 2 < min_n or max_n < m // 2):
                if not self.p.rhs_expensive:
                    min_n = max(m // 2, min_n)
                if not self.p.lhs_expensive:
                    max_n = min(m * 2, max_n)
            n = min_n
            while n <= max_n:
                out.append(_Noted(_with(c.config, block_m=m, block_n=n),
                                  self.num_result_tiles((m, n)) < self.d.core_count))
                n *= 2
            m *= 2

    def _eliminate_low_occupancy(self, cfgs: list[_Noted]) -> list[_Noted]:
        if self.exhaustive or len(cfgs) < 24:
            return cfgs
        last = cfgs[-1]
        kept = [c for c in cfgs if not c.not_enough_tiles]
        if not kept:
            kept = [_Noted(_with(last.config, block_m=self.min_out[0], block_n=self.min_out[1]),
                           last.not_enough_tiles)]
        return kept

    def _cta_sizes(self, c: _Noted, out: list[_Noted]) -> None:
        w = self.min_warps
        mx = self.max_warps((c.config.block_m, c.config.block_n))
        while w <= mx:
            out.append(_Noted(_with(c.config, num_warps=w), c.not_enough_tiles))
            w *= 2

    def _contracting(self, c: _Noted, out: list[_Noted]) -> None:
        mx = max(self.max_k((c.config.block_m, c.config.block_n)), self.min_k)
        k = self.min_k
        while k <= mx:
            out.append(_Noted(_with(c.config, block_k=k), c.not_enough_tiles))
            k *= 2

    def _split_k(self, c: _Noted, out: list[_Noted]) -> None:
        """Legacy split-K: only while the output alone gives too few tiles,
        and each split keeps at least one contracting tile."""
        out.append(c)
        tiles = self.num_result_tiles((c.config.block_m, c.config.block_n))
        s = 2
        while s <= 16 and self.k // s >= c.config.block_k and tiles * (s // 2) < self.d.core_count:
            out.append(_Noted(_with(c.config, split_k=s), c.not_enough_tiles))
            s *= 2

    def _stages(self, c: _Noted, out: list[_Noted]) -> None:
        cfg = c.config
        k_per_split = _ceil_div(self.k, cfg.split_k)
        available = _ceil_div(k_per_split, cfg.block_k)
        limit = max(1, _ceil_div(self._k_limit_smem((cfg.block_m, cfg.block_n)), cfg.block_k))
        mx = min(available, limit, K_MAX_WARPS_PER_SCHEDULER)
        for s in range(1, mx + 1):
            out.append(_Noted(_with(cfg, num_stages=s), c.not_enough_tiles))

    def _tma(self, c: _Noted, out: list[_Noted]) -> None:
        out.append(_Noted(_with(c.config, is_tma_allowed=False), c.not_enough_tiles))
        if self.exhaustive or is_tma_recommended(c.config):
            out.append(_Noted(_with(c.config, is_tma_allowed=True), c.not_enough_tiles))

    def _waves_per_eu(self, c: _Noted, out: list[_Noted]) -> None:
        for w in (0, 1, 2, 4):
            out.append(_Noted(_with(c.config, waves_per_eu=w), c.not_enough_tiles))

    # -- restriction to the platform's default list -----------------------------------
    def optimize(self, configs: list[TritonConfig], hints: Iterable[TritonConfig]) -> list[TritonConfig]:
        """XLA's OptimizeConfigSet: keep the configs equal to a hint clamped
        to this problem; if none survive, the hints themselves."""
        hints = list(hints)
        if not hints or not configs:
            return configs
        allowed = set()
        for h in hints:
            bm = min(max(h.block_m, self.min_out[0]), self.max_out[0])
            bn = min(max(h.block_n, self.min_out[1]), self.max_out[1])
            bk = min(max(h.block_k, self.min_k), self.max_k((bm, bn)))
            allowed.add(_with(h, block_m=bm, block_n=bn, block_k=bk, split_k=1, num_ctas=1))
        kept = [c for c in configs if _with(c, split_k=1) in allowed]
        return kept if kept else hints

    def configs(self) -> list[TritonConfig]:
        """What XLA's Triton backend would autotune: the generated space,
        restricted to the platform's defaults unless exhaustive."""
        generated = self.generate()
        if self.exhaustive:
            return generated
        hints = tuple(TritonConfig(*h) for h in triton_defaults.hints_for(self.d.triton_platform))
        return self.optimize(generated, hints)

    def describe(self) -> str:
        return (f"problem BxMxNxK {self.batch}x{self.lhs}x{self.rhs}x{self.k} "
                f"({self.op_bits}->{self.compute_bits} bit); tiles "
                f"[{self.min_out[0]}-{self.max_out[0]}]x[{self.min_out[1]}-{self.max_out[1]}]"
                f"x[{self.min_k}-?]; occupancy mode {int(self.occupancy)}; "
                f"warps >= {self.min_warps}")


def is_tma_recommended(c: TritonConfig) -> bool:
    """XLA's IsTmaRecommended (codegen/triton/tma_utils.cc)."""
    return (c.num_warps <= 8 and c.num_stages in (1, 3, 4)
            and c.block_m <= 256 and c.block_n <= 256 and c.block_k <= 256)


# ---------------------------------------------------------------------------
# Resources and feasibility
# ---------------------------------------------------------------------------

TMA_BARRIER_BYTES = 8   # one mbarrier (64 bit) per pipeline stage


@dataclass
class Resources:
    threads: int
    pipeline_smem: int          # operand tiles x stages (+ TMA barriers)
    epilogue_smem: int          # accumulator layout-conversion scratch (0 if none)
    smem: int                   # what the kernel requests
    acc_registers: int          # 32-bit registers holding the accumulator tile
    registers_per_thread: int
    smem_detail: str = ""
    epilogue_reason: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"threads": self.threads, "shared_memory": self.smem,
                "pipeline_shared_memory": self.pipeline_smem,
                "epilogue_shared_memory": self.epilogue_smem,
                "accumulator_registers": self.acc_registers,
                "registers_per_thread": self.registers_per_thread}


def epilogue_conversion(problem: GemmProblem, device: DeviceSpec) -> str:
    """Why the accumulator tile must go through shared memory to meet an
    epilogue operand, or '' when it need not.

    Triton keeps the accumulator in the MMA layout.  An epilogue operand
    loaded in that layout costs nothing; one loaded in another layout
    (a tensor of pointers gets a blocked layout: S4, where Intel's backend
    rewrote block-pointer loads into pointer tensors; or a matrix stored
    transposed relative to the output) forces a ``convert_layout`` of the
    accumulator through shared memory."""
    mats = [e for e in problem.epilogue_operands if e.kind == "matrix"]
    if not mats:
        return ""
    if device.epilogue_via_shared_memory:
        return (f"epilogue operand {mats[0].name} {mats[0].shape} is loaded as a tensor of "
                f"pointers (blocked layout) on {device.name}")
    for e in mats:
        if e.transposed:
            return f"epilogue operand {e.name} {e.shape} is stored transposed to the output"
    return ""


def resources(cfg: TritonConfig, problem: GemmProblem, device: DeviceSpec) -> Resources:
    threads = cfg.num_warps * device.threads_per_warp
    lhs_b = max(1, (max(1, problem.operand_bits) + 7) // 8)
    from ..ir.shape import bit_width
    rhs_b = max(1, (bit_width(problem.rhs_type) + 7) // 8)
    lhs_tile = cfg.block_m * cfg.block_k * lhs_b
    rhs_tile = cfg.block_k * cfg.block_n * rhs_b
    stages = max(1, cfg.num_stages)
    barriers = TMA_BARRIER_BYTES * stages if cfg.is_tma_allowed and device.tma else 0
    tiles = (f"({cfg.block_m}x{cfg.block_k} x {lhs_b} B + {cfg.block_k}x{cfg.block_n} x {rhs_b} B)")
    if problem.operand_bits >= 32 and stages > 1:
        # 32-bit operands are converted to TF32 on their way to the MMA:
        # stages-1 buffers are in flight plus one staging copy of the rhs
        # tile (fits every shared-memory verdict in the H200 sweep logs,
        # e.g. 128x256x64/s3 f32: 2 x 98304 + 65536 = 262144 B, XLA's figure).
        pipeline = (stages - 1) * (lhs_tile + rhs_tile) + rhs_tile + barriers
        detail = (f"operand tiles {stages - 1} stage{'s' if stages > 2 else ''} in flight x {tiles} "
                  f"+ TF32 staging {cfg.block_k}x{cfg.block_n} x {rhs_b} B")
    else:
        pipeline = stages * (lhs_tile + rhs_tile) + barriers
        detail = f"operand tiles {stages} stage{'s' if stages > 1 else ''} x {tiles}"
    detail += (f" + {stages} TMA barriers x {TMA_BARRIER_BYTES} B" if barriers else "") + f" = {pipeline} B"
    reason = epilogue_conversion(problem, device)
    epi = cfg.block_m * cfg.block_n * problem.acc_bytes if reason else 0
    if epi:
        detail += (f"; epilogue layout conversion {cfg.block_m}x{cfg.block_n} x "
                   f"{problem.acc_bytes} B = {epi} B ({reason})")
    # The pipeline buffers are dead once the K loop ends, so the
    # conversion scratch reuses them: the request is the larger of the two.
    smem = max(pipeline, epi)
    acc_regs = cfg.block_m * cfg.block_n * problem.compute_bits // 32
    acc_per_thread = _ceil_div(cfg.block_m * cfg.block_n * problem.acc_bytes // 4, threads)
    if problem.operand_bits >= 32:
        # 32-bit operands are converted (to TF32) in registers: both whole
        # operand tiles are register-resident.
        op_regs = _ceil_div(cfg.block_m * cfg.block_k + cfg.block_k * cfg.block_n, threads)
    else:
        op_regs = _ceil_div((cfg.block_m * cfg.block_k * lhs_b + cfg.block_k * cfg.block_n * rhs_b) // 4,
                            threads)
    return Resources(threads, pipeline, epi, smem, acc_regs, acc_per_thread + op_regs, detail, reason)


def check(cfg: TritonConfig, problem: GemmProblem, device: DeviceSpec,
          res: Resources | None = None) -> list[str]:
    """Reasons this config cannot run on the device (empty: feasible)."""
    res = res or resources(cfg, problem, device)
    why: list[str] = []
    if res.threads > device.threads_per_block:
        why.append(f"needs {res.threads} threads per block ({cfg.num_warps} warps x "
                   f"{device.threads_per_warp}), device limit {device.threads_per_block}")
    if res.smem > device.shared_memory_per_block:
        why.append(f"needs {res.smem} B shared memory, device limit "
                   f"{device.shared_memory_per_block} B [{res.smem_detail}]")
    if res.acc_registers > device.registers_per_block:
        why.append(f"accumulator {cfg.block_m}x{cfg.block_n} needs {res.acc_registers} registers, "
                   f"device limit {device.registers_per_block} per block")
    elif res.registers_per_thread > device.max_registers_per_thread:
        why.append(f"needs about {res.registers_per_thread} registers per thread, device limit "
                   f"{device.max_registers_per_thread} (would spill)")
    if cfg.is_tma_allowed and not device.tma:
        why.append(f"TMA requested, {device.name} has no TMA")
    if cfg.num_ctas > 1 and not device.tma:
        why.append(f"{cfg.num_ctas}-CTA clusters need Hopper, {device.name} has none")
    if cfg.block_k < 16:
        why.append(f"block_k {cfg.block_k} < 16, Triton's minimum for dot")
    if not why:
        # measured: XLA compiles this config but throws it away (register
        # spills, wrong results) on this device (discards.py)
        from .cost import eff_class
        from .discards import reason
        r = reason(device.name, eff_class(problem), cfg.label)
        if r:
            why.append(r)
    return why
