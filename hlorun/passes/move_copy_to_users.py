"""move_copy_to_users: sink layout-changing copies below the ops that do not
care about layouts (XLA's MoveCopyToUsers, xla/service/gpu/transforms).

Layout assignment (and the reshape decomposer) put a ``copy`` where a value
changes layout.  When that value then goes through ops that work in any
layout, XLA moves the copy down to their results, so the copy happens once
per *use* and on the smaller, sliced value:

* ``pad`` / ``slice`` / ``dynamic-slice`` / ``reduce-window`` of a copy ->
  the op on the copied value (in its layout), then a copy to the op's layout;
* ``reduce`` of a copy (non-tuple result) reads the copied value directly:
  a reduction handles any layout (a column reduction instead of a copy);
* elementwise unary ops (not ``reduce-precision``, not ``bitcast-convert``,
  not ``copy``), ``reverse`` and ``convert`` of a copy -> the op, then the
  copy -- but not a convert whose only user is a convolution (it is likely
  fused into the convolution);
* elementwise binary ops whose two operands are copies of values of the same
  shape and layout -> the op on those values, then one copy;
* ``concatenate`` whose operands are all copies of values of one layout ->
  the concatenate in that layout, then one copy.

A copy of a copy is left alone: today's XLA returns early for ``kCopy`` in
HandleElementwiseUnary (the version this was first written from moved the
outer copy too, which left a no-op copy for the simplifier).

The transformers' fused Q/K/V projection is the case this exists for: its
result is copied to a head-major layout and then split; with the copy moved
below the three slices each slice + copy becomes one transpose kernel (three
kernels where a whole-tensor transpose + three slices made four), as in
XLA's dumps.  XLA runs it as HloPassFix right after the ReshapeDecomposer of
RunLayoutNormalizationPasses.

Registered, not in gpu-cuda yet.  Session 7 measurement (main 20b3e87,
transpose-of-dot on, this pass wired as XLA has it: ``- pass:
move_copy_to_users`` with ``fixed_point: true`` after the first
reshape-decomposer; ``bench/kernel_lists.py``): every transformer's kLoop
excess goes (12l kLoop 163 -> 127 / 127, 4l 59 -> 47 / 47, f32_algo 33 -> 27
/ 25, remat 40 -> 28 / 27) and held-out kinds rise 2988 -> 2995 / 3176, but
known kinds fall 1568 -> 1563 / 1602 (scan_4l -5: its loop state keeps
Q/K/V untransposed, XLA stacks them transposed; 2l_bf16 -3: the split-K
reduce XLA keeps in a reduce+transpose multi-output fusion is copied into
both transposes by hlorun's priority fusion; attention_dpa -1) and held-out
programs within +-10% fall 73 -> 72 (swin_window_attn_bf16 12 -> 11 / 13:
XLA splits its layer norm into 4 kernels, hlorun makes 1).  The removed
``wrapped_slice`` kernels were matching XLA kLoop kernels hlorun misses
elsewhere, so the gate keeps this pass out of gpu-cuda.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.module import Instruction, Module
from .base import Pass
from .dfs_rewrite import DfsRewriteVisitor, make, make_copy

#: ops that keep their operand's layout: op(copy(x)) -> copy(op(x))
_LAYOUT_PRESERVING = ("pad", "slice", "dynamic-slice", "reduce-window")


class _Visitor(DfsRewriteVisitor):
    only_opcodes = frozenset({"copy"})

    def __init__(self, owner: "MoveCopyToUsers"):
        super().__init__()
        self.owner = owner

    # -- helpers -------------------------------------------------------------
    def _sink(self, hlo: Instruction, new_operands: list[Instruction], layout_from: Instruction,
              why: str) -> None:
        """Replace ``hlo`` by copy(hlo' (new_operands)) where hlo' has the
        layout of ``layout_from`` (and hlo's element type and dimensions)."""
        attrs = dict(hlo.attrs)
        shape = hlo.shape.with_layout(layout_from.shape.layout)
        earlier = make(hlo.opcode, shape, new_operands, attrs, metadata_from=hlo, comp=hlo.parent)
        later = make_copy(earlier, hlo.shape)
        self.owner.remark(hlo, why, derived_from=[hlo])
        self.replace_instruction(hlo, later)

    def _layout_preserving(self, hlo: Instruction) -> None:
        operand = hlo.operands[0]
        if operand.opcode != "copy" or not hlo.shape.is_array:
            return
        copied = operand.operands[0]
        self._sink(hlo, [copied, *hlo.operands[1:]], copied,
                   f"{hlo.opcode} of a copy: {hlo.opcode} first, then the copy")

    # -- handlers ------------------------------------------------------------
    def handle_pad(self, hlo: Instruction) -> None:
        self._layout_preserving(hlo)

    def handle_slice(self, hlo: Instruction) -> None:
        self._layout_preserving(hlo)

    def handle_dynamic_slice(self, hlo: Instruction) -> None:
        self._layout_preserving(hlo)

    def handle_reduce_window(self, hlo: Instruction) -> None:
        # XLA rebuilds it from operand 0 and init 1: one-operand windows only
        if len(hlo.operands) == 2:
            self._layout_preserving(hlo)

    def handle_reduce(self, hlo: Instruction) -> None:
        operand = hlo.operands[0]
        if operand.opcode != "copy" or hlo.shape.is_tuple or len(hlo.operands) != 2:
            return
        new = make("reduce", hlo.shape, [operand.operands[0], hlo.operands[1]], dict(hlo.attrs),
                   comp=hlo.parent)
        self.owner.remark(hlo, "reduce of a copy reads the copied value", derived_from=[hlo])
        self.replace_instruction(hlo, new)

    def handle_bitcast_convert(self, hlo: Instruction) -> None:
        return None

    def handle_convert(self, hlo: Instruction) -> None:
        if hlo.user_count == 1 and hlo.users[0].opcode == "convolution":
            return  # the convert is likely fused into the convolution
        operand = hlo.operands[0]
        if operand.opcode == "copy":
            copied = operand.operands[0]
            self._sink(hlo, [copied], copied, "convert of a copy: convert first, then the copy")

    def handle_copy(self, hlo: Instruction) -> None:
        # XLA's HandleElementwiseUnary returns early for a copy: a copy of a
        # copy stays two copies here (algsimp merges them later)
        return None

    def handle_reverse(self, hlo: Instruction) -> None:
        operand = hlo.operands[0]
        if operand.opcode == "copy":
            copied = operand.operands[0]
            self._sink(hlo, [copied], copied, "reverse of a copy: reverse first, then the copy")

    def handle_elementwise_unary(self, hlo: Instruction) -> None:
        if hlo.opcode == "reduce-precision":
            return
        operand = hlo.operands[0]
        if operand.opcode == "copy":
            copied = operand.operands[0]
            self._sink(hlo, [copied], copied, f"{hlo.opcode} of a copy: {hlo.opcode} first, then the copy")

    def handle_elementwise_binary(self, hlo: Instruction) -> None:
        a, b = hlo.operands[0], hlo.operands[1]
        if a.opcode != "copy" or b.opcode != "copy":
            return
        ca, cb = a.operands[0], b.operands[0]
        if ca.shape != cb.shape:
            return
        self._sink(hlo, [ca, cb], ca, f"{hlo.opcode} of two copies: {hlo.opcode} first, then one copy")

    def handle_concatenate(self, hlo: Instruction) -> None:
        ops = hlo.operands
        if ops[0].opcode != "copy":
            return
        layout = ops[0].operands[0].shape.layout
        if any(op.opcode != "copy" or op.operands[0].shape.layout != layout for op in ops):
            return
        self._sink(hlo, [op.operands[0] for op in ops], ops[0].operands[0],
                   "concatenate of copies: concatenate first, then one copy")


@dataclass(frozen=True)
class MoveCopyToUsers(Pass):
    """Sink copies below layout-agnostic users (run it as a fixed point)."""

    name = "move_copy_to_users"

    def run(self, module: Module) -> bool:
        return _Visitor(self).run_on_module(module)
