"""algsimp's add rewrites (a subset of XLA's ``AlgebraicSimplifierVisitor::HandleAdd``),
and ``HandleMultiply``'s first rule, ``A * 1`` and ``1 * A`` -> ``A`` (a
constant of ones or a broadcast of one, when the shapes agree):

* ``A + 0`` and ``0 + A`` -> ``A`` (a zero constant, or a broadcast of one,
  when the shapes agree);
* (layout-insensitive only) ``A + scatter(B, i, u)`` with an add-scatter
  used only by the add -> ``scatter(A + B, i, u)`` (either side) -- the
  embedding gradient of a tied-embedding transformer scatters straight into
  the unembedding gradient instead of into zeros.  When both operands are
  such scatters XLA merges them (concatenated indices and updates); that
  case is not implemented and left unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...ir.module import Instruction
from .shapes import same_shape

if TYPE_CHECKING:
    from .visitor import AlgsimpVisitor


def is_all(x: Instruction, value: int) -> bool:
    """``IsAll(x, value)``: a constant of ``value``, or a broadcast of one."""
    while x.opcode == "broadcast":
        x = x.operands[0]
    return x.opcode == "constant" and x.literal is not None and x.literal.is_scalar_value(value)


def is_all_zero(x: Instruction) -> bool:
    return is_all(x, 0)


def handle_multiply(v: "AlgsimpVisitor", mul: Instruction) -> None:
    lhs, rhs = mul.operands
    if is_all(rhs, 1) and same_shape(mul.shape, lhs.shape, v.layout_sensitive):
        v.replace_with_operand(mul, lhs)
    elif is_all(lhs, 1) and same_shape(mul.shape, rhs.shape, v.layout_sensitive):
        v.replace_with_operand(mul, rhs)


def _add_scatter(x: Instruction) -> bool:
    if x.opcode != "scatter" or len(x.operands) != 3 or x.user_count != 1:
        return False
    comp = x.attrs.get("to_apply")
    root = getattr(comp, "root", None)
    return root is not None and root.opcode == "add" and \
        all(o.opcode == "parameter" for o in root.operands)


def handle_add(v: "AlgsimpVisitor", add: Instruction) -> None:
    lhs, rhs = add.operands
    if is_all_zero(rhs) and same_shape(add.shape, lhs.shape, v.layout_sensitive):
        v.replace_with_operand(add, lhs)
        return
    if is_all_zero(lhs) and same_shape(add.shape, rhs.shape, v.layout_sensitive):
        v.replace_with_operand(add, rhs)
        return
    if v.layout_sensitive:
        return
    ls, rs = _add_scatter(lhs), _add_scatter(rhs)
    if ls and rs:
        return
    if rs or ls:
        scatter, other = (rhs, lhs) if rs else (lhs, rhs)
        from ..dfs_rewrite import add_instruction
        pair = [other, scatter.operands[0]] if rs else [scatter.operands[0], other]
        new_operand = add_instruction(add.parent, v.new("add", add.shape, pair))
        scatter.set_operand(0, new_operand)
        v.replace_with_operand(add, scatter)


__all__ = ["handle_add", "handle_multiply", "is_all", "is_all_zero"]
