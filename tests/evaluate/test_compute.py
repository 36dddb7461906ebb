"""reduce, reduce-window, sort, dot, convolution, gather, scatter,
select-and-scatter and control flow against references written from the
definitions (explicit loops on small shapes, or plain numpy)."""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np

from .helpers import f32, rng, run_hlo

REDUCERS = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
"""


def test_reduce_simple_variadic_and_general_reducers():
    p = f32(6, 37, 5, seed=20)
    text = """HloModule m
""" + REDUCERS + """
argmax {
  av = f32[] parameter(0)
  ai = s32[] parameter(1)
  bv = f32[] parameter(2)
  bi = s32[] parameter(3)
  gt = pred[] compare(av, bv), direction=GT
  eq = pred[] compare(av, bv), direction=EQ
  lt = pred[] compare(ai, bi), direction=LT
  tie = pred[] and(eq, lt)
  pick = pred[] or(gt, tie)
  v = f32[] select(pick, av, bv)
  i = s32[] select(pick, ai, bi)
  ROOT r = (f32[], s32[]) tuple(v, i)
}
absmax {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  x = f32[] abs(a)
  y = f32[] abs(b)
  ROOT m = f32[] maximum(x, y)
}
ENTRY e {
  p = f32[6,37,5]{2,1,0} parameter(0)
  z = f32[] constant(0)
  n = f32[] constant(-inf)
  s = f32[6,5]{1,0} reduce(p, z), dimensions={1}, to_apply=add
  m = f32[37]{0} reduce(p, n), dimensions={0,2}, to_apply=max
  io = s32[6,37,5]{2,1,0} iota(), iota_dimension=1
  zi = s32[] constant(0)
  am = (f32[6,5]{1,0}, s32[6,5]{1,0}) reduce(p, io, n, zi), dimensions={1}, to_apply=argmax
  ab = f32[6]{0} reduce(p, z), dimensions={1,2}, to_apply=absmax
  ROOT out = (f32[6,5]{1,0}, f32[37]{0}, (f32[6,5]{1,0}, s32[6,5]{1,0}), f32[6]{0}) tuple(s, m, am, ab)
}"""
    s, m, (av, ai), ab = run_hlo(text, p)
    np.testing.assert_allclose(s, p.astype(np.float64).sum(axis=1), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(m, p.max(axis=(0, 2)))
    np.testing.assert_array_equal(ai, p.argmax(axis=1))
    np.testing.assert_array_equal(av, p.max(axis=1))
    np.testing.assert_array_equal(ab, np.abs(p).max(axis=(1, 2)))


def test_bf16_reduce_accumulates_in_f32():
    x = np.full((4096,), 1.0, dtype=ml_dtypes.bfloat16)
    text = """HloModule m
add {
  a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT s = bf16[] add(a, b)
}
ENTRY e {
  x = bf16[4096]{0} parameter(0)
  z = bf16[] constant(0)
  ROOT r = bf16[] reduce(x, z), dimensions={0}, to_apply=add
}"""
    # sequential bf16 accumulation would stall at 256; XLA:GPU accumulates wider
    assert float(run_hlo(text, x)) == 4096.0


def _reduce_window_ref(x, init, fn, size, stride, pad, lhs_dil, rhs_dil):
    rank = x.ndim
    dil_shape = [(n - 1) * d + 1 for n, d in zip(x.shape, lhs_dil)]
    full = np.full([s + lo + hi for s, (lo, hi) in zip(dil_shape, pad)], init, dtype=np.float64)
    for idx in np.ndindex(*x.shape):
        full[tuple(i * d + lo for i, d, (lo, hi) in zip(idx, lhs_dil, pad))] = x[idx]
    ext = [(k - 1) * d + 1 for k, d in zip(size, rhs_dil)]
    out_shape = [(f - e) // s + 1 for f, e, s in zip(full.shape, ext, stride)]
    out = np.empty(out_shape)
    for o in np.ndindex(*out_shape):
        acc = init
        for k in np.ndindex(*size):
            acc = fn(acc, full[tuple(o[i] * stride[i] + k[i] * rhs_dil[i] for i in range(rank))])
        out[o] = acc
    return out


def test_reduce_window_pooling_dilation_and_padding():
    p = f32(2, 9, 7, 2, seed=21)
    text = """HloModule m
