"""Dots and convolutions go through one BLAS matmul on matrices numpy can
hand to BLAS (no einsum, no per-element loops), convolutions in both
memory orders (channels-minor NHWC and spatial-minor NCHW im2col) agree
with XLA:CPU, and freed array memory is reused instead of page-faulted in
again per op (bench/evaluator_speed.py measures the speed)."""

from __future__ import annotations

import resource

import ml_dtypes
import numpy as np
import pytest

from hlorun.evaluate import conv, linalg, random_inputs
from hlorun.evaluate.allocator import keep_freed_memory
from hlorun.ir.attrs import parse_dim_labels
from hlorun.ir.shape_inference import infer_shape
from hlorun.text.parser import parse_module

from . import xla_oracle
from .helpers import run_hlo


class _Spy:
    def __init__(self, monkeypatch):
        self.calls = []
        real = np.matmul

        def matmul(a, b, *args, **kw):
            self.calls.append((a, b))
            return real(a, b, *args, **kw)

        def einsum(*args, **kw):
            raise AssertionError("einsum on the dot/convolution path")
        monkeypatch.setattr(np, "matmul", matmul)
        monkeypatch.setattr(np, "einsum", einsum)


def _blas(x):
    """Each matrix (last two dimensions) is laid out for BLAS."""
    one = np.lib.stride_tricks.as_strided(x, (1,) + x.shape[-2:], (0,) + x.strides[-2:])
    return x.dtype == np.float32 and linalg._blas_layout(one)


ATTENTION_DOT = """HloModule m
ENTRY e {
  q = bf16[2,16,4,8]{3,2,1,0} parameter(0)
  k = bf16[2,16,4,8]{3,2,1,0} parameter(1)
  ROOT s = bf16[2,4,16,16]{3,2,1,0} dot(q, k), lhs_batch_dims={0,2}, lhs_contracting_dims={3}, rhs_batch_dims={0,2}, rhs_contracting_dims={3}
}"""


def test_dot_general_is_one_matmul_on_blas_matrices(monkeypatch):
    r = np.random.default_rng(0)
    q, k = (r.uniform(-1, 1, (2, 16, 4, 8)).astype(ml_dtypes.bfloat16) for _ in range(2))
    spy = _Spy(monkeypatch)
    got = run_hlo(ATTENTION_DOT, q, k)
    assert len(spy.calls) == 1
    a, b = spy.calls[0]
    assert a.shape == (8, 16, 8) and b.shape == (8, 8, 16) and _blas(a) and _blas(b)
    monkeypatch.undo()
    want = np.einsum("bthd,bshd->bhts", q.astype(np.float64), k.astype(np.float64))
    np.testing.assert_array_equal(got, want.astype(np.float32).astype(ml_dtypes.bfloat16))


@pytest.mark.parametrize("lb,lc,rb,rc,shape_a,shape_b", [
    ([], [0], [], [1], (24, 16), (8, 24)),  # both operands transposed
    ([2], [0], [0], [2], (6, 5, 3), (3, 7, 6)),  # batch dimension last: one reordering copy
    ([0, 2], [3, 1], [2, 0], [3, 1], (2, 5, 3, 4), (3, 5, 2, 4)),  # 2 batch, 2 contracting dims
])
def test_transposed_operands_still_reach_blas(monkeypatch, lb, lc, rb, rc, shape_a, shape_b):
    r = np.random.default_rng(1)
    a, b = r.uniform(-1, 1, shape_a).astype(np.float32), r.uniform(-1, 1, shape_b).astype(np.float32)
    spy = _Spy(monkeypatch)
    got = linalg.dot_general(a, b, lb, lc, rb, rc)
    assert len(spy.calls) == 1 and all(_blas(x) for x in spy.calls[0])
    monkeypatch.undo()
    letters = "abcdefgh"
    la, lb_ = list(letters[:a.ndim]), list(letters[4:4 + b.ndim])
    for i, j in zip(lb + lc, rb + rc):
        lb_[j] = la[i]
    free_a = [la[d] for d in range(a.ndim) if d not in lb + lc]
    free_b = [lb_[d] for d in range(b.ndim) if d not in rb + rc]
    spec = f"{''.join(la)},{''.join(lb_)}->{''.join([la[d] for d in lb] + free_a + free_b)}"
    np.testing.assert_allclose(got, np.einsum(spec, a.astype(np.float64), b), rtol=1e-5, atol=1e-5)


CONVS = [  # (window, feature_group_count, batch_group_count, input features, output features)
    ("size=3x3 stride=2x2 pad=1_1x1_0", 1, 1, 4, 6),
    ("size=3x3 pad=0_0x1_-1 rhs_dilate=1x2", 1, 1, 4, 6),
    ("size=3x3 pad=1_1x1_1", 4, 1, 4, 8),
    ("size=3x3 pad=2_2x2_2 lhs_dilate=2x2 rhs_reversal=1x1", 1, 1, 4, 6),
    ("size=2x2 stride=1x2", 1, 2, 4, 6),
]


