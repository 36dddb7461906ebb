"""Data movement against numpy: bitcasts through physical layouts,
transposes, slices (dynamic ones clamp like XLA), pad with negative and
interior padding, iota, concatenate, broadcast into non-default layouts."""

from __future__ import annotations

import numpy as np

from .helpers import f32, run_hlo


def test_bitcast_reinterprets_the_physical_buffer():
    p = f32(4, 6, 8, seed=4)
    text = """HloModule m
ENTRY e {
  p = f32[4,6,8]{2,1,0} parameter(0)
  t = f32[8,4,6]{0,2,1} transpose(p), dimensions={2,0,1}
  b = f32[4,6,8]{2,1,0} bitcast(t)
  c = f32[4,6,8]{0,1,2} copy(p)
  bc = f32[8,6,4]{2,1,0} bitcast(c)
  rb = f32[24,8]{1,0} bitcast(p)
  cm = f32[48,4]{0,1} bitcast(c)
  ROOT out = (f32[8,4,6]{0,2,1}, f32[4,6,8]{2,1,0}, f32[8,6,4]{2,1,0}, f32[24,8]{1,0}, f32[48,4]{0,1}) tuple(t, b, bc, rb, cm)
}"""
    t, b, bc, rb, cm = run_hlo(text, p)
    np.testing.assert_array_equal(t, np.transpose(p, (2, 0, 1)))
    # t's layout {0,2,1} stores dims 1,2,0 major-to-minor: exactly p's bytes
    np.testing.assert_array_equal(b, p)
    # {0,1,2} stores dim 2 most major: the bytes of p.T
    np.testing.assert_array_equal(bc, np.transpose(p, (2, 1, 0)))
    np.testing.assert_array_equal(rb, p.reshape(24, 8))
    # f32[48,4]{0,1} over the buffer of p.T: logical [i,j] = buffer[j*48 + i]
    buf = np.transpose(p, (2, 1, 0)).reshape(-1)
    np.testing.assert_array_equal(cm, buf.reshape(4, 48).T)


def test_bitcast_with_element_type_change_of_same_width():
    x = f32(3, 4, seed=5)
    text = """HloModule m
ENTRY e {
  x = f32[3,4]{1,0} parameter(0)
  ROOT b = s32[4,3]{0,1} bitcast(x)
}"""
    got = run_hlo(text, x)
    # s32[4,3]{0,1} stores dim 1 major: the buffer read as [3,4] row-major
    np.testing.assert_array_equal(got, x.view(np.int32).T)


def test_reshape_and_broadcast_are_logical():
    p = f32(4, 6, seed=6)
    text = """HloModule m
ENTRY e {
  p = f32[4,6]{0,1} parameter(0)
  r = f32[2,12]{1,0} reshape(p)
  b = f32[5,4,3,6]{1,3,0,2} broadcast(p), dimensions={1,3}
  v = f32[6]{0} parameter(1)
  bv = f32[4,6]{0,1} broadcast(v), dimensions={1}
  ROOT out = (f32[2,12]{1,0}, f32[5,4,3,6]{1,3,0,2}, f32[4,6]{0,1}) tuple(r, b, bv)
}"""
    v = f32(6, seed=7)
    r, b, bv = run_hlo(text, p, v)
    np.testing.assert_array_equal(r, p.reshape(2, 12))
    np.testing.assert_array_equal(b, np.broadcast_to(p[None, :, None, :], (5, 4, 3, 6)))
    np.testing.assert_array_equal(bv, np.broadcast_to(v, (4, 6)))


def test_slices_and_dynamic_slices_clamp_like_xla():
    p = f32(10, 12, seed=8)
    u = f32(3, 5, seed=9)
    text = """HloModule m
ENTRY e {
  p = f32[10,12]{1,0} parameter(0)
  u = f32[3,5]{1,0} parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  s = f32[4,4]{1,0} slice(p), slice={[1:9:2], [0:12:3]}
  ds = f32[3,5]{1,0} dynamic-slice(p, i, j), dynamic_slice_sizes={3,5}
  dus = f32[10,12]{1,0} dynamic-update-slice(p, u, i, j)
  ROOT out = (f32[4,4]{1,0}, f32[3,5]{1,0}, f32[10,12]{1,0}) tuple(s, ds, dus)
}"""
    for i, j, ci, cj in [(2, 3, 2, 3), (100, -5, 7, 0), (-1, 9, 0, 7)]:
        s, ds, dus = run_hlo(text, p, u, np.int32(i), np.int32(j))
        np.testing.assert_array_equal(s, p[1:9:2, 0:12:3])
        np.testing.assert_array_equal(ds, p[ci:ci + 3, cj:cj + 5])
        want = p.copy()
        want[ci:ci + 3, cj:cj + 5] = u
        np.testing.assert_array_equal(dus, want)


def _pad_reference(x, value, config):
    """Element-by-element definition of XLA's pad."""
    out_shape = []
    for n, (lo, hi, it) in zip(x.shape, config):
        out_shape.append(lo + hi + n + max(n - 1, 0) * it)
    out = np.full(out_shape, value, dtype=x.dtype)
    for idx in np.ndindex(*x.shape):
        pos = tuple(lo + k * (it + 1) for k, (lo, hi, it) in zip(idx, config))
        if all(0 <= q < s for q, s in zip(pos, out_shape)):
            out[pos] = x[idx]
    return out


def test_pad_low_high_negative_and_interior():
    p = f32(5, 7, seed=10)
    text = """HloModule m
ENTRY e {
  p = f32[5,7]{1,0} parameter(0)
  z = f32[] constant(-1)
  a = f32[10,5]{1,0} pad(p, z), padding=2_-1_1x-2_0
  b = f32[9,16]{1,0} pad(p, z), padding=0_4x3_6_0
  c = f32[3,20]{1,0} pad(p, z), padding=-1_-1_0x-1_2_2
  ROOT out = (f32[10,5]{1,0}, f32[9,16]{1,0}, f32[3,20]{1,0}) tuple(a, b, c)
}"""
    a, b, c = run_hlo(text, p)
    np.testing.assert_array_equal(a, _pad_reference(p, -1, [(2, -1, 1), (-2, 0, 0)]))
    np.testing.assert_array_equal(b, _pad_reference(p, -1, [(0, 4, 0), (3, 6, 0)]))
    np.testing.assert_array_equal(c, _pad_reference(p, -1, [(-1, -1, 0), (-1, 2, 2)]))


def test_iota_reverse_concatenate():
    p = f32(3, 4, seed=11)
    text = """HloModule m
ENTRY e {
  p = f32[3,4]{1,0} parameter(0)
  i = s32[3,4]{0,1} iota(), iota_dimension=1
  f = bf16[5]{0} iota(), iota_dimension=0
  r = f32[3,4]{1,0} reverse(p), dimensions={1}
  c = f32[3,12]{1,0} concatenate(p, r, p), dimensions={1}
  ROOT out = (s32[3,4]{0,1}, bf16[5]{0}, f32[3,12]{1,0}) tuple(i, f, c)
}"""
    i, f, c = run_hlo(text, p)
    np.testing.assert_array_equal(i, np.broadcast_to(np.arange(4), (3, 4)))
    np.testing.assert_array_equal(f.astype(np.float32), np.arange(5))
    np.testing.assert_array_equal(c, np.concatenate([p, p[:, ::-1], p], axis=1))
