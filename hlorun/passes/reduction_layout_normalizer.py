"""reduction-layout-normalizer: XLA's ReductionLayoutNormalizer
(xla/service/gpu/transforms/reduction_layout_normalizer.cc), which
OptimizeHloPostLayoutAssignment runs right after LayoutNormalization /
ScatterSimplifier and before SoftmaxRewriterTriton and
ReductionDimensionGrouper.

LayoutNormalization leaves reduces alone (its default action only wraps
their results), so a reduce can still read an input in a non-default layout
(a reduction of an array laid out column-major for a triangular solve or a
cuSOLVER call).  Here every reduce is rewritten to read its inputs in the
default layout (EnforceMinorToMajorReduceOpVisitor::HandleReduce):

* each input is bitcast to its dimensions in major-to-minor order of its
  layout (default layout); the reduced dimensions are renumbered
  accordingly;
* the kept dimensions keep that physical order in the new result; its layout
  places them where the old result's layout had them (so that a bitcast
  gets back to the old result);
* a reduce whose (single) input is already in the default layout is left
  alone; inputs of a variadic reduce must share one layout (XLA fails
  otherwise: a PassError here);
* where the new result shape differs, the new reduce is wrapped in a
  bitcast (per element, through get-tuple-element and a tuple, for a
  variadic reduce).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.module import Instruction, Module
from ..ir.shape import Layout, Shape
from .base import Pass
from .dfs_rewrite import DfsRewriteVisitor, make_bitcast


def _logical_to_physical(layout: Layout, rank: int) -> list[int]:
    """``LayoutUtil::MakeLogicalToPhysical``: physical 0 is the most major."""
    out = [0] * rank
    for physical in range(rank):
        out[layout.minor_to_major[rank - 1 - physical]] = physical
    return out


class _Visitor(DfsRewriteVisitor):
    only_opcodes = frozenset({"reduce"})

    def __init__(self, owner: Pass):
        super().__init__()
        self.owner = owner

    def handle_reduce(self, reduce: Instruction) -> None:
        n = len(reduce.operands) // 2
        inputs = reduce.operands[:n]
        reduced = set(reduce.dimensions)
        first = inputs[0].shape
        if any(s.layout is None for s in (x.shape for x in inputs)):
            return
        new_inputs: list[Instruction] = []
        new_shapes: list[Shape] = []
        out_dims: list[int] | None = None
        for k, operand in enumerate(inputs):
            shape = operand.shape
            if k and shape.minor_to_major != first.minor_to_major:
                self.owner.fail("Layout assignment should have assigned the same layout to all "
                                "reduce inputs", reduce)
            result = reduce.shape.tuple_shapes[k] if reduce.shape.is_tuple else reduce.shape
            rank, out_rank = shape.rank, result.rank
            l2p = _logical_to_physical(result.layout, out_rank) if result.layout is not None \
                else list(range(out_rank))
            new_dims: list[int] = []
            operand_data: list[int] = []
            result_data: list[int] = []
            result_layout = [0] * out_rank
            for i in range(rank):
                logical = shape.minor_to_major[rank - 1 - i]
                size = shape.dimensions[logical]
                operand_data.append(size)
                if logical in reduced:
                    new_dims.append(i)
                else:
                    result_data.append(size)
                    logical_out = logical - sum(1 for d in reduced if d < logical)
                    result_layout[out_rank - l2p[logical_out] - 1] = len(result_data) - 1
            new_operand_shape = Shape.array(shape.element_type, operand_data)
            new_shapes.append(Shape.array(result.element_type, result_data, Layout(result_layout)))
            if new_operand_shape == shape and n == 1:
                return
            new_inputs.append(make_bitcast(operand, new_operand_shape, metadata_from=operand)
                              if new_operand_shape != shape else operand)
            if out_dims is None:
                out_dims = new_dims
            elif out_dims != new_dims:
                self.owner.fail("reduce inputs reduce different physical dimensions", reduce)
        new_shape = new_shapes[0] if n == 1 and not reduce.shape.is_tuple \
            else Shape.tuple(new_shapes)
        name = reduce.name
        new = self.replace_reduce(reduce, new_inputs, new_shape, out_dims or [])
        self.owner.remark(new, f"{name}: inputs read in the default layout "
                               f"({first} -> {new_inputs[0].shape}), "
                               f"dimensions={{{','.join(map(str, out_dims or []))}}}",
                          derived_from=[name])


@dataclass(frozen=True)
class ReductionLayoutNormalizer(Pass):
    """Reduces read their inputs in the default layout (XLA's ReductionLayoutNormalizer)."""

    name = "reduction-layout-normalizer"

    def run(self, module: Module) -> bool:
        return _Visitor(self).run_on_module(module)


__all__ = ["ReductionLayoutNormalizer"]
