"""cuDNN fused attention (``__cudnn$fmha*``) against an independent
reference: a plain numpy forward and JAX's autodiff of the same plain
attention for the gradients; XLA's own non-cuDNN lowering of the same
program; and XLA's before/after pair of the cuDNN program."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from hlorun.cli import cli
from hlorun.evaluate import EvaluationError, evaluate, random_inputs
from hlorun.text.parser import load_module, parse_module

from ..conftest import TESTDATA

DUMPS = TESTDATA / "xla-dumps"

#: JAX's dot numbers per layout: ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))
_DIMS = {
    "BTNH": [((3, 3), ((0, 2), (0, 2))), ((3, 1), ((0, 1), (0, 2))), ((2, 1), ((0, 1), (0, 2))),
             ((3, 1), ((0, 1), (0, 2))), ((2, 1), ((0, 1), (0, 2))), ((3, 3), ((0, 2), (0, 2)))],
    "BNTH": [((3, 3), ((0, 1), (0, 1))), ((3, 2), ((0, 1), (0, 1))), ((2, 2), ((0, 1), (0, 1))),
             ((3, 2), ((0, 1), (0, 1))), ((2, 2), ((0, 1), (0, 1))), ((3, 3), ((0, 1), (0, 1)))],
}
_KEYS = ["bmm1_dot_dimension_numbers", "bmm2_dot_dimension_numbers",
         "bmm1_grad_gemm1_dot_dimension_numbers", "bmm1_grad_gemm2_dot_dimension_numbers",
         "bmm2_grad_gemm1_dot_dimension_numbers", "bmm2_grad_gemm2_dot_dimension_numbers"]


def _config(layout, bwd, scale, mask, window=0, dropout=0.0):
    cfg = {"fmha_scale": scale, "mask_type": mask, "dropout_rate": dropout, "seed": 42,
           "sliding_window_length": window, "max_seg_per_batch": 1, "is_paged_attention": False,
           "is_flash_attention": True}
    for i, (key, ((lc, rc), (lb, rb))) in enumerate(zip(_KEYS, _DIMS[layout])):
        if (i >= 2) == bwd:
            cfg[key] = {"lhs_contracting_dimensions": [str(lc)], "rhs_contracting_dimensions": [str(rc)],
                        "lhs_batch_dimensions": [str(d) for d in lb],
                        "rhs_batch_dimensions": [str(d) for d in rb]}
    return json.dumps({"operation_queue_id": "0", "cudnn_fmha_backend_config": cfg})


def _shape(t, dims):
    return f"{t}[{','.join(map(str, dims))}]"


def _module(layout, b, t, s, nq, nkv, h, *, mask="NO_MASK", bias=False, window=0, padding=False,
            scale=0.25, dropout=0.0, ty="f32"):
    """Forward (training) + backward fused attention, as JAX lowers them."""
    qs = (b, t, nq, h) if layout == "BTNH" else (b, nq, t, h)
    ks = (b, s, nkv, h) if layout == "BTNH" else (b, nkv, s, h)
    bs = (1, nq, t, s)
    mask_type = ("PADDING_" + mask if mask == "CAUSAL" else "PADDING") if padding else mask
    p = [f"q = {_shape(ty, qs)} parameter(0)", f"k = {_shape(ty, ks)} parameter(1)",
         f"v = {_shape(ty, ks)} parameter(2)", f"do = {_shape(ty, qs)} parameter(3)"]
    extra = []
    if bias:
        p.append(f"bias = {_shape(ty, bs)} parameter({len(p)})")
        extra.append("bias")
    seq = []
    if padding:
        p.append(f"ql = s32[{b}] parameter({len(p)})")
        p.append(f"kl = s32[{b}] parameter({len(p)})")
        seq = ["ql", "kl"]
    o4, st = (b, nq, t, h), (b, nq, t)
    fwd_target = "__cudnn$fmhaScaleBiasSoftmax" if bias else "__cudnn$fmhaSoftmax"
    bwd_target = fwd_target + "Backward"
    if dropout:
        fwd_target = fwd_target + "Dropout"
    fcfg = _config(layout, False, scale, mask_type, window, dropout)
    bcfg = _config(layout, True, scale, mask_type, window, dropout)
    perm = "0,2,1,3" if layout == "BTNH" else "0,1,2,3"
    dk4 = (b, nkv, s, h)
    db = f", {_shape(ty, bs)}" if bias else ""
    lines = [
        f"f = ({_shape(ty, o4)}, {_shape('f32', st)}, u8[0]) custom-call({', '.join(['q', 'k', 'v'] + extra + seq)}), "
        f"custom_call_target=\"{fwd_target}\", backend_config={fcfg}",
        f"o = {_shape(ty, o4)} get-tuple-element(f), index=0",
        f"stats = {_shape('f32', st)} get-tuple-element(f), index=1",
        f"ot = {_shape(ty, qs)} transpose(o), dimensions={{{perm}}}",
        f"g = ({_shape(ty, o4)}, {_shape(ty, dk4)}, {_shape(ty, dk4)}{db}, u8[0]) custom-call("
        f"{', '.join(['q', 'k', 'v', 'stats', 'do'] + extra + ['ot'] + seq)}), "
        f"custom_call_target=\"{bwd_target}\", backend_config={bcfg}",
    ]
    outs = ["o", "stats"]
    shapes = [_shape(ty, o4), _shape("f32", st)]
    for i, (name, shp) in enumerate([("dq", o4), ("dk", dk4), ("dv", dk4)] + ([("db", bs)] if bias else [])):
        lines.append(f"{name} = {_shape(ty, shp)} get-tuple-element(g), index={i}")
        outs.append(name)
        shapes.append(_shape(ty, shp))
    lines.append(f"ROOT r = ({', '.join(shapes)}) tuple({', '.join(outs)})")
    body = "\n  ".join(p + lines)
    return f"HloModule fmha\n\nENTRY e {{\n  {body}\n}}\n"


def _to_bnth(x, layout):
    return x if layout == "BNTH" else np.transpose(x, (0, 2, 1, 3))


def _reference(layout, q, k, v, do, bias, scale, keep):
    """Plain attention in f64 (forward, per head) and JAX's vjp for the grads."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    nq, nkv = _to_bnth(q, layout).shape[1], _to_bnth(k, layout).shape[1]
    group = nq // nkv

    def attn(q, k, v, bias):
        q, k, v = (x if layout == "BNTH" else jnp.transpose(x, (0, 2, 1, 3)) for x in (q, k, v))
        k, v = jnp.repeat(k, group, axis=1), jnp.repeat(v, group, axis=1)
        s = jnp.einsum("bnth,bnsh->bnts", q, k) * scale
        if bias is not None:
            s = s + bias
        s = jnp.where(keep, s, -jnp.inf)
        p = jax.nn.softmax(s, axis=-1)
        p = jnp.where(jnp.any(keep, axis=-1, keepdims=True), p, 0.0)
        return jnp.einsum("bnts,bnsh->bnth", p, v)

    args = [np.asarray(a, np.float64) for a in (q, k, v)] + \
        [None if bias is None else np.asarray(bias, np.float64)]
    out, vjp = jax.vjp(lambda q, k, v, bb: attn(q, k, v, bb), *args[:3], args[3]) if bias is not None \
        else jax.vjp(lambda q, k, v: attn(q, k, v, None), *args[:3])
    grads = vjp(jnp.asarray(_to_bnth(np.asarray(do, np.float64), layout)))
    # gradients come back in the operands' layout: the custom calls return B N T H
    grads = [np.asarray(_to_bnth(np.asarray(g), layout)) for g in grads[:3]] + \
        [np.asarray(g) for g in grads[3:]]
    jax.config.update("jax_enable_x64", False)
    return np.asarray(out), grads


