"""The copies XLA's CopyInsertion keeps at a conditional's branch roots
(``AddCopiesForConditional``: every element of a conditional's output that
is a phi of its branches is copied at each branch root; RemoveUnnecessaryCopies
then keeps the copy where a branch returns a value of its operand the output
buffer cannot take over).  Used by copy-insertion (``copy_insertion.py``),
which decides whether an operand value can be taken over.

A branch that returns (part of) its parameter -- ``lax.cond(ok, update,
lambda p: p, params)``, loss_scale_fp16_cond's skipped step -- writes a copy of
each such element."""

from __future__ import annotations

from typing import Callable

from ..ir.module import Computation, Instruction


def branches(cond: Instruction) -> list[Computation]:
    """The branch computations, in operand order (operand k + 1 feeds branch k)."""
    bs = cond.attrs.get("branch_computations")
    if isinstance(bs, list):
        return [b for b in bs if isinstance(b, Computation)]
    return [b for b in (cond.attrs.get("true_computation"), cond.attrs.get("false_computation"))
            if isinstance(b, Computation)]


def _passed_element(value: Instruction, param: Instruction) -> int | None:
    """The parameter element ``value`` is (through bitcasts), or None."""
    while value.opcode == "bitcast":
        value = value.operands[0]
    if value.opcode == "get-tuple-element" and value.operands[0] is param:
        return value.tuple_index
    return None


def copy_passed_through(cond: Instruction,
                        must_copy: Callable[[Instruction], str | None]) -> list[tuple[Instruction, str]]:
    """Copy every branch-root element that is an element of the branch's
    parameter whose operand value ``must_copy`` says cannot become the
    conditional's output (it returns why, or None).  Returns the copies with
    the reason."""
    if not cond.shape.is_tuple:
        return []
    out: list[tuple[Instruction, str]] = []
    n = len(cond.shape.tuple_shapes)
    for k, b in enumerate(branches(cond)):
        if k + 1 >= len(cond.operands) or not b.parameters:
            continue
        operand, param, root = cond.operands[k + 1], b.parameters[0], b.root
        if operand.opcode != "tuple" or param is None or root is None:
            continue
        if root is param:
            if all(must_copy(operand.operands[i]) is None for i in range(min(n, len(operand.operands)))):
                continue
            elements = []
            for i in range(n):
                g = Instruction("get-tuple-element", param.shape.tuple_shapes[i], [param], "",
                                {"index": str(i)})
                b.add_instruction(g, "get-tuple-element")
                elements.append(g)
            new_root = Instruction("tuple", root.shape, elements, "", {})
            b.add_instruction(new_root, "tuple")
            b.root = new_root
            root = new_root
        if root.opcode != "tuple":
            continue
        for i, v in enumerate(list(root.operands)):
            j = _passed_element(v, param)
            if j is None or j >= len(operand.operands):
                continue
            why = must_copy(operand.operands[j])
            if why is None:
                continue
            c = Instruction("copy", v.shape, [v], "", {})
            b.add_instruction(c, "copy")
            root.set_operand(i, c)
            out.append((c, f"branch {b.name} returns element {j} of its parameter, "
                           f"{operand.operands[j].name}, which {why}"))
    return out


__all__ = ["branches", "copy_passed_through"]
