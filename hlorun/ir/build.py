"""Instruction and computation constructors with XLA's conventions.

``make_*`` helpers append a new instruction to a computation the way
``HloComputation::AddInstruction`` does (a module-unique name derived from
the opcode or the given base, optional metadata copied from another
instruction) and compute the result shape the way XLA's shape functions do
where that matters (``MakeBinaryHlo`` takes the lhs shape, a transpose keeps
the physical layout, ``ShapeUtil::InsertDimensionsAtIndex`` places new
dimensions next to the dimension they are inserted before ...).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .attrs import format_int_list
from .literal import Literal
from .module import Computation, Instruction, Module
from .shape import Layout, Shape


def _add(comp: Computation, opcode: str, shape: Shape, operands: Sequence[Instruction],
         attrs: dict[str, Any] | None = None, name: str | None = None,
         metadata: str | None = None) -> Instruction:
    instr = Instruction(opcode, shape, list(operands), "", dict(attrs or {}))
    if metadata:
        instr.attrs["metadata"] = metadata
    return comp.add_instruction(instr, name or opcode)


def metadata_of(instr: Instruction | None) -> str | None:
    """The raw ``metadata={...}`` text of ``instr`` (for copying)."""
    return instr.attrs.get("metadata") if instr is not None else None


def make_instruction(comp: Computation, opcode: str, shape: Shape,
                     operands: Sequence[Instruction] = (), attrs: dict[str, Any] | None = None,
                     name: str | None = None, metadata: str | None = None) -> Instruction:
    return _add(comp, opcode, shape, operands, attrs, name, metadata)


# ---------------------------------------------------------------------------
# Shapes (ShapeUtil functions)
# ---------------------------------------------------------------------------


def permute_dimensions(permutation: Sequence[int], shape: Shape) -> Shape:
    """``ShapeUtil::PermuteDimensions``: result dimension i is operand
    dimension ``permutation[i]``; the layout is permuted along so that the
    physical order is unchanged (a transpose to this shape is a bitcast)."""
    dims = [shape.dimensions[p] for p in permutation]
    if shape.layout is None:
        return Shape.array(shape.element_type, dims)
    inv = [0] * len(permutation)
    for i, p in enumerate(permutation):
        inv[p] = i
    m2m = [inv[d] for d in shape.layout.minor_to_major]
    return Shape.array(shape.element_type, dims, shape.layout.with_minor_to_major(m2m))


def insert_dimensions_at_index(shape: Shape, dim_idx: int, bounds: Sequence[int]) -> Shape:
    """``ShapeUtil::InsertDimensionsAtIndex``: new dimensions before
    ``dim_idx``; in the layout they become "next major" to the dimension
    they are inserted before (the most minor ones when appended)."""
    dims = list(shape.dimensions)
    new_dims = dims[:dim_idx] + list(bounds) + dims[dim_idx:]
    if shape.layout is None:
        return Shape.array(shape.element_type, new_dims)
    n = len(bounds)
    m2m: list[int] = []
    if dim_idx == len(dims):
        m2m.extend(dim_idx + i for i in range(n - 1, -1, -1))
    for d in shape.layout.minor_to_major:
        m2m.append(d + n if d >= dim_idx else d)
        if d == dim_idx:
            m2m.extend(dim_idx + i for i in range(n - 1, -1, -1))
    return Shape.array(shape.element_type, new_dims, shape.layout.with_minor_to_major(m2m))


def delete_dimensions(dims_to_delete: Sequence[int], shape: Shape) -> Shape:
    """``ShapeUtil::DeleteDimensions``: the layout keeps the relative order
    of the remaining dimensions."""
    drop = set(dims_to_delete)
    keep = [i for i in range(shape.rank) if i not in drop]
    dims = [shape.dimensions[i] for i in keep]
    if shape.layout is None:
        return Shape.array(shape.element_type, dims)
    new_index = {d: i for i, d in enumerate(keep)}
    m2m = [new_index[d] for d in shape.layout.minor_to_major if d in new_index]
    return Shape.array(shape.element_type, dims, shape.layout.with_minor_to_major(m2m))


# ---------------------------------------------------------------------------
# Instructions (MakeXxxHlo)
# ---------------------------------------------------------------------------


def make_constant(comp: Computation, element_type: str, value: Any,
                  name: str = "constant", metadata: str | None = None) -> Instruction:
    """A scalar constant (``LiteralUtil::Zero`` / ``CreateR0``)."""
    shape = Shape.array(element_type, ())
    instr = Instruction("constant", shape, [], "", {})
    instr.literal = Literal.from_array(np.asarray(value), shape)
    if metadata:
        instr.attrs["metadata"] = metadata
    return comp.add_instruction(instr, name)


def make_convert(operand: Instruction, element_type: str, metadata: str | None = None) -> Instruction:
    """``MakeConvertToHlo``: no-op when the type already matches."""
    if operand.shape.element_type == element_type:
        return operand
    return _add(operand.parent, "convert", operand.shape.with_element_type(element_type),
                [operand], metadata=metadata)


def make_binary(opcode: str, lhs: Instruction, rhs: Instruction, shape: Shape | None = None,
                metadata: str | None = None, attrs: dict[str, Any] | None = None) -> Instruction:
    """``HloInstruction::CreateBinary(lhs->shape(), ...)`` unless ``shape``."""
    return _add(lhs.parent, opcode, shape if shape is not None else lhs.shape, [lhs, rhs],
                attrs, metadata=metadata)


def make_unary(opcode: str, operand: Instruction, shape: Shape | None = None,
               metadata: str | None = None) -> Instruction:
    return _add(operand.parent, opcode, shape if shape is not None else operand.shape,
                [operand], metadata=metadata)


def make_transpose(operand: Instruction, permutation: Sequence[int],
                   metadata: str | None = None, shape: Shape | None = None) -> Instruction:
    return _add(operand.parent, "transpose",
                shape if shape is not None else permute_dimensions(permutation, operand.shape),
                [operand], {"dimensions": format_int_list(permutation)}, metadata=metadata)


def make_broadcast(operand: Instruction, shape: Shape, dimensions: Sequence[int],
                   metadata: str | None = None) -> Instruction:
    return _add(operand.parent, "broadcast", shape, [operand],
                {"dimensions": format_int_list(dimensions)}, metadata=metadata)


def make_reshape(operand: Instruction, shape: Shape, metadata: str | None = None) -> Instruction:
    return _add(operand.parent, "reshape", shape, [operand], metadata=metadata)


def make_bitcast(operand: Instruction, shape: Shape, metadata: str | None = None) -> Instruction:
    return _add(operand.parent, "bitcast", shape, [operand], metadata=metadata)


def make_reduce(operand: Instruction, init: Instruction, dimensions: Sequence[int],
                to_apply: Computation, shape: Shape, metadata: str | None = None) -> Instruction:
    return _add(operand.parent, "reduce", shape, [operand, init],
                {"dimensions": format_int_list(dimensions), "to_apply": to_apply},
                metadata=metadata)


def make_scalar_computation(module: Module, opcode: str, element_type: str,
                            name: str, param_names: tuple[str, str] = ("scalar_lhs", "scalar_rhs")
                            ) -> Computation:
    """``HloComputation::Builder`` for ``f(lhs, rhs) = lhs <opcode> rhs`` on
    scalars, added as an embedded computation (XLA's
    ``CreateScalarAddComputation`` names: scalar_lhs, scalar_rhs)."""
    comp = Computation(module.unique_name(name))
    module.add_computation(comp)
    scalar = Shape.array(element_type, ())
    lhs = Instruction("parameter", scalar)
    lhs.parameter_number = 0
    comp.add_instruction(lhs, param_names[0])
    rhs = Instruction("parameter", scalar)
    rhs.parameter_number = 1
    comp.add_instruction(rhs, param_names[1])
    root = Instruction(opcode, scalar, [lhs, rhs])
    comp.add_instruction(root, opcode)
    comp.root = root
    return comp


__all__ = ["delete_dimensions", "insert_dimensions_at_index", "make_binary", "make_bitcast",
           "make_broadcast", "make_constant", "make_convert", "make_instruction", "make_reduce",
           "make_reshape", "make_scalar_computation", "make_transpose", "make_unary",
           "metadata_of", "permute_dimensions"]
