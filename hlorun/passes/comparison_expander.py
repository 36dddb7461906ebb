"""comparison-expander: floating-point compares in total order become
integer compares (XLA's ``ComparisonExpander``,
xla/hlo/transforms/expanders/comparison_expander.cc; GpuCompiler adds it
to the "optimization" pipeline with the upcast pair (bf16, f32)).

A ``compare`` whose order is TOTAL (``order=TOTAL`` or the older
``type=TOTALORDER``, :mod:`hlorun.ir.comparison`) on a floating-point type
-- the comparators of ``jnp.sort`` / ``argsort`` -- is rewritten: bf16
operands are first converted to f32; each operand x is bitcast to the
signed integer of its width, s = bitcast(x), and mapped to
``s < 0 ? (INT_MAX xor s) : s`` (types without -0, the fnuz fp8 types:
``s < 0 ? (s == INT_MIN ? INT_MIN : INT_MIN - s) : s``), which orders
-NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN; the two are compared
with the original direction as signed integers.  Runs on every non-fusion
computation (sort comparators included).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.build import make_binary, make_broadcast, make_constant, make_instruction
from ..ir.comparison import is_float_total_order
from ..ir.module import Computation, Instruction, Module
from ..ir.shape import bit_width
from .base import Pass
from .dfs_rewrite import nonfusion_computations, replace_instruction

#: expand_via_upcast_ of GpuCompiler's ComparisonExpander
UPCAST = {"bf16": "f32"}
#: primitive_util::HasNegativeZero is false for these
_NO_NEGATIVE_ZERO = frozenset({"f8e4m3fnuz", "f8e5m2fnuz", "f8e4m3b11fnuz", "f8e8m0fnu"})


def _to_ordered_int(comp: Computation, x: Instruction, zero: Instruction, lo: Instruction,
                    hi: Instruction, float_type: str) -> Instruction:
    """``BitcastConvertFloatingPointToIntegral``."""
    shape = hi.shape
    pred = shape.with_element_type("pred")
    s = make_instruction(comp, "bitcast-convert", shape, [x])
    if float_type not in _NO_NEGATIVE_ZERO:
        flipped = make_binary("xor", hi, s, shape=shape)
    else:
        flipped = make_binary("subtract", lo, s, shape=shape)
        is_nan = make_instruction(comp, "compare", pred, [s, lo], {"direction": "EQ"})
        flipped = make_instruction(comp, "select", shape, [is_nan, lo, flipped])
    negative = make_instruction(comp, "compare", pred, [s, zero], {"direction": "LT"})
    return make_instruction(comp, "select", shape, [negative, flipped, s])


def expand(compare: Instruction) -> Instruction:
    """``ComparisonExpander::ExpandInstruction``: the replacement compare."""
    comp = compare.parent
    lhs, rhs = compare.operands[0], compare.operands[1]
    t = lhs.shape.element_type
    if t in UPCAST:
        t = UPCAST[t]
        lhs = make_instruction(comp, "convert", lhs.shape.with_element_type(t), [lhs])
        rhs = make_instruction(comp, "convert", rhs.shape.with_element_type(t), [rhs])
    bits = bit_width(t)
    it = f"s{bits}"
    shape = lhs.shape.with_element_type(it)
    zero = make_broadcast(make_constant(comp, it, 0), shape, [])
    lo = make_broadcast(make_constant(comp, it, -(1 << (bits - 1))), shape, [])
    hi = make_broadcast(make_constant(comp, it, (1 << (bits - 1)) - 1), shape, [])
    a = _to_ordered_int(comp, lhs, zero, lo, hi, t)
    b = _to_ordered_int(comp, rhs, zero, lo, hi, t)
    return make_instruction(comp, "compare", compare.shape, [a, b],
                            {"direction": compare.attrs["direction"]})


@dataclass(frozen=True)
class ComparisonExpander(Pass):
    """Rewrite total-order floating-point compares into signed integer compares."""

    name = "comparison-expander"

    def run(self, module: Module) -> bool:
        changed = False
        for comp in nonfusion_computations(module):
            for c in [i for i in comp.instructions if i.opcode == "compare" and is_float_total_order(i)]:
                new = expand(c)
                self.remark(new, f"{c.name}: {c.operands[0].shape.element_type} compare in total order "
                                 f"became a signed integer compare", derived_from=[c])
                replace_instruction(c, new)
                changed = True
        return changed
