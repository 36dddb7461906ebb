"""Held-out set 6 (testdata/xla-dumps-holdout/, "set 6"): twelve JAX programs
written by the coordinator in session 6 and compiled by XLA (JAX 0.11.2,
NVIDIA H200) during that session; none of the engineers changing passes saw
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


def retnet_retention_train_bf16(b=4, t=128, d=256, h=4, vocab=2048):
    """RetNet parallel retention: per-head exponential decay mask, group norm, swish gate; training."""
    hd = d // h
    gammas = 1 - 2.0 ** (-5 - jnp.arange(h, dtype=F32))
    def loss(p, tok, tgt):
        x = p["emb"][tok]
        xn = _rms(x, p["g"])
        q = (xn @ p["wq"]).reshape(b, t, h, hd)
        k = (xn @ p["wk"]).reshape(b, t, h, hd)
        v = (xn @ p["wv"]).reshape(b, t, h, hd)
        n = jnp.arange(t, dtype=F32)
        diff = n[:, None] - n[None, :]
        decay = jnp.where(diff >= 0, gammas[:, None, None] ** diff, 0.0)  # h,t,t
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(F32) * decay[None] / math.sqrt(hd)
        o = jnp.einsum("bhqk,bkhd->bqhd", s.astype(BF16), v).astype(F32)
        o = (o - o.mean(-1, keepdims=True)) * lax.rsqrt(o.var(-1, keepdims=True) + 1e-5)
        o = (jax.nn.silu(xn @ p["wg"]).astype(F32) * o.reshape(b, t, d)).astype(BF16) @ p["wo"]
        x = x + o
        return _xent((_rms(x, p["g2"]) @ p["emb"].T).astype(F32), tgt)
    p = dict(emb=S((vocab, d), BF16), g=S((d,), F32), g2=S((d,), F32), wq=S((d, d), BF16),
             wk=S((d, d), BF16), wv=S((d, d), BF16), wg=S((d, d), BF16), wo=S((d, d), BF16))
    return _sgd(loss), (p, S((b, t), I32), S((b, t), I32))


def sliding_window_attn_train_bf16(b=2, t=512, d=256, h=4, win=64, nglobal=4):
    """Longformer-style banded attention (window 64) with a few global tokens, bf16 training."""
    hd = d // h
    def loss(p, x, y):
        xn = _ln(x, p["g"], p["bb"])
        qkv = (xn @ p["wqkv"]).reshape(b, t, 3, h, hd)
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        i = jnp.arange(t)
        band = jnp.abs(i[:, None] - i[None, :]) <= win
        glob = (i[:, None] < nglobal) | (i[None, :] < nglobal)
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(F32) / math.sqrt(hd)
        s = jnp.where(band | glob, s, -1e30)
        o = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, -1).astype(BF16), v)
        out = x + o.reshape(b, t, d) @ p["wo"]
        return jnp.mean((out.astype(F32) - y.astype(F32)) ** 2)
    p = dict(g=S((d,), F32), bb=S((d,), F32), wqkv=S((d, 3 * d), BF16), wo=S((d, d), BF16))
    return _sgd(loss), (p, S((b, t, d), BF16), S((b, t, d), BF16))


def wavenet_dilated_train_f32(b=8, t=1024, c=64, layers=4):
    """WaveNet: causal dilated conv1d stack, tanh*sigmoid gates, residual and skip 1x1; training."""
    def loss(p, x, y):
        skip = 0.0
        for i in range(layers):
            dil = 2 ** i
            h = lax.conv_general_dilated(x, p["w"][i], (1,), [(dil, 0)], rhs_dilation=(dil,),
                                         dimension_numbers=("NWC", "WIO", "NWC"))
            z = jnp.tanh(h[..., :c]) * jax.nn.sigmoid(h[..., c:])
            x = x + z @ p["res"][i]
            skip = skip + z @ p["skip"][i]
        out = jax.nn.relu(skip) @ p["head"]
        return _xent(out, y)
    L = layers
    p = dict(w=[S((2, c, 2 * c), F32)] * L, res=[S((c, c), F32)] * L, skip=[S((c, c), F32)] * L,
             head=S((c, 256), F32))
    return _sgd(loss), (p, S((b, t, c), F32), S((b, t), I32))


def vqvae_codebook_train_f32(b=16, hw=16, c=64, codes=512):
    """VQ-VAE bottleneck: encoder conv, nearest codebook entry (argmin), straight-through, losses."""
    def conv(x, w, s=1):
        return lax.conv_general_dilated(x, w, (s, s), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    def loss(p, img):
        z = conv(jax.nn.relu(conv(img, p["e1"], 2)), p["e2"])  # b,hw,hw,c
        zf = z.reshape(-1, c)
        d2 = (zf ** 2).sum(-1, keepdims=True) - 2 * zf @ p["cb"].T + (p["cb"] ** 2).sum(-1)[None]
        idx = jnp.argmin(d2, -1)
        q = p["cb"][idx]
        st = zf + lax.stop_gradient(q - zf)
        rec = conv(jax.nn.relu(st.reshape(z.shape)), p["d1"])
        rec = jax.image.resize(rec, img.shape, "nearest")
        commit = jnp.mean((zf - lax.stop_gradient(q)) ** 2)
        cbl = jnp.mean((lax.stop_gradient(zf) - q) ** 2)
        return jnp.mean((rec - img) ** 2) + cbl + 0.25 * commit
    p = dict(e1=S((4, 4, 3, c), F32), e2=S((3, 3, c, c), F32), cb=S((codes, c), F32), d1=S((3, 3, c, 3), F32))
    return _sgd(loss), (p, S((b, 2 * hw, 2 * hw, 3), F32))


def ppo_gae_loss_f32(t=128, envs=64, obs=64, acts=16, hid=256):
    """PPO update: policy/value MLP, GAE by a reverse lax.scan, clipped ratio and value loss."""
    def loss(p, o, a, oldlogp, r, done):
        h = jnp.tanh(jnp.tanh(o @ p["w1"]) @ p["w2"])
        logits = h @ p["pi"]
        v = (h @ p["v"])[..., 0]  # t,envs
        logp = jax.nn.log_softmax(logits)
        lp = jnp.take_along_axis(logp, a[..., None], -1)[..., 0]
        def gae(carry, xs):
            rt, vt, vn, dn = xs
            delta = rt + 0.99 * vn * (1 - dn) - vt
            adv = delta + 0.99 * 0.95 * (1 - dn) * carry
            return adv, adv
        vnext = jnp.concatenate([v[1:], jnp.zeros((1, envs), F32)], 0)
        _, adv = lax.scan(gae, jnp.zeros((envs,), F32), (r, lax.stop_gradient(v), lax.stop_gradient(vnext), done),
                          reverse=True)
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        ratio = jnp.exp(lp - oldlogp)
        pl = -jnp.minimum(ratio * adv, jnp.clip(ratio, 0.8, 1.2) * adv).mean()
        ret = adv + lax.stop_gradient(v)
        ent = -(jnp.exp(logp) * logp).sum(-1).mean()
        return pl + 0.5 * jnp.mean((v - ret) ** 2) - 0.01 * ent
    p = dict(w1=S((obs, hid), F32), w2=S((hid, hid), F32), pi=S((hid, acts), F32), v=S((hid, 1), F32))
    return _sgd(loss), (p, S((t, envs, obs), F32), S((t, envs), I32), S((t, envs), F32),
                        S((t, envs), F32), S((t, envs), F32))


def nerf_render_train_f32(rays=1024, samples=64, freqs=10, hid=256):
    """NeRF: positional encoding, 6-layer MLP with a skip, volume rendering by cumprod; training."""
    def loss(p, pts, deltas, rgb):
        x = pts.reshape(-1, 3)
        f = 2.0 ** jnp.arange(freqs, dtype=F32)
        enc = jnp.concatenate([x, jnp.sin(x[:, :, None] * f).reshape(-1, 3 * freqs),
                               jnp.cos(x[:, :, None] * f).reshape(-1, 3 * freqs)], -1)
        h = enc
        for i in range(6):
            if i == 3:
                h = jnp.concatenate([h, enc], -1)
            h = jax.nn.relu(h @ p["w"][i])
        out = (h @ p["out"]).reshape(rays, samples, 4)
        sigma, col = jax.nn.relu(out[..., 0]), jax.nn.sigmoid(out[..., 1:])
        alpha = 1 - jnp.exp(-sigma * deltas)
        trans = jnp.cumprod(jnp.concatenate([jnp.ones((rays, 1), F32), 1 - alpha[:, :-1] + 1e-10], -1), -1)
        w = alpha * trans
        pred = (w[..., None] * col).sum(1)
        return jnp.mean((pred - rgb) ** 2)
    din = 3 + 6 * freqs
    ws = [S((din, hid), F32), S((hid, hid), F32), S((hid, hid), F32), S((hid + din, hid), F32),
          S((hid, hid), F32), S((hid, hid), F32)]
    p = dict(w=ws, out=S((hid, 4), F32))
    return _sgd(loss), (p, S((rays, samples, 3), F32), S((rays, samples), F32), S((rays, 3), F32))


def deit_patchconv_train_bf16(b=8, img=64, patch=8, d=256, h=4, layers=2, classes=100):
    """DeiT-style ViT training: strided-conv patch embedding, cls token, pre-LN blocks, layer scale."""
    hd = d // h
    n = (img // patch) ** 2 + 1
    def loss(p, im, y):
        x = lax.conv_general_dilated(im, p["patch"], (patch, patch), "VALID",
                                     dimension_numbers=("NHWC", "HWIO", "NHWC")).reshape(b, -1, d)
        x = jnp.concatenate([jnp.broadcast_to(p["cls"], (b, 1, d)), x], 1) + p["pos"]
        for i in range(layers):
            qkv = (_ln(x, p["g"][i], p["bb"][i]) @ p["wqkv"][i]).reshape(b, n, 3, h, hd)
            s = jnp.einsum("bqhd,bkhd->bhqk", qkv[:, :, 0], qkv[:, :, 1]).astype(F32) / math.sqrt(hd)
            o = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, -1).astype(BF16), qkv[:, :, 2])
            x = x + p["ls1"][i] * (o.reshape(b, n, d) @ p["wo"][i])
            f = jax.nn.gelu(_ln(x, p["g2"][i], p["bb2"][i]) @ p["w1"][i]) @ p["w2"][i]
            x = x + p["ls2"][i] * f
        return _xent((_ln(x[:, 0], p["gf"], p["bf"]) @ p["head"]).astype(F32), y)
    L = layers
    p = dict(patch=S((patch, patch, 3, d), BF16), cls=S((1, 1, d), BF16), pos=S((1, n, d), BF16),
             g=[S((d,), F32)] * L, bb=[S((d,), F32)] * L, g2=[S((d,), F32)] * L, bb2=[S((d,), F32)] * L,
             wqkv=[S((d, 3 * d), BF16)] * L, wo=[S((d, d), BF16)] * L, w1=[S((d, 4 * d), BF16)] * L,
             w2=[S((4 * d, d), BF16)] * L, ls1=[S((d,), BF16)] * L, ls2=[S((d,), BF16)] * L,
             gf=S((d,), F32), bf=S((d,), F32), head=S((d, classes), BF16))
    return _sgd(loss), (p, S((b, img, img, 3), BF16), S((b,), I32))


def hmm_forward_scan_f32(b=32, t=200, states=64, obs=128):
    """HMM forward algorithm in log space over lax.scan (CTC-like), gradient of the log likelihood."""
    def loss(p, x):
        logA = jax.nn.log_softmax(p["A"], -1)
        logB = jax.nn.log_softmax(p["B"], -1)
        em = jnp.take(logB.T, x, axis=0)  # b? -> t,b,states after transpose
        em = em.transpose(1, 0, 2)
        def body(alpha, e):
            a = jax.nn.logsumexp(alpha[:, :, None] + logA[None], axis=1) + e
            return a, None
        a0 = jax.nn.log_softmax(p["pi"])[None] + em[0]
        aT, _ = lax.scan(body, a0, em[1:])
        return -jax.nn.logsumexp(aT, -1).mean()
    p = dict(A=S((states, states), F32), B=S((states, obs), F32), pi=S((states,), F32))
    return _sgd(loss), (p, S((b, t), I32))


def fake_quant_qat_mlp_bf16(b=256, sizes=(512, 1024, 1024, 10)):
    """Quantization-aware training: int8 fake quantization (round, clip, straight-through) of
    weights and activations with per-channel scales, bf16 MLP."""
    def fq(x, scale):
        q = jnp.clip(jnp.round(x / scale), -127, 127) * scale
        return x + lax.stop_gradient(q - x)
    def loss(p, x, y):
        for i, w in enumerate(p["w"]):
            ws = (jnp.abs(w).max(0, keepdims=True).astype(F32) / 127 + 1e-8).astype(BF16)
            xs = (jnp.abs(x).max().astype(F32) / 127 + 1e-8).astype(BF16)
            x = fq(x, xs) @ fq(w, ws)
            if i < len(p["w"]) - 1:
                x = jax.nn.relu(x)
        return _xent(x.astype(F32), y)
    p = dict(w=[S((a, c), BF16) for a, c in zip(sizes[:-1], sizes[1:])])
    return _sgd(loss), (p, S((b, sizes[0]), BF16), S((b,), I32))


def chunked_vocab_xent_bf16(n=2048, d=512, vocab=32768, chunk=8192):
    """Memory-saving LM loss: vocab processed in chunks by lax.scan with an online logsumexp; grads."""
    def loss(p, x, tgt):
        w = p["head"].reshape(d, vocab // chunk, chunk).transpose(1, 0, 2)
        def body(carry, xs):
            m, s, tl = carry
            wc, off = xs
            lg = (x @ wc).astype(F32)
            mn = jnp.maximum(m, lg.max(-1))
            s = s * jnp.exp(m - mn) + jnp.exp(lg - mn[:, None]).sum(-1)
            loc = tgt - off
            hit = (loc >= 0) & (loc < chunk)
            tl = tl + jnp.where(hit, jnp.take_along_axis(lg, jnp.clip(loc, 0, chunk - 1)[:, None], -1)[:, 0], 0.0)
            return (mn, s, tl), None
        init = (jnp.full((n,), -1e30, F32), jnp.zeros((n,), F32), jnp.zeros((n,), F32))
        (m, s, tl), _ = lax.scan(body, init, (w, jnp.arange(vocab // chunk) * chunk))
        return jnp.mean(m + jnp.log(s) - tl)
    p = dict(head=S((d, vocab), BF16))
    return _sgd(loss), (p, S((n, d), BF16), S((n,), I32))


def kmeans_step_f32(n=16384, d=64, k=256):
    """One k-means iteration: squared distances by a GEMM, argmin, segment_sum centroid update."""
    def step(x, c):
        d2 = (x * x).sum(-1, keepdims=True) - 2 * x @ c.T + (c * c).sum(-1)[None]
        a = jnp.argmin(d2, -1)
        sums = jax.ops.segment_sum(x, a, num_segments=k)
        cnt = jax.ops.segment_sum(jnp.ones((n,), F32), a, num_segments=k)
        newc = jnp.where(cnt[:, None] > 0, sums / jnp.maximum(cnt, 1)[:, None], c)
        inertia = jnp.take_along_axis(d2, a[:, None], -1).sum()
        return newc, inertia
    return step, (S((n, d), F32), S((k, d), F32))


def embed_adagrad_rows_f32(batch=4096, vocab=100000, d=64, hid=256):
    """Recommender step: embedding lookups, MLP, sigmoid loss, row-sparse Adagrad via scatter-add."""
    def step(emb, acc, w1, w2, ids, y):
        def loss(e_rows, w1, w2):
            h = jax.nn.relu(e_rows.reshape(batch, -1) @ w1)
            logit = (h @ w2)[:, 0]
            return jnp.mean(jax.nn.softplus(logit) - y * logit)
        rows = emb[ids]  # batch,2,d
        l, (g_rows, gw1, gw2) = jax.value_and_grad(loss, argnums=(0, 1, 2))(rows, w1, w2)
        flat_ids, gflat = ids.reshape(-1), g_rows.reshape(-1, d)
        acc = acc.at[flat_ids].add(gflat * gflat)
        upd = gflat * lax.rsqrt(acc[flat_ids] + 1e-10)
        emb = emb.at[flat_ids].add(-0.05 * upd)
        return emb, acc, w1 - 1e-3 * gw1, w2 - 1e-3 * gw2, l
    return step, (S((vocab, d), F32), S((vocab, d), F32), S((2 * d, hid), F32), S((hid, 1), F32),
                  S((batch, 2), I32), S((batch,), F32))


HOLDOUT6 = {
    "retnet_retention_train_bf16": retnet_retention_train_bf16,
    "sliding_window_attn_train_bf16": sliding_window_attn_train_bf16,
    "wavenet_dilated_train_f32": wavenet_dilated_train_f32,
    "vqvae_codebook_train_f32": vqvae_codebook_train_f32,
    "ppo_gae_loss_f32": ppo_gae_loss_f32,
    "nerf_render_train_f32": nerf_render_train_f32,
    "deit_patchconv_train_bf16": deit_patchconv_train_bf16,
    "hmm_forward_scan_f32": hmm_forward_scan_f32,
    "fake_quant_qat_mlp_bf16": fake_quant_qat_mlp_bf16,
    "chunked_vocab_xent_bf16": chunked_vocab_xent_bf16,
    "kmeans_step_f32": kmeans_step_f32,
    "embed_adagrad_rows_f32": embed_adagrad_rows_f32,
}
