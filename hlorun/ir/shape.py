"""Primitive types, layouts and shapes, with XLA's ShapeUtil semantics.

Shapes and layouts are immutable and interned: the parser builds each distinct
shape text once, and passes compare shapes cheaply.  Printing follows XLA's
``ShapeUtil::HumanStringWithLayout`` exactly.

The helpers at the bottom (``reshape_is_bitcast``, ``transpose_is_bitcast``,
``make_default_layout`` ...) mirror ``xla::ShapeUtil`` / ``xla::LayoutUtil``;
they are what layout assignment, the reshape decomposer and layout
normalization reason with (scenario S0).
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import Iterable, Sequence

# ---------------------------------------------------------------------------
# Primitive types
# ---------------------------------------------------------------------------

#: name -> (bit width, kind).  kind: 'pred', 's' (signed int), 'u' (unsigned),
#: 'f' (floating point), 'c' (complex), 'token', 'opaque'.
PRIMITIVE_TYPES: dict[str, tuple[int, str]] = {
    "pred": (8, "pred"),
    "s1": (1, "s"), "s2": (2, "s"), "s4": (4, "s"), "s8": (8, "s"),
    "s16": (16, "s"), "s32": (32, "s"), "s64": (64, "s"),
    "u1": (1, "u"), "u2": (2, "u"), "u4": (4, "u"), "u8": (8, "u"),
    "u16": (16, "u"), "u32": (32, "u"), "u64": (64, "u"),
    "f16": (16, "f"), "bf16": (16, "f"), "f32": (32, "f"), "f64": (64, "f"),
    "f8e5m2": (8, "f"), "f8e4m3": (8, "f"), "f8e4m3fn": (8, "f"),
    "f8e4m3b11fnuz": (8, "f"), "f8e3m4": (8, "f"), "f8e5m2fnuz": (8, "f"),
    "f8e4m3fnuz": (8, "f"), "f8e8m0fnu": (8, "f"),
    "f4e2m1fn": (4, "f"), "f6e3m2fn": (6, "f"), "f6e2m3fn": (6, "f"),
    "c64": (64, "c"), "c128": (128, "c"),
    "token": (0, "token"),
    "opaque": (0, "opaque"),
}

#: Aliases accepted on input (XLA accepts "opaque_type" for OPAQUE_TYPE).
_TYPE_ALIASES = {"opaque_type": "opaque"}

#: Regex alternation of every type name, longest first (so f8e4m3fnuz wins
#: over f8e4m3fn over f8e4m3).
TYPE_NAME_RE = "|".join(
    sorted(list(PRIMITIVE_TYPES) + list(_TYPE_ALIASES), key=len, reverse=True)
)

#: XLA's enum spelling, used in messages ("F32", "OPAQUE_TYPE").
def type_enum_name(t: str) -> str:
    return "OPAQUE_TYPE" if t == "opaque" else t.upper()


def canonical_type(name: str) -> str:
    return _TYPE_ALIASES.get(name, name)


def bit_width(t: str) -> int:
    return PRIMITIVE_TYPES[t][0]


def is_floating(t: str) -> bool:
    return PRIMITIVE_TYPES[t][1] == "f"


def is_complex(t: str) -> bool:
    return PRIMITIVE_TYPES[t][1] == "c"


def is_integral(t: str) -> bool:
    return PRIMITIVE_TYPES[t][1] in ("s", "u")


def is_signed_integral(t: str) -> bool:
    return PRIMITIVE_TYPES[t][1] == "s"


def is_unsigned_integral(t: str) -> bool:
    return PRIMITIVE_TYPES[t][1] == "u"


def is_array_type(t: str) -> bool:
    return PRIMITIVE_TYPES[t][1] not in ("token", "opaque")


#: is_array_type of every known element type
_ARRAY_TYPES = {t: is_array_type(t) for t in PRIMITIVE_TYPES}


def is_f8(t: str) -> bool:
    return t.startswith("f8")


def byte_width(t: str) -> int:
    """Bytes per element as XLA stores an unpacked element (s4 -> 1)."""
    bits = bit_width(t)
    return max(1, (bits + 7) // 8) if bits else 0


# ---------------------------------------------------------------------------
# Layout
# ---------------------------------------------------------------------------

#: Tile dimension that combines dimensions (printed as '*').
COMBINE_DIMENSION = -(2**63)
#: Size of an unbounded dynamic dimension (printed as '?').
UNBOUNDED_SIZE = -(2**63)


class Layout:
    """A dense layout: minor_to_major plus XLA's optional layout extras.

    Printed as ``{minor_to_major:T(tiles)L(n)#(t)*(t)E(n)S(n)SC(..)P(shape)M(n)}``
    with every empty extra omitted, exactly like ``xla::Layout::Print``.
    """

    __slots__ = (
        "minor_to_major", "tiles", "tail_padding_alignment", "index_type",
        "pointer_type", "element_size_in_bits", "memory_space", "split_configs",
        "physical_shape", "dynamic_metadata_prefix_bytes", "_str", "_key",
    )

    def __init__(
        self,
        minor_to_major: Sequence[int],
        tiles: Sequence[Sequence[int]] = (),
        tail_padding_alignment: int = 1,
        index_type: str | None = None,
        pointer_type: str | None = None,
        element_size_in_bits: int = 0,
        memory_space: int = 0,
        split_configs: Sequence[tuple[int, tuple[int, ...]]] = (),
        physical_shape: "Shape | None" = None,
        dynamic_metadata_prefix_bytes: int = 0,
    ):
        self.minor_to_major = tuple(minor_to_major)
        self.tiles = tuple(tuple(t) for t in tiles)
        self.tail_padding_alignment = tail_padding_alignment
        self.index_type = index_type
        self.pointer_type = pointer_type
        self.element_size_in_bits = element_size_in_bits
        self.memory_space = memory_space
        self.split_configs = tuple((d, tuple(ix)) for d, ix in split_configs)
        self.physical_shape = physical_shape
        self.dynamic_metadata_prefix_bytes = dynamic_metadata_prefix_bytes
        self._str: str | None = None
        self._key = (
            self.minor_to_major, self.tiles, tail_padding_alignment, index_type,
            pointer_type, element_size_in_bits, memory_space, self.split_configs,
            None if physical_shape is None else str(physical_shape),
            dynamic_metadata_prefix_bytes,
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Layout) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return f"Layout({self})"

    def __str__(self) -> str:
        if self._str is None:
            self._str = self._format()
        return self._str

    @property
    def has_extras(self) -> bool:
        """True if anything beyond minor_to_major is set (tiles, E(), S() ...)."""
        return self._key[1:] != ((), 1, None, None, 0, 0, (), None, 0)

    def _format(self) -> str:
        parts = [",".join(str(d) for d in self.minor_to_major)]
        extra: list[str] = []
        if self.tiles:
            extra.append("T" + "".join(
                "(" + ",".join("*" if d == COMBINE_DIMENSION else str(d) for d in t) + ")"
                for t in self.tiles))
        if self.tail_padding_alignment != 1:
            extra.append(f"L({self.tail_padding_alignment})")
        if self.index_type is not None:
            extra.append(f"#({self.index_type})")
        if self.pointer_type is not None:
            extra.append(f"*({self.pointer_type})")
        if self.element_size_in_bits:
            extra.append(f"E({self.element_size_in_bits})")
        if self.memory_space:
            extra.append(f"S({self.memory_space})")
        if self.split_configs:
            extra.append("SC" + "".join(
                f"({d}:{','.join(str(i) for i in ix)})" for d, ix in self.split_configs))
        if self.physical_shape is not None:
            extra.append(f"P({self.physical_shape})")
        if self.dynamic_metadata_prefix_bytes:
            extra.append(f"M({self.dynamic_metadata_prefix_bytes})")
        if extra:
            parts.append(":" + "".join(extra))
        return "{" + "".join(parts) + "}"

    def with_minor_to_major(self, minor_to_major: Sequence[int]) -> "Layout":
        """The same layout extras with a different dimension order."""
        return Layout(
            minor_to_major, self.tiles, self.tail_padding_alignment,
            self.index_type, self.pointer_type, self.element_size_in_bits,
            self.memory_space, self.split_configs, self.physical_shape,
            self.dynamic_metadata_prefix_bytes,
        )


@lru_cache(maxsize=None)
def default_layout(rank: int) -> Layout:
    """XLA's default (descending, row-major) layout: {rank-1,...,1,0}."""
    return Layout(tuple(range(rank - 1, -1, -1)))


# ---------------------------------------------------------------------------
# Shape
# ---------------------------------------------------------------------------


class Shape:
    """An array, tuple, token/opaque or buffer shape.

    Arrays: ``element_type`` (type name), ``dimensions`` (tuple of ints),
    ``dynamic`` (tuple of bools, or ``None`` when fully static) and ``layout``
    (``None`` when the text had none).  Tuples: ``tuple_shapes``.  A buffer
    shape ``b(...)`` wraps its array shape in ``buffer_of``.
    """

    __slots__ = (
        "element_type", "dimensions", "dynamic", "layout", "tuple_shapes",
        "buffer_of", "_str", "_str_nolayout", "_key", "_hash", "_array",
    )

    def __init__(
        self,
        element_type: str,
        dimensions: Sequence[int] = (),
        layout: Layout | None = None,
        dynamic: Sequence[bool] | None = None,
        tuple_shapes: Sequence["Shape"] | None = None,
        buffer_of: "Shape | None" = None,
    ):
        self.element_type = element_type
        self.dimensions = tuple(dimensions)
        self.dynamic = tuple(dynamic) if dynamic is not None and any(dynamic) else None
        self.layout = layout
        # Element shapes are interned, so a tuple's key holds them (compared
        # by identity first, hashed from their cached hash): building,
        # hashing and interning a shape nested N deep costs O(N), not O(N^2),
        # and never recurses.
        self.tuple_shapes = (tuple(intern(s) for s in tuple_shapes)
                             if tuple_shapes is not None else None)
        self.buffer_of = intern(buffer_of) if buffer_of is not None else None
        # is_array, worked out once (None: an unknown element type, which
        # is_array reports as it always did)
        self._array = (self.tuple_shapes is None and self.buffer_of is None
                       and _ARRAY_TYPES.get(element_type))
        self._str: str | None = None
        self._str_nolayout: str | None = None
        if self.tuple_shapes is not None:
            self._key = ("(", self.tuple_shapes)
        elif buffer_of is not None:
            self._key = ("b", self.buffer_of)
        else:
            self._key = (element_type, self.dimensions, self.dynamic, layout)
        self._hash = hash(self._key)

    # -- constructors -----------------------------------------------------
    @staticmethod
    def array(element_type: str, dimensions: Sequence[int],
              layout: Layout | Sequence[int] | None = "default",  # type: ignore[assignment]
              dynamic: Sequence[bool] | None = None) -> "Shape":
        """An array shape; ``layout`` may be a Layout, a minor_to_major list,
        ``None`` (no layout) or ``"default"`` (descending)."""
        dims = tuple(dimensions)
        if isinstance(layout, str):
            layout = default_layout(len(dims)) if is_array_type(element_type) else None
        elif layout is not None and not isinstance(layout, Layout):
            layout = Layout(layout)
        return intern(Shape(element_type, dims, layout, dynamic))

    @staticmethod
    def tuple(shapes: Iterable["Shape"]) -> "Shape":
        return intern(Shape("tuple", (), None, None, tuple(shapes)))

    @staticmethod
    def token() -> "Shape":
        return intern(Shape("token"))

    # -- identity ---------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, Shape) and self._hash == other._hash
                                 and self._key == other._key)

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self):
        # Rebuilt through the constructor: the cached hash is per process.
        return (_rebuild_shape, (self.element_type, self.dimensions, self.layout,
                                 self.dynamic, self.tuple_shapes, self.buffer_of))

    def __repr__(self) -> str:
        return f"Shape({self})"

    def __str__(self) -> str:
        if self._str is None:
            self._str = self._format(True)
        return self._str

    def to_string(self, with_layout: bool = True) -> str:
        if with_layout:
            return str(self)
        if self._str_nolayout is None:
            self._str_nolayout = self._format(False)
        return self._str_nolayout

    def _format(self, with_layout: bool) -> str:
        if self.tuple_shapes is not None:
            _format_nested_first(self, with_layout)
            if not self.tuple_shapes:
                return "()"
            out = []
            for i, s in enumerate(self.tuple_shapes):
                if i == 0:
                    pass
                elif i % 5 == 0:
                    out.append(f", /*index={i}*/")
                else:
                    out.append(", ")
                out.append(s.to_string(with_layout))
            return "(" + "".join(out) + ")"
        if self.buffer_of is not None:
            return "b(" + self.buffer_of.to_string(with_layout) + ")"
        t = self.element_type
        if not self.dimensions:
            text = t + "[]"
        else:
            if self.dynamic is None:
                dims = ",".join(str(d) for d in self.dimensions)
            else:
                dims = ",".join(
                    ("?" if d == UNBOUNDED_SIZE else f"<={d}") if dyn else str(d)
                    for d, dyn in zip(self.dimensions, self.dynamic))
            text = f"{t}[{dims}]"
        if with_layout and self.layout is not None and is_array_type(t):
            ls = str(self.layout)
            if self.dimensions or ls != "{}":
                text += ls
        return text

    # -- queries ----------------------------------------------------------
    @property
    def is_tuple(self) -> bool:
        return self.tuple_shapes is not None

    @property
    def is_buffer(self) -> bool:
        return self.buffer_of is not None

    @property
    def is_array(self) -> bool:
        a = self._array
        if a is None:
            return (self.tuple_shapes is None and self.buffer_of is None
                    and is_array_type(self.element_type))
        return a

    @property
    def is_token(self) -> bool:
        return self.element_type == "token"

    @property
    def rank(self) -> int:
        return len(self.dimensions)

    @property
    def is_scalar(self) -> bool:
        return self.is_array and not self.dimensions

    @property
    def is_dynamic(self) -> bool:
        return self.dynamic is not None

    def is_dynamic_dimension(self, i: int) -> bool:
        return self.dynamic is not None and self.dynamic[i]

    @property
    def element_count(self) -> int:
        return math.prod(self.dimensions) if self.is_array else 0

    @property
    def has_layout(self) -> bool:
        stack = [self]
        while stack:
            s = stack.pop()
            if s.tuple_shapes is not None:
                stack.extend(s.tuple_shapes)
            elif s.buffer_of is not None:
                stack.append(s.buffer_of)
            elif s.layout is None and is_array_type(s.element_type):
                return False
        return True

    @property
    def minor_to_major(self) -> tuple[int, ...]:
        return (self.layout or default_layout(len(self.dimensions))).minor_to_major

    def byte_size(self, pointer_size: int = 8) -> int:
        """Bytes of this shape's buffer (tuples: the pointer table only),
        like ``ShapeUtil::ByteSizeOf`` (sub-byte types packed per
        ``E()`` element size, otherwise one byte per element)."""
        if self.tuple_shapes is not None:
            return pointer_size * len(self.tuple_shapes)
        if self.buffer_of is not None:
            return self.buffer_of.byte_size(pointer_size)
        if not is_array_type(self.element_type):
            return 0
        n = self.element_count
        bits = bit_width(self.element_type)
        if self.layout is not None and self.layout.element_size_in_bits:
            return (n * self.layout.element_size_in_bits + 7) // 8
        if bits < 8:
            return n
        return n * bits // 8

    def leaves(self, index: tuple[int, ...] = ()) -> list[tuple[tuple[int, ...], "Shape"]]:
        """(shape index, leaf array shape) pairs in depth-first order
        (iterative: any nesting depth)."""
        out: list[tuple[tuple[int, ...], Shape]] = []
        stack = [(index, self)]
        while stack:
            idx, s = stack.pop()
            if s.tuple_shapes is None:
                out.append((idx, s))
            else:
                stack.extend((idx + (i,), e) for i, e in reversed(list(enumerate(s.tuple_shapes))))
        return out

    def subshape(self, index: Sequence[int]) -> "Shape":
        s = self
        for i in index:
            if s.tuple_shapes is None or not 0 <= i < len(s.tuple_shapes):
                raise IndexError(f"shape index {{{','.join(map(str, index))}}} invalid for {self}")
            s = s.tuple_shapes[i]
        return s

    # -- derived shapes ----------------------------------------------------
    def with_layout(self, layout: Layout | Sequence[int] | None) -> "Shape":
        if layout is not None and not isinstance(layout, Layout):
            layout = Layout(layout)
        return intern(Shape(self.element_type, self.dimensions, layout,
                            self.dynamic))

    def with_default_layout(self) -> "Shape":
        return map_array_leaves(self, lambda s: s.with_layout(default_layout(len(s.dimensions)))
                                if is_array_type(s.element_type) else s)

    def with_default_layout_if_missing(self) -> "Shape":
        if self.has_layout:
            return self
        return map_array_leaves(self, lambda s: s if s.layout is not None or not is_array_type(
            s.element_type) else s.with_layout(default_layout(len(s.dimensions))))

    def with_element_type(self, element_type: str) -> "Shape":
        return intern(Shape(element_type, self.dimensions, self.layout, self.dynamic))

    def with_dimensions(self, dimensions: Sequence[int], layout: Layout | Sequence[int] | None | str = "default") -> "Shape":
        return Shape.array(self.element_type, dimensions, layout)

    def without_layout(self) -> "Shape":
        return map_array_leaves(
            self, lambda s: intern(Shape(s.element_type, s.dimensions, None, s.dynamic)),
            buffers=False)


