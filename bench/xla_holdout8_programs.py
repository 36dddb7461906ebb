"""Held-out set 8 (testdata/xla-dumps-holdout/, "set 8"): twelve JAX programs
written by the coordinator in session 7 while the engineers worked, compiled
by XLA (JAX 0.11.2, NVIDIA H200) near the end of that session and measured on
the final main before any engineer saw them.  Same builder contract as
xla_oracle_programs.py; added to its PROGRAMS, so ``python3
bench/xla_oracle_dumps.py OUT NAME`` re-makes one.
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


def deberta_disentangled_attn_bf16(b=4, t=128, d=256, h=4, span=32):
    """DeBERTa attention: content-to-position and position-to-content terms gathered by relative index."""
    hd = d // h
    rel = jnp.clip(jnp.arange(t)[:, None] - jnp.arange(t)[None, :] + span, 0, 2 * span - 1)
    def loss(p, x, y):
        xn = _ln(x, p["g"], p["bb"])
        q = (xn @ p["wq"]).reshape(b, t, h, hd)
        k = (xn @ p["wk"]).reshape(b, t, h, hd)
        v = (xn @ p["wv"]).reshape(b, t, h, hd)
        pk = (p["pos"] @ p["wpk"]).reshape(2 * span, h, hd)
        pq = (p["pos"] @ p["wpq"]).reshape(2 * span, h, hd)
        c2c = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(F32)
        c2p = jnp.einsum("bqhd,rhd->bhqr", q, pk).astype(F32)
        p2c = jnp.einsum("bkhd,rhd->bhkr", k, pq).astype(F32)
        c2p = jnp.take_along_axis(c2p, jnp.broadcast_to(rel, (b, h, t, t)), -1)
        p2c = jnp.swapaxes(jnp.take_along_axis(p2c, jnp.broadcast_to(rel.T, (b, h, t, t)), -1), -1, -2)
        s = (c2c + c2p + p2c) / math.sqrt(3 * hd)
        o = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, -1).astype(BF16), v).reshape(b, t, d)
        out = x + o @ p["wo"]
        return jnp.mean((out.astype(F32) - y.astype(F32)) ** 2)
    p = dict(g=S((d,), F32), bb=S((d,), F32), wq=S((d, d), BF16), wk=S((d, d), BF16),
             wv=S((d, d), BF16), wo=S((d, d), BF16), pos=S((2 * span, d), BF16),
             wpk=S((d, d), BF16), wpq=S((d, d), BF16))
    return _sgd(loss), (p, S((b, t, d), BF16), S((b, t, d), BF16))


def mamba2_ssd_chunk_f32(b=2, t=256, h=4, p_=32, n=32, chunk=64):
    """Mamba-2 SSD, chunked: segment sums of log decays by cumsum, intra-chunk masks, inter-chunk states."""
    c = t // chunk
    def segsum(a):  # ..., L -> ..., L, L
        cs = jnp.cumsum(a, -1)
        d = cs[..., :, None] - cs[..., None, :]
        L = a.shape[-1]
        return jnp.where(jnp.tril(jnp.ones((L, L), bool)), d, -jnp.inf)
    def loss(w, x, a_log, bm, cm, y):
        xx = (x @ w).reshape(b, c, chunk, h, p_)
        a = -jnp.exp(a_log).reshape(b, c, chunk, h).transpose(0, 3, 1, 2)  # b,h,c,l
        B = bm.reshape(b, c, chunk, h, n)
        C = cm.reshape(b, c, chunk, h, n)
        Lm = jnp.exp(segsum(a))
        y_diag = jnp.einsum("bclhn,bcshn,bhcls,bcshp->bclhp", C, B, Lm, xx)
        a_cs = jnp.cumsum(a, -1)
        decay_states = jnp.exp(a_cs[..., -1:] - a_cs)
        states = jnp.einsum("bclhn,bhcl,bclhp->bchpn", B, decay_states, xx)
        chunk_decay = jnp.exp(segsum(jnp.pad(a_cs[..., -1], ((0, 0), (0, 0), (1, 0)))))
        states = jnp.concatenate([jnp.zeros_like(states[:, :1]), states], 1)
        new_states = jnp.einsum("bhzc,bchpn->bzhpn", chunk_decay, states)[:, :-1]
        y_off = jnp.einsum("bclhn,bchpn,bhcl->bclhp", C, new_states, jnp.exp(a_cs))
        out = (y_diag + y_off).reshape(b, t, h * p_)
        return jnp.mean((out - y) ** 2)
    def step(w, x, a_log, bm, cm, y):
        l, g = jax.value_and_grad(loss)(w, x, a_log, bm, cm, y)
        return w - 1e-3 * g, l
    return step, (S((h * p_, h * p_), F32), S((b, t, h * p_), F32), S((b, t, h), F32),
                  S((b, t, h * n), F32), S((b, t, h * n), F32), S((b, t, h * p_), F32))


def unet_attn_resize_f16(b=2, hw=32, c=64):
    """Small U-Net level: convs, self-attention at 16x16, nearest-neighbour upsampling by resize; fp16 training."""
    dn = ("NHWC", "HWIO", "NHWC")
    def conv(x, w, stride=1):
        return lax.conv_general_dilated(x, w, (stride, stride), "SAME", dimension_numbers=dn)
    def loss(p, x, y):
        h1 = jax.nn.silu(conv(x, p["c1"]))
        h2 = jax.nn.silu(conv(h1, p["down"], 2))  # b,16,16,c
        s = h2.reshape(b, -1, c)
        qkv = s @ p["qkv"]
        q, k, v = jnp.split(qkv, 3, -1)
        att = jax.nn.softmax((q @ jnp.swapaxes(k, 1, 2)).astype(F32) / math.sqrt(c), -1).astype(F16)
        s = s + (att @ v) @ p["proj"]
        up = jax.image.resize(s.reshape(b, hw // 2, hw // 2, c), (b, hw, hw, c), "nearest")
        out = conv(jnp.concatenate([up, h1], -1), p["c2"])
        return jnp.mean((out.astype(F32) - y.astype(F32)) ** 2)
    p = dict(c1=S((3, 3, 3, c), F16), down=S((3, 3, c, c), F16), qkv=S((c, 3 * c), F16),
             proj=S((c, c), F16), c2=S((3, 3, 2 * c, 3), F16))
    return _sgd(loss), (p, S((b, hw, hw, 3), F16), S((b, hw, hw, 3), F16))


def rnnt_joint_loss_f32(b=4, t=64, u=16, d=128, vocab=64):
    """RNN-T joint network over (T, U) by broadcast add, log-softmax, emission/blank gathers; training."""
    def loss(p, enc, pred, labels):
        j = jnp.tanh((enc @ p["we"])[:, :, None] + (pred @ p["wp"])[:, None])  # b,t,u+1,d
        logp = jax.nn.log_softmax(j @ p["wo"], -1)  # b,t,u+1,vocab
        blank = logp[..., 0]
        emit = jnp.take_along_axis(logp[:, :, :u], labels[:, None, :, None], -1)[..., 0]
        return -(blank.mean() + emit.mean())
    p = dict(we=S((d, d), F32), wp=S((d, d), F32), wo=S((d, vocab), F32))
    return _sgd(loss), (p, S((b, t, d), F32), S((b, u + 1, d), F32), S((b, u), I32))


def moe_sort_dispatch_bf16(tokens=2048, d=256, ff=512, experts=8):
    """MoE with sort-based dispatch: argsort tokens by expert, per-expert block GEMMs, unsort; training."""
    cap = tokens // experts
    def loss(p, x, y):
        logits = (x @ p["router"]).astype(F32)
        e = jnp.argmax(logits, -1)
        gate = jnp.max(jax.nn.softmax(logits, -1), -1)
        order = jnp.argsort(e)
        xs = x[order].reshape(experts, cap, d)
        h = jax.nn.gelu(jnp.einsum("ecd,edf->ecf", xs, p["w1"]))
        o = jnp.einsum("ecf,efd->ecd", h, p["w2"]).reshape(tokens, d)
        out = jnp.zeros_like(o).at[order].set(o) * gate[:, None].astype(BF16)
        return jnp.mean((out.astype(F32) - y.astype(F32)) ** 2)
    p = dict(router=S((d, experts), BF16), w1=S((experts, d, ff), BF16), w2=S((experts, ff, d), BF16))
    return _sgd(loss), (p, S((tokens, d), BF16), S((tokens, d), BF16))


def bf16x6_algo_mlp_f32(b=512, d=512, hid=2048, layers=3):
    """f32 MLP whose dots run the BF16_BF16_F32_X6 algorithm, LayerNorm, training."""
    prec = lax.DotAlgorithmPreset.BF16_BF16_F32_X6
    def loss(p, x, y):
        for i in range(layers):
            h = jax.nn.gelu(jnp.dot(_ln(x, p["g"][i], p["bb"][i]), p["w1"][i], precision=prec))
            x = x + jnp.dot(h, p["w2"][i], precision=prec)
        return jnp.mean((x - y) ** 2)
    p = dict(g=S((layers, d), F32), bb=S((layers, d), F32), w1=S((layers, d, hid), F32),
             w2=S((layers, hid, d), F32))
    return _sgd(loss), (p, S((b, d), F32), S((b, d), F32))


def f16_algo_attention_f16(b=4, t=256, d=256, h=4):
    """fp16 causal attention whose dots run the F16_F16_F32 algorithm, RMSNorm, training."""
    prec = lax.DotAlgorithmPreset.F16_F16_F32
    hd = d // h
    def loss(p, x, y):
        xn = _rms(x, p["g"])
        q = jnp.einsum("btd,de->bte", xn, p["wq"], precision=prec).reshape(b, t, h, hd)
        k = jnp.einsum("btd,de->bte", xn, p["wk"], precision=prec).reshape(b, t, h, hd)
        v = jnp.einsum("btd,de->bte", xn, p["wv"], precision=prec).reshape(b, t, h, hd)
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k, precision=prec).astype(F32) / math.sqrt(hd)
        i = jnp.arange(t)
        s = jnp.where(i[:, None] >= i[None, :], s, -1e4)
        o = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, -1).astype(F16), v, precision=prec)
        out = x + jnp.einsum("btd,de->bte", o.reshape(b, t, d), p["wo"], precision=prec)
        return jnp.mean((out.astype(F32) - y.astype(F32)) ** 2)
    p = dict(g=S((d,), F32), wq=S((d, d), F16), wk=S((d, d), F16), wv=S((d, d), F16), wo=S((d, d), F16))
    return _sgd(loss), (p, S((b, t, d), F16), S((b, t, d), F16))


def rmsprop_tree_donated_f32():
    """Centered RMSProp with momentum and decoupled weight decay over a 12-leaf tree; donated state."""
    shapes = [(512, 512), (512,), (512, 2048), (2048,), (2048, 512), (512,), (64, 512), (512,),
              (3, 3, 64, 64), (64,), (1000, 512), (1000,)]
    def step(params, ms, mg, mom, grads):
        def upd(p, m, g_avg, mo, g):
            m = 0.9 * m + 0.1 * g * g
            g_avg = 0.9 * g_avg + 0.1 * g
            mo = 0.9 * mo + g * lax.rsqrt(m - g_avg * g_avg + 1e-8)
            return p - 1e-3 * (mo + 1e-4 * p), m, g_avg, mo
        out = [upd(*a) for a in zip(params, ms, mg, mom, grads)]
        return tuple(list(z) for z in zip(*out))
    tree = [S(s, F32) for s in shapes]
    return step, (tree, tree, tree, tree, tree)


def sparse_topk_attn_bf16(b=2, t=512, d=256, h=4, k=32):
    """Top-k sparse attention: each query keeps its 32 highest-scoring keys (top_k + gather); training."""
    hd = d // h
    def loss(p, x, y):
        q = (x @ p["wq"]).reshape(b, t, h, hd).transpose(0, 2, 1, 3)
        kk = (x @ p["wk"]).reshape(b, t, h, hd).transpose(0, 2, 1, 3)
        v = (x @ p["wv"]).reshape(b, t, h, hd).transpose(0, 2, 1, 3)
        s = (q @ jnp.swapaxes(kk, -1, -2)).astype(F32) / math.sqrt(hd)
        top, idx = lax.top_k(s, k)  # b,h,t,k
        vg = jnp.take_along_axis(v[:, :, None], idx[..., None], 3)  # b,h,t,k,hd
        o = jnp.einsum("bhtk,bhtkd->bhtd", jax.nn.softmax(top, -1).astype(BF16), vg)
        out = x + o.transpose(0, 2, 1, 3).reshape(b, t, d) @ p["wo"]
        return jnp.mean((out.astype(F32) - y.astype(F32)) ** 2)
    p = dict(wq=S((d, d), BF16), wk=S((d, d), BF16), wv=S((d, d), BF16), wo=S((d, d), BF16))
    return _sgd(loss), (p, S((b, t, d), BF16), S((b, t, d), BF16))


def lbfgs_two_loop_f32(n=65536, m=8):
    """L-BFGS direction: the two-loop recursion over an m=8 history in fori_loops, then a line step."""
    def step(x, g, s_hist, y_hist):
        rho = 1.0 / jnp.maximum(jnp.sum(s_hist * y_hist, -1), 1e-10)
        def first(i, c):
            q, alphas = c
            j = m - 1 - i
            a = rho[j] * jnp.dot(s_hist[j], q)
            return q - a * y_hist[j], alphas.at[j].set(a)
        q, alphas = lax.fori_loop(0, m, first, (g, jnp.zeros((m,), F32)))
        gamma = jnp.dot(s_hist[-1], y_hist[-1]) / jnp.maximum(jnp.dot(y_hist[-1], y_hist[-1]), 1e-10)
        def second(i, r):
            beta = rho[i] * jnp.dot(y_hist[i], r)
            return r + s_hist[i] * (alphas[i] - beta)
        r = lax.fori_loop(0, m, second, gamma * q)
        x_new = x - 0.5 * r
        s_hist = jnp.concatenate([s_hist[1:], (x_new - x)[None]], 0)
        return x_new, s_hist, r
    return step, (S((n,), F32), S((n,), F32), S((m, n), F32), S((m, n), F32))


def convlstm_scan_f32(b=4, steps=8, hw=16, c=16):
    """ConvLSTM over 8 frames in lax.scan: 3x3 conv on [x, h] for the four gates; training."""
    dn = ("NHWC", "HWIO", "NHWC")
    def loss(p, xs, y):
        def cell(carry, x):
            hh, cc = carry
            z = lax.conv_general_dilated(jnp.concatenate([x, hh], -1), p["w"], (1, 1), "SAME",
                                         dimension_numbers=dn) + p["b"]
            i, f, o, g = jnp.split(z, 4, -1)
            cc = jax.nn.sigmoid(f) * cc + jax.nn.sigmoid(i) * jnp.tanh(g)
            hh = jax.nn.sigmoid(o) * jnp.tanh(cc)
            return (hh, cc), None
        z0 = jnp.zeros((b, hw, hw, c), F32)
        (hh, _), _ = lax.scan(cell, (z0, z0), xs)
        return jnp.mean((hh @ p["head"] - y) ** 2)
    p = dict(w=S((3, 3, 2 * c, 4 * c), F32), b=S((4 * c,), F32), head=S((c, 1), F32))
    return _sgd(loss), (p, S((steps, b, hw, hw, c), F32), S((b, hw, hw, 1), F32))


def maxpool_cnn_train_f32(b=16, hw=32, c=32, classes=10):
    """CNN with 2x2 max pooling (reduce-window; select-and-scatter in the backward) and avg pooling."""
    dn = ("NHWC", "HWIO", "NHWC")
    def pool(x):
        return lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    def loss(p, x, y):
        h = pool(jax.nn.relu(lax.conv_general_dilated(x, p["c1"], (1, 1), "SAME", dimension_numbers=dn)))
        h = pool(jax.nn.relu(lax.conv_general_dilated(h, p["c2"], (1, 1), "SAME", dimension_numbers=dn)))
        h = lax.reduce_window(h, 0.0, lax.add, (1, 3, 3, 1), (1, 1, 1, 1), "SAME") / 9.0
        return _xent(h.mean((1, 2)) @ p["fc"], y)
    p = dict(c1=S((3, 3, 3, c), F32), c2=S((3, 3, c, 2 * c), F32), fc=S((2 * c, classes), F32))
    return _sgd(loss), (p, S((b, hw, hw, 3), F32), S((b,), I32))


HOLDOUT8 = {
    "deberta_disentangled_attn_bf16": deberta_disentangled_attn_bf16,
    "mamba2_ssd_chunk_f32": mamba2_ssd_chunk_f32,
    "unet_attn_resize_f16": unet_attn_resize_f16,
    "rnnt_joint_loss_f32": rnnt_joint_loss_f32,
    "moe_sort_dispatch_bf16": moe_sort_dispatch_bf16,
    "bf16x6_algo_mlp_f32": bf16x6_algo_mlp_f32,
    "f16_algo_attention_f16": f16_algo_attention_f16,
    "rmsprop_tree_donated_f32": rmsprop_tree_donated_f32,
    "sparse_topk_attn_bf16": sparse_topk_attn_bf16,
    "lbfgs_two_loop_f32": lbfgs_two_loop_f32,
    "convlstm_scan_f32": convlstm_scan_f32,
    "maxpool_cnn_train_f32": maxpool_cnn_train_f32,
}
