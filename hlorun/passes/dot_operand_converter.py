"""operand_converter: give both dot operands one element type (XLA's
``DotOperandConverter``, xla/service/gpu/transforms/dot_operand_converter.cc).

A dot whose operands have different element types -- ``bf16 x f32`` from
``lax.dot_general`` with mixed inputs, or the ``f32 x bf16`` dots with
``algorithm=dot_bf16_bf16_f32`` that JAX's ``dot_product_attention``
gradient emits -- gets a ``convert`` of the less precise operand to the
more precise type (``primitive_util::HigherPrecisionType``), so that later
passes (GEMM fusion, the cuBLAS rewriter, the dot-algorithm rewriter) only
see same-typed operands.  Two fp8 operands of different fp8 types are left
alone (cuBLAS-LT and Triton take mixed fp8 GEMMs).  Runs in XLA's
"optimization" pipeline after DotDecomposer (and after OperandUpcaster,
which hlorun does not model: on Volta and newer it skips matrix
multiplications).  The convert carries the dot's metadata, as
``HloInstruction::AddInstruction`` gives it.

Postcondition: every dot outside fusion computations has operands of one
element type, or two fp8 operands.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.build import make_convert, metadata_of
from ..ir.module import Instruction, Module
from ..ir.shape_inference.common import higher_precision
from .base import Pass
from .dfs_rewrite import nonfusion_computations

#: F8E4M3FN, F8E5M2, F8E4M3FNUZ, F8E5M2FNUZ: converting between them is left out.
_NON_CONVERTING = frozenset({"f8e4m3fn", "f8e5m2", "f8e4m3fnuz", "f8e5m2fnuz"})


def needs_conversion(dot: Instruction) -> bool:
    """``DotOperandConverter::InstructionMatchesPattern``."""
    if dot.opcode != "dot":
        return False
    a, b = (o.shape.element_type for o in dot.operands[:2])
    if a == b:
        return False
    return not (a in _NON_CONVERTING and b in _NON_CONVERTING)


@dataclass(frozen=True)
class DotOperandConverter(Pass):
    """Convert the less precise operand of a mixed-type dot to the other operand's type."""

    name = "operand_converter"

    def run(self, module: Module) -> bool:
        changed = False
        for comp in nonfusion_computations(module):
            for dot in [i for i in comp.instructions if needs_conversion(i)]:
                lhs, rhs = dot.operands[0], dot.operands[1]
                a, b = lhs.shape.element_type, rhs.shape.element_type
                desired = higher_precision(a, b)
                index = 1 if desired == a else 0
                narrow = dot.operands[index]
                convert = make_convert(narrow, desired, metadata=metadata_of(dot))
                dot.set_operand(index, convert)
                self.remark(dot, f"converted operand {index} of {dot.name} from "
                                 f"{narrow.shape.element_type} to {desired} (operand types differed: {a} x {b})",
                            derived_from=[dot], operand=index, from_type=narrow.shape.element_type, to_type=desired)
                changed = True
        return changed