_INTERN: dict[tuple, Shape] = {}


def _rebuild_shape(element_type, dimensions, layout, dynamic, tuple_shapes, buffer_of) -> Shape:
    return intern(Shape(element_type, dimensions, layout, dynamic, tuple_shapes, buffer_of))


def map_array_leaves(shape: Shape, fn, buffers: bool = True) -> Shape:
    """``shape`` with every non-tuple element replaced by ``fn(element)``
    (inside ``b(...)`` too unless ``buffers`` is false), the tuple structure
    rebuilt; iterative, so any nesting depth works."""
    done: dict[int, Shape] = {}
    stack = [(shape, False)]
    while stack:
        s, ready = stack.pop()
        if id(s) in done:
            continue
        if s.tuple_shapes is not None:
            if ready:
                done[id(s)] = Shape.tuple(done[id(e)] for e in s.tuple_shapes)
            else:
                stack.append((s, True))
                stack.extend((e, False) for e in s.tuple_shapes if id(e) not in done)
        elif s.buffer_of is not None and buffers:
            done[id(s)] = intern(Shape("buffer", buffer_of=fn(s.buffer_of)))
        else:
            done[id(s)] = fn(s)
    return done[id(shape)]


def _format_nested_first(shape: Shape, with_layout: bool) -> None:
    """Fill the text caches of ``shape``'s nested tuple/buffer elements
    innermost first, so formatting a deeply nested shape never recurses
    deeper than one level."""
    attr = "_str" if with_layout else "_str_nolayout"
    stack = [(shape, False)]
    while stack:
        s, ready = stack.pop()
        if ready:
            if s is not shape and getattr(s, attr) is None:
                setattr(s, attr, s._format(with_layout))
            continue
        kids = s.tuple_shapes if s.tuple_shapes is not None else (
            (s.buffer_of,) if s.buffer_of is not None else ())
        pending = [k for k in kids if (k.tuple_shapes is not None or k.buffer_of is not None)
                   and getattr(k, attr) is None]
        if pending:
            stack.append((s, True))
            stack.extend((k, False) for k in pending)


