"""Sizes of instruction shapes the cost model asks for millions of times,
memoised per shape (shapes are interned and hash their value once):
elements, bytes, the first leaf's elements and the narrowest output bit
width."""

from __future__ import annotations

import math

from ...ir.module import Instruction
from ...ir.shape import bit_width, byte_width

_ELEMENTS: dict = {}  # shape (interned, hash cached) -> elements


def _elements(instr: Instruction) -> int:
    s = instr.shape
    n = _ELEMENTS.get(s)
    if n is None:
        if s.is_tuple:
            n = sum(math.prod(t.dimensions) for t in s.tuple_shapes if not t.is_tuple)
        else:
            n = math.prod(s.dimensions)
        _ELEMENTS[s] = n
    return n


_BYTES: dict = {}  # shape -> (bytes, bytes per element as the read model charges)


def _shape_bytes(s) -> tuple[int, int]:
    got = _BYTES.get(s)
    if got is None:
        if s.is_tuple:
            n = sum(math.prod(t.dimensions) * byte_width(t.element_type)
                    for t in s.tuple_shapes if not t.is_tuple)
            got = (n, 4)
        else:
            got = (math.prod(s.dimensions) * byte_width(s.element_type), byte_width(s.element_type))
        _BYTES[s] = got
    return got


def _bytes(instr: Instruction) -> int:
    return _shape_bytes(instr.shape)[0]


def _element_shape_elements(root: Instruction) -> int:
    """Elements of ``GetElementShape``: the root's shape, the first leaf of a tuple."""
    got = _LEAF_ELEMENTS.get(root.shape)
    if got is None:
        s = root.shape
        while s.is_tuple:
            s = s.tuple_shapes[0]
        got = _LEAF_ELEMENTS[root.shape] = max(1, math.prod(s.dimensions))
    return got


_LEAF_ELEMENTS: dict = {}  # shape -> _element_shape_elements


_BITS: dict = {}  # shape -> _output_bits


def _output_bits(root: Instruction) -> int:
    got = _BITS.get(root.shape)
    if got is None:
        got = _BITS[root.shape] = _shape_output_bits(root.shape)
    return got


def _shape_output_bits(shape) -> int:
    shapes = [shape]
    bits = []
    while shapes:
        s = shapes.pop()
        if s.is_tuple:
            shapes += s.tuple_shapes
        elif s.is_array:
            bits.append(bit_width(s.element_type))
    return min(bits) if bits else 8


__all__: list[str] = []  # the package's modules import the memoised helpers by name
