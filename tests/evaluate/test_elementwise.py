"""Elementwise opcodes against numpy-computed expectations (XLA's rules for
integer edge cases, conversions, total order)."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from .helpers import f32, run_hlo

BF16 = ml_dtypes.bfloat16


def test_unary_float_functions_match_numpy():
    x = f32(8, 33, seed=1)
    text = """HloModule m
ENTRY e {
  x = f32[8,33]{1,0} parameter(0)
  e = f32[8,33]{1,0} exponential(x)
  t = f32[8,33]{1,0} tanh(x)
  l = f32[8,33]{1,0} logistic(x)
  r = f32[8,33]{1,0} erf(x)
  a = f32[8,33]{1,0} round-nearest-afz(x)
  s = f32[8,33]{1,0} sign(x)
  ROOT out = (f32[8,33]{1,0}, f32[8,33]{1,0}, f32[8,33]{1,0}, f32[8,33]{1,0}, f32[8,33]{1,0}, f32[8,33]{1,0}) tuple(e, t, l, r, a, s)
}"""
    e, t, lg, er, ra, sg = run_hlo(text, x)
    np.testing.assert_allclose(e, np.exp(x), rtol=1e-6)
    np.testing.assert_allclose(t, np.tanh(x), rtol=1e-6)
    np.testing.assert_allclose(lg, 1 / (1 + np.exp(-x.astype(np.float64))), rtol=1e-6)
    np.testing.assert_allclose(er, [[math.erf(v) for v in row] for row in x.astype(np.float64)],
                               rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(ra, np.zeros_like(x) + np.sign(x) * np.floor(np.abs(x) + 0.5))
    np.testing.assert_array_equal(sg, np.sign(x))


def test_erf_accuracy_over_range():
    xs = np.linspace(-6, 6, 241).astype(np.float32)
    text = """HloModule m
ENTRY e {
  x = f32[241]{0} parameter(0)
  ROOT r = f32[241]{0} erf(x)
}"""
    got = run_hlo(text, xs)
    want = np.array([math.erf(float(v)) for v in xs], dtype=np.float32)
    np.testing.assert_allclose(got, want, rtol=2e-7, atol=1e-8)


def test_bf16_arithmetic_rounds_once_from_f32():
    a = f32(64, 48, seed=2).astype(BF16)
    b = f32(64, 48, seed=3).astype(BF16)
    text = """HloModule m
ENTRY e {
  a = bf16[64,48]{1,0} parameter(0)
  b = bf16[64,48]{1,0} parameter(1)
  s = bf16[64,48]{1,0} add(a, b)
  d = bf16[64,48]{1,0} divide(a, b)
  ROOT out = (bf16[64,48]{1,0}, bf16[64,48]{1,0}) tuple(s, d)
}"""
    s, d = run_hlo(text, a, b)
    assert s.dtype == BF16
    np.testing.assert_array_equal(s, (a.astype(np.float32) + b.astype(np.float32)).astype(BF16))
    np.testing.assert_array_equal(d, (a.astype(np.float32) / b.astype(np.float32)).astype(BF16))


def test_integer_division_and_remainder_edge_cases():
    imin = np.iinfo(np.int32).min
    a = np.array([7, -7, 7, -7, 5, imin, imin, 0], dtype=np.int32)
    b = np.array([2, 2, -2, -2, 0, -1, 0, 0], dtype=np.int32)
    text = """HloModule m
ENTRY e {
  a = s32[8]{0} parameter(0)
  b = s32[8]{0} parameter(1)
  d = s32[8]{0} divide(a, b)
  r = s32[8]{0} remainder(a, b)
  ROOT out = (s32[8]{0}, s32[8]{0}) tuple(d, r)
}"""
    d, r = run_hlo(text, a, b)
    # C truncation; x/0 == -1; INT_MIN/-1 == INT_MIN; x%0 == x; INT_MIN%-1 == 0
    np.testing.assert_array_equal(d, [3, -3, -3, 3, -1, imin, -1, -1])
    np.testing.assert_array_equal(r, [1, -1, 1, -1, 5, 0, imin, 0])


def test_unsigned_division_by_zero_is_all_ones():
    text = """HloModule m