def intern(shape: Shape) -> Shape:
    """Return the canonical instance of an equal shape."""
    got = _INTERN.get(shape._key)
    if got is None:
        _INTERN[shape._key] = shape
        return shape
    return got


# ---------------------------------------------------------------------------
# Shape comparisons (ShapeUtil)
# ---------------------------------------------------------------------------


def compatible(a: Shape, b: Shape) -> bool:
    """``ShapeUtil::Compatible``: same structure, types and dimensions;
    layouts and dynamic-dimension flags (``<=``) ignored."""
    stack = [(a, b)]
    while stack:
        a, b = stack.pop()
        if a is b:
            continue
        if a.tuple_shapes is not None or b.tuple_shapes is not None:
            if (a.tuple_shapes is None or b.tuple_shapes is None
                    or len(a.tuple_shapes) != len(b.tuple_shapes)):
                return False
            stack.extend(zip(a.tuple_shapes, b.tuple_shapes))
        elif a.buffer_of is not None or b.buffer_of is not None:
            if a.buffer_of is None or b.buffer_of is None:
                return False
            stack.append((a.buffer_of, b.buffer_of))
        elif a.element_type != b.element_type or a.dimensions != b.dimensions:
            return False
    return True


def compatible_ignoring_element_type(a: Shape, b: Shape) -> bool:
    if a.tuple_shapes is not None or b.tuple_shapes is not None:
        if a.tuple_shapes is None or b.tuple_shapes is None:
            return False
        return len(a.tuple_shapes) == len(b.tuple_shapes) and all(
            compatible_ignoring_element_type(x, y)
            for x, y in zip(a.tuple_shapes, b.tuple_shapes))
    return a.dimensions == b.dimensions


