"""The reduction rewrites XLA:GPU runs after SoftmaxRewriterTriton and before
priority fusion (gpu_compiler.cc, OptimizeHloPostLayoutAssignment):

* ``reduction-dimension-grouper`` (ReductionDimensionGrouper): adjacent
  reduced dimensions of a reduce's (default-layout) inputs are merged into
  one through a bitcast: ``reduce(f32[128,256], dims={0,1})`` becomes
  ``reduce(bitcast f32[32768], dims={0})``.
* ``reduction-splitter`` (HloPassFix<ReductionSplitter>, small dimensions
  not ignored): a reduction whose reduced and kept dimensions are both
  non-contiguous reduces its largest reduced dimension first, then the rest.
* ``tree-reduction-rewriter`` (HloPassFix<TreeReductionRewriter>): a
  reduction the reduction emitter takes (reduced or kept dimensions
  contiguous) that is not *race free* -- a row longer than 1024 threads x
  16 elements, more than 8 reduced batch rows, a column of more than 32 x
  128 rows -- is done in two reductions: a reduced batch dimension over the
  bound goes in a reduction of its own; otherwise the last reduced
  dimension ``k`` is padded (with the init value) to ``k1 * k2`` and split
  by a bitcast into [k1, k2], ``k2`` about sqrt(k) (at most the bound;
  the least padding, then a power of two), ``k1`` and ``k2`` swapped when
  XLA's vectorization heuristic says so; the inner reduce reduces ``k2``
  (and the other reduced dimensions), the outer one ``k1``.  A loss
  ``sum(f32[128,256])`` becomes ``f32[128]`` then ``f32[]``, as in XLA.
  Not implemented: splitting variadic (argmax) reductions, which XLA does.

Postconditions: no reduce has adjacent reduced dimensions; every
single-output reduction the reduction emitter takes is race free.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..ir.attrs import format_int_list, format_padding
from ..ir.module import Instruction, Module
from ..ir.shape import Shape, default_layout
from .base import Pass
from .dfs_rewrite import DfsRewriteVisitor, add_instruction, make_bitcast
from .priority_fusion.analysis import (BATCHED_REDUCTION_RACE_FREE_BOUND,
                                       MIN_THREADS_X_ROW_REDUCTION, WARP_SIZE,
                                       is_reduction_from_or_to_contiguous, reduction_dims)

#: GetReductionTiling: row reductions 16 elements per thread, columns 128 rows
ROW_TILE, COLUMN_TILE = 16, 128


def _inputs(reduce: Instruction) -> tuple[list[Instruction], list[Instruction]]:
    n = len(reduce.operands) // 2
    return list(reduce.operands[:n]), list(reduce.operands[n:])


def _default(shape: Shape) -> bool:
    return shape.layout is None or shape.minor_to_major == tuple(default_layout(shape.rank)
                                                                 .minor_to_major)


def _array(element_type: str, dims) -> Shape:
    return Shape.array(element_type, list(dims), default_layout(len(dims)))


def _result_shape(inputs: list[Instruction], dims) -> Shape:
    shapes = [_array(x.shape.element_type, dims) for x in inputs]
    return shapes[0] if len(shapes) == 1 else Shape.tuple(shapes)


def _new_reduce(reduce: Instruction, shape: Shape, inputs, inits, dims) -> Instruction:
    return Instruction("reduce", shape, list(inputs) + list(inits), "",
                       {"dimensions": format_int_list(sorted(dims)),
                        "to_apply": reduce.attrs["to_apply"]})


class _Visitor(DfsRewriteVisitor):
    only_opcodes = frozenset({"reduce"})  # the subclasses handle reduces only

    def __init__(self, owner: Pass):
        super().__init__()
        self.owner = owner

    def replace(self, reduce: Instruction, new: Instruction, why: str) -> None:
        name = reduce.name
        self.replace_instruction(reduce, new)
        self.owner.remark(new, f"{name}: {why}", derived_from=[reduce])


# ---------------------------------------------------------------------------
# ReductionDimensionGrouper
# ---------------------------------------------------------------------------


class _Grouper(_Visitor):
    def handle_reduce(self, reduce: Instruction) -> None:
        inputs, inits = _inputs(reduce)
        if not all(_default(x.shape) for x in inputs):
            return  # XLA requires (CHECKs) default layouts here
        reduced = set(reduce.dimensions)
        dims = inputs[0].shape.dimensions
        grouped: list[int] = []
        new_reduced: list[int] = []
        run = 1
        changed = False
        for d, size in enumerate(dims):
            if d in reduced and d + 1 < len(dims) and d + 1 in reduced:
                run *= size
                changed = True
                continue
            if d in reduced:
                grouped.append(run * size)
                new_reduced.append(len(grouped) - 1)
                run = 1
            else:
                grouped.append(size)
        if not changed:
            return
        casts = [make_bitcast(x, _array(x.shape.element_type, grouped), metadata_from=x)
                 for x in inputs]
        new = _new_reduce(reduce, reduce.shape, casts, inits, new_reduced)
        self.replace(reduce, new, f"adjacent reduced dimensions grouped: {list(dims)} -> "
                                  f"{grouped}, dimensions={{{','.join(map(str, new_reduced))}}}")


# ---------------------------------------------------------------------------
# ReductionSplitter
# ---------------------------------------------------------------------------


class _Splitter(_Visitor):
    def handle_reduce(self, reduce: Instruction) -> None:
        if is_reduction_from_or_to_contiguous(reduce) or len(reduce.dimensions) < 2 \
                or reduce.shape.is_tuple:
            return
        arg, init = reduce.operands
        dims = arg.shape.dimensions
        biggest = max(reduce.dimensions, key=lambda d: (dims[d], -d))
        pre_dims = [s for d, s in enumerate(dims) if d != biggest]
        pre = add_instruction(reduce.parent, _new_reduce(
            reduce, _array(reduce.shape.element_type, pre_dims), [arg], [init], [biggest]),
            metadata_from=reduce)
        rest = [d - (d > biggest) for d in reduce.dimensions if d != biggest]
        new = _new_reduce(reduce, reduce.shape, [pre], [init], rest)
        self.replace(reduce, new, f"non-contiguous reduction split: dimension {biggest} "
                                  f"(size {dims[biggest]}) first")


# ---------------------------------------------------------------------------
# TreeReductionRewriter
# ---------------------------------------------------------------------------


def race_free_bound(is_row: bool) -> int:
    """``ReductionDimensionRaceFreeBound``."""
    return MIN_THREADS_X_ROW_REDUCTION * ROW_TILE if is_row else WARP_SIZE * COLUMN_TILE


def race_free(is_row: bool, d: tuple[int, int, int]) -> bool:
    """``ReductionIsRaceFree``."""
    if is_row:
        return d[2] <= race_free_bound(True) and d[0] <= BATCHED_REDUCTION_RACE_FREE_BOUND
    return d[1] <= race_free_bound(False)


def _swap(k1: int, k2: int, n: int, bound: int, is_row: bool) -> bool:
    """``ShouldSwapInnerAndOuterReducedMinorDimension``."""
    if k1 > bound:
        return False
    if is_row:
        if k2 % 2 == 0 and n % 2 == 0:
            return k2 * 2 < k1 or k1 % 2 == 0
        return n % 2 == 0 or k1 % 2 != 0
    return True


def split_params(k: int, is_row: bool) -> tuple[int, int]:
    """``ComputeSplitParams``: (k1, k2) with k1 * k2 = k padded."""
    bound = race_free_bound(is_row)
    k2 = min(math.isqrt(k), bound)
    best_pad = (k2 - k % k2) % k2
    best_k1 = (k + best_pad) // k2
    i = k2 - 1
    while i > k2 // 2:
        pad = (i - k % i) % i
        if pad < best_pad or (pad == best_pad and i & (i - 1) == 0):
            best_pad = pad
            best_k1 = (k + pad) // i
        i -= 1
    padded = k + best_pad
    k1, k2 = best_k1, padded // best_k1
    if _swap(k1, k2, k, bound, is_row):
        k1, k2 = k2, k1
    return k1, k2


class _Tree(_Visitor):
    def handle_reduce(self, reduce: Instruction) -> None:
        if not is_reduction_from_or_to_contiguous(reduce) or reduce.shape.is_tuple:
            return
        rd = reduction_dims(reduce)
        if race_free(rd.is_row, rd.dims):
            return
        dims = sorted(reduce.dimensions)
        if len(dims) > 2:
            return  # XLA CHECKs at most two after ReductionDimensionGrouper
        inputs, inits = _inputs(reduce)
        if rd.is_row and rd.dims[0] > BATCHED_REDUCTION_RACE_FREE_BOUND:
            minor = dims[-1]
            kept = [s for d, s in enumerate(inputs[0].shape.dimensions) if d != minor]
            inner = add_instruction(reduce.parent, _new_reduce(
                reduce, _result_shape(inputs, kept), inputs, inits, [minor]),
                metadata_from=reduce)
            self.replace(reduce, _new_reduce(reduce, reduce.shape, [inner], inits, [0]),
                         f"{rd.describe()} has more than {BATCHED_REDUCTION_RACE_FREE_BOUND} "
                         f"reduced batch rows: the minor dimension {minor} is reduced first")
            return
        self._split(reduce, rd, dims, inputs, inits)

    def _split(self, reduce, rd, dims, inputs, inits) -> None:
        shape_dims = list(inputs[0].shape.dimensions)
        split = dims[-1]
        k = shape_dims[split]
        k1, k2 = split_params(k, rd.is_row)
        comp = reduce.parent
        padded = list(shape_dims)
        padded[split] = k1 * k2
        if k1 * k2 != k:
            cfg = [(0, k1 * k2 - k, 0) if d == split else (0, 0, 0) for d in range(len(shape_dims))]
            inputs = [add_instruction(comp, Instruction(
                "pad", _array(x.shape.element_type, padded), [x, init], "",
                {"padding": format_padding(cfg)}), metadata_from=x)
                for x, init in zip(inputs, inits)]
        reshaped = padded[:split] + [k1, k2] + padded[split + 1:]
        inputs = [make_bitcast(x, _array(x.shape.element_type, reshaped), metadata_from=x)
                  for x in inputs]
        inner_dims = [d + 1 if d == split else d for d in dims]
        outer = split - inner_dims.index(split + 1)
        kept = [s for d, s in enumerate(reshaped) if d not in inner_dims]
        inner = add_instruction(comp, _new_reduce(reduce, _result_shape(inputs, kept), inputs,
                                                  inits, inner_dims), metadata_from=reduce)
        self.replace(reduce, _new_reduce(reduce, reduce.shape, [inner], inits, [outer]),
                     f"{rd.describe()} is not race free: dimension {split} ({k}) split into "
                     f"[{k1}, {k2}]" + (f" (padded by {k1 * k2 - k})" if k1 * k2 != k else "")
                     + f", {k2} reduced first")


def _fix(owner: Pass, visitor, module: Module) -> bool:
    """``HloPassFix``: rerun until nothing changes."""
    changed = False
    while visitor(owner).run_on_module(module):
        changed = True
    return changed


@dataclass(frozen=True)
class ReductionDimensionGrouper(Pass):
    """Merge adjacent reduced dimensions (XLA's ReductionDimensionGrouper)."""

    name = "reduction-dimension-grouper"

    def run(self, module: Module) -> bool:
        return _Grouper(self).run_on_module(module)


@dataclass(frozen=True)
class ReductionSplitter(Pass):
    """Non-contiguous multi-dimension reductions: largest dimension first."""

    name = "reduction-splitter"

    def run(self, module: Module) -> bool:
        return _fix(self, _Splitter, module)


@dataclass(frozen=True)
class TreeReductionRewriter(Pass):
    """Reductions that are not race free become two reductions (XLA's TreeReductionRewriter)."""

    name = "tree-reduction-rewriter"

    def run(self, module: Module) -> bool:
        return _fix(self, _Tree, module)


__all__ = ["ReductionDimensionGrouper", "ReductionSplitter", "TreeReductionRewriter",
           "race_free", "split_params"]
