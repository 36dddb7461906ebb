"""Helpers shared by the shape-inference rules: XLA's ``ShapeUtil``
predicates on element types and dimensions, and the error type.

Every rule raises :class:`InferenceError` (a ``ValueError``) with XLA's
wording when its operands are inconsistent, and otherwise returns the result
shape.  Array results get the layout XLA's ``ShapeInference`` would give them
(the operand's for shape-preserving ops, the default one for new shapes);
callers that compare shapes ignore layouts.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..attrs import parse_int_list
from ..shape import (PRIMITIVE_TYPES, UNBOUNDED_SIZE, Shape, bit_width, default_layout,
                     intern, is_array_type)


class InferenceError(ValueError):
    """The operands and attributes of an instruction admit no result shape."""


#: Floating-point types: (overflow exponent, significand width incl. the
#: implicit bit), as ``std::numeric_limits<T>::max_exponent`` / ``digits``;
#: ``primitive_util::HigherPrecisionType`` ranks types by these.
FLOAT_FORMAT: dict[str, tuple[int, int]] = {
    "f64": (1024, 53), "f32": (128, 24), "bf16": (128, 8), "f16": (16, 11),
    "f8e5m2": (16, 3), "f8e4m3": (8, 4), "f8e4m3fn": (9, 4), "f8e4m3fnuz": (8, 4),
    "f8e4m3b11fnuz": (5, 4), "f8e5m2fnuz": (16, 3), "f8e3m4": (4, 5),
    "f8e8m0fnu": (128, 1), "f4e2m1fn": (3, 2), "f6e2m3fn": (3, 4), "f6e3m2fn": (5, 3),
}

COMPLEX_COMPONENT = {"c64": "f32", "c128": "f64"}


def kind(t: str) -> str:
    return PRIMITIVE_TYPES[t][1]


def is_float(t: str) -> bool:
    return PRIMITIVE_TYPES[t][1] == "f"


def is_complex(t: str) -> bool:
    return PRIMITIVE_TYPES[t][1] == "c"


def is_integral(t: str) -> bool:
    return PRIMITIVE_TYPES[t][1] in ("s", "u")


def is_signed(t: str) -> bool:
    """``ShapeUtil::ElementIsSigned``: signed ints, floats and complex."""
    return PRIMITIVE_TYPES[t][1] in ("s", "f", "c")


def is_unsigned_integral(t: str) -> bool:
    return PRIMITIVE_TYPES[t][1] == "u"


def storage_bits(t: str) -> int:
    """``primitive_util::StorageBitWidth`` (PRED is stored in 8 bits)."""
    return 8 if t == "pred" else bit_width(t)


def type_bits(t: str) -> int:
    """``primitive_util::BitWidth`` (PRED counts 1 bit)."""
    return 1 if t == "pred" else bit_width(t)


def _precision_key(t: str) -> tuple:
    comp = COMPLEX_COMPONENT.get(t, t)
    fmt = FLOAT_FORMAT.get(comp)
    return (is_complex(t), fmt[0] if fmt else -1, fmt[1] if fmt else -1,
            type_bits(comp), kind(comp) == "s")


def higher_precision(a: str, b: str) -> str:
    """``primitive_util::HigherPrecisionType``."""
    if a == b:
        return a
    return a if _precision_key(a) > _precision_key(b) else b


def same_type_ignoring_fp(a: str, b: str) -> bool:
    """``ShapeUtil::SameElementTypeIgnoringFpPrecision``."""
    return a == b or (is_float(a) and is_float(b))


def upper(t: str) -> str:
    return t.upper()


def human(s: Shape) -> str:
    """``ShapeUtil::HumanString``: the shape without layout."""
    return s.to_string(False)


def is_unbounded(s: Shape, i: int) -> bool:
    return s.dynamic is not None and s.dynamic[i] and s.dimensions[i] == UNBOUNDED_SIZE


def dims_compatible(a: int, b: int) -> bool:
    """``CompatibleDimensionSizes``: equal, or one is unbounded ('?')."""
    return a == b or a == UNBOUNDED_SIZE or b == UNBOUNDED_SIZE


def same_dimensions(a: Shape, b: Shape) -> bool:
    """``ShapeUtil::SameDimensions`` ('?' matches anything)."""
    if len(a.dimensions) != len(b.dimensions):
        return False
    return all(dims_compatible(x, y) for x, y in zip(a.dimensions, b.dimensions))


def _equal(a: Shape, b: Shape, ignore_type: bool, ignore_fp: bool) -> bool:
    if a.tuple_shapes is not None or b.tuple_shapes is not None:
        if a.tuple_shapes is None or b.tuple_shapes is None:
            return False
        return len(a.tuple_shapes) == len(b.tuple_shapes) and all(
            _equal(x, y, ignore_type, ignore_fp) for x, y in zip(a.tuple_shapes, b.tuple_shapes))
    if a.buffer_of is not None or b.buffer_of is not None:
        return (a.buffer_of is not None and b.buffer_of is not None
                and _equal(a.buffer_of, b.buffer_of, ignore_type, ignore_fp))
    if not ignore_type and a.element_type != b.element_type:
        if not (ignore_fp and is_array_type(a.element_type) and is_array_type(b.element_type)
                and is_float(a.element_type) and is_float(b.element_type)):
            return False
    if is_array_type(a.element_type) != is_array_type(b.element_type):
        return False
    return a.dimensions == b.dimensions


def compatible(a: Shape, b: Shape) -> bool:
    """``ShapeUtil::Compatible``: layouts and dynamic-dimension flags ignored."""
    return a is b or _equal(a, b, False, False)


def compatible_ignoring_fp(a: Shape, b: Shape) -> bool:
    """``ShapeUtil::CompatibleIgnoringFpPrecision``."""
    return a is b or _equal(a, b, False, True)


def compatible_ignoring_element_type(a: Shape, b: Shape) -> bool:
    """``ShapeUtil::CompatibleIgnoringElementType``."""
    return a is b or _equal(a, b, True, False)


def expect_array(s: Shape, what: str) -> None:
    """``ExpectArray``: an array (not a tuple, token or buffer)."""
    if not s.is_array:
        raise InferenceError(f"Expected array argument for {what}, but got {human(s)}.")


def make(et: str, dims: Sequence[int], dynamic: Sequence[bool] | None = None) -> Shape:
    """``ShapeUtil::MakeShape``: a new array shape with the default layout."""
    dims = tuple(dims)
    layout = default_layout(len(dims)) if is_array_type(et) else None
    dyn = tuple(dynamic) if dynamic is not None and any(dynamic) else None
    return intern(Shape(et, dims, layout, dyn))


def change_type(s: Shape, et: str) -> Shape:
    """``ShapeUtil::ChangeElementType``: same dimensions and layout."""
    if s.element_type == et:
        return s
    return intern(Shape(et, s.dimensions, s.layout, s.dynamic))


def dynamic_flags(s: Shape) -> list[bool]:
    return list(s.dynamic) if s.dynamic is not None else [False] * len(s.dimensions)


def ints(attrs: dict[str, Any], key: str,
         default: tuple[int, ...] | None = None) -> tuple[int, ...]:
    """An int-list attribute (``{1,2}``), or ``default`` when absent."""
    v = attrs.get(key)
    if v is None:
        if default is None:
            raise InferenceError(f"attribute {key} is missing")
        return default
    return parse_int_list(v)


def program_shape(comp: Any) -> tuple[list[Shape], Shape]:
    """(parameter shapes, result shape) of a called computation."""
    if comp is None or comp.root is None:
        raise InferenceError(f"computation {getattr(comp, 'name', '?')} has no root")
    params = []
    for i, p in enumerate(comp.parameters):
        if p is None:
            raise InferenceError(f"computation {comp.name} has no parameter {i}")
        params.append(p.shape)
    return params, comp.root.shape


def signature(params: Sequence[Shape], result: Shape) -> str:
    """``ShapeUtil::HumanString(ProgramShape)``: ``(f32[], f32[]) -> f32[]``."""
    return "(" + ", ".join(human(p) for p in params) + ") -> " + human(result)
