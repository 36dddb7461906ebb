"""Held-out set 4 (testdata/xla-dumps-holdout/, "set 4"): twelve JAX programs
written by the coordinator in session 5 and compiled by XLA (JAX 0.11.2,
NVIDIA H100) at the start of that session; none of the engineers changing
passes saw them.  Same builder contract as xla_oracle_programs.py; added to
its PROGRAMS, so ``python3 bench/xla_oracle_dumps.py OUT NAME`` re-makes one.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax

# the set-3 builders' shorthands and norms (bench/ is on sys.path)
from xla_holdout3_programs import BF16, F16, F32, S, _rms

def _xent(logits, tgt):
    lse = jax.nn.logsumexp(logits, -1)
    return jnp.mean(lse - jnp.take_along_axis(logits, tgt[..., None], -1)[..., 0])


def relpos_attn_train_bf16(b=4, t=128, d=256, h=4, buckets=32):
    """T5-style attention with a learned relative-position bias (gathered), bf16 training, SGD."""
    hd = d // h
    rel = jnp.arange(t)[None, :] - jnp.arange(t)[:, None]
    idx = jnp.clip(rel + buckets // 2, 0, buckets - 1)
    def loss(p, x, y):
        xn = _rms(x, p["g"])
        q = (xn @ p["wq"]).reshape(b, t, h, hd)
        k = (xn @ p["wk"]).reshape(b, t, h, hd)
        v = (xn @ p["wv"]).reshape(b, t, h, hd)
        bias = p["rel"][idx].transpose(2, 0, 1)  # h,t,t
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(F32) + bias[None]
        a = jax.nn.softmax(s, -1).astype(BF16)
        o = jnp.einsum("bhqk,bkhd->bqhd", a, v).reshape(b, t, d) @ p["wo"]
        out = x + o
        return jnp.mean((out.astype(F32) - y.astype(F32)) ** 2)
    def step(p, x, y):
        l, g = jax.value_and_grad(loss)(p, x, y)
        return jax.tree_util.tree_map(lambda a, b_: a - (1e-2 * b_).astype(a.dtype), p, g), l
    p = dict(g=S((d,), F32), wq=S((d, d), BF16), wk=S((d, d), BF16), wv=S((d, d), BF16),
             wo=S((d, d), BF16), rel=S((buckets, h), F32))
    return step, (p, S((b, t, d), BF16), S((b, t, d), BF16))


def lora_train_bf16(b=8, t=64, d=512, r=16, layers=2, vocab=2048):
    """Frozen bf16 base weights with trainable low-rank adapters; grads only for A/B."""
    def loss(ad, base, tok, tgt):
        x = base["emb"][tok]
        for i in range(layers):
            w, (a, bb) = base["w"][i], ad[i]
            y = x @ w + ((x @ a) @ bb) * 2.0
            x = _rms(jax.nn.silu(y) + x, base["g"][i])
        return _xent((x @ base["emb"].T).astype(F32), tgt)
    def step(ad, base, tok, tgt):
        l, g = jax.value_and_grad(loss)(ad, base, tok, tgt)
        return jax.tree_util.tree_map(lambda a, b_: a - 1e-3 * b_, ad, g), l
    ad = [(S((d, r), BF16), S((r, d), BF16))] * layers
    base = dict(emb=S((vocab, d), BF16), w=[S((d, d), BF16)] * layers, g=[S((d,), F32)] * layers)
    return step, (ad, base, S((b, t), jnp.int32), S((b, t), jnp.int32))


def conv_transpose_decoder_f32(b=8, c=64):
    """Upsampling decoder with conv_transpose (NHWC), f32 training step."""
    def up(x, w):
        return lax.conv_transpose(x, w, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    def loss(p, z, y):
        x = (z @ p["fc"]).reshape(b, 4, 4, c)
        x = jax.nn.relu(up(x, p["w1"]) + p["b1"])
        x = jax.nn.relu(up(x, p["w2"]) + p["b2"])
        x = jnp.tanh(up(x, p["w3"]))
        return jnp.mean((x - y) ** 2)
    def step(p, z, y):
        l, g = jax.value_and_grad(loss)(p, z, y)
        return jax.tree_util.tree_map(lambda a, b_: a - 1e-3 * b_, p, g), l
    p = dict(fc=S((64, 16 * c), F32), w1=S((3, 3, c, c), F32), b1=S((c,), F32),
             w2=S((3, 3, c, c // 2), F32), b2=S((c // 2,), F32), w3=S((3, 3, c // 2, 3), F32))
    return step, (p, S((b, 64), F32), S((b, 32, 32, 3), F32))


def softcap_mqa_train_bf16(b=4, t=128, d=256, h=8, vocab=2048, cap=30.0):
    """Multi-query attention (one KV head) with tanh logit soft-capping, bf16, Gemma-like."""
    hd = d // h
    def loss(p, tok, tgt):
        x = p["emb"][tok] * math.sqrt(d)
        xn = _rms(x, p["g"])
        q = (xn @ p["wq"]).reshape(b, t, h, hd)
        k = xn @ p["wk"]
        v = xn @ p["wv"]
        s = jnp.einsum("bqhd,bkd->bhqk", q, k).astype(F32) / math.sqrt(hd)
        s = cap * jnp.tanh(s / cap)
        s = jnp.where(jnp.tril(jnp.ones((t, t), bool)), s, -1e30)
        a = jax.nn.softmax(s, -1).astype(BF16)
        o = jnp.einsum("bhqk,bkd->bqhd", a, v).reshape(b, t, d) @ p["wo"]
        x = x + o
        x = x + jax.nn.gelu(_rms(x, p["g2"]) @ p["w1"], approximate=True) @ p["w2"]
        logits = (_rms(x, p["g3"]) @ p["emb"].T).astype(F32)
        logits = cap * jnp.tanh(logits / cap)
        return _xent(logits, tgt)
    def step(p, tok, tgt):
        l, g = jax.value_and_grad(loss)(p, tok, tgt)
        return jax.tree_util.tree_map(lambda a, b_: a - (1e-3 * b_).astype(a.dtype), p, g), l
    p = dict(emb=S((vocab, d), BF16), g=S((d,), F32), g2=S((d,), F32), g3=S((d,), F32),
             wq=S((d, d), BF16), wk=S((d, hd), BF16), wv=S((d, hd), BF16), wo=S((d, d), BF16),
             w1=S((d, 4 * d), BF16), w2=S((4 * d, d), BF16))
    return step, (p, S((b, t), jnp.int32), S((b, t), jnp.int32))


def gnn_message_passing_f32(n=2048, e=16384, f=64, layers=2):
    """Graph network: gather node features along edges, segment_sum to receivers, MLP; training."""
    def loss(p, x, snd, rcv, y):
        for i in range(layers):
            msg = jax.nn.relu(jnp.concatenate([x[snd], x[rcv]], -1) @ p["we"][i])
            agg = jax.ops.segment_sum(msg, rcv, num_segments=n)
            deg = jax.ops.segment_sum(jnp.ones((e,), F32), rcv, num_segments=n)[:, None]
            x = x + jax.nn.relu((agg / jnp.maximum(deg, 1.0)) @ p["wn"][i])
        return jnp.mean((x.sum(-1) - y) ** 2)
    def step(p, x, snd, rcv, y):
        l, g = jax.value_and_grad(loss)(p, x, snd, rcv, y)
        return jax.tree_util.tree_map(lambda a, b_: a - 1e-3 * b_, p, g), l
    p = dict(we=[S((2 * f, f), F32)] * layers, wn=[S((f, f), F32)] * layers)
    return step, (p, S((n, f), F32), S((e,), jnp.int32), S((e,), jnp.int32), S((n,), F32))


def topp_sample_bf16(b=8, d=512, vocab=8192, p_top=0.9):
    """One decode step's head: logits, temperature, nucleus (top-p) filtering via sort/cumsum, sample."""
    def fwd(w, x, g, key):
        logits = (_rms(x, g) @ w).astype(F32) / 0.8
        srt = jnp.sort(logits, -1)[:, ::-1]
        cum = jnp.cumsum(jax.nn.softmax(srt, -1), -1)
        k = jnp.sum(cum < p_top, -1, keepdims=True)
        thresh = jnp.take_along_axis(srt, k, -1)
        masked = jnp.where(logits < thresh, -jnp.inf, logits)
        return jax.random.categorical(key, masked, -1), jnp.max(jax.nn.log_softmax(masked), -1)
    return fwd, (S((d, vocab), BF16), S((b, d), BF16), S((d,), F32),
                 jax.ShapeDtypeStruct((2,), jnp.uint32))


