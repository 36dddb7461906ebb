"""ShapeUtil helpers for layouts and bitcasts; expectations are XLA's
shape_util_test.cc and util_test.cc cases."""

from __future__ import annotations

import itertools

import pytest

from hlorun.ir.shape import (BitcastDecompositionReshape, BitcastDecompositionTranspose,
                             BitcastDecompositionTrt, Shape, align_layouts, common_factors,
                             decompose_bitcast, deduce_transpose_dimensions_for_bitcast,
                             delete_dimensions, dimensions_unmodified_by_reshape,
                             drop_degenerate_dimensions, is_decomposable_bitcast,
                             is_reshape_or_transpose_bitcast, permute_dimensions,
                             reorder_logical_dimensions, reshape_is_bitcast, transpose_is_bitcast)


def S(et, dims, m2m="default"):
    return Shape.array(et, dims, m2m)


@pytest.mark.parametrize("a,b,expected", [
    ([8, 4], [8, 4], [(0, 0), (1, 1), (2, 2)]),
    ([2, 3], [3, 2], [(0, 0), (2, 2)]),
    ([2, 3, 4], [6, 4], [(0, 0), (2, 1), (3, 2)]),
    ([4, 3, 2], [2, 3, 4], [(0, 0), (3, 3)]),
    ([7, 9, 2, 15], [63, 6, 5], [(0, 0), (2, 1), (4, 3)]),
    ([1, 1, 1], [1], [(0, 0), (1, 1), (2, 1), (3, 1)]),
    ([0, 10], [0, 10, 3], [(0, 0), (2, 3)]),
    ([2, 1, 3], [2, 3], [(0, 0), (1, 1), (2, 1), (3, 2)]),
])
def test_common_factors(a, b, expected):
    # the zero-sized case: after the common prefix the products differ, so
    # the whole shape is one group
    assert common_factors(a, b) == expected


def test_dimensions_unmodified_by_reshape():
    assert dimensions_unmodified_by_reshape(
        S("s32", [4, 1, 3, 5, 6, 7]), S("s32", [2, 6, 1, 5, 1, 42])) == [(3, 3)]


def test_deduce_transpose_dimensions_for_bitcast():
    assert deduce_transpose_dimensions_for_bitcast(S("f32", [5, 3], [1, 0]),
                                                   S("f32", [3, 5], [0, 1])) == (1, 0)
    assert deduce_transpose_dimensions_for_bitcast(S("f32", [5, 3], [1, 0]),
                                                   S("f32", [3, 5], [1, 0])) is None


def test_is_reshape_or_transpose_bitcast():
    assert is_reshape_or_transpose_bitcast(S("f32", [10, 5], [1, 0]), S("f32", [5, 10], [0, 1]))
    assert is_reshape_or_transpose_bitcast(S("f32", [10, 5], [1, 0]), S("f32", [5, 10], [1, 0]))
    assert not is_reshape_or_transpose_bitcast(S("f32", [10, 5], [0, 1]), S("f32", [5, 10], [0, 1]))


def test_decompose_bitcast_to_reshape():
    d = decompose_bitcast(S("f32", [1, 16, 17, 3], [3, 2, 1, 0]), S("f32", [16, 51], [1, 0]))
    assert isinstance(d, BitcastDecompositionReshape)
    d = decompose_bitcast(S("f32", [17, 3, 1, 16], [1, 0, 3, 2]), S("f32", [51, 16], [0, 1]))
    assert isinstance(d, BitcastDecompositionReshape)


def test_decompose_bitcast_to_transpose():
    d = decompose_bitcast(S("f32", [3, 7, 6, 4], [3, 2, 1, 0]), S("f32", [3, 6, 4, 7], [2, 1, 3, 0]))
    assert isinstance(d, BitcastDecompositionTranspose) and d.transpose_dims == (0, 2, 3, 1)


@pytest.mark.parametrize("inp,out,t1,t1_shape,r_shape,t2", [
    (S("f32", [16, 17, 3], [2, 1, 0]), S("f32", [51, 16], [0, 1]),
     (0, 1, 2), S("f32", [16, 17, 3], [2, 1, 0]), S("f32", [16, 51], [1, 0]), (1, 0)),
    (S("f32", [16, 17, 3, 7], [3, 2, 1, 0]), S("f32", [7, 16, 51], [0, 2, 1]),
     (0, 1, 2, 3), S("f32", [16, 17, 3, 7], [3, 2, 1, 0]), S("f32", [16, 51, 7], [2, 1, 0]), (2, 0, 1)),
    (S("f32", [16, 3, 17], [1, 2, 0]), S("f32", [51, 16], [1, 0]),
     (0, 2, 1), S("f32", [16, 17, 3], [2, 1, 0]), S("f32", [51, 16], [1, 0]), (0, 1)),
    (S("f32", [16, 3, 17], [1, 2, 0]), S("f32", [16, 51], [0, 1]),
     (0, 2, 1), S("f32", [16, 17, 3], [2, 1, 0]), S("f32", [51, 16], [1, 0]), (1, 0)),
])
def test_decompose_bitcast_to_trt(inp, out, t1, t1_shape, r_shape, t2):
    d = decompose_bitcast(inp, out)
    assert isinstance(d, BitcastDecompositionTrt)
    assert d.transpose1_dims == t1 and d.transpose1_shape == t1_shape
    assert d.reshape_shape == r_shape and d.transpose2_dims == t2
    assert d.is_transpose1_identity() == (list(t1) == sorted(t1))
    assert d.is_transpose2_identity() == (list(t2) == sorted(t2))
    # the pieces really are bitcasts
    assert transpose_is_bitcast(inp, d.transpose1_shape, d.transpose1_dims)
    assert reshape_is_bitcast(d.transpose1_shape, d.reshape_shape, ignore_element_type=True)
    assert transpose_is_bitcast(d.reshape_shape, out, d.transpose2_dims)


