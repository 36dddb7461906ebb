"""Reduction facts of XLA:GPU's fusion analysis (reduction_utils.cc):

* :func:`reduction_dims` -- ``GetReductionKindAndContiguousComponents``
  (row or column, [major, middle, minor]);
* :func:`unnested_faster_than_elemental` --
  ``IsUnnestedReductionFasterThanElemental`` (and why, for remarks);
* :func:`is_reduction_from_or_to_contiguous` -- ``IsReductionFromOrTo
  ContiguousDimensions`` with the small-reduction rule;
* :func:`is_real_reduction_hero` -- reductions the reduction emitter takes
  (race-free bounds).

Each fact depends only on the reduce's input shape and its dimensions, so
it is worked out once per (shape, dimensions) and remembered (priority
fusion asks for every pair it estimates)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...ir.module import Instruction
from ...ir.shape import Shape

WARP_SIZE = 32
MIN_THREADS_X_ROW_REDUCTION = 1024
BATCHED_REDUCTION_RACE_FREE_BOUND = 8


@dataclass(frozen=True)
class ReductionDims:
    is_row: bool
    dims: tuple[int, int, int]  # row: [batch, kept, reduced]; column: [major kept, reduced, minor kept]

    def describe(self) -> str:
        a, b, c = self.dims
        return (f"row reduction (batch {a}, {b} rows of {c})" if self.is_row else
                f"column reduction ({b} rows reduced into {c} columns" +
                (f", batch {a})" if a > 1 else ")"))


def _consecutive(shape: Shape, dims: list[int]) -> bool:
    """``LayoutUtil::AreDimensionsConsecutive``."""
    m2m = list(shape.minor_to_major)
    pos = sorted(m2m.index(d) for d in dims)
    return all(b == a + 1 for a, b in zip(pos, pos[1:]))


def _partition(shape: Shape, middle: list[int]) -> list[int]:
    values = [1, 1, 1]
    seg = 2
    for d in shape.minor_to_major:
        if seg != 0:
            inside = d in middle
            if seg == 2 and inside:
                seg = 1
            elif seg == 1 and not inside:
                seg = 0
        values[seg] *= shape.dimensions[d]
    return values


def _reduction_dims(shape: Shape, reduced: list[int]) -> ReductionDims:
    keep = [d for d in range(shape.rank) if d not in reduced]
    if not keep:
        return ReductionDims(True, (1, 1, math.prod(shape.dimensions)))
    if _consecutive(shape, keep):
        p = _partition(shape, keep)
        if p[1] == 1:
            return ReductionDims(True, (1, 1, p[0] * p[2]))
        if p[2] == 1:
            return ReductionDims(False, (1, p[0], p[1]))
        return ReductionDims(True, (p[0], p[1], p[2]))
    p = _partition(shape, reduced)
    if p[2] == 1:
        return ReductionDims(True, (1, p[0], p[1]))
    return ReductionDims(False, (p[0], p[1], p[2]))


def unnested_faster_than_elemental(r: ReductionDims) -> tuple[bool, str]:
    """``IsUnnestedReductionFasterThanElemental`` and why."""
    ok = _faster(r)
    if r.is_row:
        return ok, (f"row size {r.dims[2]} " + (">= warp size 32" if r.dims[2] >= WARP_SIZE
                                                else "divides the warp size 32" if ok
                                                else "is below the warp size 32"))
    major, minor = r.dims[1], r.dims[2]
    return ok, (f"column reduction of {major} rows x {minor} columns is "
                + ("large enough for the reduction emitter" if ok else
                   "too small for the reduction emitter (the loop emitter is faster)"))


def _faster(r: ReductionDims) -> bool:
    if r.is_row:
        return r.dims[2] >= WARP_SIZE or WARP_SIZE % r.dims[2] == 0
    major, minor = r.dims[1], r.dims[2]
    return not (major < WARP_SIZE or (major < 2 * WARP_SIZE and minor < WARP_SIZE)
                or (major < 4 * WARP_SIZE and minor < 8) or (major < 8 * WARP_SIZE and minor < 3))


def _race_free(r: ReductionDims) -> bool:
    if r.is_row:
        return r.dims[2] <= MIN_THREADS_X_ROW_REDUCTION * 16 and \
            r.dims[0] <= BATCHED_REDUCTION_RACE_FREE_BOUND
    return r.dims[1] <= WARP_SIZE * 128


#: (input shape, dimensions text) -> (ReductionDims, from or to contiguous
#: dimensions and faster than elemental, race free)
_FACTS: dict = {}


def _facts(reduce: Instruction) -> tuple[ReductionDims, bool, bool]:
    shape = reduce.operands[0].shape
    key = (shape, reduce.attrs.get("dimensions"))
    got = _FACTS.get(key)
    if got is None:
        reduced = list(reduce.dimensions)
        keep = [d for d in range(shape.rank) if d not in reduced]
        r = _reduction_dims(shape, reduced)
        contiguous = (_consecutive(shape, keep) or _consecutive(shape, reduced)) and _faster(r)
        got = _FACTS[key] = (r, contiguous, _race_free(r))
    return got


def reduction_dims(reduce: Instruction) -> ReductionDims:
    return _facts(reduce)[0]


def is_reduction_from_or_to_contiguous(reduce: Instruction) -> bool:
    if reduce.opcode != "reduce":  # variadic (argmax) reduces too, as in XLA
        return False
    return _facts(reduce)[1]


def is_real_reduction_hero(root: Instruction, hero: Instruction) -> bool:
    if hero.opcode != "reduce":
        return False
    _, contiguous, race_free = _facts(hero)
    return contiguous and (root is hero or race_free)


__all__ = ["BATCHED_REDUCTION_RACE_FREE_BOUND", "MIN_THREADS_X_ROW_REDUCTION", "WARP_SIZE",
           "ReductionDims", "is_real_reduction_hero", "is_reduction_from_or_to_contiguous",
           "reduction_dims", "unnested_faster_than_elemental"]
