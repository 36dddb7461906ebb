"""What the verifier's rule modules share: the error a rule raises and
XLA's ``ShapeVerifier::ShapesSame``."""

from __future__ import annotations

from typing import Any

from ..ir.shape import Layout, Shape
from ..ir.shape_inference.common import compatible


class VerifyError(Exception):
    """A verifier rule failed (the message follows XLA's wording)."""


def shapes_same(a: Shape, b: Shape, opts: Any, minor_to_major_only: bool = False) -> bool:
    """``ShapeVerifier::ShapesSame``: compatible, or equal including layouts
    when the verifier is layout-sensitive."""
    if not opts.layout_sensitive:
        return compatible(a, b)
    return equal_with_layout(a, b, minor_to_major_only)


def equal_with_layout(a: Shape, b: Shape, minor_to_major_only: bool = False,
                      ignore_tiles_and_memory_space: bool = False,
                      ignore_memory_space: bool = False) -> bool:
    """``Shape::Equal`` (optionally ``MinorToMajorOnlyInLayout``, or
    ignoring tiles and/or memory spaces)."""
    if a.is_tuple or b.is_tuple:
        return (a.is_tuple and b.is_tuple and len(a.tuple_shapes) == len(b.tuple_shapes)
                and all(equal_with_layout(x, y, minor_to_major_only,
                                          ignore_tiles_and_memory_space, ignore_memory_space)
                        for x, y in zip(a.tuple_shapes, b.tuple_shapes)))
    if not compatible(a, b) or a.dynamic != b.dynamic:
        return False
    if a.layout is None or b.layout is None or not a.is_array:
        return True
    if minor_to_major_only:
        return a.layout.minor_to_major == b.layout.minor_to_major
    return layouts_equal(a.layout, b.layout, ignore_tiles=ignore_tiles_and_memory_space,
                         ignore_memory_space=ignore_tiles_and_memory_space or ignore_memory_space)


def layouts_equal(a: Layout, b: Layout, ignore_tiles: bool = False,
                  ignore_memory_space: bool = False, ignore_element_size: bool = False) -> bool:
    """``Layout::Equal`` with its Ignore... options."""
    if a == b:
        return True
    return (a.minor_to_major == b.minor_to_major
            and (ignore_tiles or a.tiles == b.tiles)
            and (ignore_memory_space or a.memory_space == b.memory_space)
            and (ignore_element_size or a.element_size_in_bits == b.element_size_in_bits)
            and a.tail_padding_alignment == b.tail_padding_alignment
            and a.index_type == b.index_type and a.pointer_type == b.pointer_type
            and a.split_configs == b.split_configs
            and str(a.physical_shape) == str(b.physical_shape)
            and a.dynamic_metadata_prefix_bytes == b.dynamic_metadata_prefix_bytes)
