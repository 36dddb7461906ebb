"""What the verifier's rule modules share: the error a rule raises and
XLA's ``ShapeVerifier::ShapesSame``."""

from __future__ import annotations

from typing import Any

from ..ir.shape import Shape
from ..ir.shape_inference.common import compatible


class VerifyError(Exception):
    """A verifier rule failed (the message follows XLA's wording)."""


def shapes_same(a: Shape, b: Shape, opts: Any, minor_to_major_only: bool = False) -> bool:
    """``ShapeVerifier::ShapesSame``: compatible, or equal including layouts
    when the verifier is layout-sensitive."""
    if not opts.layout_sensitive:
        return compatible(a, b)
    return equal_with_layout(a, b, minor_to_major_only)


def equal_with_layout(a: Shape, b: Shape, minor_to_major_only: bool = False) -> bool:
    """``Shape::Equal`` (optionally ``MinorToMajorOnlyInLayout``)."""
    if a.is_tuple or b.is_tuple:
        return (a.is_tuple and b.is_tuple and len(a.tuple_shapes) == len(b.tuple_shapes)
                and all(equal_with_layout(x, y, minor_to_major_only)
                        for x, y in zip(a.tuple_shapes, b.tuple_shapes)))
    if not compatible(a, b) or a.dynamic != b.dynamic:
        return False
    if a.layout is None or b.layout is None or not a.is_array:
        return True
    if minor_to_major_only:
        return a.layout.minor_to_major == b.layout.minor_to_major
    return a.layout == b.layout
