"""Held-out set 3 (testdata/xla-dumps-holdout/, "set 3"): twelve JAX programs
written by the coordinator in session 4 and compiled by XLA (JAX 0.11.2,
NVIDIA H200) after the session's engineers had started; none of them saw
these programs.  Same builder contract as xla_oracle_programs.py; added to
its PROGRAMS, so ``python3 bench/xla_oracle_dumps.py OUT NAME`` re-makes one.
"""

from __future__ import annotations

import math
import jax
import jax.numpy as jnp
from jax import lax

S = jax.ShapeDtypeStruct
BF16, F32, F16 = jnp.bfloat16, jnp.float32, jnp.float16


def _rms(x, g):
    x32 = x.astype(F32)
    return (x32 * lax.rsqrt((x32 * x32).mean(-1, keepdims=True) + 1e-6) * g).astype(x.dtype)


def _ln(x, g, b):
    x32 = x.astype(F32)
    m = x32.mean(-1, keepdims=True)
    v = x32.var(-1, keepdims=True)
    return ((x32 - m) * lax.rsqrt(v + 1e-5) * g + b).astype(x.dtype)


def mp_adam_transformer(layers=2, b=4, t=128, d=256, h=4, ff=1024, vocab=1024):
    """Mixed precision: f32 master params cast to bf16, post-LN, Adam update."""
    hd = d // h
    def block(p, x):
        q = (x @ p["wq"]).reshape(b, t, h, hd)
        k = (x @ p["wk"]).reshape(b, t, h, hd)
        v = (x @ p["wv"]).reshape(b, t, h, hd)
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k, preferred_element_type=F32) / math.sqrt(hd)
        a = jax.nn.softmax(s, -1).astype(BF16)
        o = jnp.einsum("bhqk,bkhd->bqhd", a, v).reshape(b, t, d) @ p["wo"]
        x = _ln(x + o, p["g1"], p["b1"])
        f = jax.nn.relu(x @ p["w1"]) @ p["w2"]
        return _ln(x + f, p["g2"], p["b2"])
    def loss(pf, tok, tgt):
        p = jax.tree_util.tree_map(lambda a: a.astype(BF16), pf)
        x = p["emb"][tok]
        for lp in p["layers"]:
            x = block(lp, x)
        logits = (x @ p["emb"].T).astype(F32)
        lse = jax.nn.logsumexp(logits, -1)
        return jnp.mean(lse - jnp.take_along_axis(logits, tgt[..., None], -1)[..., 0])
    def step(pf, m, v, tok, tgt):
        l, g = jax.value_and_grad(loss)(pf, tok, tgt)
        m = jax.tree_util.tree_map(lambda a, b_: 0.9 * a + 0.1 * b_, m, g)
        v = jax.tree_util.tree_map(lambda a, b_: 0.999 * a + 0.001 * b_ * b_, v, g)
        pf = jax.tree_util.tree_map(lambda p_, a, b_: p_ - 1e-3 * a / (jnp.sqrt(b_) + 1e-8), pf, m, v)
        return pf, m, v, l
    lay = dict(wq=S((d, d), F32), wk=S((d, d), F32), wv=S((d, d), F32), wo=S((d, d), F32),
               g1=S((d,), F32), b1=S((d,), F32), g2=S((d,), F32), b2=S((d,), F32),
               w1=S((d, ff), F32), w2=S((ff, d), F32))
    pf = dict(emb=S((vocab, d), F32), layers=[lay] * layers)
    return step, (pf, pf, pf, S((b, t), jnp.int32), S((b, t), jnp.int32))


