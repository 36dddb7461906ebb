"""The algsimp visitor: shape-only rewrites (reshape, broadcast, transpose,
convert, copy); dots are in :mod:`.dot`.  See the package docstring for the
list of rewrites."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ...ir.attrs import format_int_list
from ...ir.build import permute_dimensions
from ...ir.literal import Literal
from ...ir.module import Instruction
from ...ir.opcode import ELEMENTWISE
from ...ir.shape import (Shape, bit_width, deduce_transpose_dimensions_for_bitcast, inverse_permutation, merely_inserts_or_deletes_unit_dims,
                         reshape_is_bitcast, transpose_is_bitcast)
from ..dfs_rewrite import DfsRewriteVisitor, add_instruction
from . import add as add_rules
from . import compare as compare_rules
from . import concat as concat_rules
from . import dot as dot_rules
from . import minmax as minmax_rules
from . import reduce as reduce_rules
from . import select_divide
from . import slice as slice_rules
from .shapes import same_shape

if TYPE_CHECKING:
    from . import AlgebraicSimplifier


def reshape_leaves_dimensions_unmodified(reshape: Instruction, dims: tuple[int, ...]
                                         ) -> list[int] | None:
    """``ReshapeLeavesDimensionsUnmodified``: the output position of each
    input dimension in ``dims`` if the reshape keeps it (same size, same
    product of the dimensions before it), else None."""
    src, dst = reshape.operands[0].shape.dimensions, reshape.shape.dimensions
    out: list[int] = []
    for d in dims:
        before = math.prod(src[:d])
        prod, found = 1, None
        for k in range(len(dst)):
            if prod == before and dst[k] == src[d]:
                found = k
                break
            prod *= dst[k]
        if found is None:
            return None
        out.append(found)
    return out


class AlgsimpVisitor(DfsRewriteVisitor):
    def __init__(self, owner: "AlgebraicSimplifier"):
        super().__init__()
        self.owner = owner
        self.layout_sensitive = owner.is_layout_sensitive
        self.scalar_add: dict[str, object] = {}

    # -- helpers --------------------------------------------------------------------
    def replace_with_new(self, old: Instruction, new: Instruction) -> None:
        """``ReplaceWithNewInstruction``."""
        if new.parent is None:
            add_instruction(old.parent, new)
        self.replace_instruction(old, new)

    def replace_with_operand(self, old: Instruction, new: Instruction) -> None:
        """``ReplaceInstruction(old, existing)`` (only if shapes fit)."""
        self.replace_instruction(old, new)

    def new(self, opcode: str, shape: Shape, operands: list[Instruction], **attrs) -> Instruction:
        return Instruction(opcode, shape, operands, "", dict(attrs))

    # -- maximum / minimum ------------------------------------------------------------
    def handle_maximum(self, instr: Instruction) -> None:
        if not minmax_rules.simplify(self, instr, lowest=True):
            minmax_rules.to_clamp(self, instr, lowest=True)

    def handle_minimum(self, instr: Instruction) -> None:
        if not minmax_rules.simplify(self, instr, lowest=False):
            minmax_rules.to_clamp(self, instr, lowest=False)

    # -- reverse --------------------------------------------------------------------
    def handle_reverse(self, reverse: Instruction) -> None:
        """``HandleReverse``: reversing only size-1 dimensions does nothing
        (a 1x1 filter's reverse in a convolution gradient)."""
        if all(reverse.shape.dimensions[d] == 1 for d in reverse.dimensions):
            self.replace_with_operand(reverse, reverse.operands[0])

    # -- convert / copy ---------------------------------------------------------------
    def handle_convert(self, convert: Instruction) -> None:
        op = convert.operands[0]
        if op.shape.element_type == convert.shape.element_type:
            self.replace_with_operand(convert, op)

    def handle_copy(self, copy: Instruction) -> None:
        op = copy.operands[0]
        if same_shape(copy.shape, op.shape, True):
            self.replace_with_operand(copy, op)

    # -- bitcast -----------------------------------------------------------------------
    def handle_bitcast(self, bitcast: Instruction) -> None:
        """``HandleBitcast``: a bitcast of a bitcast becomes one bitcast of
        the inner operand; a bitcast whose shape (layout included) and element
        type equal its operand's is removed.  (Bitcasts with control
        predecessors are left alone.)"""
        if bitcast.control_predecessors:
            return
        op = bitcast.operands[0]
        if op.opcode == "bitcast":
            new = self.new("bitcast", bitcast.shape, [op.operands[0]])
            self.replace_with_new(bitcast, new)
            bitcast, op = new, new.operands[0]
        if bitcast.shape.element_type != op.shape.element_type:
            return
        if same_shape(bitcast.shape, op.shape, True):
            self.replace_with_operand(bitcast, op)
            return
        # a bitcast that is a transpose of a broadcast: the transpose moves
        # into the broadcast (XLA's SimplifyTransposeOfBroadcast with
        # DeduceTransposeDimensionsForBitcast); a scalar broadcast takes the
        # bitcast's shape and layout
        if op.opcode == "broadcast" and bitcast.shape.layout is not None \
                and op.shape.layout is not None:
            perm = deduce_transpose_dimensions_for_bitcast(op.shape, bitcast.shape)
            if perm is not None:
                self._transpose_of_broadcast(bitcast, list(perm))

    def _transpose_of_broadcast(self, t: Instruction, perm: list[int]) -> bool:
        """``SimplifyTransposeOfBroadcast``: transpose(broadcast(x)) (or a
        bitcast that is one) -> broadcast(x) to ``t``'s shape when the
        broadcast dimensions stay in increasing order; layout-sensitive,
        also only when x's layout orders them as ``t``'s layout does."""
        op = t.operands[0]
        if op.opcode != "broadcast" or list(op.dimensions) != sorted(op.dimensions):
            return False
        inv = inverse_permutation(perm)
        new_dims = [inv[d] for d in op.dimensions]
        if new_dims != sorted(new_dims):
            return False
        if self.layout_sensitive and new_dims:
            # no broadcast that transposes implicitly: the broadcast
            # dimensions ordered alike by x's layout and by t's layout
            m2m = list(op.operands[0].shape.minor_to_major)
            by_operand = sorted(range(len(new_dims)), key=lambda a: m2m[a])
            extracted = [d for d in t.shape.minor_to_major if d in new_dims]
            by_result = sorted(range(len(new_dims)), key=lambda a: extracted[a])
            if by_operand != by_result:
                return False
        self.replace_with_new(t, self.new("broadcast", t.shape, [op.operands[0]],
                                          dimensions=format_int_list(new_dims)))
        return True

    # -- reshape -----------------------------------------------------------------------
    def handle_reshape(self, reshape: Instruction) -> None:
        op = reshape.operands[0]
        shape = reshape.shape
        if shape.is_array and 0 in shape.dimensions:
            c = self.new("constant", shape.with_default_layout_if_missing(), [])
            c.literal = Literal.from_array(np.zeros(shape.dimensions), c.shape)
            self.replace_with_new(reshape, c)
            return
        if same_shape(shape, op.shape, self.layout_sensitive):
            self.replace_with_operand(reshape, op)
            return
        if op.opcode == "reshape":
            self.replace_with_new(reshape, self.new("reshape", shape, [op.operands[0]]))
            return
        if op.opcode == "iota":
            # reshape(iota) -> iota when the reshape keeps the iota dimension
            dims = reshape_leaves_dimensions_unmodified(reshape, (op.int_attr("iota_dimension"),))
            if dims is not None:
                self.replace_with_new(reshape, self.new("iota", shape, [], iota_dimension=str(dims[0])))
                return
        if op.opcode == "broadcast":
            dims = reshape_leaves_dimensions_unmodified(reshape, op.dimensions)
            if dims is not None:
                self.replace_with_new(reshape, self.new(
                    "broadcast", shape, [op.operands[0]], dimensions=format_int_list(dims)))
                return
        if self.layout_sensitive and shape.layout is not None and op.shape.layout is not None \
                and reshape_is_bitcast(op.shape, shape):
            self.replace_with_new(reshape, self.new("bitcast", shape, [op]))

    # -- broadcast ---------------------------------------------------------------------
    def handle_broadcast(self, bcast: Instruction) -> None:
        op = bcast.operands[0]
        dims = list(bcast.dimensions)
        n_out, n_in = math.prod(bcast.shape.dimensions), math.prod(op.shape.dimensions)
        if dims == sorted(dims) and n_out == n_in:
            self.replace_with_new(bcast, self.new("reshape", bcast.shape, [op]))
            return
        if bcast.shape.rank == op.shape.rank and n_out == n_in:
            self.replace_with_new(bcast, self.new(
                "transpose", bcast.shape, [op],
                dimensions=format_int_list(inverse_permutation(dims))))
            return
        if op.opcode == "reshape":
            degenerate = merely_inserts_or_deletes_unit_dims(op.operands[0].shape, op.shape)
            if degenerate is not None and not degenerate[0]:
                for idx in sorted(degenerate[1], reverse=True):
                    del dims[idx]
                self.replace_with_new(bcast, self.new(
                    "broadcast", bcast.shape, [op.operands[0]], dimensions=format_int_list(dims)))
                return
        if self.sink_broadcast(bcast):
            return
        if op.shape.rank == 0:
            for user in bcast.users:
                if not user._users and not user.is_root():
                    continue
                if user.opcode in ("reshape", "transpose") and user.operands[0] is bcast:
                    nb = add_instruction(bcast.parent, self.new(
                        "broadcast", user.shape, [op], dimensions="{}"))
                    user.replace_all_uses_with(nb)
                    self.mark_changed()
                    return
            return
        if op.opcode == "iota":  # broadcast(iota) -> iota
            self.replace_with_new(bcast, self.new(
                "iota", bcast.shape, [], iota_dimension=str(dims[op.int_attr("iota_dimension")])))
            return
        if op.opcode == "broadcast":
            new_dims = [dims[d] for d in op.dimensions]
            self.replace_with_new(bcast, self.new(
                "broadcast", bcast.shape, [op.operands[0]], dimensions=format_int_list(new_dims)))
            return
        if self.layout_sensitive:
            return
        if self.owner.enable_broadcast_degenerate_dimension and 1 in op.shape.dimensions:
            kept = [i for i, d in enumerate(op.shape.dimensions) if d != 1]
            squeezed = Shape.array(op.shape.element_type, [op.shape.dimensions[i] for i in kept])
            r = add_instruction(bcast.parent, self.new("reshape", squeezed, [op]))
            self.replace_with_new(bcast, self.new(
                "broadcast", bcast.shape, [r], dimensions=format_int_list([dims[i] for i in kept])))

    def sink_broadcast(self, bcast: Instruction) -> bool:
        """``TryToSinkBroadcastAfterOpWithUniqueNonScalarOperand``: an
        elementwise user whose operands are this broadcast or broadcasts of
        scalars runs on the broadcast's operand instead, and its result is
        broadcast (``convert(broadcast(c))`` -> ``broadcast(convert(c))``).
        Users that are copies, fusions, or dead are left alone."""
        if bcast.shape.rank == 0:
            return False
        op = bcast.operands[0]
        changed = False
        for user in list(bcast.users):
            if user.parent is None or (not user._users and not user.is_root()):
                continue
            if user.opcode in ("copy", "fusion") or user.opcode not in ELEMENTWISE:
                continue
            if user.opcode == "bitcast-convert" and bit_width(user.shape.element_type) != \
                    bit_width(user.operands[0].shape.element_type):
                continue  # changes the shape: not elementwise (HloInstruction::IsElementwise)
            if not all(o is bcast or (o.opcode == "broadcast" and o.operands[0].shape.is_array
                                      and o.operands[0].shape.rank == 0) for o in user.operands):
                continue
            new_ops = []
            for o in user.operands:
                if o is bcast:
                    new_ops.append(op)
                elif op.shape.rank == 0:
                    new_ops.append(o.operands[0])
                else:
                    new_ops.append(add_instruction(bcast.parent, self.new(
                        "broadcast", op.shape.with_element_type(o.shape.element_type),
                        [o.operands[0]], dimensions="{}")))
            shape = op.shape.with_element_type(user.shape.element_type)
            inner = Instruction(user.opcode, shape, new_ops, "", dict(user.attrs))
            inner.attrs.pop("backend_config", None)
            add_instruction(bcast.parent, inner, metadata_from=user)
            self.replace_with_new(user, self.new("broadcast", user.shape, [inner],
                                                 dimensions=format_int_list(bcast.dimensions)))
            changed = True
        return changed

    # -- transpose ---------------------------------------------------------------------
    def handle_transpose(self, t: Instruction) -> None:
        op = t.operands[0]
        perm = list(t.dimensions)
        if perm == sorted(perm):
            self.replace_with_operand(t, op)
            return
        if op.opcode == "transpose":
            inner = list(op.dimensions)
            merged = [inner[p] for p in perm]
            self.replace_with_new(t, self.new("transpose", t.shape, [op.operands[0]],
                                              dimensions=format_int_list(merged)))
            return
        if dot_rules.transpose_of_dot(self, t):
            return
        # XLA's HandleTranspose: a bitcast transpose becomes a bitcast first
        if self.layout_sensitive and t.shape.layout is not None and op.shape.layout is not None \
                and transpose_is_bitcast(op.shape, t.shape, perm):
            self.replace_with_new(t, self.new("bitcast", t.shape, [op]))
            return
        self._transpose_of_broadcast(t, perm)

    # -- concatenate -------------------------------------------------------------------
    def handle_concatenate(self, concat: Instruction) -> None:
        concat_rules.handle_concatenate(self, concat)

    # -- slice -------------------------------------------------------------------------
    def handle_slice(self, slice_: Instruction) -> None:
        slice_rules.handle_slice(self, slice_)

    # -- dot ---------------------------------------------------------------------------
    def handle_dot(self, dot: Instruction) -> None:
        dot_rules.handle_dot(self, dot)

    # -- add ---------------------------------------------------------------------------
    def handle_add(self, add: Instruction) -> None:
        add_rules.handle_add(self, add)

    def handle_multiply(self, mul: Instruction) -> None:
        add_rules.handle_multiply(self, mul)

    # -- compare -----------------------------------------------------------------------
    def handle_compare(self, compare: Instruction) -> None:
        compare_rules.handle_compare(self, compare)

    # -- select / divide ----------------------------------------------------------------
    def handle_select(self, select: Instruction) -> None:
        select_divide.handle_select(self, select)

    def handle_divide(self, divide: Instruction) -> None:
        select_divide.handle_divide(self, divide)

    # -- reduce ------------------------------------------------------------------------
    def handle_reduce(self, reduce: Instruction) -> None:
        reduce_rules.handle_reduce(self, reduce)


__all__ = ["AlgsimpVisitor", "merely_inserts_or_deletes_unit_dims", "permute_dimensions",
           "reshape_leaves_dimensions_unmodified", "same_shape"]
