"""simplify-fp-conversions: XLA's SimplifyFPConversions
(xla/hlo/transforms/simplifiers/simplify_fp_conversions.cc), which XLA:GPU
runs after layout assignment when excess precision is allowed
(``--xla_allow_excess_precision``, on by default).

A chain of two or more floating-point converts ``A -> B -> C ... -> D`` is
one convert ``A -> D`` -- or nothing when ``D`` is ``A``'s type: a bf16 dot
result the split-K rewriter reduced in f32, rounded to bf16 and converted
back to f32 for a log-softmax, stays f32.  This trades bit-exactness with
the unoptimized program for precision (the values only get more precise),
as XLA does.  Per computation in post order; replacements drop the chain
when nothing else reads it.

Postcondition: no convert to a floating-point type reads another such
convert.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.edit import replace_instruction
from ..ir.module import Instruction, Module
from ..ir.shape import is_floating
from .base import Pass
from .dfs_rewrite import add_instruction


def _float_convert(i: Instruction) -> bool:
    return i.opcode == "convert" and i.shape.is_array and is_floating(i.shape.element_type)


@dataclass(frozen=True)
class SimplifyFPConversions(Pass):
    """Fold chains of floating-point converts into one convert (or none)."""

    name = "simplify-fp-conversions"

    def run(self, module: Module) -> bool:
        changed = False
        for comp in module.computation_post_order():
            for instr in comp.make_instruction_post_order():
                if instr.parent is not comp:
                    continue
                source, length = instr, 0
                while _float_convert(source):
                    source = source.operands[0]
                    length += 1
                if length < 2:
                    continue
                types = " -> ".join(_chain_types(instr, length))
                if instr.shape.element_type == source.shape.element_type:
                    new = source
                    what = f"convert chain {types} removed"
                else:
                    new = add_instruction(comp, Instruction(
                        "convert", instr.shape, [source], "", {}), instr)
                    what = f"convert chain {types} folded into {new.name}"
                self.remark(instr, what, derived_from=[instr])
                replace_instruction(comp, instr, new)
                changed = True
        return changed


def _chain_types(instr: Instruction, length: int) -> list[str]:
    out = [instr.shape.element_type]
    cur = instr
    for _ in range(length):
        cur = cur.operands[0]
        out.append(cur.shape.element_type)
    return list(reversed(out))