def encdec_cross_attn(b=4, ts=96, tt=64, d=256, h=4):
    """One decoder layer with causal self-attention and cross-attention, bf16 training."""
    hd = d // h
    def attn(q_in, kv_in, wq, wk, wv, wo, causal):
        bq, tq, _ = q_in.shape
        tk = kv_in.shape[1]
        q = (q_in @ wq).reshape(bq, tq, h, hd)
        k = (kv_in @ wk).reshape(bq, tk, h, hd)
        v = (kv_in @ wv).reshape(bq, tk, h, hd)
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(F32) * (1 / math.sqrt(hd))
        if causal:
            s = jnp.where(jnp.tril(jnp.ones((tq, tk), bool)), s, -jnp.inf)
        a = jax.nn.softmax(s, -1).astype(BF16)
        return jnp.einsum("bhqk,bkhd->bqhd", a, v).reshape(bq, tq, d) @ wo
    def loss(p, enc, dec, tgt):
        x = dec + attn(_rms(dec, p["g0"]), _rms(dec, p["g0"]), *p["self"], True)
        x = x + attn(_rms(x, p["g1"]), enc, *p["cross"], False)
        y = (x @ p["out"]).astype(F32)
        return jnp.mean((y - tgt) ** 2)
    def step(p, enc, dec, tgt):
        l, g = jax.value_and_grad(loss)(p, enc, dec, tgt)
        return jax.tree_util.tree_map(lambda a, b_: a - 0.01 * b_, p, g), l
    w = [S((d, d), BF16)] * 4
    p = dict(g0=S((d,), F32), g1=S((d,), F32), self=w, cross=w, out=S((d, d), BF16))
    return step, (p, S((b, ts, d), BF16), S((b, tt, d), BF16), S((b, tt, d), F32))


def mixer_infer(b=8, patches=64, c=256, tok_h=128, ch_h=1024, blocks=2):
    """MLP-Mixer inference in bf16: token mixing is a transpose + dense."""
    def fwd(ps, x):
        for p in ps:
            y = _ln(x, p["g1"], p["b1"])
            y = jnp.swapaxes(y, 1, 2)
            y = jax.nn.gelu(y @ p["t1"]) @ p["t2"]
            x = x + jnp.swapaxes(y, 1, 2)
            y = _ln(x, p["g2"], p["b2"])
            x = x + jax.nn.gelu(y @ p["c1"]) @ p["c2"]
        return x.mean(1)
    p = dict(g1=S((c,), F32), b1=S((c,), F32), g2=S((c,), F32), b2=S((c,), F32),
             t1=S((patches, tok_h), BF16), t2=S((tok_h, patches), BF16),
             c1=S((c, ch_h), BF16), c2=S((ch_h, c), BF16))
    return fwd, ([p] * blocks, S((b, patches, c), BF16))


def conv1d_tcn_train(b=8, t=512, c=128, layers=3):
    """Temporal conv net (dilated causal conv1d, f32) with layer norm, training step."""
    def loss(ws, x, y):
        h = x
        for i, (w, g) in enumerate(ws):
            dil = 2 ** i
            hp = jnp.pad(h, ((0, 0), (2 * dil, 0), (0, 0)))
            o = lax.conv_general_dilated(hp, w, (1,), "VALID", rhs_dilation=(dil,),
                                         dimension_numbers=("NWC", "WIO", "NWC"))
            h = h + jax.nn.relu(_ln(o, g, 0.0))
        return jnp.mean((h - y) ** 2)
    def step(ws, x, y):
        l, g = jax.value_and_grad(loss)(ws, x, y)
        return jax.tree_util.tree_map(lambda a, b_: a - 0.01 * b_, ws, g), l
    ws = [(S((3, c, c), F32), S((c,), F32))] * layers
    return step, (ws, S((b, t, c), F32), S((b, t, c), F32))


def vae_train(b=64, din=784, hid=512, z=32):
    """VAE training step with the reparameterisation trick (jax.random in the step)."""
    def loss(p, x, key):
        h = jnp.tanh(x @ p["e1"] + p["eb"])
        mu, logv = h @ p["mu"], h @ p["lv"]
        eps = jax.random.normal(key, mu.shape)
        zz = mu + jnp.exp(0.5 * logv) * eps
        r = jax.nn.sigmoid(jnp.tanh(zz @ p["d1"]) @ p["d2"])
        rec = -jnp.sum(x * jnp.log(r + 1e-7) + (1 - x) * jnp.log(1 - r + 1e-7), -1)
        kl = -0.5 * jnp.sum(1 + logv - mu ** 2 - jnp.exp(logv), -1)
        return jnp.mean(rec + kl)
    def step(p, x, key):
        l, g = jax.value_and_grad(loss)(p, x, key)
        return jax.tree_util.tree_map(lambda a, b_: a - 1e-3 * b_, p, g), l
    p = dict(e1=S((din, hid), F32), eb=S((hid,), F32), mu=S((hid, z), F32), lv=S((hid, z), F32),
             d1=S((z, hid), F32), d2=S((hid, din), F32))
    return step, (p, S((b, din), F32), S((2,), jnp.uint32))