def selective_scan_train_f32(b=4, t=64, d=128, n=16):
    """Mamba-like selective state-space scan with lax.scan over time, f32 training."""
    def loss(p, x, y):
        dt = jax.nn.softplus(x @ p["wdt"])
        bm = x @ p["wb"]
        cm = x @ p["wc"]
        a = -jnp.exp(p["alog"])
        def body(hs, inp):
            xt, dtt, bt, ct = inp
            da = jnp.exp(dtt[:, :, None] * a)
            hs = da * hs + (dtt * xt)[:, :, None] * bt[:, None, :]
            return hs, jnp.einsum("bdn,bn->bd", hs, ct)
        xs = (x.transpose(1, 0, 2), dt.transpose(1, 0, 2), bm.transpose(1, 0, 2), cm.transpose(1, 0, 2))
        _, ys = lax.scan(body, jnp.zeros((b, d, n), F32), xs)
        out = ys.transpose(1, 0, 2) * jax.nn.silu(x @ p["wz"])
        return jnp.mean((out @ p["wo"] - y) ** 2)
    def step(p, x, y):
        l, g = jax.value_and_grad(loss)(p, x, y)
        return jax.tree_util.tree_map(lambda a, b_: a - 1e-3 * b_, p, g), l
    p = dict(wdt=S((d, d), F32), wb=S((d, n), F32), wc=S((d, n), F32), alog=S((d, n), F32),
             wz=S((d, d), F32), wo=S((d, d), F32))
    return step, (p, S((b, t, d), F32), S((b, t, d), F32))