def equal_ignoring_element_type(a: Shape, b: Shape) -> bool:
    return (a.dimensions == b.dimensions and a.dynamic == b.dynamic
            and a.layout == b.layout and a.is_array and b.is_array)


# ---------------------------------------------------------------------------
# Index arithmetic (IndexUtil)
# ---------------------------------------------------------------------------


def _linear_index_physical(dims: Sequence[int], minor_to_major: Sequence[int],
                           index: Sequence[int]) -> int:
    """``IndexUtil::MultidimensionalIndexToLinearIndex`` (physical order)."""
    linear = 0
    scale = 1
    for d in minor_to_major:
        linear += index[d] * scale
        scale *= dims[d]
    return linear


def _multi_index_row_major(dims: Sequence[int], linear: int) -> list[int]:
    """Inverse of the logical (dim-0-major) linear index."""
    index = [0] * len(dims)
    for d in range(len(dims) - 1, -1, -1):
        size = dims[d]
        if size:
            index[d] = linear % size
            linear //= size
    return index


def _linear_row_major(dims: Sequence[int], index: Sequence[int]) -> int:
    linear = 0
    for d, size in enumerate(dims):
        linear = linear * size + index[d]
    return linear


def reshape_is_bitcast(input_shape: Shape, output_shape: Shape,
                       ignore_element_type: bool = False) -> bool:
    """``ShapeUtil::ReshapeIsBitcast``: does reshaping ``input_shape`` into
    ``output_shape`` leave every element at the same physical position?

    Both shapes must be arrays with layouts.  Like XLA, only
    ``minor_to_major`` matters (tiles are not consulted), zero-element shapes
    are trivially bitcasts, and the check is done on *unit indices* in both
    directions: an index with a single 1 in a dimension of size > 1 must map
    to the same physical offset in the other shape.
    """
    if not ignore_element_type and input_shape.element_type != output_shape.element_type:
        return False
    n = input_shape.element_count
    if n != output_shape.element_count:
        return False
    if n == 0:
        return True
    return (_unit_indices_preserved(input_shape, output_shape)
            and _unit_indices_preserved(output_shape, input_shape))


def _unit_indices_preserved(a: Shape, b: Shape) -> bool:
    adims, bdims = a.dimensions, b.dimensions
    am2m, bm2m = a.minor_to_major, b.minor_to_major
    for dim, size in enumerate(adims):
        if size <= 1:
            continue
        unit = [0] * len(adims)
        unit[dim] = 1
        logical = _linear_row_major(adims, unit)
        bindex = _multi_index_row_major(bdims, logical)
        if (_linear_index_physical(adims, am2m, unit)
                != _linear_index_physical(bdims, bm2m, bindex)):
            return False
    return True