""" + REDUCERS + """
ENTRY e {
  p = f32[2,9,7,2]{3,2,1,0} parameter(0)
  z = f32[] constant(0)
  n = f32[] constant(-inf)
  mp = f32[2,5,4,2]{3,2,1,0} reduce-window(p, n), window={size=1x3x3x1 stride=1x2x2x1 pad=0_0x1_1x1_1x0_0}, to_apply=max
  dl = f32[2,17,4,2]{3,2,1,0} reduce-window(p, z), window={size=1x3x2x1 pad=0_0x1_1x0_0x0_0 lhs_dilate=1x2x1x1 rhs_dilate=1x1x3x1}, to_apply=add
  ROOT out = (f32[2,5,4,2]{3,2,1,0}, f32[2,17,4,2]{3,2,1,0}) tuple(mp, dl)
}"""
    mp, dl = run_hlo(text, p)
    np.testing.assert_array_equal(mp, _reduce_window_ref(p, -np.inf, max, (1, 3, 3, 1), (1, 2, 2, 1),
                                                         [(0, 0), (1, 1), (1, 1), (0, 0)], (1,) * 4, (1,) * 4))
    np.testing.assert_allclose(dl, _reduce_window_ref(p, 0.0, lambda a, b: a + b, (1, 3, 2, 1), (1,) * 4,
                                                      [(0, 0), (1, 1), (0, 0), (0, 0)], (1, 2, 1, 1),
                                                      (1, 1, 3, 1)), rtol=1e-6)


def test_sort_fast_path_and_comparator_network():
    x = f32(6, 37, seed=22)
    x[0, :5] = 0.5  # ties, to check stability
    k = rng(23).integers(0, 4, (6, 37)).astype(np.int32)
    text = """HloModule m
less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=LT, type=TOTALORDER
}
gt_kv {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ROOT c = pred[] compare(a, b), direction=GT
}
lex {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  x = f32[] parameter(2)
  y = f32[] parameter(3)
  ltk = pred[] compare(a, b), direction=LT
  eqk = pred[] compare(a, b), direction=EQ
  gtv = pred[] compare(x, y), direction=GT
  both = pred[] and(eqk, gtv)
  ROOT r = pred[] or(ltk, both)
}
ENTRY e {
  x = f32[6,37]{1,0} parameter(0)
  k = s32[6,37]{1,0} parameter(1)
  io = s32[6,37]{1,0} iota(), iota_dimension=1
  a = f32[6,37]{1,0} sort(x), dimensions={0}, to_apply=less
  kv = (f32[6,37]{1,0}, s32[6,37]{1,0}) sort(x, io), dimensions={1}, is_stable=true, to_apply=gt_kv
  lx = (s32[6,37]{1,0}, f32[6,37]{1,0}, s32[6,37]{1,0}) sort(k, x, io), dimensions={1}, is_stable=true, to_apply=lex
  ROOT out = (f32[6,37]{1,0}, (f32[6,37]{1,0}, s32[6,37]{1,0}), (s32[6,37]{1,0}, f32[6,37]{1,0}, s32[6,37]{1,0})) tuple(a, kv, lx)
}"""
    a, (kv, kvi), (lk, lv, li) = run_hlo(text, x, k)
    np.testing.assert_array_equal(a, np.sort(x, axis=0))
    want_i = np.argsort(-x, axis=1, kind="stable")
    np.testing.assert_array_equal(kvi, want_i)
    np.testing.assert_array_equal(kv, np.take_along_axis(x, want_i, 1))
    for r in range(6):
        order = sorted(range(37), key=lambda c: (k[r, c], -x[r, c], c))
        np.testing.assert_array_equal(li[r], order)
        np.testing.assert_array_equal(lk[r], k[r, order])
        np.testing.assert_array_equal(lv[r], x[r, order])


def test_dot_dimension_numbers_and_precision():
    a = f32(3, 40, 24, seed=24)
    b = f32(3, 24, 32, seed=25)
    c = f32(16, 8, 12, seed=26).astype(ml_dtypes.bfloat16)
    d = f32(12, 8, 20, seed=27).astype(ml_dtypes.bfloat16)
    e = rng(28).integers(-128, 128, (24, 40)).astype(np.int8)
    f = rng(29).integers(-128, 128, (40, 16)).astype(np.int8)
    text = """HloModule m
