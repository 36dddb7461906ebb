"""The held-out XLA:GPU programs (testdata/xla-dumps-holdout/): JAX programs
written during session 3 and compiled by XLA (JAX 0.11.2, H100) but never
shown to the engineers writing passes, to measure how kernel lists and
numerics generalise.  Same builder contract as xla_oracle_programs.py; they
are added to its PROGRAMS, so ``python3 bench/xla_oracle_dumps.py OUT NAME``
re-makes one (then ``--unpack`` into testdata/xla-dumps-holdout).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax

S = jax.ShapeDtypeStruct
BF16, F32, F16 = jnp.bfloat16, jnp.float32, jnp.float16


def _ln(x, g, b):
    x32 = x.astype(F32)
    m = x32.mean(-1, keepdims=True)
    v = ((x32 - m) ** 2).mean(-1, keepdims=True)
    return (((x32 - m) * lax.rsqrt(v + 1e-5)) * g + b).astype(x.dtype)


def gpt_ln(layers=3, b=4, t=128, d=384, heads=6, ff=1536, vocab=2048, dtype=BF16):
    hd = d // heads
    def block(p, x):
        h = _ln(x, p["g1"], p["b1"])
        qkv = h @ p["wqkv"] + p["bqkv"]
        q, k, v = (a.reshape(b, t, heads, hd) for a in jnp.split(qkv, 3, -1))
        s = jnp.einsum("bthd,bshd->bhts", q, k).astype(F32) / math.sqrt(hd)
        s = jnp.where(jnp.tril(jnp.ones((t, t), bool)), s, -1e9)
        a = jax.nn.softmax(s, -1).astype(dtype)
        x = x + jnp.einsum("bhts,bshd->bthd", a, v).reshape(b, t, d) @ p["wo"]
        h = _ln(x, p["g2"], p["b2"])
        return x + jax.nn.gelu(h @ p["w1"] + p["c1"], approximate=True) @ p["w2"]
    def loss(params, tok, tgt):
        x = params["wte"][tok] + params["wpe"][None]
        for p in params["layers"]:
            x = block(p, x)
        x = _ln(x, params["gf"], params["bf"])
        logits = (x @ params["wte"].T).astype(F32)
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), tgt[..., None], -1))
    def step(params, tok, tgt):
        l, g = jax.value_and_grad(loss)(params, tok, tgt)
        return jax.tree_util.tree_map(lambda p, q: p - 1e-3 * q.astype(p.dtype), params, g), l
    lay = dict(g1=S((d,), F32), b1=S((d,), F32), wqkv=S((d, 3 * d), dtype), bqkv=S((3 * d,), dtype),
               wo=S((d, d), dtype), g2=S((d,), F32), b2=S((d,), F32), w1=S((d, ff), dtype), c1=S((ff,), dtype),
               w2=S((ff, d), dtype))
    params = dict(wte=S((vocab, d), dtype), wpe=S((t, d), dtype), gf=S((d,), F32), bf=S((d,), F32),
                  layers=[lay] * layers)
    return step, (params, S((b, t), jnp.int32), S((b, t), jnp.int32))


def resnet_bn(b=16, hw=32, c=64, dtype=BF16):
    def conv(x, w):
        return lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    def bn(x, g, be):
        x32 = x.astype(F32)
        m = x32.mean((0, 1, 2)); v = x32.var((0, 1, 2))
        return ((x32 - m) * lax.rsqrt(v + 1e-5) * g + be).astype(x.dtype)
    def loss(p, x, y):
        h = jax.nn.relu(bn(conv(x, p["w0"]), p["g0"], p["b0"]))
        for i in (1, 2):
            r = jax.nn.relu(bn(conv(h, p[f"w{i}a"]), p[f"g{i}a"], p[f"b{i}a"]))
            r = bn(conv(r, p[f"w{i}b"]), p[f"g{i}b"], p[f"b{i}b"])
            h = jax.nn.relu(h + r)
        h = h.astype(F32).mean((1, 2))
        return jnp.mean((h @ p["fc"] - y) ** 2)
    def step(p, x, y):
        l, g = jax.value_and_grad(loss)(p, x, y)
        return jax.tree_util.tree_map(lambda a, q: a - 0.1 * q.astype(a.dtype), p, g), l
    p = {"w0": S((3, 3, 3, c), dtype), "g0": S((c,), F32), "b0": S((c,), F32), "fc": S((c, 10), F32)}
    for i in (1, 2):
        for s in "ab":
            p[f"w{i}{s}"] = S((3, 3, c, c), dtype); p[f"g{i}{s}"] = S((c,), F32); p[f"b{i}{s}"] = S((c,), F32)
    return step, (p, S((b, hw, hw, 3), dtype), S((b, 10), F32))


def vit_infer(b=8, img=64, patch=8, d=256, heads=4, layers=2, dtype=BF16):
    n = (img // patch) ** 2; hd = d // heads
    def fwd(p, x):
        x = x.reshape(b, img // patch, patch, img // patch, patch, 3).transpose(0, 1, 3, 2, 4, 5).reshape(b, n, -1)
        x = x @ p["pe"] + p["pos"]
        for l in p["layers"]:
            h = _ln(x, l["g1"], l["b1"])
            q, k, v = (a.reshape(b, n, heads, hd) for a in jnp.split(h @ l["wqkv"], 3, -1))
            a = jax.nn.softmax(jnp.einsum("bthd,bshd->bhts", q, k).astype(F32) / math.sqrt(hd), -1).astype(dtype)
            x = x + jnp.einsum("bhts,bshd->bthd", a, v).reshape(b, n, d) @ l["wo"]
            h = _ln(x, l["g2"], l["b2"])
            x = x + jax.nn.gelu(h @ l["w1"]) @ l["w2"]
        return (x.mean(1) @ p["head"]).astype(F32)
    lay = dict(g1=S((d,), F32), b1=S((d,), F32), wqkv=S((d, 3 * d), dtype), wo=S((d, d), dtype),
               g2=S((d,), F32), b2=S((d,), F32), w1=S((d, 4 * d), dtype), w2=S((4 * d, d), dtype))
    p = dict(pe=S((patch * patch * 3, d), dtype), pos=S((n, d), dtype), head=S((d, 100), dtype), layers=[lay] * layers)
    return fwd, (p, S((b, img, img, 3), dtype))


def lstm_scan(b=32, t=32, d=128, h=256):
    def cell(p, carry, x):
        hh, cc = carry
        z = x @ p["wx"] + hh @ p["wh"] + p["b"]
        i, f, g, o = jnp.split(z, 4, -1)
        cc = jax.nn.sigmoid(f) * cc + jax.nn.sigmoid(i) * jnp.tanh(g)
        hh = jax.nn.sigmoid(o) * jnp.tanh(cc)
        return (hh, cc), hh
    def loss(p, xs, y):
        (hh, _), _ = lax.scan(lambda c, x: cell(p, c, x), (jnp.zeros((b, h)), jnp.zeros((b, h))), xs)
        return jnp.mean((hh @ p["out"] - y) ** 2)
    def step(p, xs, y):
        l, g = jax.value_and_grad(loss)(p, xs, y)
        return jax.tree_util.tree_map(lambda a, q: a - 0.01 * q, p, g), l
    p = dict(wx=S((d, 4 * h), F32), wh=S((h, 4 * h), F32), b=S((4 * h,), F32), out=S((h, 8), F32))
    return step, (p, S((t, b, d), F32), S((b, 8), F32))


def embed_xent(b=8, t=256, vocab=32000, d=512, dtype=BF16):
    def loss(p, tok, tgt):
        x = p["emb"][tok]
        x = jnp.tanh(x @ p["w"])
        logits = (x @ p["out"]).astype(F32)
        lse = jax.nn.logsumexp(logits, -1)
        return jnp.mean(lse - jnp.take_along_axis(logits, tgt[..., None], -1)[..., 0])
    def step(p, tok, tgt):
        l, g = jax.value_and_grad(loss)(p, tok, tgt)
        return jax.tree_util.tree_map(lambda a, q: a - 0.01 * q.astype(a.dtype), p, g), l
    p = dict(emb=S((vocab, d), dtype), w=S((d, d), dtype), out=S((d, vocab), dtype))
    return step, (p, S((b, t), jnp.int32), S((b, t), jnp.int32))


def depthwise_fp16(b=8, hw=56, c=96):
    def fwd(p, x):
        dn = ("NHWC", "HWIO", "NHWC")
        h = lax.conv_general_dilated(x, p["pw1"], (1, 1), "SAME", dimension_numbers=dn)
        h = jnp.clip(h, 0, 6)
        h = lax.conv_general_dilated(h, p["dw"], (1, 1), "SAME", dimension_numbers=dn, feature_group_count=4 * c)
        h = jnp.clip(h, 0, 6)
        return lax.conv_general_dilated(h, p["pw2"], (1, 1), "SAME", dimension_numbers=dn) + x
    p = dict(pw1=S((1, 1, c, 4 * c), F16), dw=S((3, 3, 1, 4 * c), F16), pw2=S((1, 1, 4 * c, c), F16))
    return fwd, (p, S((b, hw, hw, c), F16))


def scan_reductions(b=64, n=4096):
    def fwd(x, w):
        c = jnp.cumsum(x, -1)
        lse = jax.nn.logsumexp(x, -1)
        am = jnp.argmax(x @ w, -1)
        mx = jnp.max(x, 0)
        return c, lse, am, mx, jnp.cumprod(jnp.tanh(x[:, :128]), -1)
    return fwd, (S((b, n), F32), S((n, 512), F32))


def rope_gqa_train(b=2, t=256, d=512, hq=8, hkv=2, hd=64, dtype=BF16):
    def rope(x):
        half = hd // 2
        freq = 1.0 / (10000 ** (jnp.arange(half) / half))
        ang = jnp.arange(t)[:, None] * freq[None]
        cos, sin = jnp.cos(ang)[None, :, None].astype(x.dtype), jnp.sin(ang)[None, :, None].astype(x.dtype)
        x1, x2 = x[..., :half], x[..., half:]
        return jnp.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)
    def loss(p, x):
        q = rope((x @ p["wq"]).reshape(b, t, hq, hd))
        k = rope((x @ p["wk"]).reshape(b, t, hkv, hd))
        v = (x @ p["wv"]).reshape(b, t, hkv, hd)
        k = jnp.repeat(k, hq // hkv, 2); v = jnp.repeat(v, hq // hkv, 2)
        s = jnp.einsum("bthd,bshd->bhts", q, k).astype(F32) / math.sqrt(hd)
        s = jnp.where(jnp.tril(jnp.ones((t, t), bool)), s, -jnp.inf)
        o = jnp.einsum("bhts,bshd->bthd", jax.nn.softmax(s, -1).astype(dtype), v).reshape(b, t, hq * hd)
        return jnp.mean((o @ p["wo"]).astype(F32) ** 2)
    def step(p, x):
        l, g = jax.value_and_grad(loss)(p, x)
        return jax.tree_util.tree_map(lambda a, q: a - 0.01 * q, p, g), l
    p = dict(wq=S((d, hq * hd), dtype), wk=S((d, hkv * hd), dtype), wv=S((d, hkv * hd), dtype), wo=S((hq * hd, d), dtype))
    return step, (p, S((b, t, d), dtype))



def _rms(x, g):
    x32 = x.astype(F32)
    return (x32 * lax.rsqrt((x32 * x32).mean(-1, keepdims=True) + 1e-6) * g).astype(x.dtype)


def llama_swiglu(layers=2, b=2, t=256, d=512, heads=8, ff=1408, vocab=4096, dtype=BF16):
    hd = d // heads
    def rope(x):
        half = hd // 2
        f = 1.0 / (10000 ** (jnp.arange(half) / half)); a = jnp.arange(t)[:, None] * f[None]
        c, s = jnp.cos(a)[None, :, None].astype(x.dtype), jnp.sin(a)[None, :, None].astype(x.dtype)
        return jnp.concatenate([x[..., :half] * c - x[..., half:] * s, x[..., :half] * s + x[..., half:] * c], -1)
    def block(p, x):
        h = _rms(x, p["n1"])
        q = rope((h @ p["wq"]).reshape(b, t, heads, hd)); k = rope((h @ p["wk"]).reshape(b, t, heads, hd))
        v = (h @ p["wv"]).reshape(b, t, heads, hd)
        s = jnp.einsum("bthd,bshd->bhts", q, k).astype(F32) / math.sqrt(hd)
        s = jnp.where(jnp.tril(jnp.ones((t, t), bool)), s, -1e9)
        x = x + jnp.einsum("bhts,bshd->bthd", jax.nn.softmax(s, -1).astype(dtype), v).reshape(b, t, d) @ p["wo"]
        h = _rms(x, p["n2"])
        return x + (jax.nn.silu(h @ p["wg"]) * (h @ p["wu"])) @ p["wd"]
    def loss(params, tok, tgt):
        x = params["emb"][tok]
        for p in params["layers"]:
            x = block(p, x)
        logits = (_rms(x, params["nf"]) @ params["out"]).astype(F32)
        return jnp.mean(jax.nn.logsumexp(logits, -1) - jnp.take_along_axis(logits, tgt[..., None], -1)[..., 0])
    def step(params, tok, tgt):
        l, g = jax.value_and_grad(loss)(params, tok, tgt)
        return jax.tree_util.tree_map(lambda p, q: p - 1e-3 * q, params, g), l
    lay = dict(n1=S((d,), F32), wq=S((d, d), dtype), wk=S((d, d), dtype), wv=S((d, d), dtype), wo=S((d, d), dtype),
               n2=S((d,), F32), wg=S((d, ff), dtype), wu=S((d, ff), dtype), wd=S((ff, d), dtype))
    params = dict(emb=S((vocab, d), dtype), nf=S((d,), F32), out=S((d, vocab), dtype), layers=[lay] * layers)
    return step, (params, S((b, t), jnp.int32), S((b, t), jnp.int32))


def unet_fp16(b=4, hw=64, c=32):
    dn = ("NHWC", "HWIO", "NHWC")
    def conv(x, w, s=1):
        return lax.conv_general_dilated(x, w, (s, s), "SAME", dimension_numbers=dn)
    def fwd(p, x):
        e1 = jax.nn.relu(conv(x, p["e1"]))
        e2 = jax.nn.relu(conv(e1, p["e2"], 2))
        m = jax.nn.relu(conv(e2, p["m"]))
        u = jnp.repeat(jnp.repeat(m, 2, 1), 2, 2)
        d = jax.nn.relu(conv(jnp.concatenate([u, e1], -1), p["d"]))
        return conv(d, p["o"])
    p = dict(e1=S((3, 3, 3, c), F16), e2=S((3, 3, c, 2 * c), F16), m=S((3, 3, 2 * c, 2 * c), F16),
             d=S((3, 3, 3 * c, c), F16), o=S((1, 1, c, 1), F16))
    return fwd, (p, S((b, hw, hw, 3), F16))


def gru_fori(b=64, d=256, steps=20):
    def fwd(p, h0, xs):
        def body(i, h):
            x = xs[i]
            r = jax.nn.sigmoid(x @ p["wr"] + h @ p["ur"])
            z = jax.nn.sigmoid(x @ p["wz"] + h @ p["uz"])
            n = jnp.tanh(x @ p["wn"] + (r * h) @ p["un"])
            return (1 - z) * n + z * h
        return lax.fori_loop(0, steps, body, h0)
    p = {k: S((d, d), F32) for k in ("wr", "ur", "wz", "uz", "wn", "un")}
    return fwd, (p, S((b, d), F32), S((steps, b, d), F32))


def assoc_scan_bf16(b=8, t=1024, d=256):
    def fwd(a, x):
        def comb(l, r):
            return (l[0] * r[0], r[0] * l[1] + r[1])
        _, h = lax.associative_scan(comb, (jax.nn.sigmoid(a), x), axis=1)
        return (h.astype(F32) ** 2).sum(-1)
    return fwd, (S((b, t, d), BF16), S((b, t, d), BF16))


def clip_loss(n=512, d=512, e=256):
    def loss(p, img, txt):
        zi = img @ p["wi"]; zt = txt @ p["wt"]
        zi = zi / jnp.linalg.norm(zi, axis=-1, keepdims=True)
        zt = zt / jnp.linalg.norm(zt, axis=-1, keepdims=True)
        lg = zi @ zt.T * jnp.exp(p["t"])
        lbl = jnp.arange(n)
        l1 = -jnp.mean(jax.nn.log_softmax(lg, -1)[lbl, lbl]); l2 = -jnp.mean(jax.nn.log_softmax(lg.T, -1)[lbl, lbl])
        return (l1 + l2) / 2
    def step(p, img, txt):
        l, g = jax.value_and_grad(loss)(p, img, txt)
        return jax.tree_util.tree_map(lambda a, q: a - 0.01 * q, p, g), l
    p = dict(wi=S((d, e), F32), wt=S((d, e), F32), t=S((), F32))
    return step, (p, S((n, d), F32), S((n, d), F32))


def layernorm_fp16(rows=512, d=4096):
    def fwd(x, g, bb):
        x32 = x.astype(F32); m = x32.mean(-1, keepdims=True); v = ((x32 - m) ** 2).mean(-1, keepdims=True)
        return ((x32 - m) * lax.rsqrt(v + 1e-5) * g + bb).astype(F16)
    return fwd, (S((rows, d), F16), S((d,), F32), S((d,), F32))


def adamw_clip():
    shapes = [(1024, 1024), (1024,), (4096, 1024), (1024, 4096), (50, 1024), (1024,)]
    def upd(params, grads, m, v, step):
        gn = jnp.sqrt(sum(jnp.sum(g.astype(F32) ** 2) for g in grads))
        sc = jnp.minimum(1.0, 1.0 / (gn + 1e-6))
        out = []
        for p, g, mm, vv in zip(params, grads, m, v):
            g = g.astype(F32) * sc
            mm = 0.9 * mm + 0.1 * g; vv = 0.999 * vv + 0.001 * g * g
            mh = mm / (1 - 0.9 ** step); vh = vv / (1 - 0.999 ** step)
            p32 = p.astype(F32)
            out.append(((p32 - 1e-3 * (mh / (jnp.sqrt(vh) + 1e-8) + 0.01 * p32)).astype(BF16), mm, vv))
        return out
    mk = lambda dt: [S(s, dt) for s in shapes]
    return upd, (mk(BF16), mk(BF16), mk(F32), mk(F32), S((), F32))


def int8_weight_only(m=256, k=2048, n=2048):
    def fwd(x, wq, sc):
        return (x @ wq.astype(BF16)) * sc.astype(BF16)
    return fwd, (S((m, k), BF16), S((k, n), jnp.int8), S((n,), F32))


def batched_small_gemm(bt=64, m=32, k=32, n=32):
    def fwd(a, b, c):
        return jnp.tanh(jnp.einsum("bmk,bkn->bmn", a, b)) @ c
    return fwd, (S((bt, m, k), F32), S((bt, k, n), F32), S((n, 16), F32))



HOLDOUT = {
    "gpt_ln_3l_bf16": gpt_ln,
    "resnet_bn_train_bf16": resnet_bn,
    "vit_infer_bf16": vit_infer,
    "lstm_scan_train_f32": lstm_scan,
    "embed_xent_train_bf16": embed_xent,
    "depthwise_conv_fp16": depthwise_fp16,
    "scan_reductions_f32": scan_reductions,
    "rope_gqa_train_bf16": rope_gqa_train,
    "llama_swiglu_2l_bf16": llama_swiglu,
    "unet_small_fp16": unet_fp16,
    "gru_fori_f32": gru_fori,
    "assoc_scan_bf16": assoc_scan_bf16,
    "clip_loss_train_f32": clip_loss,
    "layernorm_fp16": layernorm_fp16,
    "adamw_clip_tree": adamw_clip,
    "int8_weight_only_bf16": int8_weight_only,
    "batched_small_gemm_f32": batched_small_gemm,
}