def test_fail_on_non_decomposable_bitcast():
    a, b = S("s4", [3, 2], [1, 0]), S("s8", [3], [0])
    assert not is_decomposable_bitcast(a, b)
    assert decompose_bitcast(a, b) is None
    assert is_decomposable_bitcast(a, a.with_element_type("s8"))


def test_align_layouts_without_trivial_dimensions():
    inp = S("f32", [3, 8, 5, 7, 11], [3, 2, 1, 0, 4])
    got = align_layouts(inp, S("f32", [4, 3, 2, 7, 5, 11]))
    assert got.minor_to_major == (4, 3, 2, 1, 0, 5) and reshape_is_bitcast(inp, got)
    got = align_layouts(inp, S("f32", [3, 2, 4, 35, 11]))
    assert got.minor_to_major == (3, 2, 1, 0, 4) and reshape_is_bitcast(inp, got)


def test_align_layouts_with_trivial_dimensions():
    inp = S("f32", [1, 3, 8, 1, 5, 7, 1, 11, 1, 1], [5, 0, 4, 2, 1, 3, 6, 7, 9, 8])
    got = align_layouts(inp, S("f32", [1, 4, 1, 3, 2, 7, 5, 11, 1]))
    assert got is not None and reshape_is_bitcast(inp, got)


def test_align_layouts_with_all_trivial_dimensions():
    inp = S("f32", [1, 1, 1, 1], [0, 1, 3, 2])
    got = align_layouts(inp, S("f32", [1, 1, 1, 1, 1]))
    assert got is not None and reshape_is_bitcast(inp, got)


def test_align_layouts_wrong_input_layout():
    inp = S("f32", [3, 8, 5, 7, 11], [2, 3, 1, 0, 4])
    assert align_layouts(inp, S("f32", [4, 3, 2, 7, 5, 11])) is None


def test_align_layouts_non_consecutive_alignment_part():
    inp = S("f32", [3, 8, 5, 7, 11], [3, 2, 1, 0, 4])
    assert align_layouts(inp, S("f32", [4, 3, 2, 5, 77])) is None


def test_align_layouts_exhaustive_small():
    # Property: whenever align_layouts answers, the reshape is a bitcast, and
    # when it does not, no layout of the output makes it one.
    for in_dims, out_dims in [([2, 3, 4], [6, 4]), ([6, 4], [2, 3, 4]), ([2, 3, 4], [4, 6]),
                              ([4, 1, 6], [2, 2, 6]), ([2, 2, 3], [4, 3])]:
        for m2m in itertools.permutations(range(len(in_dims))):
            inp = S("f32", in_dims, m2m)
            got = align_layouts(inp, S("f32", out_dims))
            any_ok = any(reshape_is_bitcast(inp, S("f32", out_dims, p))
                         for p in itertools.permutations(range(len(out_dims))))
            assert (got is not None) == any_ok, (inp, out_dims)
            if got is not None:
                assert reshape_is_bitcast(inp, got)


def test_delete_and_drop_degenerate_dimensions():
    shape = S("f32", [5, 3, 2, 7, 9], [2, 0, 1, 4, 3])
    assert delete_dimensions(shape, [1, 2, 3]) == S("f32", [5, 9], [0, 1])
    assert delete_dimensions(shape, [3, 2, 1]) == S("f32", [5, 9], [0, 1])
    assert drop_degenerate_dimensions(S("f32", [1, 4, 1, 3], [0, 3, 1, 2])) == S("f32", [4, 3], [1, 0])


def test_permute_dimensions_keeps_physical_layout():
    shape = S("f32", [2, 3, 4], [0, 2, 1])
    for perm in itertools.permutations(range(3)):
        out = permute_dimensions(perm, shape)
        assert transpose_is_bitcast(shape, out, perm)


def test_reorder_logical_dimensions():
    assert str(reorder_logical_dimensions(S("f32", [16, 3, 12, 17], [1, 2, 0, 3]), [0, 2, 1, 3])) \
        == "f32[16,12,3,17]{2,1,0,3}"
    assert str(reorder_logical_dimensions(S("f32", [10, 20, 30], [2, 1, 0]), [1, 2, 0])) \
        == "f32[20,30,10]{1,0,2}"
