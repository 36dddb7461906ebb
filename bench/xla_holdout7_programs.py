"""Held-out set 7 (testdata/xla-dumps-holdout/, "set 7"): twelve JAX programs
written by the coordinator in session 7 and compiled by XLA (JAX 0.11.2,
NVIDIA H200) at the start of that session, measured before any engineer saw
them.  Same builder contract as xla_oracle_programs.py; added to its
PROGRAMS, so ``python3 bench/xla_oracle_dumps.py OUT NAME`` re-makes one.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax

# the earlier sets' shorthands, norms and loss (bench/ is on sys.path)
from xla_holdout3_programs import BF16, F32, S, _ln, _rms
from xla_holdout4_programs import _xent
from xla_holdout5_programs import _sgd

I32 = jnp.int32
F16 = jnp.float16


def mod_router_train_bf16(b=4, t=256, d=256, ff=1024, cap=64):
    """Mixture-of-depths: a router picks the top-64 tokens per sequence, only they pass the MLP."""
    def loss(p, x, y):
        r = (x @ p["wr"])[..., 0].astype(F32)  # b,t
        w, idx = lax.top_k(r, cap)
        sel = jnp.take_along_axis(x, idx[..., None], 1)  # b,cap,d
        h = jax.nn.gelu(_rms(sel, p["g"]) @ p["w1"]) @ p["w2"]
        h = h * jax.nn.sigmoid(w)[..., None].astype(BF16)
        bi = jnp.arange(b)[:, None]
        out = x.at[bi, idx].add(h)
        return jnp.mean((out.astype(F32) - y.astype(F32)) ** 2)
    p = dict(wr=S((d, 1), BF16), g=S((d,), F32), w1=S((d, ff), BF16), w2=S((ff, d), BF16))
    return _sgd(loss), (p, S((b, t, d), BF16), S((b, t, d), BF16))


def spec_decode_verify_bf16(b=8, k=5, d=512, vocab=8192):
    """Speculative decoding verify step: target logits for k drafts, acceptance ratio, first reject."""
    def step(emb, wout, h, draft_tok, draft_p, u):
        logits = (h @ wout).astype(F32)  # b,k+1,vocab
        probs = jax.nn.softmax(logits, -1)
        pt = jnp.take_along_axis(probs[:, :k], draft_tok[..., None], -1)[..., 0]
        acc = u < jnp.minimum(1.0, pt / draft_p)
        n_acc = jnp.sum(jnp.cumprod(acc.astype(I32), -1), -1)
        resid = jnp.maximum(probs[:, :k] - draft_p[..., None], 0.0)
        nxt = jnp.argmax(jnp.concatenate([resid, probs[:, k:]], 1), -1)  # b,k+1
        tok = jnp.take_along_axis(nxt, n_acc[:, None], 1)[:, 0]
        return tok, n_acc, emb[tok] + h[:, -1]
    return step, (S((vocab, d), BF16), S((d, vocab), BF16), S((b, k + 1, d), BF16),
                  S((b, k), I32), S((b, k), F32), S((b, k), F32))


def gat_segment_softmax_f32(n=4096, e=32768, d=64, heads=4):
    """Graph attention: per-edge scores, segment-max/segment-sum softmax over destinations; training."""
    hd = d // heads
    def loss(p, x, src, dst, y):
        hx = (x @ p["w"]).reshape(n, heads, hd)
        s = jax.nn.leaky_relu((hx[src] * p["a1"]).sum(-1) + (hx[dst] * p["a2"]).sum(-1), 0.2)
        smax = jax.ops.segment_max(s, dst, n)
        ex = jnp.exp(s - smax[dst])
        den = jax.ops.segment_sum(ex, dst, n)
        alpha = ex / (den[dst] + 1e-9)
        out = jax.ops.segment_sum(alpha[..., None] * hx[src], dst, n).reshape(n, d)
        return _xent(jax.nn.elu(out) @ p["wo"], y)
    p = dict(w=S((d, d), F32), a1=S((heads, hd), F32), a2=S((heads, hd), F32), wo=S((d, 16), F32))
    return _sgd(loss), (p, S((n, d), F32), S((e,), I32), S((e,), I32), S((n,), I32))


def flow_matching_mlp_bf16(b=256, d=128, hid=512, temb=64, blocks=3):
    """Rectified-flow step: sinusoidal time embedding, adaLN-modulated residual MLP blocks; training."""
    def loss(p, x0, x1, t):
        xt = (1 - t[:, None]) * x0 + t[:, None] * x1
        f = jnp.exp(-math.log(1e4) * jnp.arange(temb // 2) / (temb // 2))
        e = jnp.concatenate([jnp.sin(t[:, None] * f), jnp.cos(t[:, None] * f)], -1)
        c = jax.nn.silu(e.astype(BF16) @ p["wt"])
        h = xt.astype(BF16) @ p["win"]
        for i in range(blocks):
            sc, sh = jnp.split(c @ p["ada"][i], 2, -1)
            hn = _ln(h, p["g"][i], p["bb"][i]) * (1 + sc) + sh
            h = h + jax.nn.gelu(hn @ p["w1"][i]) @ p["w2"][i]
        v = (h @ p["wout"]).astype(F32)
        return jnp.mean((v - (x1 - x0)) ** 2)
    p = dict(wt=S((temb, hid), BF16), win=S((d, hid), BF16), ada=S((blocks, hid, 2 * hid), BF16),
             g=S((blocks, hid), F32), bb=S((blocks, hid), F32), w1=S((blocks, hid, hid), BF16),
             w2=S((blocks, hid, hid), BF16), wout=S((hid, d), BF16))
    return _sgd(loss), (p, S((b, d), F32), S((b, d), F32), S((b,), F32))


def gp_cholesky_f32(n=512, d=8):
    """Gaussian-process marginal likelihood: RBF kernel, Cholesky, triangular solves; hyper-gradient."""
    def nll(p, x, y):
        ls, sf, sn = jnp.exp(p["log_ls"]), jnp.exp(p["log_sf"]), jnp.exp(p["log_sn"])
        xs = x / ls
        sq = (xs * xs).sum(-1)
        d2 = sq[:, None] + sq[None, :] - 2 * xs @ xs.T
        kmat = sf * jnp.exp(-0.5 * jnp.maximum(d2, 0.0)) + (sn + 1e-4) * jnp.eye(n)
        chol = jnp.linalg.cholesky(kmat)
        alpha = jax.scipy.linalg.cho_solve((chol, True), y)
        return 0.5 * y @ alpha + jnp.log(jnp.diagonal(chol)).sum()
    p = dict(log_ls=S((d,), F32), log_sf=S((), F32), log_sn=S((), F32))
    return _sgd(nll), (p, S((n, d), F32), S((n,), F32))


def fno_spectral_f32(b=8, n=256, c=32, modes=32, layers=2):
    """Fourier neural operator: rfft, complex weights on the low modes, irfft, pointwise path; training."""
    def loss(p, x, y):
        h = x @ p["lift"]
        for i in range(layers):
            hf = jnp.fft.rfft(h, axis=1)[:, :modes]  # b,modes,c complex
            w = lax.complex(p["wr"][i], p["wi"][i])
            of = jnp.einsum("bmc,mcd->bmd", hf, w)
            of = jnp.pad(of, ((0, 0), (0, n // 2 + 1 - modes), (0, 0)))
            h = jax.nn.gelu(jnp.fft.irfft(of, n=n, axis=1) + h @ p["pw"][i])
        return jnp.mean(((h @ p["proj"])[..., 0] - y) ** 2)
    p = dict(lift=S((2, c), F32), wr=S((layers, modes, c, c), F32), wi=S((layers, modes, c, c), F32),
             pw=S((layers, c, c), F32), proj=S((c, 1), F32))
    return _sgd(loss), (p, S((b, n, 2), F32), S((b, n), F32))


def ctc_loss_scan_f32(b=16, t=64, lab=12, vocab=32, d=128):
    """CTC loss: log-space alpha recursion over frames in lax.scan (blank-interleaved labels); training."""
    s_len = 2 * lab + 1
    def loss(p, feats, labels):
        logp = jax.nn.log_softmax(feats @ p["w"], -1)  # b,t,vocab
        ext = jnp.zeros((b, s_len), I32).at[:, 1::2].set(labels)  # blank = 0
        lp = jnp.take_along_axis(logp, jnp.broadcast_to(ext[:, None], (b, t, s_len)), 2)
        skip_ok = jnp.concatenate([jnp.zeros((b, 2), bool),
                                   (ext[:, 2:] != 0) & (ext[:, 2:] != ext[:, :-2])], 1)
        neg = -1e30
        a0 = jnp.full((b, s_len), neg).at[:, :2].set(lp[:, 0, :2])
        def body(a, lpt):
            a1 = jnp.concatenate([jnp.full((b, 1), neg), a[:, :-1]], 1)
            a2 = jnp.where(skip_ok, jnp.concatenate([jnp.full((b, 2), neg), a[:, :-2]], 1), neg)
            m = jnp.maximum(jnp.maximum(a, a1), a2)
            a = m + jnp.log(jnp.exp(a - m) + jnp.exp(a1 - m) + jnp.exp(a2 - m)) + lpt
            return a, None
        a, _ = lax.scan(body, a0, jnp.swapaxes(lp[:, 1:], 0, 1))
        return -jnp.mean(jnp.logaddexp(a[:, -1], a[:, -2]))
    p = dict(w=S((d, vocab), F32))
    return _sgd(loss), (p, S((b, t, d), F32), S((b, lab), I32))


def alibi_attn_tf32_train_f32(b=4, t=256, d=256, h=8):
    """f32 attention with ALiBi slopes; every dot runs the TF32_TF32_F32 algorithm; training."""
    prec = lax.DotAlgorithmPreset.TF32_TF32_F32
    hd = d // h
    slopes = 2.0 ** (-8.0 * (jnp.arange(h) + 1) / h)
    def loss(p, x, y):
        xn = _ln(x, p["g"], p["bb"])
        qkv = jnp.einsum("btd,de->bte", xn, p["wqkv"], precision=prec).reshape(b, t, 3, h, hd)
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        i = jnp.arange(t)
        bias = -slopes[:, None, None] * jnp.abs(i[:, None] - i[None, :])
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k, precision=prec) / math.sqrt(hd) + bias
        s = jnp.where(i[:, None] >= i[None, :], s, -1e30)
        o = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, -1), v, precision=prec).reshape(b, t, d)
        out = x + jnp.einsum("btd,de->bte", o, p["wo"], precision=prec)
        return jnp.mean((out - y) ** 2)
    p = dict(g=S((d,), F32), bb=S((d,), F32), wqkv=S((d, 3 * d), F32), wo=S((d, d), F32))
    return _sgd(loss), (p, S((b, t, d), F32), S((b, t, d), F32))


def shampoo_newton_f32(d=256, iters=8):
    """Shampoo-style preconditioner: inverse 4th roots by coupled Newton iterations in a fori_loop."""
    def inv_root(a):
        eye = jnp.eye(d)
        z = a / (jnp.linalg.norm(a) + 1e-6)
        def body(_, c):
            x, m = c
            t = (5 * eye - m) / 4
            return x @ t, (t @ t @ t @ t) @ m
        x, _ = lax.fori_loop(0, iters, body, (eye, z))
        return x * (jnp.linalg.norm(a) + 1e-6) ** -0.25
    def step(w, g, l_stat, r_stat):
        l_stat = 0.95 * l_stat + g @ g.T
        r_stat = 0.95 * r_stat + g.T @ g
        upd = inv_root(l_stat + 1e-4 * jnp.eye(d)) @ g @ inv_root(r_stat + 1e-4 * jnp.eye(d))
        return w - 1e-2 * upd, l_stat, r_stat
    return step, (S((d, d), F32), S((d, d), F32), S((d, d), F32), S((d, d), F32))


def gumbel_vq_train_bf16(b=64, t=64, d=256, codes=512):
    """Gumbel-softmax quantizer with straight-through hard codes; noise from a threefry key; training."""
    def loss(p, x, key):
        logits = (x @ p["wq"]).astype(F32)
        u = jax.random.uniform(key, logits.shape, F32, 1e-6, 1 - 1e-6)
        y = jax.nn.softmax((logits - jnp.log(-jnp.log(u))) / 0.8, -1)
        hard = jax.nn.one_hot(jnp.argmax(y, -1), codes, dtype=F32)
        z = (hard - lax.stop_gradient(y) + y).astype(BF16) @ p["codebook"]
        rec = z @ p["wd"]
        q = jax.nn.softmax(logits, -1).mean((0, 1))
        return jnp.mean((rec.astype(F32) - x.astype(F32)) ** 2) + 0.1 * jnp.sum(q * jnp.log(q + 1e-9))
    p = dict(wq=S((d, codes), BF16), codebook=S((codes, d), BF16), wd=S((d, d), BF16))
    return _sgd(loss), (p, S((b, t, d), BF16), S((2,), jnp.uint32))


def pixelshuffle_sr_fp16(b=4, hgt=64, wid=64, c=32, r=2):
    """Super-resolution: conv stack, depth-to-space (pixel shuffle) reshape/transpose, L1 loss; fp16."""
    dn = ("NHWC", "HWIO", "NHWC")
    def loss(p, x, y):
        h = jax.nn.relu(lax.conv_general_dilated(x, p["w1"], (1, 1), "SAME", dimension_numbers=dn))
        h = jax.nn.relu(lax.conv_general_dilated(h, p["w2"], (1, 1), "SAME", dimension_numbers=dn))
        h = lax.conv_general_dilated(h, p["w3"], (1, 1), "SAME", dimension_numbers=dn)  # 3*r*r ch
        h = h.reshape(b, hgt, wid, r, r, 3).transpose(0, 1, 3, 2, 4, 5).reshape(b, hgt * r, wid * r, 3)
        return jnp.mean(jnp.abs(h.astype(F32) - y.astype(F32)))
    p = dict(w1=S((5, 5, 3, c), F16), w2=S((3, 3, c, c), F16), w3=S((3, 3, c, 3 * r * r), F16))
    return _sgd(loss), (p, S((b, hgt, wid, 3), F16), S((b, hgt * r, wid * r, 3), F16))


def int4_weight_dequant_bf16(b=16, t=32, d=1024, ff=4096, group=128):
    """Serving MLP with int4 weights: per-group scales, dequantized to bf16 in front of the dots."""
    def step(x, w1q, s1, w2q, s2):
        w1 = (w1q.astype(BF16).reshape(d // group, group, ff) * s1[:, None]).reshape(d, ff)
        w2 = (w2q.astype(BF16).reshape(ff // group, group, d) * s2[:, None]).reshape(ff, d)
        h = jax.nn.silu(x @ w1)
        return x + h @ w2
    return step, (S((b, t, d), BF16), S((d, ff), jnp.int4), S((d // group, ff), BF16),
                  S((ff, d), jnp.int4), S((ff // group, d), BF16))


HOLDOUT7 = {
    "mod_router_train_bf16": mod_router_train_bf16,
    "spec_decode_verify_bf16": spec_decode_verify_bf16,
    "gat_segment_softmax_f32": gat_segment_softmax_f32,
    "flow_matching_mlp_bf16": flow_matching_mlp_bf16,
    "gp_cholesky_f32": gp_cholesky_f32,
    "fno_spectral_f32": fno_spectral_f32,
    "ctc_loss_scan_f32": ctc_loss_scan_f32,
    "alibi_attn_tf32_train_f32": alibi_attn_tf32_train_f32,
    "shampoo_newton_f32": shampoo_newton_f32,
    "gumbel_vq_train_bf16": gumbel_vq_train_bf16,
    "pixelshuffle_sr_fp16": pixelshuffle_sr_fp16,
    "int4_weight_dequant_bf16": int4_weight_dequant_bf16,
}
