"""Shapes, layouts and ShapeUtil semantics (expectations from XLA's
shape_util_test.cc)."""

from __future__ import annotations

import pytest

from hlorun.ir.shape import (Shape, ShapeSyntaxError, compatible, parse_array_shape,
                             reshape_is_bitcast, transpose_is_bitcast)


def S(et, dims, m2m):
    return Shape.array(et, dims, m2m)


@pytest.mark.parametrize("in_row_major", [True, False])
@pytest.mark.parametrize("out_row_major", [True, False])
def test_reshape_is_bitcast_3x4_6x2(in_row_major, out_row_major):
    a = S("f32", [3, 4], [1, 0] if in_row_major else [0, 1])
    b = S("f32", [6, 2], [1, 0] if out_row_major else [0, 1])
    assert reshape_is_bitcast(a, b) == (in_row_major and out_row_major)


def test_reshape_is_bitcast_dim1_most_minor():
    assert reshape_is_bitcast(S("f32", [3, 2, 2], [1, 0, 2]), S("f32", [6, 2], [0, 1]))


def test_reshape_is_bitcast_dim0_most_minor_is_not():
    assert not reshape_is_bitcast(S("f32", [3, 2, 2], [0, 1, 2]), S("f32", [6, 2], [0, 1]))


def test_reshape_is_bitcast_element_type():
    a, b = S("f32", [3, 2, 2], [1, 0, 2]), S("f16", [6, 2], [0, 1])
    assert reshape_is_bitcast(a, b, ignore_element_type=True)
    assert not reshape_is_bitcast(a, b)


def test_reshape_is_bitcast_degenerate_dims_and_zero_elements():
    # Size-1 dimensions can sit anywhere in the layout.
    a = S("f32", [1, 3, 8, 1, 5], [4, 0, 3, 2, 1])
    b = S("f32", [3, 8, 5], [2, 1, 0])
    assert reshape_is_bitcast(a, b)
    assert reshape_is_bitcast(S("f32", [0, 4], [1, 0]), S("f32", [4, 0], [0, 1]))


def test_s0_reshape_becomes_non_bitcast_when_gemm_output_is_pinned():
    # Layout assignment made the reshape a bitcast by pulling the consumer's
    # layout {2,3,1,0} back onto the GEMM output; once the GEMM output is
    # pinned to the canonical {2,1,0}, the same reshape is not a bitcast.
    result = S("f16", [2, 1, 32, 128], [2, 3, 1, 0])
    assert reshape_is_bitcast(S("f16", [2, 32, 128], [1, 2, 0]), result)
    assert not reshape_is_bitcast(S("f16", [2, 32, 128], [2, 1, 0]), result)


def test_transpose_is_bitcast():
    a = S("f32", [10, 5], [1, 0])
    b = S("f16", [5, 10], [0, 1])
    assert transpose_is_bitcast(a, b, [1, 0], ignore_element_type=True)
    assert not transpose_is_bitcast(a, b, [1, 0])


@pytest.mark.parametrize("text", [
    "f32[2,3]{1,0}", "f32[]", "bf16[<=8,?]{1,0}", "s4[16]{0:E(4)}",
    "f32[8,128]{1,0:T(8,128)S(1)}", "pred[2,2]{0,1}", "f8e4m3fn[16,32]{1,0}",
    "f32[4]{0:T(2)(2,1)L(4)#(s32)*(u32)E(32)S(2)M(8)}", "token[]", "u4[3]{0}",
])
def test_array_shape_text_round_trips(text):
    assert str(parse_array_shape(text)) == text


def test_missing_layout_is_default_and_scalar_prints_bare():
    assert str(parse_array_shape("f32[2,3,4]")) == "f32[2,3,4]{2,1,0}"
    assert str(parse_array_shape("f32[]")) == "f32[]"


def test_tuple_shape_prints_index_annotations():
    t = Shape.tuple([parse_array_shape("f32[]")] * 7)
    assert str(t) == "(f32[], f32[], f32[], f32[], f32[], /*index=5*/f32[], f32[])"


def test_byte_sizes():
    assert parse_array_shape("f32[2,3]").byte_size() == 24
    assert parse_array_shape("bf16[10]").byte_size() == 20
    assert parse_array_shape("s4[16]{0:E(4)}").byte_size() == 8
    assert Shape.tuple([parse_array_shape("f32[]")] * 3).byte_size() == 24


def test_bad_shapes_are_errors():
    with pytest.raises(ShapeSyntaxError):
        parse_array_shape("f32[2,3]{0}")  # layout rank mismatch
    with pytest.raises(ShapeSyntaxError):
        parse_array_shape("f32[2,3]{0,0}")  # not a permutation


def test_compatible_ignores_layout():
    assert compatible(parse_array_shape("f32[2,3]{1,0}"), parse_array_shape("f32[2,3]{0,1}"))
    assert not compatible(parse_array_shape("f32[2,3]"), parse_array_shape("f16[2,3]"))
