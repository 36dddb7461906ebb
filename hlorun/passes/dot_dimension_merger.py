"""dot-dimension-merger: XLA's DotDimensionMerger
(xla/hlo/transforms/simplifiers/dot_dimension_merger.cc).

A dot with two or more batch dimensions gets them merged into one, the
logically first, on both operands and on the result, when on each operand
the batch dimension numbers are sorted, logically consecutive and
consecutive in the physical layout.  Each operand is reshaped to the merged
shape (its layout keeps the other dimensions' order), the new dot has one
batch dimension, and a reshape restores the original result shape.  With
layouts normalized the reshapes are bitcasts, which the following
layout-sensitive simplifier turns into ``bitcast``.

XLA:GPU runs it in "nvptx post-layout_assignment part 1", after layout
normalization and before the GEMM rewriters, so GEMM fusions and cuBLAS
calls see one batch dimension (``bf16[8,2,4,64]`` x ``bf16[8,2,64,1024]``
-> ``bf16[16,4,64]`` x ``bf16[16,64,1024]``).

Postcondition: no dot in a non-fusion computation has two or more batch
dimensions that satisfy the three conditions above.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..ir.module import Instruction, Module
from ..ir.shape import Shape
from .base import Pass
from .dfs_rewrite import DfsRewriteVisitor, make_reshape, replace_instruction

_DOT_ATTRS = ("operand_precision", "algorithm")


def _consecutive_if_sorted(dims: Sequence[int]) -> bool:
    """``DistinctNumbersAreConsecutiveIfSorted``."""
    return len(set(dims)) == len(dims) and (not dims or max(dims) - min(dims) == len(dims) - 1)


def _consecutive_in_layout(shape: Shape, dims: Sequence[int]) -> bool:
    """``LayoutUtil::AreDimensionsConsecutive``: the dimensions occupy
    adjacent positions of minor_to_major."""
    if shape.layout is None:
        return False
    pos = sorted(shape.layout.minor_to_major.index(d) for d in dims)
    return pos[-1] - pos[0] == len(pos) - 1


def _merged(shape: Shape, batch_dim: int, count: int, size: int) -> Shape:
    """``Shape::DeleteDimension(batch_dim + 1)`` ``count - 1`` times, then
    the batch dimension's size set to ``size``."""
    dims = list(shape.dimensions)
    del dims[batch_dim + 1:batch_dim + count]
    dims[batch_dim] = size
    layout = shape.layout
    if layout is not None:
        gone = set(range(batch_dim + 1, batch_dim + count))
        m2m = [d - (count - 1 if d >= batch_dim + count else 0)
               for d in layout.minor_to_major if d not in gone]
        layout = layout.with_minor_to_major(m2m)
    return Shape.array(shape.element_type, dims, layout)


def _shift(dims: Sequence[int], start: int, shift: int) -> list[int]:
    return [d if d < start else d - shift for d in dims]


def _fmt(dims: Sequence[int]) -> str:
    return "{" + ",".join(str(d) for d in dims) + "}"


class _Visitor(DfsRewriteVisitor):
    def __init__(self, owner: "DotDimensionMerger"):
        super().__init__()
        self.owner = owner

    def handle_dot(self, dot: Instruction) -> None:
        lhs, rhs = dot.operands
        lb, rb = dot.int_list("lhs_batch_dims"), dot.int_list("rhs_batch_dims")
        count = len(lb)
        if count < 2 or len(rb) != count or dot.shape.is_dynamic:
            return
        if not (_consecutive_if_sorted(lb) and _consecutive_if_sorted(rb)
                and list(lb) == sorted(lb) and list(rb) == sorted(rb)
                and _consecutive_in_layout(lhs.shape, lb)
                and _consecutive_in_layout(rhs.shape, rb)):
            return
        lbd, rbd = min(lb), min(rb)
        size = 1
        for d in lb:
            size *= lhs.shape.dimensions[d]
        new_lhs = make_reshape(lhs, _merged(lhs.shape, lbd, count, size))
        new_rhs = make_reshape(rhs, _merged(rhs.shape, rbd, count, size))
        attrs = {k: v for k, v in dot.attrs.items() if k in _DOT_ATTRS}
        attrs["lhs_batch_dims"] = _fmt([lbd])
        attrs["lhs_contracting_dims"] = _fmt(
            _shift(dot.int_list("lhs_contracting_dims"), lbd, count - 1))
        attrs["rhs_batch_dims"] = _fmt([rbd])
        attrs["rhs_contracting_dims"] = _fmt(
            _shift(dot.int_list("rhs_contracting_dims"), rbd, count - 1))
        comp = dot.parent
        new_dot = comp.add_instruction(
            Instruction("dot", _merged(dot.shape, 0, count, size), [new_lhs, new_rhs], "", attrs),
            "dot")
        back = make_reshape(new_dot, dot.shape)
        self.owner.remark(new_dot, (f"dot {dot.name}: batch dimensions {_fmt(lb)} x {_fmt(rb)} "
                                    f"merged into one of size {size}: "
                                    f"{new_lhs.shape.to_string(False)} x "
                                    f"{new_rhs.shape.to_string(False)} -> "
                                    f"{new_dot.shape.to_string(False)}"),
                          derived_from=[dot], rule="merge-batch-dims")
        replace_instruction(dot, back)
        self.mark_changed()


@dataclass(frozen=True)
class DotDimensionMerger(Pass):
    """Consecutive batch dimensions of dots become one."""

    name = "dot-dimension-merger"

    def run(self, module: Module) -> bool:
        return _Visitor(self).run_on_module(module)