def compose_permutations(p1: Sequence[int], p2: Sequence[int]) -> tuple[int, ...]:
    """``ComposePermutations(p1, p2)[i] = p1[p2[i]]``."""
    return tuple(p1[i] for i in p2)


def inverse_permutation(p: Sequence[int]) -> tuple[int, ...]:
    out = [0] * len(p)
    for i, v in enumerate(p):
        out[v] = i
    return tuple(out)


def transpose_is_bitcast(input_shape: Shape, output_shape: Shape,
                         dimension_mapping: Sequence[int],
                         ignore_element_type: bool = False) -> bool:
    """``ShapeUtil::TransposeIsBitcast``: the transpose with the given
    permutation only relabels dimensions (minor_to_major composes)."""
    if not ignore_element_type and input_shape.element_type != output_shape.element_type:
        return False
    return (compose_permutations(dimension_mapping, output_shape.minor_to_major)
            == tuple(input_shape.minor_to_major))


def is_permutation(p: Sequence[int], rank: int) -> bool:
    return len(p) == rank and sorted(p) == list(range(rank))


def is_descending_layout(shape: Shape) -> bool:
    """True if the array layout is the default {rank-1,...,0} (ignores extras)."""
    return tuple(shape.minor_to_major) == tuple(range(shape.rank - 1, -1, -1))


def is_monotonic_with_dim0_major(shape: Shape) -> bool:
    """``LayoutUtil::IsMonotonicWithDim0Major``."""
    return is_descending_layout(shape)


def make_shape_with_descending_layout_and_same_physical_layout(shape: Shape) -> Shape:
    """``ShapeUtil::MakeShapeWithDescendingLayoutAndSamePhysicalLayout``:
    dimensions reordered major-to-minor, default layout; like XLA, the
    tiles, element size, tail padding and memory space are kept (they
    describe the same physical layout), other layout fields are not."""
    m2m = shape.minor_to_major
    dims = [shape.dimensions[d] for d in reversed(m2m)]
    layout = default_layout(len(dims))
    old = shape.layout
    if old is not None and old.has_extras:
        layout = Layout(layout.minor_to_major, old.tiles, old.tail_padding_alignment,
                        element_size_in_bits=old.element_size_in_bits,
                        memory_space=old.memory_space)
    dyn = None
    if shape.dynamic is not None:
        dyn = [shape.dynamic[d] for d in reversed(m2m)]
    return intern(Shape(shape.element_type, dims, layout, dyn))


#: Sub-byte non-pred types (XLA's primitive_util::IsSubByteNonPredType).
SUB_BYTE_TYPES = frozenset(t for t, (bits, kind) in PRIMITIVE_TYPES.items()
                           if 0 < bits < 8 and kind != "pred")


def with_element_size_in_bits(layout: Layout, bits: int) -> Layout:
    return Layout(layout.minor_to_major, layout.tiles, layout.tail_padding_alignment,
                  layout.index_type, layout.pointer_type, bits, layout.memory_space,
                  layout.split_configs, layout.physical_shape, layout.dynamic_metadata_prefix_bytes)


def change_element_type(shape: Shape, element_type: str) -> Shape:
    """``ShapeUtil::ChangeElementType``: the layout stays; its element size
    in bits is cleared unless the new type is sub-byte."""
    if shape.tuple_shapes is not None:
        return Shape.tuple(change_element_type(s, element_type) for s in shape.tuple_shapes)
    out = intern(Shape(element_type, shape.dimensions, shape.layout, shape.dynamic))
    if out.layout is not None and out.layout.element_size_in_bits \
            and element_type not in SUB_BYTE_TYPES:
        out = out.with_layout(with_element_size_in_bits(out.layout, 0))
    return out


def dims_physical_major_to_minor(shape: Shape) -> list[int]:
    """The logical dimension numbers from most major to most minor."""
    return list(reversed(shape.minor_to_major))


def byte_size_of_elements(shape: Shape) -> int:
    return shape.byte_size()


# ---------------------------------------------------------------------------
# Shape text parsing (used by the parser for the SHAPE token, cached)
# ---------------------------------------------------------------------------

_ARRAY_RE = re.compile(
    r"(?P<t>" + TYPE_NAME_RE + r")\[(?P<dims>[^\]]*)\](?:(?P<layout>\{.*\}))?\Z",
    re.S)


class ShapeSyntaxError(ValueError):
    """Malformed shape text; ``offset`` is relative to the shape's start."""

    def __init__(self, message: str, offset: int = 0):
        super().__init__(message)
        self.offset = offset


@lru_cache(maxsize=65536)
def parse_array_shape(text: str, fill_layout: bool = True) -> Shape:
    """Parse one array shape token such as ``f32[2,<=3]{1,0:T(8,128)}``."""
    m = _ARRAY_RE.match(text)
    if not m:
        raise ShapeSyntaxError(f"malformed shape '{text}'")
    t = canonical_type(m.group("t"))
    dims_text = m.group("dims").strip()
    dims: list[int] = []
    dyn: list[bool] = []
    if dims_text:
        for part in dims_text.split(","):
            p = part.strip()
            if p == "?":
                dims.append(UNBOUNDED_SIZE)
                dyn.append(True)
                continue
            is_dyn = p.startswith("<=")
            if is_dyn:
                p = p[2:].strip()
            try:
                v = int(p)
            except ValueError:
                raise ShapeSyntaxError(
                    f"expects integer dimension size, saw '{part.strip()}'",
                    m.start("dims")) from None
            if v < 0:
                raise ShapeSyntaxError(f"invalid dimension size {v}", m.start("dims"))
            dims.append(v)
            dyn.append(is_dyn)
    layout = None
    layout_text = m.group("layout")
    if layout_text is not None:
        layout = parse_layout(layout_text)
        if len(layout.minor_to_major) != len(dims) and is_array_type(t):
            raise ShapeSyntaxError(
                f"Dimensions size is {len(dims)}, but minor to major size is "
                f"{len(layout.minor_to_major)}.", m.start("layout"))
        if layout.physical_shape is not None:
            raise ShapeSyntaxError(
                "Layout has physical shape, but is not for a sparse array: "
                f"{layout}", m.start("layout"))
        if sorted(layout.minor_to_major) != list(range(len(dims))):
            raise ShapeSyntaxError(
                f"layout {layout} is not a permutation of the {len(dims)} dimensions",
                m.start("layout"))
    elif (fill_layout or not dims) and is_array_type(t):
        layout = default_layout(len(dims))
    return intern(Shape(t, dims, layout, dyn if any(dyn) else None))


