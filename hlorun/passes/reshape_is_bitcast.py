"""reshape-is-bitcast: the precondition of layout normalization, as a checker.

XLA's LayoutNormalization handles a reshape by ``TF_RET_CHECK(ShapeUtil::
ReshapeIsBitcast(s, operand->shape()))`` (layout_normalization.cc): a
reshape whose operand and result layouts do not describe the same bytes
crashes the compiler.  The reshape-decomposer establishes it; anything that
changes a layout after that (a GEMM rewriter pinning its output to the
canonical layout, scenario S0) can break it.  This checker reports each
such reshape with the message XLA would print, plus the operand and result
layouts, so the pipeline can name the pass after which it first appeared.
"""

from __future__ import annotations

from ..ir.module import Module
from ..ir.shape import reshape_is_bitcast
from ..errors import Diagnostic
from ..verifier.checkers import Checker


class ReshapeIsBitcast(Checker):
    """Every reshape (outside fusions) must be a bitcast."""

    name = "reshape-is-bitcast"

    def check(self, module: Module) -> list[Diagnostic]:
        out: list[Diagnostic] = []
        try:
            # One sweep for the offending reshapes and the fused computations;
            # the post order (MakeNonfusionComputations, the order of the
            # findings) is only built when there is something to report.
            fused: set = set()
            reshapes: list = []
            for comp in module.computations:
                for instr in comp._instructions:
                    op = instr.opcode
                    if op == "fusion":
                        c = instr.fused_computation
                        if c is not None:
                            fused.add(c)
                    elif op == "reshape" and instr.operands:
                        reshapes.append((comp, instr))
            bad = []
            for comp, instr in reshapes:
                if comp in fused:
                    continue
                s, s0 = instr.shape, instr.operands[0].shape
                if s.is_array and s0.is_array and not reshape_is_bitcast(s, s0):
                    bad.append(instr)
            if not bad:
                return out
            from .dfs_rewrite import nonfusion_computations
            flagged = set(bad)
            for comp in nonfusion_computations(module):
                for instr in comp._instructions:
                    if instr not in flagged:
                        continue
                    operand = instr.operands[0]
                    s, s0 = instr.shape, operand.shape
                    out.append(self.diag(
                        module, instr,
                        f"RET_CHECK failure (xla/service/layout_normalization.cc:429) "
                        f"ShapeUtil::ReshapeIsBitcast(s, operand->shape()): reshape "
                        f"%{instr.name} from %{operand.name} {s0} to {s} is not a bitcast "
                        f"(operand layout {s0.layout}, result layout {s.layout})",
                        notes=["run reshape-decomposer before layout_normalization "
                               "(it turns the reshape into copy + bitcast)"]))
        except Exception as e:  # a checker never raises
            out.append(Diagnostic(rule=self.name, message=f"checker crashed: {e!r}",
                                  filename=module.filename))
        return out