ENTRY e {
  a = f32[3,40,24]{2,1,0} parameter(0)
  b = f32[3,24,32]{2,1,0} parameter(1)
  c = bf16[16,8,12]{2,1,0} parameter(2)
  d = bf16[12,8,20]{2,1,0} parameter(3)
  e = s8[24,40]{1,0} parameter(4)
  f = s8[40,16]{1,0} parameter(5)
  bmm = f32[3,40,32]{2,1,0} dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
  mc = f32[16,20]{1,0} dot(c, d), lhs_contracting_dims={1,2}, rhs_contracting_dims={1,0}
  mcb = bf16[16,20]{1,0} dot(c, d), lhs_contracting_dims={1,2}, rhs_contracting_dims={1,0}
  ii = s32[24,16]{1,0} dot(e, f), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  tr = f32[3,40,3,32]{3,2,1,0} dot(a, b), lhs_contracting_dims={2}, rhs_contracting_dims={1}
  ROOT out = (f32[3,40,32]{2,1,0}, f32[16,20]{1,0}, bf16[16,20]{1,0}, s32[24,16]{1,0}, f32[3,40,3,32]{3,2,1,0}) tuple(bmm, mc, mcb, ii, tr)
}"""
    bmm, mc, mcb, ii, tr = run_hlo(text, a, b, c, d, e, f)
    np.testing.assert_allclose(bmm, np.einsum("bmk,bkn->bmn", a, b), rtol=1e-5, atol=1e-6)
    want = np.einsum("mjk,kjn->mn", c.astype(np.float64), d.astype(np.float64))
    np.testing.assert_allclose(mc, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(mcb, mc.astype(ml_dtypes.bfloat16))  # one rounding of the f32 sum
    np.testing.assert_array_equal(ii, e.astype(np.int32) @ f.astype(np.int32))
    np.testing.assert_allclose(tr, np.einsum("amk,bkn->ambn", a, b), rtol=1e-5, atol=1e-6)


def _conv_ref(x, w, stride, pad, lhs_dil, rhs_dil, groups=1):
    """NCHW input, OIHW kernel, by definition (spatial rank 2)."""
    n, c, h, wd = x.shape
    o, ci, kh, kw = w.shape
    xd = np.zeros((n, c, (h - 1) * lhs_dil[0] + 1, (wd - 1) * lhs_dil[1] + 1))
    xd[:, :, ::lhs_dil[0], ::lhs_dil[1]] = x
    H, W = xd.shape[2:]
    oh = (H + pad[0][0] + pad[0][1] - ((kh - 1) * rhs_dil[0] + 1)) // stride[0] + 1
    ow = (W + pad[1][0] + pad[1][1] - ((kw - 1) * rhs_dil[1] + 1)) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for b, oc, i, j in itertools.product(range(n), range(o), range(oh), range(ow)):
        g = oc // og
        acc = 0.0
        for ic, u, v in itertools.product(range(ci), range(kh), range(kw)):
            y = i * stride[0] + u * rhs_dil[0] - pad[0][0]
            z = j * stride[1] + v * rhs_dil[1] - pad[1][0]
            if 0 <= y < H and 0 <= z < W:
                acc += xd[b, g * ci + ic, y, z] * w[oc, ic, u, v]
        out[b, oc, i, j] = acc
    return out


def test_convolution_layouts_strides_dilations_groups():
    x = f32(2, 7, 6, 4, seed=30)   # NHWC
    w = f32(3, 3, 4, 6, seed=31)   # HWIO
    dw = f32(3, 3, 1, 8, seed=32)  # depthwise, multiplier 2
    text = """HloModule m