_LAYOUT_ITEM_RE = re.compile(
    r"\s*(?:(?P<D>D)\((?P<dv>[^)]*)\)|(?P<T>T)(?P<tv>(?:\([^)]*\))+)|L\((?P<L>-?\d+)\)"
    r"|#\((?P<idx>\w+)\)|\*\((?P<ptr>\w+)\)|E\((?P<E>-?\d+)\)|S\((?P<S>-?\d+)\)"
    r"|SC(?P<SC>(?:\([^)]*\))+)|P\((?P<P>.*)\)|M\((?P<M>-?\d+)\))")


@lru_cache(maxsize=4096)
def parse_layout(text: str) -> Layout:
    """Parse ``{1,0:T(8,128)(2,1)E(4)S(1)}`` (braces included)."""
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise ShapeSyntaxError(f"malformed layout '{text}'")
    body = body[1:-1]
    m2m_text, _, extras = body.partition(":")
    m2m: list[int] = []
    if m2m_text.strip():
        for p in m2m_text.split(","):
            try:
                m2m.append(int(p))
            except ValueError:
                raise ShapeSyntaxError(f"expects integer in layout, saw '{p.strip()}'") from None
    kw: dict = {}
    pos = 0
    extras = extras.rstrip()
    while pos < len(extras):
        m = _LAYOUT_ITEM_RE.match(extras, pos)
        if not m or m.end() == pos:
            bad = extras[pos:].strip()
            if bad.startswith("D"):
                raise ShapeSyntaxError("expected a DimLevelType abbreviation (D, C, or S)")
            raise ShapeSyntaxError(f"unexpected '{bad}' in layout {text}")
        pos = m.end()
        if m.group("D"):
            for item in m.group("dv").split(","):
                it = item.strip().rstrip("+~")
                if it and it not in ("D", "C", "S", "H"):
                    raise ShapeSyntaxError("expected a DimLevelType abbreviation (D, C, or S)")
        elif m.group("T"):
            tiles = []
            for t in re.findall(r"\(([^)]*)\)", m.group("tv")):
                dims = []
                for d in t.split(","):
                    d = d.strip()
                    if not d:
                        continue
                    if d != "*" and not re.fullmatch(r"\d+", d):
                        raise ShapeSyntaxError(f"expects a tile dimension (integer or '*'), "
                                               f"saw '{d}' in layout {text}")
                    dims.append(COMBINE_DIMENSION if d == "*" else int(d))
                tiles.append(tuple(dims))
            kw["tiles"] = tiles
        elif m.group("L") is not None:
            kw["tail_padding_alignment"] = int(m.group("L"))
        elif m.group("idx") is not None:
            kw["index_type"] = m.group("idx")
        elif m.group("ptr") is not None:
            kw["pointer_type"] = m.group("ptr")
        elif m.group("E") is not None:
            kw["element_size_in_bits"] = int(m.group("E"))
        elif m.group("S") is not None:
            kw["memory_space"] = int(m.group("S"))
        elif m.group("SC") is not None:
            scs = []
            for sc in re.findall(r"\(([^)]*)\)", m.group("SC")):
                d, _, rest = sc.partition(":")
                scs.append((int(d), tuple(int(x) for x in rest.split(",") if x.strip())))
            kw["split_configs"] = scs
        elif m.group("P") is not None:
            kw["physical_shape"] = parse_array_shape(m.group("P").strip())
        elif m.group("M") is not None:
            kw["dynamic_metadata_prefix_bytes"] = int(m.group("M"))
    return Layout(m2m, **kw)


# ---------------------------------------------------------------------------
# More ShapeUtil: reshape factorisation, layout alignment, bitcast
# decomposition (used by layout assignment, the reshape decomposer and
# layout normalization)
# ---------------------------------------------------------------------------


def common_factors(a: Sequence[int], b: Sequence[int]) -> list[tuple[int, int]]:
    """XLA's ``CommonFactors(a, b)``: the boundaries (i, j) such that
    prod(a[:i]) == prod(b[:j]), from (0, 0) to (len(a), len(b)).  Equal
    prefixes give one boundary per dimension; zero-sized tails give one
    group."""
    a, b = list(a), list(b)
    if math.prod(a) != math.prod(b):
        raise ValueError(f"CommonFactors: products differ: {a} vs {b}")
    if a == b:
        return [(i, i) for i in range(len(a) + 1)]
    bounds: list[tuple[int, int]] = []
    i = j = 0
    prior_i = prior_j = -1
    while i < len(a) and j < len(b) and a[i] == b[j]:
        prior_i, prior_j = i, j
        bounds.append((i, j))
        i += 1
        j += 1
    if math.prod(a[i:]) != math.prod(b[j:]):
        return [(0, 0), (len(a), len(b))]
    if math.prod(a[i:]) == 0:
        bounds.append((i, j))
        bounds.append((len(a), len(b)))
        return bounds
    pa = pb = 1
    while True:
        if pa == pb and (i > prior_i or j > prior_j):
            prior_i, prior_j = i, j
            bounds.append((i, j))
            continue
        in_i, in_j = i < len(a), j < len(b)
        if not (in_i or in_j):
            break
        next_a = pa < pb or (in_i and (not in_j or (pa == pb and a[i] <= b[j])))
        next_b = pb < pa or (in_j and (not in_i or (pb == pa and b[j] <= a[i])))
        if next_a:
            pa *= a[i]
            i += 1
        if next_b:
            pb *= b[j]
            j += 1
    return bounds


