"""Shrink dimensions while every shape stays consistent.

Dimensions that must keep equal sizes (or, through a reshape, scale by the
same factor) are grouped into *classes* with a union-find over (instruction,
tuple index, dimension) slots, following each opcode's dimension
correspondence: elementwise ops tie dimension i to dimension i, broadcast
and transpose map through their ``dimensions``, dot ties batch to batch,
contracting to contracting and free dimensions to the result, reduce ties
kept dimensions to the result, reshape ties the most-major non-unit
dimension of each factor group on both sides (so dividing both by the same
factor keeps the element counts equal), calls/fusions/while/conditional
tie operands to parameters and roots to results.  A dimension an opcode
cannot follow (windows, gathers, custom calls, bitcasts, partial slices and
paddings, concatenated dimensions ...) freezes its whole class.

A class of sizes with greatest common divisor g can be divided by any
factor of g: ``dims-min`` divides by g, ``dims-halve`` by 2.  Slices,
dynamic-slice sizes and constants (their values are cut) follow.
"""

from __future__ import annotations

import math
from typing import Hashable, Sequence

from ...ir import attrs as A
from ...ir.literal import Literal
from ...ir.module import Instruction, Module
from ...ir.shape import Shape
from ..edit import entry_layout, fix_entry_layout
from .base import Strategy
from .dims_graph import DimGraph


def _smallest_factor(n: int) -> int:
    for f in range(2, int(math.isqrt(n)) + 1):
        if n % f == 0:
            return f
    return n


class _ShrinkDims(Strategy):
    def factor(self, g: int) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def units(self, module: Module) -> list[Hashable]:
        g = DimGraph(module)
        return [k for k, _, n in g.shrinkable() if self._useful(n)]

    def _useful(self, g: int) -> bool:
        return True

    def apply(self, module: Module, units: Sequence[Hashable]) -> bool:
        graph = DimGraph(module)
        chosen = set(units)
        new_size: dict[int, int] = {}
        for k, members, g in graph.shrinkable():
            if k in chosen and self._useful(g):
                f = self.factor(g)
                for m in members:
                    new_size[m] = graph.size[m] // f
        if not new_size:
            return False
        old_layout = entry_layout(module)
        changes: dict[Instruction, dict[tuple[tuple[int, ...], int], int]] = {}
        for m, n in new_size.items():
            i, idx, d = graph.where[m]
            changes.setdefault(i, {})[(idx, d)] = n
        for i, ch in changes.items():
            i.shape = _resize(i.shape, (), ch)
        for i in changes:
            _fix_attrs(i)
            for u in i.users:
                if u not in changes:
                    _fix_attrs(u)
        fix_entry_layout(module, old_layout)
        return True


class ShrinkDimsToMin(_ShrinkDims):
    name = "dims-min"
    description = "divide each consistent dimension class by its gcd (often down to 1)"

    def factor(self, g: int) -> int:
        return g


class HalveDims(_ShrinkDims):
    name = "dims-halve"
    description = "divide consistent dimension classes by their smallest prime factor (halve)"

    def _useful(self, g: int) -> bool:
        return _smallest_factor(g) != g  # the gcd division already covers primes

    def factor(self, g: int) -> int:
        return _smallest_factor(g)


def _resize(shape: Shape, idx: tuple[int, ...], ch: dict) -> Shape:
    if shape.is_tuple:
        return Shape.tuple(_resize(s, idx + (k,), ch) for k, s in enumerate(shape.tuple_shapes))
    if not shape.is_array:
        return shape
    dims = list(shape.dimensions)
    hit = False
    for d in range(len(dims)):
        n = ch.get((idx, d))
        if n is not None:
            dims[d] = n
            hit = True
    if not hit:
        return shape
    from ...ir.shape import intern
    return intern(Shape(shape.element_type, dims, shape.layout, shape.dynamic))


def _fix_attrs(i: Instruction) -> None:
    """Attributes that spell sizes out: full slices, dynamic-slice sizes,
    constants' values."""
    op = i.opcode
    if op == "slice":
        out = i.shape.dimensions
        ranges = [(lo, lo + out[d] if st == 1 else hi, st)
                  for d, (lo, hi, st) in enumerate(A.parse_slice(i.attrs["slice"]))]
        i.attrs["slice"] = A.format_slice(ranges)
    elif op == "dynamic-slice":
        i.set_int_list("dynamic_slice_sizes", i.shape.dimensions)
    elif op == "constant" and i.literal is not None and i.shape.is_array \
            and i.literal.shape.dimensions != i.shape.dimensions:
        import numpy as np
        value = np.asarray(i.literal.value)
        cut = value[tuple(slice(0, n) for n in i.shape.dimensions)]
        i.literal = Literal.from_array(cut, i.shape)


__all__ = ["HalveDims", "ShrinkDimsToMin"]