def loss_scale_fp16_cond(b=32, d=512, h=1024):
    """fp16 MLP step with dynamic loss scaling: isfinite check and lax.cond skip/apply."""
    def loss(p, x, y, scale):
        hdn = jax.nn.gelu(x @ p["w1"] + p["b1"])
        out = hdn @ p["w2"]
        return jnp.mean((out.astype(F32) - y) ** 2) * scale
    def step(p, scale, x, y):
        g = jax.grad(loss)(p, x, y, scale)
        g = jax.tree_util.tree_map(lambda a: a.astype(F32) / scale, g)
        finite = jnp.all(jnp.array([jnp.all(jnp.isfinite(a)) for a in jax.tree_util.tree_leaves(g)]))
        def apply(args):
            p_, g_ = args
            return jax.tree_util.tree_map(lambda a, b_: (a.astype(F32) - 1e-3 * b_).astype(F16), p_, g_)
        def skip(args):
            return args[0]
        p = lax.cond(finite, apply, skip, (p, g))
        scale = jnp.where(finite, scale * 1.001, scale * 0.5)
        return p, scale
    p = dict(w1=S((d, h), F16), b1=S((h,), F16), w2=S((h, d), F16))
    return step, (p, S((), F32), S((b, d), F16), S((b, d), F32))


def dyn_quant_int8_matmul_bf16(m=256, k=1024, n=1024):
    """Per-token dynamic int8 quantization of activations x per-channel int8 weights, int32 GEMM, rescale."""
    def fwd(x, wq, wscale, bias):
        amax = jnp.max(jnp.abs(x.astype(F32)), -1, keepdims=True)
        xs = amax / 127.0
        xq = jnp.clip(jnp.round(x.astype(F32) / xs), -127, 127).astype(jnp.int8)
        acc = lax.dot_general(xq, wq, (((1,), (0,)), ((), ())), preferred_element_type=jnp.int32)
        y = acc.astype(F32) * xs * wscale[None, :] + bias
        return jax.nn.gelu(y).astype(BF16)
    return fwd, (S((m, k), BF16), S((k, n), jnp.int8), S((n,), F32), S((n,), F32))


