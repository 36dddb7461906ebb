"""Verifier rules for instructions that call computations: call (and
composite calls), while, conditional and fusion against the signatures of
their computations; output-to-operand aliasing of fusions and custom-calls
(custom-calls get no shape inference: their shape is the target's
contract)."""

from __future__ import annotations

from typing import Any

from ..ir import attrs as A
from ..ir.module import Computation, Instruction
from ..ir.shape import Shape
from ..ir.shape_inference.common import compatible, human, make
from .base import VerifyError, check_result, equal_with_layout, shapes_same


def callee(instr: Instruction, key: str) -> Computation:
    comp = instr.attrs.get(key)
    if not isinstance(comp, Computation):
        raise VerifyError(f"{instr.opcode} has no {key} computation")
    return comp


def param_count(instr: Instruction, comp: Computation, expected: int) -> None:
    """``CheckParameterCount``."""
    if comp.num_parameters != expected:
        raise VerifyError(f"Expected computation {comp.name} called from {instr.name} to have "
                          f"{expected} parameters, has {comp.num_parameters}")


def _operand_and_parameter(instr: Instruction, i: int, comp: Computation, p: int,
                           opts: Any) -> None:
    """``CheckOperandAndParameter``."""
    param = comp.parameters[p] if p < len(comp.parameters) else None
    if param is None:
        raise VerifyError(f"computation {comp.name} has no parameter {p}")
    if not shapes_same(instr.operands[i].shape, param.shape, opts):
        raise VerifyError(f"Operand {instr.operands[i].name} ({human(instr.operands[i].shape)}) "
                          f"shape does not match parameter's {param.name} "
                          f"({human(param.shape)}) in {comp.name}")


def _root(comp: Computation) -> Shape:
    if comp.root is None:
        raise VerifyError(f"computation {comp.name} has no root")
    return comp.root.shape


def call(instr: Instruction, opts: Any) -> Shape:
    comp = callee(instr, "to_apply")
    param_count(instr, comp, len(instr.operands))
    for i in range(comp.num_parameters):
        _operand_and_parameter(instr, i, comp, i, opts)
    if instr.attrs.get("is_composite") == "true":
        _composite(instr)
    return _root(comp)


def _composite(instr: Instruction) -> None:
    """A composite call names itself in its frontend attributes."""
    text = instr.attrs.get("frontend_attributes")
    if not text:
        raise VerifyError("A composite call op must have frontend attributes")
    fa = A.parse_frontend_attributes(text)
    if not fa.get("composite.name"):
        raise VerifyError("A composite call op must have frontend attributes with key "
                          "composite.name whose value is non-empty")
    if "composite.attributes" in fa and not fa["composite.attributes"]:
        raise VerifyError("A composite call op must have frontend attributes with key "
                          "composite.attributes whose value is default: {} or non-empty")
    version = fa.get("composite.version")
    if version is not None and not version.strip().isdigit():
        raise VerifyError("A composite call op must have frontend attributes with a "
                          "composite.version whose value is a non-negative integer but got: "
                          f"{version}")


def while_(instr: Instruction, opts: Any) -> Shape:
    body, cond = callee(instr, "body"), callee(instr, "condition")
    param_count(instr, body, 1)
    param_count(instr, cond, 1)
    _operand_and_parameter(instr, 0, body, 0, opts)
    _operand_and_parameter(instr, 0, cond, 0, opts)
    if not compatible(_root(cond), make("pred", [])):
        raise VerifyError("Conditional computation shape does not lead to a scalar predicate "
                          f"shape: {human(_root(cond))}")
    return _root(body)