ENTRY e {
  x = f32[2,7,6,4]{3,2,1,0} parameter(0)
  w = f32[3,3,4,6]{3,2,1,0} parameter(1)
  dw = f32[3,3,1,8]{3,2,1,0} parameter(2)
  a = f32[2,4,3,6]{3,2,1,0} convolution(x, w), window={size=3x3 stride=2x2 pad=1_1x1_0}, dim_labels=b01f_01io->b01f
  b = f32[2,6,5,2]{3,2,1,0} convolution(x, w), window={size=3x3 pad=0_0x1_-1 rhs_dilate=1x2}, dim_labels=b01f_01io->bf01
  c = f32[2,7,6,8]{3,2,1,0} convolution(x, dw), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=4
  t = f32[2,15,13,6]{3,2,1,0} convolution(x, w), window={size=3x3 pad=2_2x2_2 lhs_dilate=2x2 rhs_reversal=1x1}, dim_labels=b01f_01io->b01f
  ROOT out = (f32[2,4,3,6]{3,2,1,0}, f32[2,6,5,2]{3,2,1,0}, f32[2,7,6,8]{3,2,1,0}, f32[2,15,13,6]{3,2,1,0}) tuple(a, b, c, t)
}"""
    a, b, c, t = run_hlo(text, x, w, dw)
    xn = np.transpose(x, (0, 3, 1, 2)).astype(np.float64)
    wn = np.transpose(w, (3, 2, 0, 1)).astype(np.float64)
    ref_a = _conv_ref(xn, wn, (2, 2), [(1, 1), (1, 0)], (1, 1), (1, 1))
    np.testing.assert_allclose(a, np.transpose(ref_a, (0, 2, 3, 1)), rtol=1e-5, atol=1e-5)
    ref_b = _conv_ref(xn, wn, (1, 1), [(0, 0), (1, -1)], (1, 1), (1, 2))
    np.testing.assert_allclose(b, ref_b, rtol=1e-5, atol=1e-5)
    dwn = np.transpose(dw, (3, 2, 0, 1)).astype(np.float64)
    ref_c = _conv_ref(xn, dwn, (1, 1), [(1, 1), (1, 1)], (1, 1), (1, 1), groups=4)
    np.testing.assert_allclose(c, np.transpose(ref_c, (0, 2, 3, 1)), rtol=1e-5, atol=1e-5)
    ref_t = _conv_ref(xn, wn[:, :, ::-1, ::-1], (1, 1), [(2, 2), (2, 2)], (2, 2), (1, 1))
    np.testing.assert_allclose(t, np.transpose(ref_t, (0, 2, 3, 1)), rtol=1e-5, atol=1e-5)


def test_gather_and_scatter_forms():
    table = f32(50, 16, seed=33)
    ids = rng(34).integers(0, 50, (7, 3)).astype(np.int32)
    ids[0, :] = [5, 5, 5]  # duplicates
    upd = f32(7, 3, 16, seed=35)
    pairs = np.array([[0, 0], [46, 10], [60, 20], [-3, 2], [10, 11]], dtype=np.int32)
    text = """HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
mulmax {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  m = f32[] multiply(a, b)
  ROOT x = f32[] maximum(m, b)
}
ENTRY e {
  table = f32[50,16]{1,0} parameter(0)
  ids = s32[7,3]{1,0} parameter(1)
  upd = f32[7,3,16]{2,1,0} parameter(2)
  pairs = s32[5,2]{1,0} parameter(3)
  rows = f32[7,3,16]{2,1,0} gather(table, ids), offset_dims={2}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=2, slice_sizes={1,16}
  wins = f32[5,4,6]{2,1,0} gather(table, pairs), offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={0,1}, index_vector_dim=1, slice_sizes={4,6}
  sadd = f32[50,16]{1,0} scatter(table, ids, upd), update_window_dims={2}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=2, to_apply=add
  sgen = f32[50,16]{1,0} scatter(table, ids, upd), update_window_dims={2}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=2, to_apply=mulmax
  wupd = f32[5,4,6]{2,1,0} parameter(4)
  swin = f32[50,16]{1,0} scatter(table, pairs, wupd), update_window_dims={1,2}, inserted_window_dims={}, scatter_dims_to_operand_dims={0,1}, index_vector_dim=1, to_apply=add
  ROOT out = (f32[7,3,16]{2,1,0}, f32[5,4,6]{2,1,0}, f32[50,16]{1,0}, f32[50,16]{1,0}, f32[50,16]{1,0}) tuple(rows, wins, sadd, sgen, swin)
}"""
    wupd = f32(5, 4, 6, seed=36)
    rows, wins, sadd, sgen, swin = run_hlo(text, table, ids, upd, pairs, wupd)
    np.testing.assert_array_equal(rows, table[ids])
    for k, (r, c) in enumerate(pairs):  # starts clamp into [0, dim - size]
        r, c = min(max(r, 0), 46), min(max(c, 0), 10)
        np.testing.assert_array_equal(wins[k], table[r:r + 4, c:c + 6])
    want = table.astype(np.float64).copy()
    np.add.at(want, ids.reshape(-1), upd.reshape(-1, 16))
    np.testing.assert_allclose(sadd, want, rtol=1e-6, atol=1e-6)
    want = table.copy()
    for (i, j) in np.ndindex(7, 3):  # sequential application of the combiner
        t = ids[i, j]
        want[t] = np.maximum(want[t] * upd[i, j], upd[i, j])
    np.testing.assert_allclose(sgen, want, rtol=1e-6)
    want = table.copy()
    for k, (r, c) in enumerate(pairs):  # out-of-bounds windows are skipped
        if 0 <= r <= 46 and 0 <= c <= 10:
            want[r:r + 4, c:c + 6] += wupd[k]
    np.testing.assert_allclose(swin, want, rtol=1e-6)


def test_select_and_scatter_max_pool_gradient():
    x = f32(1, 6, 5, 1, seed=37)
    g = f32(1, 3, 3, 1, seed=38)
    text = """HloModule m
