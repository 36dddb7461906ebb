"""gemv-rewriter: XLA's GemvRewriter (xla/hlo/transforms/simplifiers/gemv_rewriter.cc).

A matrix-vector dot (exactly one operand without a non-contracting
dimension, after DotDecomposer) gets a unit non-contracting dimension on the
vector side, so that GEMM emitters (Triton, cuBLAS) see a matrix-matrix
product: the vector operand is bitcast (reshape when not layout-sensitive)
to ``[..., 1]`` with a new minor-most dimension, the dot produces the
result with that unit dimension (before the rhs non-contracting dimension
when the lhs was the vector, last otherwise), and a bitcast/reshape restores
the original shape.  Layouts must be normalized (descending); dynamic-shaped
dots and vector-vector / matrix-matrix dots are left alone.

Postcondition: no dot in a non-fusion computation has exactly one vector
operand.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.module import Instruction, Module
from ..ir.shape import Shape, is_monotonic_with_dim0_major
from .base import Pass
from .dfs_rewrite import DfsRewriteVisitor, add_instruction


def _with_new_minor(shape: Shape, dims: list[int]) -> Shape:
    return Shape.array(shape.element_type, dims)  # descending layout of rank + 1


class _Visitor(DfsRewriteVisitor):
    only_opcodes = frozenset({"dot"})

    def __init__(self, owner: "GemvRewriter"):
        super().__init__()
        self.owner = owner

    def handle_dot(self, dot: Instruction) -> None:
        lhs, rhs = dot.operands
        lhs_nc = lhs.shape.rank == len(dot.int_list("lhs_batch_dims")) + \
            len(dot.int_list("lhs_contracting_dims")) + 1
        rhs_nc = rhs.shape.rank == len(dot.int_list("rhs_batch_dims")) + \
            len(dot.int_list("rhs_contracting_dims")) + 1
        if lhs_nc == rhs_nc or dot.shape.is_dynamic:
            return
        sensitive = self.owner.is_layout_sensitive
        # XLA's GetLayoutWithNewMinorMostDimension checks only the shapes
        # that get the new unit dimension: the vector operand(s) and the
        # output; the matrix operand may keep any layout (a transposed
        # weight read through a bitcast, [K,N]{0,1})
        widened = [x.shape for x, nc in ((lhs, lhs_nc), (rhs, rhs_nc)) if not nc]
        if any(s.layout is not None and not is_monotonic_with_dim0_major(s)
               for s in widened + [dot.shape]):
            if not sensitive:
                return
            self.owner.fail("Layout is not normalized.", dot)
        kind = "bitcast" if sensitive else "reshape"
        comp = dot.parent

        def widen(x: Instruction) -> Instruction:
            return add_instruction(comp, Instruction(
                kind, _with_new_minor(x.shape, list(x.shape.dimensions) + [1]), [x]))
        new_lhs = lhs if lhs_nc else widen(lhs)
        new_rhs = rhs if rhs_nc else widen(rhs)
        dims = list(dot.shape.dimensions)
        if not lhs_nc:
            dims = dims[:-1] + [1, dims[-1]]
        else:
            dims = dims + [1]
        attrs = {k: v for k, v in dot.attrs.items()
                 if k in ("lhs_batch_dims", "lhs_contracting_dims", "rhs_batch_dims",
                          "rhs_contracting_dims", "operand_precision", "algorithm")}
        new_dot = add_instruction(comp, Instruction("dot", _with_new_minor(dot.shape, dims),
                                                    [new_lhs, new_rhs], "", attrs))
        back = add_instruction(comp, Instruction(kind, dot.shape, [new_dot]))
        vec = "lhs" if not lhs_nc else "rhs"
        self.owner.remark(new_dot, (f"matrix-vector dot {dot.name}: the {vec} vector gets a unit "
                                    f"non-contracting dimension so GEMM emitters see a matrix "
                                    f"product {new_lhs.shape.to_string(False)} x "
                                    f"{new_rhs.shape.to_string(False)} -> "
                                    f"{new_dot.shape.to_string(False)}"),
                          derived_from=[dot], rule="gemv")
        from ..ir.edit import replace_instruction
        replace_instruction(comp, dot, back)
        self.mark_changed()


@dataclass(frozen=True)
class GemvRewriter(Pass):
    """Matrix-vector dots become matrix-matrix dots with a unit dimension."""

    name = "gemv-rewriter"
    is_layout_sensitive: bool = True

    def run(self, module: Module) -> bool:
        return _Visitor(self).run_on_module(module)