def groupnorm_resblock_fp16(b=4, hw=32, c=128, groups=32):
    """Diffusion-style ResBlock: GroupNorm, SiLU, 3x3 convs, time embedding add, fp16 inference."""
    def gn(x, g, bb):
        n, hh, ww, cc = x.shape
        xr = x.astype(F32).reshape(n, hh, ww, groups, cc // groups)
        m = xr.mean((1, 2, 4), keepdims=True)
        v = xr.var((1, 2, 4), keepdims=True)
        return (((xr - m) * lax.rsqrt(v + 1e-5)).reshape(n, hh, ww, cc) * g + bb).astype(x.dtype)
    def conv(x, w):
        return lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    def fwd(p, x, temb):
        h = conv(jax.nn.silu(gn(x, p["g1"], p["b1"])), p["w1"])
        h = h + (jax.nn.silu(temb) @ p["wt"])[:, None, None, :]
        h = conv(jax.nn.silu(gn(h, p["g2"], p["b2"])), p["w2"])
        return x + h
    p = dict(g1=S((c,), F32), b1=S((c,), F32), g2=S((c,), F32), b2=S((c,), F32),
             w1=S((3, 3, c, c), F16), w2=S((3, 3, c, c), F16), wt=S((256, c), F16))
    return fwd, (p, S((b, hw, hw, c), F16), S((b, 256), F16))


def scan_layers_dpa_bf16(layers=4, b=2, t=256, d=256, h=4):
    """Layers under lax.scan, attention with jax.nn.dot_product_attention (xla), bf16 training."""
    hd = d // h
    def layer(x, p):
        y = _rms(x, p["g"])
        q = (y @ p["wq"]).reshape(b, t, h, hd)
        k = (y @ p["wk"]).reshape(b, t, h, hd)
        v = (y @ p["wv"]).reshape(b, t, h, hd)
        o = jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation="xla")
        x = x + o.reshape(b, t, d) @ p["wo"]
        return x + jax.nn.silu(_rms(x, p["g"]) @ p["w1"]) @ p["w2"], None
    def loss(p, x):
        y, _ = lax.scan(layer, x, p)
        return jnp.mean(y.astype(F32) ** 2)
    def step(p, x):
        l, g = jax.value_and_grad(loss)(p, x)
        return jax.tree_util.tree_map(lambda a, b_: a - 1e-2 * b_.astype(a.dtype), p, g), l
    L = layers
    p = dict(g=S((L, d), F32), wq=S((L, d, d), BF16), wk=S((L, d, d), BF16), wv=S((L, d, d), BF16),
             wo=S((L, d, d), BF16), w1=S((L, d, 4 * d), BF16), w2=S((L, 4 * d, d), BF16))
    return step, (p, S((b, t, d), BF16))


def embedding_bag_segsum(n=8192, vocab=50000, d=128, bags=512):
    """Embedding bag: gather + segment_sum (scatter-add) + MLP, f32 inference."""
    def fwd(emb, ids, seg, w):
        e = emb[ids]
        s = jax.ops.segment_sum(e, seg, num_segments=bags)
        return jax.nn.relu(s @ w).max(-1)
    return fwd, (S((vocab, d), F32), S((n,), jnp.int32), S((n,), jnp.int32), S((d, 256), F32))


