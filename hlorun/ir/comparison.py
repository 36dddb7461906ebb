"""The ordering of a ``compare`` (XLA's ``Comparison::Order``,
xla/comparison_util.cc).

XLA (as JAX 0.11 ships it) prints ``order=TOTAL|WEAK|PARTIAL`` when the
order is not the element type's default; older text says
``type=FLOAT|TOTALORDER|SIGNED|UNSIGNED`` (``ComparisonTypeToOrder``).
Both spellings are accepted and kept as written.
"""

from __future__ import annotations

from .module import Instruction
from .shape_inference.common import is_complex, is_float

#: ``ComparisonTypeToOrder``.
TYPE_TO_ORDER = {"FLOAT": "PARTIAL", "TOTALORDER": "TOTAL", "SIGNED": "TOTAL", "UNSIGNED": "TOTAL"}


def default_order(element_type: str) -> str:
    """``Comparison::DefaultOrdering``: floating point and complex types
    are partially ordered, integers and pred totally."""
    return "PARTIAL" if is_float(element_type) or is_complex(element_type) else "TOTAL"


def comparison_order(compare: Instruction) -> str:
    """``HloCompareInstruction::order()``: TOTAL, WEAK or PARTIAL."""
    order = compare.attrs.get("order")
    if order:
        return order
    ctype = compare.attrs.get("type")
    if ctype in TYPE_TO_ORDER:
        return TYPE_TO_ORDER[ctype]
    return default_order(compare.operands[0].shape.element_type)


def is_float_total_order(compare: Instruction) -> bool:
    """A floating-point compare in total order (NaNs and signed zeros
    ordered: XLA's ComparisonExpander rewrites it into integer compares)."""
    return is_float(compare.operands[0].shape.element_type) and comparison_order(compare) == "TOTAL"