def _plain_forward(layout, q, k, v, bias, scale, keep):
    """Independent loops over batch and head in numpy f64."""
    q, k, v = (_to_bnth(np.asarray(x, np.float64), layout) for x in (q, k, v))
    b, nq, t, _ = q.shape
    group = nq // k.shape[1]
    out = np.zeros((b, nq, t, v.shape[-1]))
    lse = np.zeros((b, nq, t))
    for bi in range(b):
        for n in range(nq):
            s = q[bi, n] @ k[bi, n // group].T * scale
            if bias is not None:
                s = s + bias[0, n]
            s = np.where(keep[min(bi, keep.shape[0] - 1), 0], s, -np.inf)
            for i in range(t):
                row = s[i]
                if np.isinf(row).all():
                    continue
                m = row.max()
                e = np.exp(row - m)
                lse[bi, n, i] = m + np.log(e.sum())
                out[bi, n, i] = (e / e.sum()) @ v[bi, n // group]
    return out, lse


CASES = {
    "btnh_causal": dict(layout="BTNH", b=2, t=12, s=12, nq=3, nkv=3, h=8, mask="CAUSAL"),
    "bnth_nomask_t_ne_s": dict(layout="BNTH", b=1, t=5, s=9, nq=2, nkv=2, h=4, mask="NO_MASK"),
    "gqa_bias": dict(layout="BTNH", b=2, t=7, s=10, nq=4, nkv=2, h=6, mask="NO_MASK", bias=True),
    "sliding_window": dict(layout="BNTH", b=1, t=10, s=10, nq=2, nkv=1, h=4, mask="CAUSAL", window=3),
    "padding_causal": dict(layout="BTNH", b=2, t=8, s=8, nq=2, nkv=2, h=4, mask="CAUSAL", padding=True),
}


@pytest.mark.parametrize("case", list(CASES))
def test_fused_attention_matches_plain_attention_and_its_gradients(case):
    c = dict(CASES[case])
    layout = c["layout"]
    text = _module(**c)
    b, t, s, nq, nkv, h = (c[x] for x in ("b", "t", "s", "nq", "nkv", "h"))
    r = np.random.default_rng(len(case))
    qs = (b, t, nq, h) if layout == "BTNH" else (b, nq, t, h)
    ks = (b, s, nkv, h) if layout == "BTNH" else (b, nkv, s, h)
    q, k, v, do = (r.uniform(-1, 1, sh).astype(np.float32) for sh in (qs, ks, ks, qs))
    args = [q, k, v, do]
    bias = None
    if c.get("bias"):
        bias = r.uniform(-1, 1, (1, nq, t, s)).astype(np.float32)
        args.append(bias)
    i, j = np.arange(t)[:, None], np.arange(s)[None, :]
    keep = np.ones((1, 1, t, s), bool)
    if c.get("mask") == "CAUSAL":
        keep &= j <= i
    if c.get("window"):
        keep &= j > i - c["window"]
    ql = None
    if c.get("padding"):
        ql, kl = np.array([5, 8], np.int32), np.array([6, 3], np.int32)
        args += [ql, kl]
        keep = keep & (np.arange(t)[None, None, :, None] < ql[:, None, None, None]) \
            & (np.arange(s)[None, None, None, :] < kl[:, None, None, None])
    got = evaluate(parse_module(text, "fmha.hlo"), args)
    ref_o, ref_lse = _plain_forward(layout, q, k, v, bias, 0.25, keep)
    if ql is not None:  # padded query rows give zeros
        ref_o = ref_o * (np.arange(t)[None, None, :, None] < ql[:, None, None, None])
    np.testing.assert_allclose(got[0], ref_o, rtol=1e-5, atol=1e-5)
    seen = keep.any(-1) & np.ones(ref_lse.shape, bool)
    np.testing.assert_allclose(np.where(seen, got[1], 0), np.where(seen, ref_lse, 0), rtol=1e-5, atol=1e-5)
    _, grads = _reference(layout, q, k, v, do, bias, 0.25, keep)
    names = ["dQ", "dK", "dV", "dbias"]
    for name, want, have in zip(names, grads, got[2:]):
        np.testing.assert_allclose(have, want, rtol=1e-4, atol=1e-4, err_msg=name)


def test_dropout_is_refused_not_guessed():
    text = _module("BTNH", 1, 4, 4, 1, 1, 4, mask="CAUSAL", dropout=0.1)
    module = parse_module(text, "fmha.hlo")
    with pytest.raises(EvaluationError, match="dropout_rate=0.1 is not evaluable.*Philox"):
        evaluate(module, random_inputs(module, 0))


def test_dropout_is_a_located_error_in_compare(tmp_path):
    p = tmp_path / "drop.hlo"
    p.write_text(_module("BTNH", 1, 4, 4, 1, 1, 4, mask="CAUSAL", dropout=0.1))
    r = subprocess.run([sys.executable, "-m", "hlorun", "compare", str(p), str(p)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "drop.hlo:" in r.stderr and "not evaluable" in r.stderr, r.stderr


def _pair(name):
    d = DUMPS / name
    return next(d.glob("*before_optimizations*")), next(d.glob("*gpu_after_optimizations*"))


def test_xla_cudnn_attention_before_and_after_match():
    before, after = _pair("attention_dpa_cudnn")
    r = CliRunner().invoke(cli, ["compare", str(before), str(after), "--format", "json"])
    doc = json.loads(r.stdout)
    assert r.exit_code == 0 and doc["ok"], [o for o in doc["outputs"] if not o["ok"]]


def test_cudnn_calls_agree_with_xlas_own_attention_lowering():
    """The same JAX program (causal attention and its gradients, bf16)
    lowered by XLA itself and through cuDNN's fused calls: the outputs agree
    to bf16 rounding; the same calls with the mask dropped do not."""
    xla = load_module(_pair("attention_dpa")[0])
    cudnn_path = _pair("attention_dpa_cudnn")[0]
    args = random_inputs(xla, 0)
    want = [np.asarray(x, np.float64) for x in evaluate(xla, args)]

    def errors(module):
        got = evaluate(module, args)
        return [float(np.linalg.norm(np.asarray(g, np.float64) - w) / np.linalg.norm(w))
                for g, w in zip(got, want)]

    good = errors(load_module(cudnn_path))
    assert max(good) < 1e-2, good
    unmasked = parse_module(cudnn_path.read_text().replace('"CAUSAL"', '"NO_MASK"'), "nomask.hlo")
    bad = errors(unmasked)
    assert min(bad[:3]) > 0.1, bad
