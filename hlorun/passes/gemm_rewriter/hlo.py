"""IR helpers for the GEMM rewriter: XLA's ``MakeXxxHlo`` creation
utilities and ``HloComputation::ReplaceInstruction`` semantics.

Every new instruction is appended to the computation (so printing order is
XLA's post order, independent of creation order); names are uniquified the
way XLA's NameUniquer does.  ``replace`` mirrors
``ReplaceInstructionWithDifferentShape``: metadata and sharding are carried
over when the new instruction has none, the old name is kept when the
opcode (and custom-call target) is the same, and operands that become dead
are removed with the old instruction.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import numpy as np

from ...ir.attrs import format_int_list, parse_frontend_attributes, quote
from ...ir.build import permute_dimensions
from ...ir.literal import Literal
from ...ir.module import Computation, Instruction
from ...ir.shape import Layout, Shape, default_layout

#: Opcodes that are never removed as "unused operands" (side effects).
_SIDE_EFFECTING = frozenset({
    "send", "send-done", "recv", "recv-done", "outfeed", "infeed", "rng",
    "rng-get-and-update-state", "all-reduce-start", "all-gather-start",
    "collective-permute-start", "copy-start", "after-all", "add-dependency",
    "domain",
})


def has_side_effect(instr: Instruction) -> bool:
    if instr.opcode in _SIDE_EFFECTING:
        return True
    if instr.opcode == "custom-call":
        return instr.attrs.get("custom_call_has_side_effect") == "true"
    return False


# ---------------------------------------------------------------------------
# Creation
# ---------------------------------------------------------------------------


def add(comp: Computation, opcode: str, shape: Shape, operands: Sequence[Instruction] = (),
        attrs: dict[str, Any] | None = None, name: str | None = None,
        metadata: str | None = None) -> Instruction:
    """Append a new instruction (named ``name`` or after its opcode)."""
    instr = Instruction(opcode, shape, list(operands), "", dict(attrs or {}))
    if metadata:
        instr.attrs["metadata"] = metadata
    comp.add_instruction(instr, name or opcode)
    return instr


def constant(comp: Computation, element_type: str, value: Any, name: str = "constant") -> Instruction:
    shape = Shape.array(element_type, ())
    instr = Instruction("constant", shape, [], "", {})
    instr.literal = Literal.from_array(np.asarray(value), shape)
    comp.add_instruction(instr, name)
    return instr


def constant_array(comp: Computation, value: np.ndarray, shape: Shape) -> Instruction:
    instr = Instruction("constant", shape, [], "", {})
    instr.literal = Literal.from_array(value, shape)
    comp.add_instruction(instr, "constant")
    return instr


def bitcast(comp: Computation, operand: Instruction, shape: Shape,
            metadata: str | None = None) -> Instruction:
    return add(comp, "bitcast", shape, [operand], metadata=metadata)


def convert(comp: Computation, operand: Instruction, element_type: str,
            metadata: str | None = None) -> Instruction:
    """``MakeConvertToHlo``: a no-op when the type already matches."""
    if operand.shape.element_type == element_type:
        return operand
    return add(comp, "convert", operand.shape.with_element_type(element_type), [operand],
               metadata=metadata)


def binary(comp: Computation, opcode: str, lhs: Instruction, rhs: Instruction,
           metadata: str | None = None) -> Instruction:
    """``MakeBinaryHlo``: the result takes the lhs shape (and layout)."""
    shape = lhs.shape if lhs.shape.rank >= rhs.shape.rank else rhs.shape
    return add(comp, opcode, shape, [lhs, rhs], metadata=metadata)


def transpose(comp: Computation, operand: Instruction, perm: Sequence[int],
              shape: Shape | None = None) -> Instruction:
    if shape is None:
        shape = permute_dimensions(perm, operand.shape)
    return add(comp, "transpose", shape, [operand], {"dimensions": format_int_list(perm)})


def reshape(comp: Computation, operand: Instruction, shape: Shape) -> Instruction:
    return add(comp, "reshape", shape, [operand])


def gte(comp: Computation, tup: Instruction, index: int) -> Instruction:
    return add(comp, "get-tuple-element", tup.shape.tuple_shapes[index], [tup],
               {"index": str(index)})


def pad_to(comp: Computation, operand: Instruction, target: Shape) -> Instruction:
    """``PadOperandToTargetShape``: zero high padding up to ``target``."""
    if operand.shape == target or operand.shape.element_type != target.element_type:
        return operand
    zero = constant(comp, operand.shape.element_type, 0)
    padding = "x".join(f"0_{t - d}" for d, t in zip(operand.shape.dimensions, target.dimensions))
    return add(comp, "pad", target, [operand, zero], {"padding": padding})


def slice_(comp: Computation, operand: Instruction, shape: Shape,
           starts: Sequence[int], limits: Sequence[int], strides: Sequence[int]) -> Instruction:
    text = "{" + ", ".join(
        f"[{s}:{l}]" if st == 1 else f"[{s}:{l}:{st}]"
        for s, l, st in zip(starts, limits, strides)) + "}"
    return add(comp, "slice", shape, [operand], {"slice": text})


def custom_call(comp: Computation, shape: Shape, operands: Sequence[Instruction],
                target: str, backend_config: str | None = None) -> Instruction:
    attrs: dict[str, Any] = {"custom_call_target": quote(target)}
    if backend_config is not None:
        attrs["backend_config"] = backend_config
    return add(comp, "custom-call", shape, operands, attrs, name="custom-call")


def clone(comp: Computation, instr: Instruction, shape: Shape | None = None,
          operands: Sequence[Instruction] | None = None, name: str | None = None) -> Instruction:
    """``CloneWithNewOperands`` / ``CloneWithNewShape``: same opcode and
    attributes (metadata, backend config, target, aliasing ...); the name is
    the original one, uniquified."""
    new = Instruction(instr.opcode, shape if shape is not None else instr.shape,
                      list(operands if operands is not None else instr.operands), "",
                      dict(instr.attrs))
    new.literal = instr.literal
    new.parameter_number = instr.parameter_number
    comp.add_instruction(new, name or instr.name)
    return new


# ---------------------------------------------------------------------------
# Shapes
# ---------------------------------------------------------------------------


def permute_dims_keep_layout(shape: Shape, perm: Sequence[int], layout: Layout | None) -> Shape:
    """``ShapeUtil::PermuteDimensions`` of the dimensions only, then the
    given layout (``*new_shape.mutable_layout() = ...``)."""
    return Shape.array(shape.element_type, [shape.dimensions[p] for p in perm],
                       layout if layout is not None else "default")


def descending(shape: Shape) -> Shape:
    return shape.with_layout(default_layout(shape.rank))


def is_descending(shape: Shape) -> bool:
    return shape.layout is None or shape.layout.minor_to_major == tuple(range(shape.rank - 1, -1, -1))


def same_physical_descending(shape: Shape) -> Shape:
    """``MakeShapeWithDescendingLayoutAndSamePhysicalLayout``."""
    m2m = shape.minor_to_major
    dims = [shape.dimensions[d] for d in reversed(m2m)]
    return Shape.array(shape.element_type, dims)


# ---------------------------------------------------------------------------
# Replacement (HloComputation::ReplaceInstruction semantics)
# ---------------------------------------------------------------------------


def frontend_attributes(instr: Instruction) -> dict[str, str]:
    text = instr.attrs.get("frontend_attributes")
    return parse_frontend_attributes(text) if text else {}


def _has_op_name(instr: Instruction) -> bool:
    md = instr.attrs.get("metadata")
    return bool(md) and "op_name=" in md


def replace(old: Instruction, new: Instruction) -> bool:
    """Replace ``old`` by ``new`` (already in the computation) the way
    ``HloComputation::ReplaceInstruction`` does.  Returns False (and does
    nothing) when ``old`` has control dependencies, like XLA."""
    comp = old.parent
    assert comp is not None and new.parent is comp
    if old.control_predecessors or old.control_successors:
        return False
    if not _has_op_name(new) and _has_op_name(old):
        new.attrs["metadata"] = old.attrs["metadata"]
    if "sharding" not in new.attrs and "sharding" in old.attrs:
        new.attrs["sharding"] = old.attrs["sharding"]
    old.replace_all_uses_with(new)
    if old.opcode == new.opcode and (old.opcode != "custom-call"
                                     or old.custom_call_target == new.custom_call_target):
        rename(new, old.name, old)
    remove_with_unused_operands(comp, old)
    return True


def rename(instr: Instruction, name: str, previous_owner: Instruction | None = None) -> None:
    """Give ``instr`` the name ``name`` (released by ``previous_owner``)."""
    comp = instr.parent
    if previous_owner is not None:
        previous_owner.name = previous_owner.name + ".__replaced"
    instr.name = name
    if comp is not None:
        comp._names = None  # name index rebuilt lazily


def set_unique_name(instr: Instruction, base: str) -> None:
    """``SetAndUniquifyInstrName``."""
    comp = instr.parent
    module = comp.module if comp is not None else None
    instr.name = module.unique_name(base) if module is not None else base
    if comp is not None:
        comp._names = None


def set_gemm_name(gemm: Instruction) -> None:
    """GemmRewriter's ``SetName``: cublas-lt-matmul for ``__cublas$lt$matmul``,
    else cublas-batch-gemm / cublas-gemm (FP8 calls included)."""
    from .config import CUBLAS_LT_MATMUL, read_gemm_config
    if gemm.custom_call_target == CUBLAS_LT_MATMUL:
        set_unique_name(gemm, "cublas-lt-matmul")
        return
    dims = read_gemm_config(gemm)["dot_dimension_numbers"]
    batch = dims.get("lhs_batch_dimensions") or dims.get("rhs_batch_dimensions")
    set_unique_name(gemm, "cublas-batch-gemm" if batch else "cublas-gemm")


def remove_with_unused_operands(comp: Computation, instr: Instruction) -> None:
    """``RemoveInstructionAndUnusedOperands``: remove ``instr`` and then
    every operand that became dead (parameters, side-effecting ops and ops
    with control dependencies stay)."""
    work = [instr]
    seen: set[Instruction] = set()
    while work:
        item = work.pop(0)
        if item in seen or item.parent is not comp or item.has_users() or item is comp.root:
            continue
        if item is not instr and (item.opcode == "parameter" or has_side_effect(item)):
            continue
        if item.control_predecessors or item.control_successors:
            continue
        seen.add(item)
        ops = list(item.operands)
        comp.remove_instruction(item)
        work.extend(ops)


def iter_users_through(instr: Instruction, opcodes: Iterable[str]) -> list[Instruction]:
    """Final users of ``instr``, looking through the given opcodes."""
    ops = set(opcodes)
    out: list[Instruction] = []
    for u in instr.users:
        if u.opcode in ops:
            out.extend(iter_users_through(u, ops))
        else:
            out.append(u)
    return out
