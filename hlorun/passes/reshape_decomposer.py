"""reshape-decomposer: make every reshape a bitcast (XLA's ReshapeDecomposer).

A reshape whose operand and result layouts already make it a relabelling of
the same bytes becomes a ``bitcast``.  Otherwise the physical transposition
it hides is made explicit with a ``copy``:

* if the operand can be given a layout aligned with the result
  (``ShapeUtil::AlignLayouts(result, operand)``), the operand is copied to
  that layout and then bitcast to the result;
* else if the result can be aligned with the operand, the operand is
  bitcast to the aligned result shape and copied to the real result;
* else both go through descending layouts: copy, bitcast, copy.

Postcondition: every reshape in every non-fusion computation is a bitcast
(there are no reshapes left; the ``reshape-is-bitcast`` checker holds).
This is the precondition of ``layout_normalization``; XLA runs this pass
right before it (scenario S0).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.module import Instruction, Module
from ..ir.shape import align_layouts, default_layout, reshape_is_bitcast
from .base import Pass
from .dfs_rewrite import DfsRewriteVisitor, make_bitcast, make_copy


class _Visitor(DfsRewriteVisitor):
    only_opcodes = frozenset({"reshape"})

    def __init__(self, owner: "ReshapeDecomposer"):
        super().__init__()
        self.owner = owner

    def handle_reshape(self, reshape: Instruction) -> None:
        operand = reshape.operands[0]
        s, s0 = reshape.shape, operand.shape
        if reshape_is_bitcast(s, s0):
            self.replace_instruction(reshape, make_bitcast(operand, s, metadata_from=operand))
            self.owner.remark(reshape, "reshape is a bitcast", derived_from=[reshape])
            return
        aligned_input = align_layouts(s, s0)
        if aligned_input is not None:
            copied = make_copy(operand, aligned_input)
            b = make_bitcast(copied, s, metadata_from=copied)
            self.replace_instruction(reshape, b)
            self.owner.remark(reshape, f"reshape is not a bitcast: operand copied to "
                                       f"{aligned_input}, then bitcast", derived_from=[reshape])
            return
        aligned_output = align_layouts(s0, s)
        if aligned_output is not None:
            b = make_bitcast(operand, aligned_output, metadata_from=operand)
            copied = make_copy(b, s)
            self.replace_instruction(reshape, copied)
            self.owner.remark(reshape, f"reshape is not a bitcast: bitcast to {aligned_output}, "
                                       f"then copied to the result layout", derived_from=[reshape])
            return
        c1 = make_copy(operand, s0.with_layout(default_layout(s0.rank)))
        b = make_bitcast(c1, s.with_layout(default_layout(s.rank)), metadata_from=c1)
        c2 = make_copy(b, s)
        self.replace_instruction(reshape, c2)
        self.owner.remark(reshape, "reshape is not a bitcast and neither side aligns: "
                                   "copy, bitcast, copy", derived_from=[reshape])


@dataclass(frozen=True)
class ReshapeDecomposer(Pass):
    """Rewrite every reshape as a bitcast, with copies for non-bitcast ones."""

    name = "reshape-decomposer"

    def run(self, module: Module) -> bool:
        return _Visitor(self).run_on_module(module)
