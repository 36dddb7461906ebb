"""triangular-solve-rewriter: XLA's TriangularSolveRewriter
(xla/service/gpu/transforms/triangular_solve_rewriter.cc), which
NVPTXCompiler runs in "nvptx post-layout_assignment part 2", right after
OptimizeHloPostLayoutAssignment and before fusion.

Every ``triangular-solve`` of a non-fusion computation becomes a
``__cublas$triangularSolve`` custom call (kTriangularSolveCallTarget), so
that the thunk gets temp memory:

* the call takes the solve's operands (``a``, ``b``) and returns the tuple
  ``(solve's shape, s8[temp_bytes])``, ``temp_bytes`` = 0 for a batch of 1
  (unbatched ``trsm`` needs no temp memory), else ``2 * sizeof(void*) *
  batch`` (batch = product of ``b``'s dimensions but the two minor ones);
* its backend config is the solve's TriangularSolveOptions as JSON
  (``{"left_side":..,"lower":..,"transpose_a":..,"unit_diagonal":..}``,
  every field printed, as XLA's dumps show it);
* it is named ``triangular-solve`` (uniquified), keeps the solve's metadata
  and frontend attributes, and the solve's users read element 0 through a
  ``get-tuple-element``.

Runs after layout assignment: the shapes keep their (Fortran) layouts, the
temp buffer gets ``{0}``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..ir.attrs import quote
from ..ir.module import Instruction, Module, has_opcode
from ..ir.shape import Shape
from .base import Pass
from .dfs_rewrite import nonfusion_computations

#: XLA's kTriangularSolveCallTarget (cublas_cudnn.cc)
TRIANGULAR_SOLVE_TARGET = "__cublas$triangularSolve"
_SOLVE = frozenset({"triangular-solve"})


def _flag(instr: Instruction, key: str) -> str:
    return "true" if str(instr.attrs.get(key, "false")) == "true" else "false"


def triangular_solve_options_json(instr: Instruction) -> str:
    """The solve's TriangularSolveOptions as XLA prints them in a backend config."""
    transpose = str(instr.attrs.get("transpose_a", "NO_TRANSPOSE"))
    return (f'{{"left_side":{_flag(instr, "left_side")},"lower":{_flag(instr, "lower")},'
            f'"transpose_a":"{transpose}","unit_diagonal":{_flag(instr, "unit_diagonal")}}}')


def temp_bytes(b_shape: Shape) -> int:
    batch = math.prod(b_shape.dimensions[:-2])
    return 0 if batch == 1 else 2 * 8 * batch


@dataclass(frozen=True)
class TriangularSolveRewriter(Pass):
    """triangular-solve -> __cublas$triangularSolve custom call with a temp buffer."""

    name = "triangular-solve-rewriter"

    def run(self, module: Module) -> bool:
        changed = False
        for comp in nonfusion_computations(module):
            if not has_opcode(comp, _SOLVE):
                continue
            for solve in [i for i in comp.instructions if i.opcode == "triangular-solve"]:
                temp = Shape.array("s8", [temp_bytes(solve.operands[1].shape)])
                attrs = {"custom_call_target": quote(TRIANGULAR_SOLVE_TARGET)}
                for key in ("metadata", "frontend_attributes"):
                    if key in solve.attrs:
                        attrs[key] = solve.attrs[key]
                attrs["backend_config"] = triangular_solve_options_json(solve)
                call = Instruction("custom-call", Shape.tuple([solve.shape, temp]),
                                   list(solve.operands), "", attrs)
                comp.add_instruction(call, "triangular-solve")
                gte = Instruction("get-tuple-element", solve.shape, [call], "", {"index": "0"})
                comp.add_instruction(gte, "get-tuple-element")
                comp.replace_instruction(solve, gte)
                self.remark(call, f"{solve.name} became a {TRIANGULAR_SOLVE_TARGET} custom call "
                                  f"with {temp.dimensions[0]} bytes of temp memory",
                            derived_from=[solve.name])
                changed = True
        return changed


__all__ = ["TRIANGULAR_SOLVE_TARGET", "TriangularSolveRewriter", "temp_bytes",
           "triangular_solve_options_json"]
