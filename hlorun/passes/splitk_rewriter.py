"""splitk-rewriter: XLA:GPU's SplitkRewriter (xla/backends/gpu/transforms/
splitk_rewriter.cc).

For every dot with one contracting dimension per side (and no s32
operand), a cost model picks how many chunks ``split_k`` the contracting
dimension K is split into (1, 2, 4, ..., 2048; 1 = leave the dot alone).
For a split, both operands are (zero-padded to a multiple of
``split_k * 16 bytes`` and) reshaped so that K becomes ``[split_k,
K/split_k]`` with the new dimension as a batch dimension, the dot computes
``split_k`` partial products in the accumulator type (f32 for float
outputs), a reduce over the split dimension sums them, and a convert
returns to the output type.  Small-M/N GEMMs with a long K (batch-1 linear
layers) get many parallel tiles this way.

The cost model (``EstimateGemmCostAfterSplitK``, XLA's constants):
128x128 output tiles, ``waves = max(1, tiles / (cores * tiles per SM))``,
compute cost = flops per tile x waves x 100, memory cost = bytes (operands
read, partial results written) x memory weight, dot cost = max of the two;
with a split, plus a launch overhead and the partial-result traffic of the
reduction weighted by the reduction weight.  Weights per architecture
(Hopper: memory 0.194136, reduction 193.1384, launch 4.36e7; Blackwell:
0.0848863, 189.711, 1.21563e8; older: 0.0666955, 467.815, 5.65307e7).
The split with the lowest cost wins (the first one on ties); ``force_split_k``
(``--xla_gpu_experimental_force_split_k``) overrides.  The remark lists
every candidate's cost.

Postcondition: every dot the model wants split is split.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..ir.build import make_constant, make_convert, make_scalar_computation
from ..ir.edit import replace_instruction
from ..ir.module import Instruction, Module, has_opcode
from ..ir.shape import Shape, bit_width
from .base import Pass, Target
from .dfs_rewrite import add_instruction, nonfusion_computations
from .dot_utils import (BATCH, CONTRACTING, NON_CONTRACTING, OperandDims, algorithm,
                        gemm_accumulator_type)

CANDIDATES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)
TILE_M = TILE_N = 128

#: Streaming multiprocessors (compute units) per device (vendor data sheets).
CORE_COUNT = {"H100": 132, "H200": 132, "H800": 132, "GH200": 132, "A100": 108, "A10": 72,
              "L4": 58, "V100": 80, "B200": 148, "B100": 132, "MI300X": 304, "MI250X": 220,
              "MI100": 120}


def core_count(target: Target) -> int:
    for name, n in CORE_COUNT.items():
        if target.device.upper().startswith(name):
            return n
    return 132


def cost_weights(target: Target) -> tuple[float, float, float, float]:
    """(compute, memory, reduction memory, reduction launch) weights."""
    if target.is_cuda:
        try:
            major = int(target.compute_capability.split(".")[0])
        except ValueError:
            major = 0
        if major >= 10:
            return 100.0, 0.0848863, 189.711, 1.21563e8
        if major >= 9:
            return 100.0, 0.194136, 193.1384, 4.36e7
    return 100.0, 0.0666955, 467.815, 5.65307e7


@dataclass
class GemmDims:
    b: int
    m: int
    n: int
    k: int
    lhs_bits: int
    rhs_bits: int
    acc_bits: int
    out_bits: int
    flops_per_element: int


def _side_bits(x: Instruction) -> int:
    """Element size after going up single-operand elementwise chains."""
    from ..ir.opcode import ELEMENTWISE
    while x.opcode in ELEMENTWISE and len(x.operands) == 1:
        x = x.operands[0]
    return bit_width(x.shape.element_type)


def gemm_dims(dot: Instruction) -> GemmDims:
    lhs, rhs = OperandDims.from_dot(dot)
    alg = algorithm(dot) or ""
    fpe = 12 if alg in ("dot_bf16_bf16_f32_x3", "dot_tf32_tf32_f32_x3") else \
        20 if alg == "dot_bf16_bf16_f32_x6" else 28 if alg == "dot_bf16_bf16_f32_x9" else 2
    return GemmDims(lhs.size(BATCH), lhs.size(NON_CONTRACTING), rhs.size(NON_CONTRACTING),
                    lhs.size(CONTRACTING), _side_bits(dot.operands[0]), _side_bits(dot.operands[1]),
                    bit_width(gemm_accumulator_type(dot)), bit_width(dot.shape.element_type), fpe)


def gemm_cost_after_split(g: GemmDims, split: int, cores: int,
                          w: tuple[float, float, float, float]) -> float:
    """``EstimateGemmCostAfterSplitK``."""
    eff_k = -(-g.k // split)
    eff_b = g.b * split
    m_tile, n_tile = min(g.m, TILE_M), min(g.n, TILE_N)
    tiles = float(eff_b * -(-g.m // TILE_M) * -(-g.n // TILE_N))
    per_sm = (TILE_M * TILE_N) / (m_tile * n_tile)
    waves = max(1.0, tiles / (cores * per_sm))
    compute = g.flops_per_element * m_tile * n_tile * eff_k * waves * w[0]
    read = g.m * g.k * g.b * g.lhs_bits / 8.0 + g.n * g.k * g.b * g.rhs_bits / 8.0
    write = g.m * g.n * eff_b * (g.acc_bits if split > 1 else g.out_bits) / 8.0
    cost = max(compute, (read + write) * w[1])
    if split == 1:
        return cost
    red = (eff_b * g.m * g.n * g.acc_bits / 8.0 + g.b * g.m * g.n * g.out_bits / 8.0) * w[2]
    return cost + w[3] + red


def choose_split_k(g: GemmDims, target: Target) -> tuple[int, list[tuple[int, float]]]:
    w = cost_weights(target)
    cores = core_count(target)
    costs = [(s, gemm_cost_after_split(g, s, cores, w)) for s in CANDIDATES]
    best = min(costs, key=lambda sc: sc[1])
    return best[0], costs


def _split_operand(x: Instruction, k_idx: int, split: int, padded_k: int) -> Instruction:
    comp = x.parent
    if padded_k != x.shape.dimensions[k_idx]:
        zero = make_constant(comp, x.shape.element_type, 0)
        pad = "x".join(f"0_{padded_k - d}" if i == k_idx else "0_0"
                       for i, d in enumerate(x.shape.dimensions))
        dims = list(x.shape.dimensions)
        dims[k_idx] = padded_k
        x = add_instruction(comp, Instruction("pad", Shape.array(x.shape.element_type, dims,
                                                                  x.shape.layout),
                                              [x, zero], "", {"padding": pad}))
    old = x.shape
    dims: list[int] = []
    for i, d in enumerate(old.dimensions):
        dims += [split, d // split] if i == k_idx else [d]
    m2m: list[int] = []
    for d in old.minor_to_major:
        if d >= k_idx:
            m2m.append(d + 1)
        if d <= k_idx:
            m2m.append(d)
    return add_instruction(comp, Instruction("reshape", Shape.array(old.element_type, dims, m2m),
                                             [x]))


_DOT = frozenset({"dot"})


@dataclass(frozen=True)
class SplitkRewriter(Pass):
    """Split the contracting dimension of GEMMs with few output tiles."""

    name = "splitk-rewriter"
    #: --xla_gpu_experimental_force_split_k (0: let the cost model choose)
    force_split_k: int = 0

    def run(self, module: Module) -> bool:
        changed = False
        for comp in nonfusion_computations(module):
            if not has_opcode(comp, _DOT):
                continue
            for dot in [i for i in comp.post_order() if i.opcode == "dot"]:
                changed |= self._visit(dot)
        return changed

    def _visit(self, dot: Instruction) -> bool:
        if len(dot.int_list("lhs_contracting_dims")) != 1 or \
                len(dot.int_list("rhs_contracting_dims")) != 1:
            return False
        if any(o.shape.element_type == "s32" for o in dot.operands):
            return False
        g = gemm_dims(dot)
        if self.force_split_k:
            split, costs = self.force_split_k, []
        else:
            split, costs = choose_split_k(g, self.target)
        listing = ", ".join(f"{s}: {c:.3g}" for s, c in costs)
        if split == 1:
            self.remark(dot, (f"K not split: M={g.m}, N={g.n}, K={g.k} already gives enough "
                              f"parallel tiles (cost by split_k: {listing})"), "missed",
                        derived_from=[dot], rule="splitk", split_k=1, m=g.m, n=g.n, k=g.k)
            return False
        new = self._split(dot, split, g)
        why = (f"forced by force_split_k={split}" if self.force_split_k else
               f"cheapest in XLA's split-K cost model (cost by split_k: {listing})")
        self.remark(new, (f"K={g.k} of {dot.name} split into {split} chunks of "
                          f"{-(-g.k // split)} (M={g.m}, N={g.n}: "
                          f"{-(-g.m // TILE_M) * -(-g.n // TILE_N)} output tile(s) of 128x128 "
                          f"for {core_count(self.target)} SMs); partial sums in "
                          f"{gemm_accumulator_type(dot)} reduced afterwards; {why}"),
                    derived_from=[dot], rule="splitk", split_k=split, m=g.m, n=g.n, k=g.k)
        return True

    def _split(self, dot: Instruction, split: int, g: GemmDims) -> Instruction:
        comp = dot.parent
        acc = gemm_accumulator_type(dot)
        k_idx = (dot.int_list("lhs_contracting_dims")[0], dot.int_list("rhs_contracting_dims")[0])
        min_bits = min(128, g.lhs_bits, g.rhs_bits)
        multiple = split * 128 // min_bits
        padded_k = -(-g.k // multiple) * multiple
        ops = [_split_operand(dot.operands[i], k_idx[i], split, padded_k) for i in (0, 1)]
        dims = [OperandDims.of(dot, 0), OperandDims.of(dot, 1)]
        at = None
        for i in (0, 1):
            od = dims[i]
            od.dims = [[d + 1 if d >= k_idx[i] else d for d in cat] for cat in od.dims]
            batch = od.dims[BATCH]
            if at is None:
                at = next((j for j, d in enumerate(batch) if d >= k_idx[i]), len(batch))
            batch.insert(at, k_idx[i])
            od.shape = ops[i].shape
        attrs = {"lhs_batch_dims": _il(dims[0].dims[BATCH]),
                 "lhs_contracting_dims": _il(dims[0].dims[CONTRACTING]),
                 "rhs_batch_dims": _il(dims[1].dims[BATCH]),
                 "rhs_contracting_dims": _il(dims[1].dims[CONTRACTING])}
        for key in ("operand_precision", "algorithm", "metadata"):
            if key in dot.attrs:
                attrs[key] = dot.attrs[key]
        out = dims[0].sizes(BATCH) + dims[0].sizes(NON_CONTRACTING) + dims[1].sizes(NON_CONTRACTING)
        new_dot = add_instruction(comp, Instruction("dot", Shape.array(acc, out), ops, "", attrs))
        zero = make_constant(comp, acc, 0)
        red_comp = make_scalar_computation(comp.module, "add", acc,
                                           f"{new_dot.name}.reduce_sub_computation", ("lhs", "rhs"))
        shape = Shape.array(acc, [d for j, d in enumerate(out) if j != at], dot.shape.layout)
        root = add_instruction(comp, Instruction("reduce", shape, [new_dot, zero], "", {
            "dimensions": _il([at]), "to_apply": red_comp}))
        if "metadata" in new_dot.attrs:
            root.attrs["metadata"] = new_dot.attrs["metadata"]
        root = make_convert(root, dot.shape.element_type)
        replace_instruction(comp, dot, root)
        return new_dot


def _il(v) -> str:
    return "{" + ",".join(str(x) for x in v) + "}"
