"""Shape inference rules against the expectations of XLA's
shape_inference_test.cc (the same operands, the same results or errors)."""

from __future__ import annotations

import copy

import pytest

from hlorun.ir.attrs import parse_dim_labels, parse_window
from hlorun.ir.shape import Shape
from hlorun.ir.shape_inference import (CAN_INFER, InferenceError, infer_bitcast_convert,
                                       infer_dot)
from hlorun.ir.shape_inference.common import (FLOAT_FORMAT, compatible, higher_precision)
from hlorun.ir.shape_inference.compute import (infer_convolution, infer_reduce,
                                               infer_reduce_window)
from hlorun.ir.shape_inference.data import infer_concatenate, infer_pad, infer_slice
from hlorun.ir.shape_inference.elementwise import infer_binary, infer_clamp, infer_select
from hlorun.ir.shape_inference.gather_scatter import infer_gather
from hlorun.ir.attrs import parse_shape_text


def S(text: str) -> Shape:
    return parse_shape_text(text)


def same(a: Shape, b: Shape) -> bool:
    """ShapeUtil::Equal on the parts inference decides (dims, type, dynamism)."""
    return compatible(a, b) and a.dynamic == b.dynamic


def test_convolution_with_window_dilation():
    dn = copy.copy(parse_dim_labels("bf01_01io->bf01"))  # parse results are cached
    # XLA's test permutes the kernel dims; express the same convolution with
    # kernel spatial dims (3, 0), input feature 2, output feature 1.
    dn.kernel_spatial = [3, 0]
    dn.kernel_input_feature, dn.kernel_output_feature = 2, 1
    window = parse_window("{size=3x2 stride=3x1 pad=0_0x2_1 rhs_dilate=6x2}")
    out = infer_convolution(S("f32[10,11,103,4]"), S("f32[2,12,11,3]"), 1, 1, window, dn)
    assert same(out, S("f32[10,12,31,5]"))


def test_convolution_with_base_dilation():
    dn = copy.copy(parse_dim_labels("bf01_01io->bf01"))  # parse results are cached
    dn.kernel_spatial = [3, 0]
    dn.kernel_input_feature, dn.kernel_output_feature = 2, 1
    window = parse_window("{size=4x2 stride=3x1 pad=0_0x2_1 lhs_dilate=6x2}")
    out = infer_convolution(S("f32[10,11,3,4]"), S("f32[2,12,11,4]"), 1, 1, window, dn)
    assert same(out, S("f32[10,12,4,9]"))


def test_convolution_preferred_element_type():
    dn = parse_dim_labels("b01f_01io->b01f")
    window = parse_window("{size=2x2}")
    out = infer_convolution(S("s8[2,16,16,4]"), S("s8[2,2,4,2]"), 1, 1, window, dn, "s32")
    assert same(out, S("s32[2,15,15,2]"))


def test_reduce_window_in_half():
    out = infer_reduce_window([S("f32[8,8]")], [S("f32[]")],
                              parse_window("{size=2x2 stride=2x2}"),
                              [S("f32[]"), S("f32[]")], S("f32[]"))
    assert same(out, S("f32[4,4]"))


@pytest.mark.parametrize("starts,limits,strides,want", [
    ((32, 0), (64, 64), (2, 4), "f32[16,16]"),
    ((15, 0), (20, 13), (2, 4), "f32[3,4]"),
])
def test_slice_with_strides(starts, limits, strides, want):
    out = infer_slice(S("f32[128,64]"), list(zip(starts, limits, strides)))
    assert same(out, S(want))


@pytest.mark.parametrize("starts,limits,strides", [((127, 0), (129, 2), (0, 1)),
                                                    ((127, 0), (129, 2), (1, 1))])
def test_slice_errors(starts, limits, strides):
    with pytest.raises(InferenceError):
        infer_slice(S("f32[128,64]"), list(zip(starts, limits, strides)))


def test_bitcast_convert_widths():
    assert same(infer_bitcast_convert(S("s8[10]"), "pred"), S("pred[10]"))
    assert same(infer_bitcast_convert(S("pred[10,4]"), "f32"), S("f32[10]"))
    assert same(infer_bitcast_convert(S("f32[10]"), "s8"), S("s8[10,4]"))
    with pytest.raises(InferenceError, match="Last dimension of input shape=3"):
        infer_bitcast_convert(S("s8[10,3]"), "f32")
    with pytest.raises(InferenceError, match="complex"):
        infer_bitcast_convert(S("c64[2]"), "f64")


def test_concatenate_with_dynamic_shapes():
    out = infer_concatenate([S("f32[<=32,160,10]"), S("f32[32,<=160,10]")], 0)
    assert same(out, S("f32[<=64,<=160,10]"))
    assert same(infer_concatenate([S("f32[32]"), S("f32[64]"), S("f32[32]")], 0), S("f32[128]"))