ge {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=GE
}
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[1,6,5,1]{3,2,1,0} parameter(0)
  g = f32[1,3,3,1]{3,2,1,0} parameter(1)
  z = f32[] constant(0)
  ROOT s = f32[1,6,5,1]{3,2,1,0} select-and-scatter(x, g, z), window={size=1x3x3x1 stride=1x2x2x1 pad=0_0x1_0x1_1x0_0}, select=ge, scatter=add
}"""
    got = run_hlo(text, x, g)
    want = np.zeros_like(x)
    for i, j in np.ndindex(3, 3):
        best = None
        for u, v in np.ndindex(3, 3):
            r, c = i * 2 + u - 1, j * 2 + v - 1
            if 0 <= r < 6 and 0 <= c < 5 and (best is None or not x[0, best[0], best[1], 0] >= x[0, r, c, 0]):
                best = (r, c)
        want[0, best[0], best[1], 0] += g[0, i, j, 0]
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_while_conditional_call_fusion():
    x = f32(8, seed=39)
    text = """HloModule m
cond {
  s = (s32[], f32[8]{0}) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(5)
  ROOT c = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[8]{0}) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = f32[8]{0} get-tuple-element(s), index=1
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  h = f32[] constant(0.5)
  bh = f32[8]{0} broadcast(h), dimensions={}
  v1 = f32[8]{0} multiply(v, bh)
  ROOT r = (s32[], f32[8]{0}) tuple(i1, v1)
}
neg { p = f32[8]{0} parameter(0)
  ROOT n = f32[8]{0} negate(p) }
abs { p = f32[8]{0} parameter(0)
  ROOT a = f32[8]{0} abs(p) }
sq { p = f32[8]{0} parameter(0)
  ROOT s = f32[8]{0} multiply(p, p) }
fused {
  p0 = f32[8]{0} parameter(0)
  p1 = f32[8]{0} parameter(1)
  ROOT m = f32[8]{0} subtract(p0, p1)
}
ENTRY e {
  x = f32[8]{0} parameter(0)
  b = pred[] parameter(1)
  k = s32[] parameter(2)
  z = s32[] constant(0)
  init = (s32[], f32[8]{0}) tuple(z, x)
  w = (s32[], f32[8]{0}) while(init), condition=cond, body=body
  wv = f32[8]{0} get-tuple-element(w), index=1
  c2 = f32[8]{0} conditional(b, x, x), true_computation=neg, false_computation=abs
  cn = f32[8]{0} conditional(k, x, x, x), branch_computations={neg, abs, sq}
  f = f32[8]{0} fusion(wv, c2), kind=kLoop, calls=fused
  c = f32[8]{0} call(f), to_apply=sq
  ROOT out = (f32[8]{0}, f32[8]{0}, f32[8]{0}, f32[8]{0}) tuple(wv, c2, cn, c)
}"""
    for b, k in [(True, 0), (False, 2), (True, 7), (False, -1)]:
        wv, c2, cn, c = run_hlo(text, x, np.bool_(b), np.int32(k))
        np.testing.assert_allclose(wv, x / 32, rtol=1e-7)
        np.testing.assert_array_equal(c2, -x if b else np.abs(x))
        np.testing.assert_array_equal(cn, {0: -x, 1: np.abs(x)}.get(k, x * x))
        np.testing.assert_allclose(c, (x / 32 - c2) ** 2, rtol=1e-6)
