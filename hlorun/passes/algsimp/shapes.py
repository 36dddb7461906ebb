"""Shape predicates shared by the algebraic simplifier's rule modules."""

from __future__ import annotations

from ...ir.shape import Shape


def same_shape(a: Shape, b: Shape, layout_sensitive: bool) -> bool:
    """``SameShape``: equal, or compatible when layout-insensitive."""
    if layout_sensitive:
        return a == b
    return a.element_type == b.element_type and a.dimensions == b.dimensions \
        and a.dynamic == b.dynamic