ENTRY e {
  a = u8[3]{0} parameter(0)
  b = u8[3]{0} parameter(1)
  ROOT d = u8[3]{0} divide(a, b)
}"""
    got = run_hlo(text, np.array([9, 9, 200], np.uint8), np.array([2, 0, 7], np.uint8))
    np.testing.assert_array_equal(got, [4, 255, 28])


def test_shifts_by_at_least_the_bit_width():
    a = np.array([1, -16, -16, 5, 3], dtype=np.int32)
    b = np.array([3, 2, 40, 32, -1], dtype=np.int32)
    text = """HloModule m
ENTRY e {
  a = s32[5]{0} parameter(0)
  b = s32[5]{0} parameter(1)
  l = s32[5]{0} shift-left(a, b)
  ra = s32[5]{0} shift-right-arithmetic(a, b)
  rl = s32[5]{0} shift-right-logical(a, b)
  ROOT out = (s32[5]{0}, s32[5]{0}, s32[5]{0}) tuple(l, ra, rl)
}"""
    sl, sra, srl = run_hlo(text, a, b)
    np.testing.assert_array_equal(sl, [8, -64, 0, 0, 0])
    np.testing.assert_array_equal(sra, [0, -4, -1, 0, 0])
    np.testing.assert_array_equal(srl, [0, (np.uint32(2**32 - 16) >> 2).astype(np.int32), 0, 0, 0])


def test_integer_power_popcnt_clz():
    a = np.array([2, 3, -2, 1, -1, 5, 0], dtype=np.int32)
    b = np.array([10, 3, 3, -4, -3, -1, 0], dtype=np.int32)
    text = """HloModule m
ENTRY e {
  a = s32[7]{0} parameter(0)
  b = s32[7]{0} parameter(1)
  p = s32[7]{0} power(a, b)
  c = s32[7]{0} popcnt(a)
  z = s32[7]{0} count-leading-zeros(a)
  ROOT out = (s32[7]{0}, s32[7]{0}, s32[7]{0}) tuple(p, c, z)
}"""
    p, c, z = run_hlo(text, a, b)
    np.testing.assert_array_equal(p, [1024, 27, -8, 1, -1, 0, 1])
    np.testing.assert_array_equal(c, [1, 2, 31, 1, 32, 2, 0])
    np.testing.assert_array_equal(z, [30, 30, 0, 31, 0, 29, 32])


def test_convert_follows_xla_saturation_and_nan_rules():
    c = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 300.7, -300.7, 1e-40, 127.5, -128.5, 0.1, 65504],
                 dtype=np.float32)
    text = """HloModule m
ENTRY e {
  c = f32[12]{0} parameter(0)
  s = s32[12]{0} convert(c)
  b = s8[12]{0} convert(c)
  u = u8[12]{0} convert(c)
  p = pred[12]{0} convert(c)
  w = s8[12]{0} convert(s)
  e4 = f8e4m3fn[12]{0} convert(c)
  e5 = f8e5m2[12]{0} convert(c)
  ROOT out = (s32[12]{0}, s8[12]{0}, u8[12]{0}, pred[12]{0}, s8[12]{0}, f8e4m3fn[12]{0}, f8e5m2[12]{0}) tuple(s, b, u, p, w, e4, e5)
}"""
    s, b, u, p, w, e4, e5 = run_hlo(text, c)
    imax, imin = 2**31 - 1, -2**31
    np.testing.assert_array_equal(s, [0, imax, imin, imax, imin, 300, -300, 0, 127, -128, 0, 65504])
    np.testing.assert_array_equal(b, [0, 127, -128, 127, -128, 127, -128, 0, 127, -128, 0, 127])
    np.testing.assert_array_equal(u, [0, 255, 0, 255, 0, 255, 0, 0, 127, 0, 0, 255])
    np.testing.assert_array_equal(p, [True, True, True, True, True, True, True, True, True, True, True, True])
    # s32 -> s8 wraps (two's complement truncation)
    np.testing.assert_array_equal(w, np.array(s, dtype=np.int64).astype(np.int8))
    e4f = e4.astype(np.float32)
    assert np.isnan(e4f[0]) and np.isnan(e4f[1]) and np.isnan(e4f[3])  # no inf in e4m3fn
    assert e4f[10] == np.float32(0.1015625)  # round to nearest even
    e5f = e5.astype(np.float32)
    assert np.isinf(e5f[1]) and np.isinf(e5f[3])


def test_total_order_compare_and_clamp():
    a = np.array([-0.0, np.nan, -np.inf, 1.0, -np.nan], dtype=np.float32)
    b = np.array([0.0, np.inf, -1.0, np.nan, -np.inf], dtype=np.float32)
    text = """HloModule m
