"""reduction-degenerate-dim-remover: XLA's ReductionDegenerateDimRemover
(xla/service/gpu/transforms/reduction_degenerate_dim_remover.cc), which
OptimizeHloPostLayoutAssignment runs right after LayoutNormalization /
ScatterSimplifier, before ReductionLayoutNormalizer.

A reduce whose inputs have size-1 dimensions reads them through a bitcast
that drops those dimensions (ShapeUtil::DropDegenerateDimensions, layout
kept); the reduced dimensions are renumbered.  If only size-1 dimensions
were reduced the reduce is a bitcast of its (single) input.  Where the new
result shape (its own size-1 dimensions dropped) differs from the old one,
the new reduce is wrapped in a bitcast (per element for a variadic reduce,
through get-tuple-element and a tuple).  A reduce whose first input has no
size-1 dimension is left alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.module import Instruction, Module
from ..ir.shape import Shape, drop_degenerate_dimensions, has_degenerate_dimensions
from .base import Pass
from .dfs_rewrite import DfsRewriteVisitor, make_bitcast


class _Visitor(DfsRewriteVisitor):
    only_opcodes = frozenset({"reduce"})

    def __init__(self, owner: Pass):
        super().__init__()
        self.owner = owner

    def handle_reduce(self, reduce: Instruction) -> None:
        n = len(reduce.operands) // 2
        inputs = reduce.operands[:n]
        reduced = set(reduce.dimensions)
        new_inputs: list[Instruction] = []
        new_shapes: list[Shape] = []
        new_dims: list[int] = []
        name = reduce.name
        for k, x in enumerate(inputs):
            shape = x.shape
            result = reduce.shape.tuple_shapes[k] if reduce.shape.is_tuple else reduce.shape
            if shape.layout is None or not has_degenerate_dimensions(shape):
                return
            shift = 0
            for d in range(shape.rank):
                if shape.dimensions[d] == 1:
                    shift += 1
                elif d in reduced and k == 0:
                    new_dims.append(d - shift)
            if not new_dims:
                self.replace_instruction(reduce, Instruction("bitcast", reduce.shape, [x]))
                self.owner.remark(name, "reduces only size-1 dimensions: a bitcast",
                                  derived_from=[name])
                return
            new_inputs.append(make_bitcast(x, drop_degenerate_dimensions(shape)))
            new_shapes.append(drop_degenerate_dimensions(result))
        new_shape = Shape.tuple(new_shapes) if reduce.shape.is_tuple else new_shapes[0]
        new = self.replace_reduce(reduce, new_inputs, new_shape, new_dims)
        self.owner.remark(new, f"{name}: size-1 dimensions dropped from its inputs "
                               f"(dimensions={{{','.join(map(str, new_dims))}}})",
                          derived_from=[name])


@dataclass(frozen=True)
class ReductionDegenerateDimRemover(Pass):
    """Reduces read their inputs without size-1 dimensions (XLA's ReductionDegenerateDimRemover)."""

    name = "reduction-degenerate-dim-remover"

    def run(self, module: Module) -> bool:
        return _Visitor(self).run_on_module(module)


__all__ = ["ReductionDegenerateDimRemover"]