def _conv_text(layout, window, fgc, bgc, c, o):
    n, h, w = 2 * bgc, 7, 6
    if layout == "NHWC":
        xs, labels = (n, h, w, c), "b01f_01io->b01f"
    else:
        xs, labels = (n, c, h, w), "bf01_oi01->bf01"
    ks = (3, 3, c // fgc, o) if "size=3x3" in window else (2, 2, c // fgc, o)
    ks_text = ks if layout == "NHWC" else (ks[3], ks[2], ks[0], ks[1])
    body = (f"HloModule conv\nENTRY e {{\n  x = f32[{','.join(map(str, xs))}] parameter(0)\n"
            f"  w = f32[{','.join(map(str, ks_text))}] parameter(1)\n"
            f"  ROOT c = RESULT convolution(x, w), window={{{window}}}, dim_labels={labels}, "
            f"feature_group_count={fgc}, batch_group_count={bgc}\n}}\n")
    root = parse_module(body.replace("RESULT", "f32[]"), "conv.hlo").entry.root
    shape = infer_shape("convolution", root.operands, root.attrs)
    return body.replace("RESULT", shape.to_string(False))


@pytest.mark.parametrize("chunk", [1 << 20, 64])  # 64 bytes: one output row per GEMM
@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("case", range(len(CONVS)))
def test_convolution_im2col_in_both_memory_orders_agrees_with_xla(layout, case, chunk, monkeypatch):
    if not xla_oracle.available():
        pytest.skip("jax is not installed")
    text = _conv_text(layout, *CONVS[case])
    module = parse_module(text, "conv.hlo")
    root = module.entry.root
    dn = parse_dim_labels(root.attrs["dim_labels"])
    args = random_inputs(module, case)
    assert conv._channels_minor(args[0], dn) == (layout == "NHWC")
    monkeypatch.setattr(conv, "CHUNK_BYTES", chunk)
    spy = _Spy(monkeypatch)
    from hlorun.evaluate import evaluate
    ours = evaluate(module, args)
    grouped = CONVS[case][1] > 1 or CONVS[case][2] > 1
    # grouped: one batched GEMM; else one GEMM per (image, block of output rows)
    assert len(spy.calls) == 1 if grouped else len(spy.calls) >= args[0].shape[0]
    assert all(_blas(x) for call in spy.calls for x in call)
    monkeypatch.undo()
    theirs = xla_oracle.run_on_xla_cpu(text, args)[0]
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


def test_freed_array_memory_is_reused_not_faulted_in_again():
    if not keep_freed_memory():
        pytest.skip("not glibc")
    text = """HloModule m
ENTRY e {
  a = bf16[32,256,128]{2,1,0} parameter(0)
  b = bf16[32,128,256]{2,1,0} parameter(1)
  ROOT d = bf16[32,256,256]{2,1,0} dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
}"""
    module = parse_module(text, "m.hlo")
    args = random_inputs(module, 0)
    from hlorun.evaluate import evaluate
    evaluate(module, args)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(3):
        evaluate(module, args)
    per_run = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 3
    # 20 MiB of fresh f32 arrays per run would be ~5,000 faults of 4 KiB pages
    assert per_run < 1000, per_run


@pytest.mark.parametrize("fgc", [1, 2])
def test_cudnn_backward_convolutions_use_blas_and_are_adjoints(monkeypatch, fgc):
    """<conv(x, w), g> = <x, dx(g, w)> = <w, dw(x, g)> for random x, w and
    two random g, with feature groups; each kernel position is a matmul."""
    r = np.random.default_rng(fgc)
    x = r.uniform(-1, 1, (2, 9, 7, 4)).astype(np.float32)
    w = r.uniform(-1, 1, (3, 3, 4 // fgc, 6)).astype(np.float32)
    common = (f"window={{size=3x3 stride=2x2 pad=1_1x1_1}}, dim_labels=b01f_01io->b01f, "
              f"feature_group_count={fgc}")
    text = f"""HloModule m
ENTRY e {{
  x = f32[2,9,7,4]{{3,2,1,0}} parameter(0)
  w = f32[3,3,{4 // fgc},6]{{3,2,1,0}} parameter(1)
  g = f32[2,5,4,6]{{3,2,1,0}} parameter(2)
  fwd = (f32[2,5,4,6]{{3,2,1,0}}, u8[0]{{0}}) custom-call(x, w), {common}, custom_call_target="__cudnn$convForward"
  bi = (f32[2,9,7,4]{{3,2,1,0}}, u8[0]{{0}}) custom-call(g, w), {common}, custom_call_target="__cudnn$convBackwardInput"
  bf = (f32[3,3,{4 // fgc},6]{{3,2,1,0}}, u8[0]{{0}}) custom-call(x, g), {common}, custom_call_target="__cudnn$convBackwardFilter"
  y = f32[2,5,4,6]{{3,2,1,0}} get-tuple-element(fwd), index=0
  dx = f32[2,9,7,4]{{3,2,1,0}} get-tuple-element(bi), index=0
  dw = f32[3,3,{4 // fgc},6]{{3,2,1,0}} get-tuple-element(bf), index=0
  ROOT out = (f32[2,5,4,6]{{3,2,1,0}}, f32[2,9,7,4]{{3,2,1,0}}, f32[3,3,{4 // fgc},6]{{3,2,1,0}}) tuple(y, dx, dw)
}}"""
    for k in range(2):
        g = r.uniform(-1, 1, (2, 5, 4, 6)).astype(np.float32)
        if k == 0:
            spy = _Spy(monkeypatch)
        y, dx, dw = run_hlo(text, x, w, g)
        if k == 0:
            assert len(spy.calls) == (2 if fgc == 1 else 1) + 2 * 9  # forward: one GEMM per image
            assert all(_blas(a) for call in spy.calls for a in call)
            monkeypatch.undo()
        inner = float(np.sum(y.astype(np.float64) * g))
        assert float(np.sum(x.astype(np.float64) * dx)) == pytest.approx(inner, rel=1e-5)
        assert float(np.sum(w.astype(np.float64) * dw)) == pytest.approx(inner, rel=1e-5)
