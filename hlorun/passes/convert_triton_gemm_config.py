"""convert_triton_gemm_config: XLA:GPU's ConvertTritonGemmConfig
(xla/backends/gpu/transforms/convert_triton_gemm_config.cc), the last step
of the config-assigner pipeline in today's XLA.

Every fusion whose backend config carries a ``triton_gemm_config`` (a
``__triton_gemm`` fusion after the autotuner) is re-expressed as a
block-level Triton fusion, as the after_optimizations dumps print it:

* the fusion's kind becomes ``__triton_nested_gemm_fusion``, the
  ``triton_gemm_config`` is dropped and a ``block_level_fusion_config``
  takes its place: ``output_tiles`` = the tile of the fusion's *root*, i.e.
  ``[1, ..., block_m, block_n]`` placed on the root dimensions that the
  dot's M and N dimensions become (through the bitcasts, transposes and
  elementwise ops between the dot and the root: XLA tries the permutations
  of that tile until the dot's tile maps back to ``[1.., block_m, block_n]``;
  here the dimensions are followed directly), plus ``num_warps``,
  ``num_ctas``, ``num_stages``, ``is_tma_allowed``,
  ``is_warp_specialization_allowed``, ``waves_per_eu`` of the config;
* the (first) dot gets the contraction tile: ``backend_config={"sizes":["<block_k>"]}``.

A fusion whose root dimensions cannot be traced back to the dot's M and N
is a pass failure naming the fusion (XLA: "Couldn't find output tile sizes
that satisfy ...").

Postcondition: no fusion carries a ``triton_gemm_config``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..ir.module import Instruction, Module
from ..ir.opcode import ELEMENTWISE
from .base import Pass
from .priority_fusion.analysis import fusible_computations

_SCALE_INVARIANT = ELEMENTWISE | frozenset({"convert", "copy"})


def block_level_config(output_tiles: list[int], num_warps: int = 4, num_ctas: int = 1,
                       num_stages: int = 1, is_tma_allowed: bool = False,
                       is_warp_specialization_allowed: bool = False,
                       waves_per_eu: int = 0) -> dict[str, Any]:
    """``block_level_fusion_config`` as XLA prints it (proto3 JSON: int64
    fields as strings, int32 as numbers)."""
    return {"group_size": 0, "is_tma_allowed": is_tma_allowed,
            "is_warp_specialization_allowed": is_warp_specialization_allowed,
            "num_ctas": num_ctas, "num_stages": num_stages, "num_tiles_per_pid": 0,
            "num_warps": str(num_warps), "output_tiles": [{"sizes": [str(t) for t in output_tiles]}],
            "waves_per_eu": waves_per_eu}


def _physical(shape) -> list[int]:
    """Dimensions major to minor."""
    return list(reversed(shape.minor_to_major))


def _groups(src, dst) -> list[tuple[list[int], list[int]]] | None:
    """A layout-preserving reshape / bitcast as groups of (src dims, dst
    dims), each major to minor, with equal element counts."""
    ps, pd = _physical(src), _physical(dst)
    out: list[tuple[list[int], list[int]]] = []
    i = j = 0
    while i < len(ps) or j < len(pd):
        ga: list[int] = []
        gb: list[int] = []
        na = nb = 1
        while True:
            if i < len(ps) and (not ga or na < nb or (na == nb and src.dimensions[ps[i]] == 1
                                                        and not gb)):
                ga.append(ps[i])
                na *= src.dimensions[ps[i]]
                i += 1
            elif j < len(pd) and (not gb or nb < na):
                gb.append(pd[j])
                nb *= dst.dimensions[pd[j]]
                j += 1
            else:
                break
            if ga and gb and na == nb:
                break
        if na != nb:
            return None
        out.append((ga, gb))
    return out


def _tiles_through(instr: Instruction, operand: Instruction, tiles: list[int]) -> list[int] | None:
    """The tile of ``instr``'s output when ``operand`` is tiled by ``tiles``."""
    op = instr.opcode
    if op == "transpose":
        return [tiles[src] for src in instr.dimensions]
    if op in ("bitcast", "reshape"):
        groups = _groups(operand.shape, instr.shape)
        if groups is None:
            return None
        out = [1] * instr.shape.rank
        for src_dims, dst_dims in groups:
            t = 1
            for d in src_dims:
                t *= tiles[d]
            for k, d in enumerate(reversed(dst_dims)):  # minor first; the major one
                size = instr.shape.dimensions[d]     # takes what is left (unclipped)
                here = t if k == len(dst_dims) - 1 else min(t, size)
                out[d] = here
                t = max(1, t // max(1, here))
        return out
    if op in _SCALE_INVARIANT and instr.shape.is_array and \
            tuple(instr.shape.dimensions) == tuple(operand.shape.dimensions):
        return list(tiles)
    return None


def _path_to_root(dot: Instruction) -> list[Instruction] | None:
    """The users from ``dot`` to its computation's root (first found)."""
    root = dot.parent.root
    prev: dict[Instruction, Instruction | None] = {dot: None}
    stack = [dot]
    while stack:
        x = stack.pop()
        if x is root:
            path = []
            while x is not None:
                path.append(x)
                x = prev[x]
            return list(reversed(path))
        for u in x.users:
            if u not in prev:
                prev[u] = x
                stack.append(u)
    return None


def output_tiles(dot: Instruction, block_m: int, block_n: int) -> list[int] | None:
    """The root tile that gives the dot the tile ``[1.., block_m, block_n]``
    (the dot's tile carried forward through the ops up to the root)."""
    tiles = [1] * (dot.shape.rank - 2) + [block_m, block_n]
    path = _path_to_root(dot)
    if path is None or path[-1].shape.is_tuple:
        return None
    for prev, instr in zip(path, path[1:]):
        got = _tiles_through(instr, prev, tiles)
        if got is None:
            return None
        tiles = got
    return tiles


@dataclass(frozen=True)
class ConvertTritonGemmConfig(Pass):
    """Turn __triton_gemm fusions with a triton_gemm_config into __triton_nested_gemm_fusion block-level fusions."""

    name = "convert_triton_gemm_config"

    def run(self, module: Module) -> bool:
        changed = False
        for comp in fusible_computations(module):
            for instr in comp.post_order():
                if instr.opcode == "fusion":
                    changed |= self._rewrite(instr)
        return changed

    def _rewrite(self, fusion: Instruction) -> bool:
        bc = fusion.backend_config
        if not isinstance(bc, dict):
            return False
        fbc = bc.get("fusion_backend_config") or {}
        cfg = fbc.get("triton_gemm_config")
        if not isinstance(cfg, dict):
            return False
        body = fusion.fused_computation
        dot = next((i for i in body.post_order() if i.opcode == "dot"), None) if body else None
        if dot is None:
            return False

        def num(key: str, default: int) -> int:
            v = cfg.get(key, default)
            return int(v) if v not in (None, "") else default
        bm, bn, bk = num("block_m", 16), num("block_n", 16), num("block_k", 16)
        tiles = output_tiles(dot, bm, bn)
        if tiles is None:
            self.fail(f"couldn't find output tile sizes of {fusion.name} that give its dot "
                      f"{dot.name} the tile [.., {bm}, {bn}]", fusion)
        dbc = dot.backend_config
        sizes = list(dbc.get("sizes", [])) if isinstance(dbc, dict) else []
        dot.set_backend_config({"sizes": sizes + [str(bk)]})
        fbc = {k: v for k, v in fbc.items() if k != "triton_gemm_config"}
        fbc["kind"] = "__triton_nested_gemm_fusion"
        fbc["block_level_fusion_config"] = block_level_config(
            tiles, num_warps=num("num_warps", 4), num_ctas=num("num_ctas", 1),
            num_stages=num("num_stages", 1),
            is_tma_allowed=str(cfg.get("is_tma_allowed", False)).lower() == "true",
            is_warp_specialization_allowed=str(cfg.get("is_warp_specialization_allowed",
                                                       False)).lower() == "true",
            waves_per_eu=num("waves_per_eu", 0))
        bc = dict(bc)
        bc["fusion_backend_config"] = fbc
        fusion.set_backend_config(bc)
        self.remark(fusion, f"{fusion.name}: triton_gemm_config {bm}x{bn}x{bk} -> "
                            f"__triton_nested_gemm_fusion with output tile {tiles}, dot "
                            f"{dot.name} contraction tile {bk}", "applied", rule="convert")
        return True


__all__ = ["ConvertTritonGemmConfig", "block_level_config", "output_tiles"]