def dimensions_unmodified_by_reshape(input_shape: Shape, output_shape: Shape
                                     ) -> list[tuple[int, int]]:
    """``ShapeUtil::DimensionsUnmodifiedByReshape``: (input dim, output dim)
    pairs that a reshape leaves alone (common factors of rank 1)."""
    cf = common_factors(input_shape.dimensions, output_shape.dimensions)
    out = [cf[k] for k in range(len(cf) - 1)
           if cf[k + 1][0] - cf[k][0] == 1 and cf[k + 1][1] - cf[k][1] == 1]
    return out


def has_degenerate_dimensions(shape: Shape) -> bool:
    return 1 in shape.dimensions


def delete_dimensions(shape: Shape, dims: Iterable[int]) -> Shape:
    """``Shape::DeleteDimensions``: drop dimensions, renumbering the layout."""
    drop = sorted(set(dims))
    keep = [d for d in range(shape.rank) if d not in drop]
    new_dims = [shape.dimensions[d] for d in keep]
    dyn = [shape.dynamic[d] for d in keep] if shape.dynamic is not None else None
    layout = None
    if shape.layout is not None:
        renumber = {d: k for k, d in enumerate(keep)}
        m2m = [renumber[d] for d in shape.layout.minor_to_major if d in renumber]
        layout = shape.layout.with_minor_to_major(m2m)
    return intern(Shape(shape.element_type, new_dims, layout, dyn))


def drop_degenerate_dimensions(shape: Shape) -> Shape:
    """``ShapeUtil::DropDegenerateDimensions``."""
    return delete_dimensions(shape, [d for d, n in enumerate(shape.dimensions) if n == 1])


def make_shape_with_descending_layout(element_type: str, dimensions: Sequence[int]) -> Shape:
    return Shape.array(element_type, dimensions)


def permute(values: Sequence, permutation: Sequence[int]) -> list:
    """XLA's ``Permute(input, permutation)``: output[i] = input[permutation[i]]."""
    return [values[p] for p in permutation]


def permute_dimensions(permutation: Sequence[int], shape: Shape) -> Shape:
    """``ShapeUtil::PermuteDimensions``: dimensions permuted, and (if the
    shape has a layout) a layout that makes the transpose a bitcast."""
    dims = permute(shape.dimensions, permutation)
    dyn = permute(shape.dynamic, permutation) if shape.dynamic is not None else None
    layout = None
    if shape.layout is not None:
        m2m = compose_permutations(inverse_permutation(permutation), shape.layout.minor_to_major)
        layout = shape.layout.with_minor_to_major(m2m)
    return intern(Shape(shape.element_type, dims, layout, dyn))


def permute_dimensions_ignoring_layout(permutation: Sequence[int], shape: Shape) -> Shape:
    """``ShapeUtil::PermuteDimensionsIgnoringLayout``: the dimensions
    permuted, the layout left exactly as it was (same minor_to_major)."""
    dims = permute(shape.dimensions, permutation)
    dyn = permute(shape.dynamic, permutation) if shape.dynamic is not None else None
    return intern(Shape(shape.element_type, dims, shape.layout, dyn))


def deduce_transpose_dimensions_for_bitcast(input_shape: Shape, output_shape: Shape
                                            ) -> tuple[int, ...] | None:
    """``ShapeUtil::DeduceTransposeDimensionsForBitcast``: the transpose
    permutation that makes ``input -> output`` a bitcast, or None."""
    if input_shape.rank != output_shape.rank:
        return None
    perm = compose_permutations(input_shape.minor_to_major,
                                inverse_permutation(output_shape.minor_to_major))
    if tuple(permute(input_shape.dimensions, perm)) != tuple(output_shape.dimensions):
        return None
    return perm


def is_reshape_or_transpose_bitcast(a: Shape, b: Shape, ignore_element_type: bool = False) -> bool:
    """``ShapeUtil::IsReshapeOrTransposeBitcast``."""
    if not ignore_element_type and a.element_type != b.element_type:
        return False
    if a.dimensions == b.dimensions and a.dynamic == b.dynamic and a.layout == b.layout:
        return True
    if reshape_is_bitcast(a, b, ignore_element_type=True):
        return True
    dims = deduce_transpose_dimensions_for_bitcast(a, b)
    return dims is not None and transpose_is_bitcast(b, a, dims, ignore_element_type=True)


class BitcastDecompositionReshape:
    """The bitcast is a reshape (``ShapeUtil::BitcastDecompositionReshape``)."""

    def __repr__(self) -> str:
        return "BitcastDecompositionReshape()"


class BitcastDecompositionTranspose:
    """The bitcast is a transpose with ``transpose_dims``."""

    def __init__(self, transpose_dims: Sequence[int]):
        self.transpose_dims = tuple(transpose_dims)

    def __repr__(self) -> str:
        return f"BitcastDecompositionTranspose({list(self.transpose_dims)})"


class BitcastDecompositionTrt:
    """Transpose, reshape, transpose (``BitcastDecompositionTrt``)."""

    def __init__(self, transpose1_dims, transpose1_shape, reshape_shape, transpose2_dims):
        self.transpose1_dims = tuple(transpose1_dims)
        self.transpose1_shape = transpose1_shape
        self.reshape_shape = reshape_shape
        self.transpose2_dims = tuple(transpose2_dims)

    def is_transpose1_identity(self) -> bool:
        return list(self.transpose1_dims) == sorted(self.transpose1_dims)

    def is_transpose2_identity(self) -> bool:
        return list(self.transpose2_dims) == sorted(self.transpose2_dims)

    def __repr__(self) -> str:
        return (f"BitcastDecompositionTrt({list(self.transpose1_dims)}, {self.transpose1_shape}, "
                f"{self.reshape_shape}, {list(self.transpose2_dims)})")