def conv3d_video_fp16(b=2, t=8, hw=32, c=32):
    """Small video encoder: 3D convolutions (NDHWC) with bias/relu and global pooling, fp16 inference."""
    dn = ("NDHWC", "DHWIO", "NDHWC")
    def fwd(p, x):
        y = lax.conv_general_dilated(x, p["w1"], (1, 1, 1), "SAME", dimension_numbers=dn)
        y = jax.nn.relu(y + p["b1"])
        y = lax.conv_general_dilated(y, p["w2"], (1, 2, 2), "SAME", dimension_numbers=dn)
        y = jax.nn.relu(y + p["b2"])
        pooled = y.astype(F32).mean((1, 2, 3))
        return (pooled.astype(F16) @ p["fc"]).astype(F32)
    p = dict(w1=S((3, 3, 3, 3, c), F16), b1=S((c,), F16), w2=S((3, 3, 3, c, 2 * c), F16),
             b2=S((2 * c,), F16), fc=S((2 * c, 10), F16))
    return fwd, (p, S((b, t, hw, hw, 3), F16))


def triplet_cdist_train_f32(b=256, d=128, e=64):
    """Metric learning: embed, pairwise squared distances, batch-hard triplet loss, training."""
    def loss(p, x, lab):
        z = jnp.tanh(x @ p["w1"]) @ p["w2"]
        z = z / jnp.linalg.norm(z, axis=-1, keepdims=True)
        sq = jnp.sum(z * z, -1)
        dist = sq[:, None] + sq[None, :] - 2.0 * z @ z.T
        same = lab[:, None] == lab[None, :]
        hardest_pos = jnp.max(jnp.where(same, dist, -jnp.inf), -1)
        hardest_neg = jnp.min(jnp.where(same, jnp.inf, dist), -1)
        return jnp.mean(jax.nn.relu(hardest_pos - hardest_neg + 0.2))
    def step(p, x, lab):
        l, g = jax.value_and_grad(loss)(p, x, lab)
        return jax.tree_util.tree_map(lambda a, b_: a - 1e-2 * b_, p, g), l
    p = dict(w1=S((d, 256), F32), w2=S((256, e), F32))
    return step, (p, S((b, d), F32), S((b,), jnp.int32))


def label_smooth_zloss_bf16(b=4, t=128, d=512, vocab=32000):
    """Large-vocab LM head: bf16 logits, label smoothing and z-loss, grads for head and final norm."""
    def loss(p, x, tgt):
        logits = (_rms(x, p["g"]) @ p["head"]).astype(F32)
        lse = jax.nn.logsumexp(logits, -1)
        logp = logits - lse[..., None]
        nll = -jnp.take_along_axis(logp, tgt[..., None], -1)[..., 0]
        smooth = -logp.mean(-1)
        return jnp.mean(0.9 * nll + 0.1 * smooth + 1e-4 * lse ** 2)
    def step(p, x, tgt):
        l, g = jax.value_and_grad(loss)(p, x, tgt)
        return jax.tree_util.tree_map(lambda a, b_: a - (1e-3 * b_).astype(a.dtype), p, g), l
    p = dict(g=S((d,), F32), head=S((d, vocab), BF16))
    return step, (p, S((b, t, d), BF16), S((b, t), jnp.int32))


HOLDOUT4 = {
    "relpos_attn_train_bf16": relpos_attn_train_bf16,
    "lora_train_bf16": lora_train_bf16,
    "conv_transpose_decoder_f32": conv_transpose_decoder_f32,
    "softcap_mqa_train_bf16": softcap_mqa_train_bf16,
    "gnn_message_passing_f32": gnn_message_passing_f32,
    "topp_sample_bf16": topp_sample_bf16,
    "selective_scan_train_f32": selective_scan_train_f32,
    "loss_scale_fp16_cond": loss_scale_fp16_cond,
    "dyn_quant_int8_matmul_bf16": dyn_quant_int8_matmul_bf16,
    "conv3d_video_fp16": conv3d_video_fp16,
    "triplet_cdist_train_f32": triplet_cdist_train_f32,
    "label_smooth_zloss_bf16": label_smooth_zloss_bf16,
}
