"""``GemmWorkspaceRewriteVisitor``: every BLAS custom call gets an ``s8``
workspace buffer as the last element of a result tuple (4 MiB, 32 MiB on
Hopper and later, 76/64 MiB on gfx942/gfx950; legacy cuBLAS: at most the
operand bytes), and its users read ``get-tuple-element(call, i)``.
Grouped (ragged-dot) GEMMs are not produced by this rewriter and are left
alone."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...ir.attrs import format_output_to_operand_aliasing, parse_output_to_operand_aliasing
from ...ir.module import Computation, Instruction
from ...ir.shape import Shape
from . import hlo as H
from .config import AUX_EPILOGUES, CUBLAS_GEMM, LT_TARGETS, read_gemm_config

if TYPE_CHECKING:  # pragma: no cover
    from .rewriter import GemmRewriterVisitor


def add_workspaces(v: "GemmRewriterVisitor", comp: Computation) -> bool:
    changed = False
    for instr in comp.post_order():
        if instr.parent is comp and instr.opcode == "custom-call":
            changed |= _handle(v, instr)
    return changed


def _handle(v: "GemmRewriterVisitor", instr: Instruction) -> bool:
    target = instr.custom_call_target
    shape = instr.shape
    if target in LT_TARGETS:
        cfg = read_gemm_config(instr)
        has_aux = cfg["epilogue"] in AUX_EPILOGUES
        expected = int(has_aux) + int(bool(cfg["damax_output"])) + 1
        if not ((shape.is_tuple and len(shape.tuple_shapes) == expected) or shape.is_array):
            return False
    elif target != CUBLAS_GEMM or not shape.is_array:
        return False
    workspace = v.gpu.workspace_bytes()
    if target == CUBLAS_GEMM:
        workspace = min(workspace, sum(o.shape.byte_size() for o in instr.operands))
    outputs = [shape] if shape.is_array else list(shape.tuple_shapes)
    outputs.append(Shape.array("s8", (workspace,)))
    comp = instr.parent
    new = v.clone(comp, instr, Shape.tuple(outputs))
    aliasing = new.attrs.get("output_to_operand_aliasing")
    if aliasing:
        entries = parse_output_to_operand_aliasing(aliasing)
        new.attrs["output_to_operand_aliasing"] = format_output_to_operand_aliasing(
            [((0,), operand, operand_index) for _, operand, operand_index in entries])
    if shape.is_tuple:
        for user in instr.users:
            if user.opcode != "get-tuple-element":
                v.missed(instr, f"workspace not added: user {user.name} is not a get-tuple-element")
                comp.remove_instruction(new)
                return False
        for user in instr.users:
            v.replace(user, H.gte(comp, new, user.tuple_index))
        if not instr.has_users() and instr is not comp.root:
            H.remove_with_unused_operands(comp, instr)
    else:
        v.replace(instr, H.gte(comp, new, 0))
    return True