def is_decomposable_bitcast(input_shape: Shape, output_shape: Shape) -> bool:
    return (input_shape.has_layout and output_shape.has_layout
            and input_shape.element_count == output_shape.element_count)


def decompose_bitcast_to_trt(input_shape: Shape, output_shape: Shape) -> BitcastDecompositionTrt | None:
    """``ShapeUtil::DecomposeBitcastToTrt``."""
    if not is_decomposable_bitcast(input_shape, output_shape):
        return None
    t1_shape = make_shape_with_descending_layout_and_same_physical_layout(input_shape)
    r_shape = make_shape_with_descending_layout_and_same_physical_layout(output_shape)
    rev_in = tuple(range(input_shape.rank - 1, -1, -1))
    rev_out = tuple(range(output_shape.rank - 1, -1, -1))
    t1_dims = compose_permutations(input_shape.minor_to_major, rev_in)
    t2_dims = compose_permutations(rev_out, inverse_permutation(output_shape.minor_to_major))
    return BitcastDecompositionTrt(t1_dims, t1_shape, r_shape, t2_dims)


def decompose_bitcast(input_shape: Shape, output_shape: Shape):
    """``ShapeUtil::DecomposeBitcast``: a reshape, a transpose, or
    transpose-reshape-transpose; None if the shapes cannot be bitcast."""
    if not is_decomposable_bitcast(input_shape, output_shape):
        return None
    if reshape_is_bitcast(input_shape, output_shape, ignore_element_type=True):
        return BitcastDecompositionReshape()
    dims = deduce_transpose_dimensions_for_bitcast(input_shape, output_shape)
    if dims is not None:
        return BitcastDecompositionTranspose(dims)
    return decompose_bitcast_to_trt(input_shape, output_shape)


@lru_cache(maxsize=65536)
def align_layouts(input_shape: Shape, output_shape: Shape) -> Shape | None:
    """``ShapeUtil::AlignLayouts``: ``output_shape`` with a layout that makes
    reshaping ``input_shape`` into it a bitcast, or None if there is none
    (the input's layout splits a group of dimensions that the reshape
    merges or splits).  Degenerate output dimensions go most major, in
    descending order."""
    if has_degenerate_dimensions(input_shape) or has_degenerate_dimensions(output_shape):
        simple = align_layouts(drop_degenerate_dimensions(input_shape),
                               drop_degenerate_dimensions(output_shape))
        if simple is None:
            return None
        dim_map = [i for i, n in enumerate(output_shape.dimensions) if n != 1]
        layout = [dim_map[d] for d in simple.minor_to_major]
        layout += [i for i in range(output_shape.rank - 1, -1, -1) if output_shape.dimensions[i] == 1]
        return output_shape.with_layout(Layout(layout))
    cf = common_factors(input_shape.dimensions, output_shape.dimensions)
    in_m2m = list(input_shape.minor_to_major)
    input_to_factor = [0] * input_shape.rank
    for pos in range(len(cf) - 1):
        start, end = cf[pos][0], cf[pos + 1][0]
        if start == end:
            continue
        physical = in_m2m.index(start)
        input_to_factor[start] = pos
        for i in range(start + 1, end):
            physical -= 1
            if physical < 0 or in_m2m[physical] != i:
                return None
            input_to_factor[i] = pos
    out_layout: list[int] = []
    input_minor = 0
    while len(out_layout) < output_shape.rank:
        factor = input_to_factor[in_m2m[input_minor]]
        (s_in, s_out), (e_in, e_out) = cf[factor], cf[factor + 1]
        out_layout.extend(range(e_out - 1, s_out - 1, -1))
        input_minor += e_in - s_in
    result = output_shape.with_layout(Layout(out_layout))
    assert reshape_is_bitcast(input_shape, result), (input_shape, result)
    return result


def reorder_logical_dimensions(shape: Shape, permutation: Sequence[int]) -> Shape:
    """``ShapeUtil::ReorderLogicalDimensions``: permute the dimensions and
    their layout entries together (the physical layout is unchanged)."""
    return permute_dimensions(permutation, shape)


def true_num_dimensions(shape: Shape) -> int:
    """``ShapeUtil::TrueNumDimensions``: dimensions of size other than 1."""
    return sum(1 for d in shape.dimensions if d != 1)


def inserted_or_deleted_1_sized_dimensions(shape_pre: Shape, shape_post: Shape
                                           ) -> tuple[list[int], list[int]] | None:
    """``ShapeUtil::InsertedOrDeleted1SizedDimensions``: (deleted input
    dims, inserted output dims) if the reshape only removes/adds size-1
    dimensions, else None."""
    deleted: list[int] = []
    inserted: list[int] = []
    unmodified = dimensions_unmodified_by_reshape(shape_pre, shape_post)
    bounds = [(-1, -1)] + unmodified + [(shape_pre.rank, shape_post.rank)]
    for (pi, po), (ni, no) in zip(bounds, bounds[1:]):
        for d in range(pi + 1, ni):
            if shape_pre.dimensions[d] > 1:
                return None
            deleted.append(d)
        for d in range(po + 1, no):
            if shape_post.dimensions[d] > 1:
                return None
            inserted.append(d)
    return deleted, inserted


def merely_inserts_or_deletes_unit_dims(src: Shape, dst: Shape) -> tuple[list[int], list[int]] | None:
    """``ShapeUtil::InsertedOrDeleted1SizedDimensions``: (deleted dims of
    ``src``, inserted dims of ``dst``) when the reshape ``src -> dst`` only
    adds or removes unit dimensions, else None."""
    i = j = 0
    deleted, inserted = [], []
    a, b = src.dimensions, dst.dimensions
    while i < len(a) or j < len(b):
        if i < len(a) and j < len(b) and a[i] == b[j]:
            i += 1
            j += 1
        elif i < len(a) and a[i] == 1:
            deleted.append(i)
            i += 1
        elif j < len(b) and b[j] == 1:
            inserted.append(j)
            j += 1
        else:
            return None
    return deleted, inserted