def test_dot_general():
    out = infer_dot(S("f32[5,2,11,3]"), S("f32[5,2,3,14]"), [3], [2], [0, 1], [0, 1])
    assert same(out, S("f32[5,2,11,14]"))
    with pytest.raises(InferenceError, match="Batch dimension sizes are not compatible"):
        infer_dot(S("f32[2,11,3]"), S("f32[3,3,14]"), [2], [1], [0], [0])
    with pytest.raises(InferenceError, match="out of range"):
        infer_dot(S("f32[2,11,3]"), S("f32[2,3,14]"), [3], [1], [0], [0])
    with pytest.raises(InferenceError, match="not unique"):
        infer_dot(S("f32[2,11,3]"), S("f32[2,3,14]"), [2, 2], [1, 1], [0], [0])
    # The instruction's own element type is the preferred one.
    assert same(infer_dot(S("s8[2,3]"), S("s8[3,4]"), [1], [0], [], [], "s32"), S("s32[2,4]"))


def test_binary_ops_need_equal_ranks_in_hlo():
    with pytest.raises(InferenceError, match="Shapes must be equal rank"):
        infer_binary("add", S("f32[16,8,4]"), S("f32[8]"))
    with pytest.raises(InferenceError, match="Expected input element type to be floating"):
        infer_binary("atan2", S("s32[5]"), S("s32[5]"))
    assert same(infer_binary("compare", S("f32[3]"), S("f32[3]")), S("pred[3]"))
    assert same(infer_binary("complex", S("f32[3]"), S("f32[3]")), S("c64[3]"))


def test_select_and_clamp():
    assert same(infer_select(S("pred[]"), S("f32[64,48]"), S("f32[64,48]")), S("f32[64,48]"))
    with pytest.raises(InferenceError):
        infer_select(S("pred[64]"), S("f32[64,48]"), S("f32[64,48]"))
    int4 = infer_select(S("pred[10]"), S("s4[10]{0:E(4)}"), S("s4[10]{0:E(4)}"))
    assert int4.layout.element_size_in_bits == 4  # SelectPreservesElementSize
    assert same(infer_clamp(S("f32[]"), S("f32[64,48]"), S("f32[]")), S("f32[64,48]"))
    with pytest.raises(InferenceError, match="Clamp with incompatible shapes"):
        infer_clamp(S("f32[64]"), S("f32[64,48]"), S("f32[]"))


def test_reduce_cube():
    add = ([S("f32[]"), S("f32[]")], S("f32[]"))
    cube = S("f32[3,4,5]")
    assert same(infer_reduce([cube, S("f32[]")], [1], *add), S("f32[3,5]"))
    assert same(infer_reduce([cube, S("f32[]")], [0, 2], *add), S("f32[4]"))
    with pytest.raises(InferenceError, match="Duplicate reduction dimension"):
        infer_reduce([cube, S("f32[]")], [0, 0], *add)
    with pytest.raises(InferenceError, match="must take 2 parameters"):
        infer_reduce([cube, S("f32[]")], [0], [S("f32[]")], S("f32[]"))
    two = ([S("f32[]"), S("s32[]"), S("f32[]"), S("s32[]")], S("(f32[], s32[])"))
    out = infer_reduce([cube, S("s32[3,4,5]"), S("f32[]"), S("s32[]")], [0], *two)
    assert same(out, S("(f32[4,5], s32[4,5])"))


def test_pad_with_interior_padding():
    assert same(infer_pad(S("f32[10,25]"), S("f32[]"), [(0, 2, 0), (1, 5, 1)]),
                S("f32[12,55]"))


def test_gather_like_jnp_take():
    attrs = {"offset_dims": "{1}", "collapsed_slice_dims": "{0}", "start_index_map": "{0}",
             "index_vector_dim": "1", "slice_sizes": "{1,256}"}
    assert same(infer_gather(S("f32[64,256]"), S("s32[64,1]"), attrs), S("f32[64,256]"))


def test_higher_precision_type_follows_xla():
    assert higher_precision("bf16", "f16") == "bf16"   # more range wins
    assert higher_precision("f16", "f8e4m3fn") == "f16"
    assert higher_precision("s32", "u32") == "s32"
    assert higher_precision("c64", "f64") == "c64"
    assert higher_precision("f32", "s64") == "f32"


def test_float_formats_match_ml_dtypes():
    np = pytest.importorskip("numpy")
    ml_dtypes = pytest.importorskip("ml_dtypes")
    from hlorun.ir.literal import numpy_dtype
    for t, (maxexp, digits) in FLOAT_FORMAT.items():
        dt = numpy_dtype(t)
        info = np.finfo(dt) if t in ("f16", "f32", "f64") else ml_dtypes.finfo(dt)
        assert (int(info.maxexp), int(info.nmant) + 1) == (maxexp, digits), t


def test_parser_infers_only_what_xla_can():
    assert "slice" not in CAN_INFER and "add" in CAN_INFER and "convert" not in CAN_INFER