def kv_decode_step_bf16(b=8, tmax=1024, d=512, h=8, kvh=2):
    """One decode step: dynamic_update_slice into a bf16 KV cache, GQA attention over it."""
    hd = d // h
    def fwd(p, x, kc, vc, pos):
        y = _rms(x, p["g"])
        q = (y @ p["wq"]).reshape(b, h, hd)
        k = (y @ p["wk"]).reshape(b, 1, kvh, hd)
        v = (y @ p["wv"]).reshape(b, 1, kvh, hd)
        kc = lax.dynamic_update_slice(kc, k, (0, pos, 0, 0))
        vc = lax.dynamic_update_slice(vc, v, (0, pos, 0, 0))
        qg = q.reshape(b, kvh, h // kvh, hd)
        s = jnp.einsum("bgrd,btgd->bgrt", qg, kc).astype(F32) / math.sqrt(hd)
        s = jnp.where(jnp.arange(tmax)[None, None, None] <= pos, s, -1e30)
        a = jax.nn.softmax(s, -1).astype(BF16)
        o = jnp.einsum("bgrt,btgd->bgrd", a, vc).reshape(b, d)
        return x + o @ p["wo"], kc, vc
    p = dict(g=S((d,), F32), wq=S((d, d), BF16), wk=S((d, kvh * hd), BF16), wv=S((d, kvh * hd), BF16),
             wo=S((d, d), BF16))
    cache = S((b, tmax, kvh, hd), BF16)
    return fwd, (p, S((b, d), BF16), cache, cache, S((), jnp.int32))


def grad_accum_mlp_bf16(micro=4, b=32, din=512, hid=2048, dout=10):
    """Gradient accumulation over microbatches with lax.scan, bf16 MLP, softmax cross entropy."""
    def loss(p, x, y):
        h = jax.nn.gelu(x @ p["w1"] + p["b1"])
        logits = (h @ p["w2"]).astype(F32)
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * y, -1))
    def step(p, xs, ys):
        def body(acc, xy):
            g = jax.grad(loss)(p, *xy)
            return jax.tree_util.tree_map(lambda a, b_: a + b_.astype(F32), acc, g), None
        acc0 = jax.tree_util.tree_map(lambda a: jnp.zeros(a.shape, F32), p)
        acc, _ = lax.scan(body, acc0, (xs, ys))
        return jax.tree_util.tree_map(lambda a, g: (a.astype(F32) - 1e-3 * g / micro).astype(a.dtype), p, acc)
    p = dict(w1=S((din, hid), BF16), b1=S((hid,), BF16), w2=S((hid, dout), BF16))
    return step, (p, S((micro, b, din), BF16), S((micro, b, dout), F32))


def highest_precision_f32(m=1024, k=1024, n=1024):
    """f32 dots at Precision.HIGHEST and DEFAULT feeding a layer norm."""
    def fwd(x, w1, w2, g, bb):
        h = jnp.dot(x, w1, precision=lax.Precision.HIGHEST)
        h = _ln(jax.nn.relu(h), g, bb)
        return jnp.dot(h, w2)
    return fwd, (S((m, k), F32), S((k, n), F32), S((n, n), F32), S((n,), F32), S((n,), F32))


def swin_window_attn_bf16(b=2, hw=32, c=128, win=8, heads=4):
    """Swin-style window partition (reshape/transpose), window attention, reverse, bf16 inference."""
    hd = c // heads
    def fwd(p, x):
        nw = hw // win
        xw = x.reshape(b, nw, win, nw, win, c).transpose(0, 1, 3, 2, 4, 5).reshape(b * nw * nw, win * win, c)
        y = _ln(xw, p["g"], p["b"])
        qkv = (y @ p["wqkv"]).reshape(-1, win * win, 3, heads, hd)
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        s = jnp.einsum("nqhd,nkhd->nhqk", q, k).astype(F32) / math.sqrt(hd) + p["bias"]
        a = jax.nn.softmax(s, -1).astype(BF16)
        o = jnp.einsum("nhqk,nkhd->nqhd", a, v).reshape(-1, win * win, c) @ p["wo"]
        o = o.reshape(b, nw, nw, win, win, c).transpose(0, 1, 3, 2, 4, 5).reshape(b, hw, hw, c)
        return x + o
    p = dict(g=S((c,), F32), b=S((c,), F32), wqkv=S((c, 3 * c), BF16), wo=S((c, c), BF16),
             bias=S((heads, win * win, win * win), F32))
    return fwd, (p, S((b, hw, hw, c), BF16))


HOLDOUT3 = {
    "mp_adam_transformer": mp_adam_transformer,
    "encdec_cross_attn_bf16": encdec_cross_attn,
    "mixer_infer_bf16": mixer_infer,
    "conv1d_tcn_train_f32": conv1d_tcn_train,
    "vae_train_f32": vae_train,
    "groupnorm_resblock_fp16": groupnorm_resblock_fp16,
    "scan_layers_dpa_bf16": scan_layers_dpa_bf16,
    "embedding_bag_segsum_f32": embedding_bag_segsum,
    "kv_decode_step_bf16": kv_decode_step_bf16,
    "grad_accum_mlp_bf16": grad_accum_mlp_bf16,
    "highest_precision_f32": highest_precision_f32,
    "swin_window_attn_bf16": swin_window_attn_bf16,
}
