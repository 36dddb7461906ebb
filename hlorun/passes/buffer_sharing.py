"""XLA:GPU's buffer-sharing hint for fusions (xla/service/gpu/buffer_sharing.cc,
``FusionCanShareBufferHint`` / ``CanShareBufferHint``): may a fusion write its
output into the buffer of one of its operands?

* the operand and the output have the same number of elements and the same
  element byte size;
* every instruction on the paths from the fused parameter is elementwise on
  that operand (not a copy), a bitcast or a tuple; the reduction emitter's
  hero reduce (a kInput fusion whose output is a reduce) ends a path, since
  it reads its input before anything is written; a dynamic-slice reading the
  same slice the root dynamic-update-slice writes, the update operand of that
  root, and the updated operands of a root scatter are allowed;
* a path must reach the output; in a multi-output fusion whose output is not
  elementwise, no other output may be reached.

A cuBLAS-LT call may write over its bias (operand 2) when beta is not 0.
"""

from __future__ import annotations

import math

from ..ir.module import Instruction
from ..ir.opcode import ELEMENTWISE
from ..ir.shape import byte_width


def _elementwise_on(hlo: Instruction, operand: Instruction) -> bool:
    """``IsElementwiseOnOperand``."""
    if hlo.opcode in ELEMENTWISE:
        return True
    if hlo.opcode == "dynamic-update-slice":
        return hlo.operands[0] is operand
    return False


def _reduction_hero(fusion: Instruction) -> Instruction | None:
    if fusion.fusion_kind != "kInput":
        return None
    root = fusion.fused_computation.root
    outs = list(root.operands) if root.opcode == "tuple" else [root]
    for o in outs:
        while o.opcode == "bitcast":
            o = o.operands[0]
        if o.opcode == "reduce":
            return o
    return None


def fusion_can_share(fusion: Instruction, operand_index: int, output_index: int | None = None) -> bool:
    """``FusionCanShareBufferHint(fusion, fusion.operands[operand_index],
    {output_index})``."""
    body = fusion.fused_computation
    if body is None:
        return False
    operand = fusion.operands[operand_index]
    out_shape = fusion.shape.tuple_shapes[output_index] if output_index is not None \
        else fusion.shape
    if not operand.shape.is_array or not out_shape.is_array:
        return False
    if operand.shape != out_shape:
        if math.prod(operand.shape.dimensions) != math.prod(out_shape.dimensions) or \
                byte_width(operand.shape.element_type) != byte_width(out_shape.element_type):
            return False
    hero = _reduction_hero(fusion)
    param = body.parameters[operand_index]
    root = body.root
    output = root
    if root.opcode == "tuple":
        if output_index is None:
            return False
        output = root.operands[output_index]
    non_bitcast_root = output.operands[0] if output.opcode == "bitcast" else output
    queue, visited, found = [param], {param}, False
    while queue:
        x = queue.pop(0)
        if x is output:
            found = True
        if x is hero:
            continue
        for h in x.users:
            if h not in visited:
                visited.add(h)
                queue.append(h)
            if h is non_bitcast_root and h.opcode == "scatter":
                n = len(h.shape.tuple_shapes) if h.shape.is_tuple else 1
                if h.operands.index(x) < n and h.operands.count(x) == 1:
                    continue
            if non_bitcast_root.opcode == "dynamic-update-slice" and h.opcode == "dynamic-slice" \
                    and non_bitcast_root.operands[0] is h.operands[0] \
                    and h.shape == non_bitcast_root.operands[1].shape:
                scalar = math.prod(h.shape.dimensions) == 1 and \
                    math.prod(non_bitcast_root.operands[1].shape.dimensions) == 1
                if not scalar and any(h.operands[i] is not non_bitcast_root.operands[i + 1]
                                      for i in range(1, len(h.operands))):
                    return False
            elif (not _elementwise_on(h, x) or h.opcode == "copy") and \
                    h.opcode not in ("bitcast", "tuple") and h is not hero:
                if h is not non_bitcast_root or h.opcode != "dynamic-update-slice" or \
                        h.operands.index(x) != 1:
                    return False
    if root.opcode == "tuple" and non_bitcast_root.opcode not in ELEMENTWISE:
        if any(o is not output and o in visited for o in root.operands):
            return False
    return found


def can_share(user: Instruction, operand: Instruction, output_index: int | None = None) -> bool | None:
    """``CanShareBufferHint``: True / False where XLA:GPU decides, None where
    the generic dataflow rules do."""
    if user.opcode == "fusion":
        if operand not in user.operands:
            return False
        return fusion_can_share(user, user.operands.index(operand), output_index)
    if user.opcode == "custom-call":
        target = user.custom_call_target or ""
        if target == "__cublas$lt$matmul":
            cfg = user.backend_config or {}
            gemm = cfg.get("gemm_backend_config", cfg) if isinstance(cfg, dict) else {}
            beta = float(gemm.get("beta", 0) or 0) if isinstance(gemm, dict) else 0.0
            return beta != 0.0 and len(user.operands) > 2 and user.operands[2] is operand
        return False
    return None


__all__ = ["can_share", "fusion_can_share"]