def conditional(instr: Instruction, opts: Any) -> None:
    index = instr.operands[0].shape if instr.operands else None
    if index is None or not index.is_scalar:
        raise VerifyError("The first operand of conditional must be a scalar. Got "
                          f"{human(index) if index else 'nothing'}")
    branches = instr.attrs.get("branch_computations")
    if branches is None:
        branches = [callee(instr, "true_computation"), callee(instr, "false_computation")]
    if index.element_type == "pred":
        if len(branches) != 2:
            raise VerifyError(f"a PRED conditional has 2 branches, got {len(branches)}")
    elif index.element_type != "s32":
        raise VerifyError("The first operand of indexed conditional must be a scalar of S32. "
                          f"Got type {index.element_type.upper()}.")
    elif not branches:
        raise VerifyError("conditional has no branch computations")
    if len(instr.operands) != len(branches) + 1:
        raise VerifyError(f"Expected {len(branches) + 1} operands for conditional instruction, "
                          f"has {len(instr.operands)}")
    for j, comp in enumerate(branches):
        param_count(instr, comp, 1)
        _operand_and_parameter(instr, j + 1, comp, 0, opts)
        check_result(instr, _root(comp), opts)


def fusion(instr: Instruction, opts: Any, in_fusion: bool = False) -> None:
    comps = instr.called_computations()
    if len(comps) != 1:
        raise VerifyError("Fusion has a non-unary number of called computations")
    comp = comps[0]
    root = _root(comp)
    if not shapes_same(instr.shape, root, opts):
        raise VerifyError(f"Fused computation shape ({root}) is not equal to the fusion shape "
                          f"({instr.shape})")
    if comp.num_parameters > len(instr.operands):
        raise VerifyError(f"Fused parameter count ({comp.num_parameters}) is greater than the "
                          f"number of operands ({len(instr.operands)}) passed to the fusion")
    for n, p in enumerate(comp.parameters):
        if p is not None and not shapes_same(p.shape, instr.operands[n].shape, opts):
            raise VerifyError(f"Shape mismatch between parameter number {n} and its operand in "
                              f"{instr.name}. ({p.shape} != {instr.operands[n].shape})")
    check_aliasing(instr, opts, in_fusion)


def check_aliasing(instr: Instruction, opts: Any, in_fusion: bool = False) -> None:
    text = instr.attrs.get("output_to_operand_aliasing")
    if not text:
        return
    for out_index, operand, operand_index in A.parse_output_to_operand_aliasing(text):
        if not 0 <= operand < len(instr.operands):
            raise VerifyError("Invalid aliasing operand index.")
        try:
            a = instr.operands[operand].shape.subshape(operand_index)
        except IndexError:
            raise VerifyError("Invalid aliasing operand shape index.") from None
        try:
            b = instr.shape.subshape(out_index)
        except IndexError:
            raise VerifyError("Invalid aliasing output shape index.") from None
        if instr.opcode == "custom-call" and "xla_skip_custom_call_alias_shape_check" in (
                instr.attrs.get("frontend_attributes") or ""):
            return
        if a.is_buffer:
            a = a.buffer_of
        if b.is_buffer:
            b = b.buffer_of
        if opts.layout_sensitive:
            # A scalar custom-call operand may live in another memory space;
            # fusions inside fusions may differ in tiles and memory spaces.
            relax = (instr.opcode == "custom-call" and a.is_array and a.element_count == 1) \
                or (instr.opcode == "fusion" and in_fusion)
            same = equal_with_layout(a, b, ignore_memory_space=relax,
                                     ignore_tiles_and_memory_space=relax
                                     and instr.opcode == "fusion")
        else:
            same = compatible(a, b)
        if not same:
            raise VerifyError(f"Different aliasing shapes: {a} vs {b}")


def custom_call(instr: Instruction, opts: Any) -> None:
    """No inference; layout constraints and aliasing must be consistent."""
    olc = instr.attrs.get("operand_layout_constraints")
    target = instr.custom_call_target
    if olc is not None and target not in ("LayoutConstraint", "control_dep"):
        shapes = [A.parse_shape_text(p) for p in A.split_top_level(olc.strip()[1:-1])
                  if p.strip()]
        if len(shapes) != len(instr.operands):
            raise VerifyError(f"custom-call has {len(instr.operands)} operands but "
                              f"{len(shapes)} operand layout constraints")
        for o, s in zip(instr.operands, shapes):
            if not compatible(o.shape, s):
                raise VerifyError(f"{o.shape} operand {s}")
    check_aliasing(instr, opts)
