"""Held-out set 10 (testdata/xla-dumps-holdout/, "set 10"): twelve JAX
programs written by the session-8 coordinator while that session's engineers
worked, compiled by XLA (JAX 0.11.2, NVIDIA H200) and kept outside the
repository until the engineers had stopped; measured on that session's final
main.  Same builder contract as xla_oracle_programs.py; added to its PROGRAMS,
so ``python3 bench/xla_oracle_dumps.py OUT NAME`` re-makes one.
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
U32 = jnp.uint32
I8 = jnp.int8


def ftrl_update_f32(n=1 << 18, d=64):
    """FTRL-proximal update of a linear model's weights (z, n accumulators), L1/L2 shrinkage; donated state."""
    def step(z, nacc, w, x, y):
        p = jax.nn.sigmoid(x @ w)
        g = x.T @ (p - y) / x.shape[0]
        g = jnp.broadcast_to(g, z.shape)
        n2 = nacc + g * g
        sigma = (jnp.sqrt(n2) - jnp.sqrt(nacc)) / 0.1
        z2 = z + g - sigma * jnp.broadcast_to(w, z.shape)
        w2 = jnp.where(jnp.abs(z2) <= 1e-3, 0.0,
                       -(z2 - jnp.sign(z2) * 1e-3) / ((0.5 + jnp.sqrt(n2)) / 0.1 + 1e-4))
        return z2, n2, w2[:, :1]
    return step, (S((d * 1024, 1), F32), S((d * 1024, 1), F32), S((d * 1024, 1), F32),
                  S((n // 64, d * 1024), F32), S((n // 64, 1), F32))


def kv_prefill_cache_bf16(b=2, t=256, cache=1024, d=512, h=8, kvh=2):
    """GQA prefill: writes K/V of a prompt into preallocated caches by dynamic_update_slice (donated), causal attention."""
    hd = d // h
    def fn(p, x, kc, vc, pos):
        xn = _rms(x, p["g"])
        q = (xn @ p["wq"]).reshape(b, t, h, hd)
        k = (xn @ p["wk"]).reshape(b, t, kvh, hd)
        v = (xn @ p["wv"]).reshape(b, t, kvh, hd)
        kc = lax.dynamic_update_slice(kc, k, (0, pos, 0, 0))
        vc = lax.dynamic_update_slice(vc, v, (0, pos, 0, 0))
        kk = jnp.repeat(k, h // kvh, axis=2)
        vv = jnp.repeat(v, h // kvh, axis=2)
        s = jnp.einsum("bqhd,bkhd->bhqk", q, kk).astype(F32) / math.sqrt(hd)
        s = jnp.where(jnp.tril(jnp.ones((t, t), bool)), s, -1e30)
        o = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, -1).astype(BF16), vv).reshape(b, t, d)
        return x + o @ p["wo"], kc, vc
    p = dict(g=S((d,), F32), wq=S((d, d), BF16), wk=S((d, kvh * hd), BF16), wv=S((d, kvh * hd), BF16),
             wo=S((d, d), BF16))
    return fn, (p, S((b, t, d), BF16), S((b, cache, kvh, hd), BF16), S((b, cache, kvh, hd), BF16), S((), I32))


def int8_kv_decode_bf16(b=8, cache=2048, d=1024, h=16, kvh=4):
    """One decode step reading an int8 KV cache with per-position-and-head scales, dequantised on the fly."""
    hd = d // h
    def fn(p, x, kq, vq, ks, vs, length):
        xn = _rms(x, p["g"])
        q = (xn @ p["wq"]).reshape(b, kvh, h // kvh, hd)
        k = kq.astype(BF16) * ks[..., None]
        v = vq.astype(BF16) * vs[..., None]
        s = jnp.einsum("bgrd,bkgd->bgrk", q, k).astype(F32) / math.sqrt(hd)
        s = jnp.where(jnp.arange(cache)[None, None, None, :] < length[:, None, None, None], s, -1e30)
        o = jnp.einsum("bgrk,bkgd->bgrd", jax.nn.softmax(s, -1).astype(BF16), v).reshape(b, d)
        return x + o @ p["wo"]
    p = dict(g=S((d,), F32), wq=S((d, d), BF16), wo=S((d, d), BF16))
    return fn, (p, S((b, d), BF16), S((b, cache, kvh, hd), I8), S((b, cache, kvh, hd), I8),
                S((b, cache, kvh), BF16), S((b, cache, kvh), BF16), S((b,), I32))


def hash_grid_encoding_f32(n=65536, levels=8, table=1 << 14, feat=2):
    """Instant-NGP hash grid: integer spatial hashing (xor, uint32 multiply), 8 corner gathers per level,
    trilinear weights, tiny MLP; training of tables and MLP."""
    primes = jnp.array([1, 2654435761, 805459861], U32)
    def encode(tables, x):
        outs = []
        for l in range(levels):
            res = 16 * (1.5 ** l)
            xs = x * res
            x0 = jnp.floor(xs)
            f = xs - x0
            x0 = x0.astype(U32)
            acc = 0.0
            for c in range(8):
                off = jnp.array([(c >> i) & 1 for i in range(3)], U32)
                corner = (x0 + off) * primes
                idx = (corner[:, 0] ^ corner[:, 1] ^ corner[:, 2]) % table
                w = jnp.prod(jnp.where(off.astype(bool), f, 1 - f), axis=1)
                acc = acc + w[:, None] * tables[l][idx.astype(I32)]
            outs.append(acc)
        return jnp.concatenate(outs, -1)
    def loss(p, x, y):
        h = encode(p["tables"], x)
        out = jax.nn.relu(h @ p["w1"]) @ p["w2"]
        return jnp.mean((out - y) ** 2)
    p = dict(tables=S((levels, table, feat), F32), w1=S((levels * feat, 64), F32), w2=S((64, 3), F32))
    return _sgd(loss), (p, S((n, 3), F32), S((n, 3), F32))


def dino_centering_ema_f32(b=256, din=512, dout=1024):
    """DINO: student/teacher heads, teacher centering and sharpening (stop_gradient), cross-entropy,
    EMA teacher update and center update in the same step."""
    def step(ps, pt, center, x1, x2):
        def head(p, x):
            h = jax.nn.gelu(x @ p["w1"])
            h = h / jnp.linalg.norm(h, axis=-1, keepdims=True)
            return h @ p["w2"]
        def loss(ps):
            t = lax.stop_gradient(jax.nn.softmax((head(pt, x1) - center) / 0.04, -1))
            s = jax.nn.log_softmax(head(ps, x2) / 0.1, -1)
            return -jnp.mean(jnp.sum(t * s, -1)), head(pt, x1)
        (l, tout), g = jax.value_and_grad(loss, has_aux=True)(ps)
        ps = jax.tree_util.tree_map(lambda w, d: w - 1e-3 * d, ps, g)
        pt = jax.tree_util.tree_map(lambda a, c: 0.996 * a + 0.004 * c, pt, ps)
        center = 0.9 * center + 0.1 * tout.mean(0)
        return ps, pt, center, l
    p = dict(w1=S((din, 2048), F32), w2=S((2048, dout), F32))
    return step, (p, dict(p), S((dout,), F32), S((b, din), F32), S((b, din), F32))


def bigru_scan_bf16(b=16, t=64, d=128, hdim=128):
    """Bidirectional GRU: two lax.scans (one reversed) over bf16 inputs, concatenated, classifier; training."""
    def cell(p, hprev, x):
        zr = jax.nn.sigmoid(x @ p["wzr"] + hprev @ p["uzr"])
        z, r = jnp.split(zr, 2, -1)
        n = jnp.tanh(x @ p["wn"] + (r * hprev) @ p["un"])
        return (1 - z) * n + z * hprev
    def run(p, xs, reverse):
        def body(hc, x):
            hn = cell(p, hc, x)
            return hn, hn
        _, hs = lax.scan(body, jnp.zeros((b, hdim), BF16), xs, reverse=reverse)
        return hs
    def loss(p, x, y):
        xs = jnp.swapaxes(x, 0, 1)
        hf = run(p["f"], xs, False)
        hb = run(p["b"], xs, True)
        hcat = jnp.concatenate([hf, hb], -1).mean(0)
        return _xent((hcat @ p["out"]).astype(F32), y)
    cellp = dict(wzr=S((d, 2 * hdim), BF16), uzr=S((hdim, 2 * hdim), BF16), wn=S((d, hdim), BF16),
                 un=S((hdim, hdim), BF16))
    p = dict(f=cellp, b=dict(cellp), out=S((2 * hdim, 10), BF16))
    return _sgd(loss), (p, S((b, t, d), BF16), S((b,), I32))


def quantile_huber_f32(b=256, obs=64, nq=64, actions=6):
    """QR-DQN loss: sorted target quantiles, pairwise TD errors (broadcast), Huber, |tau - 1{u<0}| weights."""
    tau = (jnp.arange(nq) + 0.5) / nq
    def loss(p, s, a, target):
        q = (jax.nn.relu(s @ p["w1"]) @ p["w2"]).reshape(b, actions, nq)
        qa = jnp.take_along_axis(q, a[:, None, None], 1)[:, 0]
        tq = jnp.sort(target, -1)
        u = tq[:, None, :] - qa[:, :, None]
        hub = jnp.where(jnp.abs(u) <= 1, 0.5 * u * u, jnp.abs(u) - 0.5)
        w = jnp.abs(tau[None, :, None] - (u < 0).astype(F32))
        return jnp.mean(jnp.sum(w * hub, 1))
    p = dict(w1=S((obs, 256), F32), w2=S((256, actions * nq), F32))
    return _sgd(loss), (p, S((b, obs), F32), S((b,), I32), S((b, nq), F32))


def affine_warp_augment_f32(b=16, hw=64, c=3):
    """Per-image random affine warp by bilinear sampling (gathers at computed coordinates), then a conv; training."""
    dn = ("NHWC", "HWIO", "NHWC")
    def warp(img, theta):
        ys, xs = jnp.meshgrid(jnp.arange(hw, dtype=F32), jnp.arange(hw, dtype=F32), indexing="ij")
        coords = jnp.stack([ys.ravel(), xs.ravel(), jnp.ones(hw * hw)], 0)
        src = theta @ coords
        y0, x0 = jnp.floor(src[0]), jnp.floor(src[1])
        wy, wx = src[0] - y0, src[1] - x0
        def at(yy, xx):
            yy = jnp.clip(yy, 0, hw - 1).astype(I32)
            xx = jnp.clip(xx, 0, hw - 1).astype(I32)
            return img[yy, xx]
        out = (at(y0, x0) * ((1 - wy) * (1 - wx))[:, None] + at(y0, x0 + 1) * ((1 - wy) * wx)[:, None]
               + at(y0 + 1, x0) * (wy * (1 - wx))[:, None] + at(y0 + 1, x0 + 1) * (wy * wx)[:, None])
        return out.reshape(hw, hw, c)
    def loss(p, imgs, thetas, y):
        x = jax.vmap(warp)(imgs, thetas)
        h = jax.nn.relu(lax.conv_general_dilated(x, p["k"], (2, 2), "SAME", dimension_numbers=dn))
        return _xent(h.mean((1, 2)) @ p["head"], y)
    p = dict(k=S((3, 3, c, 32), F32), head=S((32, 10), F32))
    return _sgd(loss), (p, S((b, hw, hw, c), F32), S((b, 2, 3), F32), S((b,), I32))


def nms_fori_f32(n=2048, keep=100):
    """Greedy non-maximum suppression: top-k by score, IoU matrix, suppression in a fori_loop; inference."""
    def fn(boxes, scores):
        s, idx = lax.top_k(scores, 512)
        bx = boxes[idx]
        y1, x1, y2, x2 = (bx[:, i] for i in range(4))
        area = (y2 - y1) * (x2 - x1)
        iy1 = jnp.maximum(y1[:, None], y1[None, :])
        ix1 = jnp.maximum(x1[:, None], x1[None, :])
        iy2 = jnp.minimum(y2[:, None], y2[None, :])
        ix2 = jnp.minimum(x2[:, None], x2[None, :])
        inter = jnp.maximum(iy2 - iy1, 0) * jnp.maximum(ix2 - ix1, 0)
        iou = inter / (area[:, None] + area[None, :] - inter + 1e-9)
        def body(i, alive):
            sup = (iou[i] > 0.5) & (jnp.arange(512) > i) & alive[i]
            return alive & ~sup
        alive = lax.fori_loop(0, 512, body, jnp.ones(512, bool))
        kept_scores = jnp.where(alive, s, -1.0)
        ks, kidx = lax.top_k(kept_scores, keep)
        return bx[kidx], ks
    return fn, (S((n, 4), F32), S((n,), F32))


def graph_segment_max_f32(nodes=8192, edges=65536, d=64, graphs=32):
    """Graph net with max aggregation (segment_max scatter) and per-graph mean readout (segment_sum); training."""
    def loss(p, x, src, dst, gid, y):
        h = x @ p["w0"]
        for i in range(2):
            msg = jax.nn.relu(h[src] @ p[f"wm{i}"])
            agg = jax.ops.segment_max(msg, dst, num_segments=nodes)
            agg = jnp.where(jnp.isfinite(agg), agg, 0.0)
            h = jax.nn.relu(h @ p[f"ws{i}"] + agg)
        cnt = jax.ops.segment_sum(jnp.ones(nodes), gid, num_segments=graphs)
        g = jax.ops.segment_sum(h, gid, num_segments=graphs) / cnt[:, None]
        return jnp.mean((g @ p["out"] - y) ** 2)
    p = dict(w0=S((d, d), F32), wm0=S((d, d), F32), wm1=S((d, d), F32), ws0=S((d, d), F32),
             ws1=S((d, d), F32), out=S((d, 1), F32))
    return _sgd(loss), (p, S((nodes, d), F32), S((edges,), I32), S((edges,), I32), S((nodes,), I32),
                        S((graphs, 1), F32))


def hyena_fftconv_f32(b=4, t=1024, d=128):
    """Hyena operator: implicit long filters from a positional MLP, FFT convolution (rfft/irfft), gating; training."""
    def loss(p, x, y):
        pos = jnp.linspace(0, 1, t)[:, None]
        filt = jnp.sin(pos @ p["f1"]) @ p["f2"] * jnp.exp(-3.0 * pos)
        u = x @ p["win"]
        v, g1, g2 = jnp.split(u, 3, -1)
        fu = jnp.fft.rfft(v * g1, n=2 * t, axis=1)
        fk = jnp.fft.rfft(filt, n=2 * t, axis=0)
        conv = jnp.fft.irfft(fu * fk[None], n=2 * t, axis=1)[:, :t]
        out = _ln(conv * g2, p["g"], p["bb"]) @ p["wout"]
        return jnp.mean((out - y) ** 2)
    p = dict(f1=S((1, 64), F32), f2=S((64, d), F32), win=S((d, 3 * d), F32), g=S((d,), F32),
             bb=S((d,), F32), wout=S((d, d), F32))
    return _sgd(loss), (p, S((b, t, d), F32), S((b, t, d), F32))


def cg_solve_tf32x3_f32(n=2048, iters=64):
    """Conjugate gradient on an SPD system in a while_loop, matvecs on the TF32_TF32_F32_X3 algorithm."""
    prec = lax.DotAlgorithmPreset.TF32_TF32_F32_X3
    def fn(a, bvec, x0):
        spd = jnp.matmul(a, a.T, precision=prec) / n + jnp.eye(n)
        mv = lambda v: jnp.matmul(spd, v, precision=prec)
        r = bvec - mv(x0)
        def cond(s):
            _, r, _, rs, i = s
            return jnp.logical_and(rs > 1e-10, i < iters)
        def body(s):
            x, r, pdir, rs, i = s
            ap = mv(pdir)
            alpha = rs / jnp.sum(pdir * ap)
            x = x + alpha * pdir
            r = r - alpha * ap
            rs2 = jnp.sum(r * r)
            return x, r, r + (rs2 / rs) * pdir, rs2, i + 1
        x, r, _, rs, i = lax.while_loop(cond, body, (x0, r, r, jnp.sum(r * r), 0))
        return x, jnp.sqrt(rs), i
    return fn, (S((n, n), F32), S((n, 8), F32), S((n, 8), F32))


HOLDOUT10 = {
    "ftrl_update_f32": ftrl_update_f32,
    "kv_prefill_cache_bf16": kv_prefill_cache_bf16,
    "int8_kv_decode_bf16": int8_kv_decode_bf16,
    "hash_grid_encoding_f32": hash_grid_encoding_f32,
    "dino_centering_ema_f32": dino_centering_ema_f32,
    "bigru_scan_bf16": bigru_scan_bf16,
    "quantile_huber_f32": quantile_huber_f32,
    "affine_warp_augment_f32": affine_warp_augment_f32,
    "nms_fori_f32": nms_fori_f32,
    "graph_segment_max_f32": graph_segment_max_f32,
    "hyena_fftconv_f32": hyena_fftconv_f32,
    "cg_solve_tf32x3_f32": cg_solve_tf32x3_f32,
}