ENTRY e {
  a = f32[5]{0} parameter(0)
  b = f32[5]{0} parameter(1)
  t = pred[5]{0} compare(a, b), direction=LT, type=TOTALORDER
  f = pred[5]{0} compare(a, b), direction=LT
  n = pred[5]{0} compare(a, b), direction=NE
  lo = f32[] constant(-0.5)
  hi = f32[] constant(0.5)
  c = f32[5]{0} clamp(lo, b, hi)
  ROOT out = (pred[5]{0}, pred[5]{0}, pred[5]{0}, f32[5]{0}) tuple(t, f, n, c)
}"""
    t, f, n, c = run_hlo(text, a, b)
    np.testing.assert_array_equal(t, [True, False, True, True, True])
    np.testing.assert_array_equal(f, [False, False, True, False, False])
    np.testing.assert_array_equal(n, [False, True, True, True, True])
    np.testing.assert_array_equal(c[[0, 1, 2, 4]], [0.0, 0.5, -0.5, -0.5])
    assert np.isnan(c[3])


def test_bitcast_convert_and_reduce_precision():
    x = np.array([1.0, -2.5, 3.14159265, 1e-30, 70000.0], dtype=np.float32)
    text = """HloModule m
ENTRY e {
  x = f32[5]{0} parameter(0)
  i = s32[5]{0} bitcast-convert(x)
  b = u8[5,4]{1,0} bitcast-convert(x)
  h = f32[5]{0} reduce-precision(x), exponent_bits=5, mantissa_bits=10
  ROOT out = (s32[5]{0}, u8[5,4]{1,0}, f32[5]{0}) tuple(i, b, h)
}"""
    i, b, h = run_hlo(text, x)
    np.testing.assert_array_equal(i, x.view(np.int32))
    np.testing.assert_array_equal(b, x.view(np.uint8).reshape(5, 4))
    # reduce-precision to f16's format == a round trip through f16 (denormals flush to 0)
    with np.errstate(over="ignore"):
        want = x.astype(np.float16).astype(np.float32)
    want[3] = 0.0
    np.testing.assert_array_equal(h, want)


def test_select_with_scalar_broadcast_pred_and_narrow_types():
    p = np.array([[True, False], [False, True]])
    a = np.array([[1, 2], [3, 4]], dtype=np.float16)
    b = np.array([[5, 6], [7, 8]], dtype=np.float16)
    text = """HloModule m
ENTRY e {
  p = pred[2,2]{1,0} parameter(0)
  a = f16[2,2]{1,0} parameter(1)
  b = f16[2,2]{1,0} parameter(2)
  ROOT s = f16[2,2]{1,0} select(p, a, b)
}"""
    np.testing.assert_array_equal(run_hlo(text, p, a, b), np.where(p, a, b))


@pytest.mark.parametrize("op,fn", [("maximum", np.maximum), ("minimum", np.minimum)])
def test_max_min_propagate_nan(op, fn):
    a = np.array([1.0, np.nan, 3.0], dtype=np.float32)
    b = np.array([np.nan, 2.0, 1.0], dtype=np.float32)
    text = f"""HloModule m
ENTRY e {{
  a = f32[3]{{0}} parameter(0)
  b = f32[3]{{0}} parameter(1)
  ROOT r = f32[3]{{0}} {op}(a, b)
}}"""
    np.testing.assert_array_equal(run_hlo(text, a, b), fn(a, b))
