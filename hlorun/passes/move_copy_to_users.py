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

In gpu-cuda since session 8 (HloPassFix, right after the first
reshape-decomposer of RunLayoutNormalizationPasses).  Session 7 measured it
as a trade (known kinds -5, held-out within +-10% -1): the removed
``wrapped_slice`` kernels had been matching XLA kLoop kernels hlorun missed
elsewhere.  Two of those misses were unfaithful pieces, fixed with it:
transformer_scan_4l's loop state kept Q/K/V untransposed because
layout-assignment pinned a while body's parameter to descending layouts
(XLA lays the body out with its state free first; now so in hlorun), and
attention_dpa's copy of k became an f32 transpose because convert-mover was
not at XLA's sites (now it is).  Measured on main a4aa5a3 with all three
(``bench/kernel_lists.py``, known and held-out): known 1567 -> 1567/1602,
27/27; held-out 3407 -> 3420/3619, 86/89 (hmm_forward_scan_f32 36 -> 41/42
kernels enters +-10%; swin_window_attn_bf16 12 -> 11/13 leaves it: XLA
splits its layer norm into 4 kernels, hlorun makes one Triton fusion).
Left: transformer_2l_bf16 111 -> 108 kinds (the split-K reduce XLA keeps
in a reduce+transpose multi-output fusion is copied into both transposes by
hlorun's priority fusion, and XLA's convert+reduce kLoop kernels are
Triton here).
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
