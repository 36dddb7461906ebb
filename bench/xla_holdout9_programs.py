"""Held-out set 9 (testdata/xla-dumps-holdout/, "set 9"): twelve JAX programs
written by the coordinator at the start of session 8, compiled by XLA (JAX
0.11.2, NVIDIA H200) and measured on the session-start main before any
engineer saw them.  Same builder contract as xla_oracle_programs.py; added to
its PROGRAMS, so ``python3 bench/xla_oracle_dumps.py OUT NAME`` re-makes one.
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


def vit_layerscale_droppath_bf16(b=8, img=64, patch=8, d=256, h=4, ff=1024, classes=100):
    """ViT block with patchify by reshape/transpose, LayerScale and per-sample drop-path; training."""
    n = (img // patch) ** 2
    hd = d // h
    def loss(p, x, y, key):
        pt = x.reshape(b, img // patch, patch, img // patch, patch, 3).transpose(0, 1, 3, 2, 4, 5)
        z = pt.reshape(b, n, patch * patch * 3) @ p["wp"] + p["pos"]
        k1, k2 = jax.random.split(key)
        keep1 = (jax.random.uniform(k1, (b, 1, 1)) > 0.1).astype(BF16) / 0.9
        keep2 = (jax.random.uniform(k2, (b, 1, 1)) > 0.1).astype(BF16) / 0.9
        hn = _ln(z, p["g1"], p["b1"])
        q, k, v = ((hn @ p[w]).reshape(b, n, h, hd) for w in ("wq", "wk", "wv"))
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(F32) / math.sqrt(hd)
        o = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, -1).astype(BF16), v).reshape(b, n, d)
        z = z + keep1 * (p["ls1"] * (o @ p["wo"]))
        hn = _ln(z, p["g2"], p["b2"])
        z = z + keep2 * (p["ls2"] * (jax.nn.gelu(hn @ p["w1"]) @ p["w2"]))
        logits = (z.mean(1) @ p["head"]).astype(F32)
        return _xent(logits, y)
    p = dict(wp=S((patch * patch * 3, d), BF16), pos=S((n, d), BF16), g1=S((d,), F32), b1=S((d,), F32),
             g2=S((d,), F32), b2=S((d,), F32), wq=S((d, d), BF16), wk=S((d, d), BF16), wv=S((d, d), BF16),
             wo=S((d, d), BF16), ls1=S((d,), BF16), ls2=S((d,), BF16), w1=S((d, ff), BF16),
             w2=S((ff, d), BF16), head=S((d, classes), BF16))
    return _sgd(loss), (p, S((b, img, img, 3), BF16), S((b,), I32), S((2,), U32))


def parallel_qknorm_block_bf16(b=4, t=256, d=512, h=8, ff=2048, vocab=2048):
    """PaLM-style parallel attention+MLP block with QK RMS-norm, SwiGLU, tied embeddings; training."""
    hd = d // h
    def loss(p, tok, tgt):
        x = p["emb"][tok]
        hn = _rms(x, p["g"])
        q = _rms((hn @ p["wq"]).reshape(b, t, h, hd), p["qg"])
        k = _rms((hn @ p["wk"]).reshape(b, t, h, hd), p["kg"])
        v = (hn @ p["wv"]).reshape(b, t, h, hd)
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(F32) / math.sqrt(hd)
        s = jnp.where(jnp.tril(jnp.ones((t, t), bool)), s, -1e9)
        o = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, -1).astype(BF16), v).reshape(b, t, d)
        mlp = (jax.nn.silu(hn @ p["wg"]) * (hn @ p["wu"])) @ p["wd"]
        x = x + o @ p["wo"] + mlp
        logits = (_rms(x, p["gf"]) @ p["emb"].T).astype(F32)
        return _xent(logits, tgt)
    p = dict(emb=S((vocab, d), BF16), g=S((d,), F32), gf=S((d,), F32), qg=S((hd,), F32), kg=S((hd,), F32),
             wq=S((d, d), BF16), wk=S((d, d), BF16), wv=S((d, d), BF16), wo=S((d, d), BF16),
             wg=S((d, ff), BF16), wu=S((d, ff), BF16), wd=S((ff, d), BF16))
    return _sgd(loss), (p, S((b, t), I32), S((b, t), I32))


def siglip_loss_train_bf16(n=512, din_i=768, din_t=512, d=256):
    """SigLIP: image/text projections, L2-normalised, all-pairs sigmoid loss with learned t and b."""
    def loss(p, xi, xt):
        zi = xi @ p["wi"]
        zt = xt @ p["wt"]
        zi = zi.astype(F32) / jnp.linalg.norm(zi.astype(F32), axis=-1, keepdims=True)
        zt = zt.astype(F32) / jnp.linalg.norm(zt.astype(F32), axis=-1, keepdims=True)
        logits = (zi.astype(BF16) @ zt.astype(BF16).T).astype(F32) * jnp.exp(p["t"]) + p["b"]
        labels = 2 * jnp.eye(n) - 1
        return -jnp.mean(jax.nn.log_sigmoid(labels * logits))
    p = dict(wi=S((din_i, d), BF16), wt=S((din_t, d), BF16), t=S((), F32), b=S((), F32))
    return _sgd(loss), (p, S((n, din_i), BF16), S((n, din_t), BF16))


def adafactor_tree_f32():
    """Adafactor: factored row/column second moments for matrices, full for vectors, RMS update clipping."""
    shapes = {"w1": (512, 1024), "w2": (1024, 512), "w3": (512, 2048), "emb": (4096, 256),
              "b1": (1024,), "b2": (512,), "g": (256,)}
    def step(p, g, vr, vc, v):
        beta, eps = 0.999, 1e-30
        newp, nvr, nvc, nv = {}, {}, {}, {}
        for k in p:
            g2 = g[k] * g[k] + eps
            if g[k].ndim == 2:
                nvr[k] = beta * vr[k] + (1 - beta) * g2.mean(1)
                nvc[k] = beta * vc[k] + (1 - beta) * g2.mean(0)
                pre = (nvr[k][:, None] * nvc[k][None, :]) / nvr[k].mean()
                u = g[k] * lax.rsqrt(pre)
            else:
                nv[k] = beta * v[k] + (1 - beta) * g2
                u = g[k] * lax.rsqrt(nv[k])
            u = u / jnp.maximum(1.0, jnp.sqrt(jnp.mean(u * u)))
            scale = jnp.maximum(1e-3, jnp.sqrt(jnp.mean(p[k] * p[k])))
            newp[k] = p[k] - 1e-2 * scale * u
        return newp, nvr, nvc, nv
    mats = {k: s for k, s in shapes.items() if len(s) == 2}
    vecs = {k: s for k, s in shapes.items() if len(s) == 1}
    p = {k: S(s, F32) for k, s in shapes.items()}
    vr = {k: S((s[0],), F32) for k, s in mats.items()}
    vc = {k: S((s[1],), F32) for k, s in mats.items()}
    v = {k: S(s, F32) for k, s in vecs.items()}
    return step, (p, dict(p), vr, vc, v)


def dlrm_interaction_f32(b=1024, tables=8, rows=4096, d=64, dense=13):
    """DLRM: bottom MLP, 8 embedding lookups, pairwise dot interactions (batched matmul + triu gather), BCE."""
    iu = jnp.triu_indices(tables + 1, 1)
    def loss(p, xd, ids, y):
        bot = jax.nn.relu(jax.nn.relu(xd @ p["b1"]) @ p["b2"])
        embs = jnp.stack([p["emb"][i][ids[:, i]] for i in range(tables)], 1)
        z = jnp.concatenate([bot[:, None, :], embs], 1)
        inter = jnp.einsum("bid,bjd->bij", z, z)[:, iu[0], iu[1]]
        top = jnp.concatenate([bot, inter], 1)
        logit = (jax.nn.relu(top @ p["t1"]) @ p["t2"])[:, 0]
        return jnp.mean(jnp.maximum(logit, 0) - logit * y + jnp.log1p(jnp.exp(-jnp.abs(logit))))
    ninter = (tables + 1) * tables // 2
    p = dict(b1=S((dense, 256), F32), b2=S((256, d), F32), emb=S((tables, rows, d), F32),
             t1=S((d + ninter, 256), F32), t2=S((256, 1), F32))
    return _sgd(loss), (p, S((b, dense), F32), S((b, tables), I32), S((b,), F32))


def linear_attn_cumsum_bf16(b=4, t=512, d=256, h=4):
    """Causal linear attention (elu+1 features) by cumulative sums of k^T v; training."""
    hd = d // h
    def loss(p, x, y):
        xn = _rms(x, p["g"])
        q, k, v = ((xn @ p[w]).reshape(b, t, h, hd).astype(F32) for w in ("wq", "wk", "wv"))
        fq, fk = jax.nn.elu(q) + 1, jax.nn.elu(k) + 1
        kv = jnp.cumsum(jnp.einsum("bthd,bthe->bthde", fk, v), axis=1)
        ks = jnp.cumsum(fk, axis=1)
        num = jnp.einsum("bthd,bthde->bthe", fq, kv)
        den = jnp.einsum("bthd,bthd->bth", fq, ks)[..., None] + 1e-6
        o = (num / den).reshape(b, t, d).astype(BF16)
        out = x + o @ p["wo"]
        return jnp.mean((out.astype(F32) - y.astype(F32)) ** 2)
    p = dict(g=S((d,), F32), wq=S((d, d), BF16), wk=S((d, d), BF16), wv=S((d, d), BF16), wo=S((d, d), BF16))
    return _sgd(loss), (p, S((b, t, d), BF16), S((b, t, d), BF16))


def pointnet_cls_train_f32(b=32, pts=1024, classes=40):
    """PointNet: input transform by batched 3x3 matmul, shared per-point MLP, max over points, classifier."""
    def loss(p, x, y):
        tnet = jnp.max(jax.nn.relu(x @ p["t1"]), axis=1) @ p["t2"]
        trans = tnet.reshape(b, 3, 3) + jnp.eye(3)
        x = jnp.einsum("bnc,bcd->bnd", x, trans)
        h = jax.nn.relu(x @ p["w1"] + p["c1"])
        h = jax.nn.relu(h @ p["w2"] + p["c2"])
        h = h @ p["w3"]
        g = jnp.max(h, axis=1)
        logits = jax.nn.relu(g @ p["f1"]) @ p["f2"]
        reg = jnp.mean((jnp.einsum("bij,bkj->bik", trans, trans) - jnp.eye(3)) ** 2)
        return _xent(logits, y) + 1e-3 * reg
    p = dict(t1=S((3, 64), F32), t2=S((64, 9), F32), w1=S((3, 64), F32), c1=S((64,), F32),
             w2=S((64, 128), F32), c2=S((128,), F32), w3=S((128, 1024), F32),
             f1=S((1024, 256), F32), f2=S((256, classes), F32))
    return _sgd(loss), (p, S((b, pts, 3), F32), S((b,), I32))


def mae_masking_train_bf16(b=8, n=256, pd=192, d=256, keep=64):
    """MAE: random masking by argsort of noise, encoder on kept patches, mask tokens unshuffled, masked MSE."""
    def loss(p, patches, key):
        noise = jax.random.uniform(key, (b, n))
        order = jnp.argsort(noise, axis=1)
        restore = jnp.argsort(order, axis=1)
        kept = jnp.take_along_axis(patches, order[:, :keep, None], 1)
        z = kept @ p["we"] + jnp.take_along_axis(jnp.broadcast_to(p["pos"], (b, n, d)), order[:, :keep, None], 1)
        hn = _ln(z, p["g"], p["bb"])
        z = z + jax.nn.gelu(hn @ p["w1"]) @ p["w2"]
        full = jnp.concatenate([z, jnp.broadcast_to(p["mask"], (b, n - keep, d))], 1)
        full = jnp.take_along_axis(full, restore[:, :, None], 1) + p["pos"]
        rec = (_ln(full, p["g"], p["bb"]) @ p["wd"]).astype(F32)
        masked = (restore >= keep).astype(F32)
        err = jnp.mean((rec - patches.astype(F32)) ** 2, -1)
        return jnp.sum(err * masked) / jnp.sum(masked)
    p = dict(we=S((pd, d), BF16), pos=S((n, d), BF16), g=S((d,), F32), bb=S((d,), F32),
             w1=S((d, 4 * d), BF16), w2=S((4 * d, d), BF16), mask=S((d,), BF16), wd=S((d, pd), BF16))
    return _sgd(loss), (p, S((b, n, pd), BF16), S((2,), U32))


def fp8_e5m2_mixed_matmul(m=1024, k=2048, n=1024):
    """fp8 forward/backward-style GEMMs: e4m3 x e5m2 and e5m2 x e4m3 with per-tensor scales, bf16 out, amax."""
    E4, E5 = jnp.float8_e4m3fn, jnp.float8_e5m2
    def fn(a, w, g, sa, sw, sg):
        y = jnp.dot(a, w, preferred_element_type=F32) * (sa * sw)
        dx = jnp.dot(g, w.T, preferred_element_type=F32) * (sg * sw)
        yb = y.astype(BF16)
        amax = jnp.max(jnp.abs(y))
        q = jnp.clip(y / (amax / 448.0), -448, 448).astype(E4)
        return yb, dx.astype(BF16), q, amax
    return fn, (S((m, k), E4), S((k, n), E4), S((m, n), E5), S((), F32), S((), F32), S((), F32))


def sinkhorn_while_f32(n=512, m=512, d=64):
    """Entropic optimal transport: cost by cdist, log-domain Sinkhorn in a while_loop until the marginal error < tol."""
    def fn(x, y, eps):
        c = jnp.sum(x * x, 1)[:, None] + jnp.sum(y * y, 1)[None, :] - 2 * x @ y.T
        la, lb = jnp.full((n,), -math.log(n)), jnp.full((m,), -math.log(m))
        def cond(s):
            _, _, err, it = s
            return jnp.logical_and(err > 1e-4, it < 200)
        def body(s):
            f, g, _, it = s
            f = eps * (la - jax.nn.logsumexp((g[None, :] - c) / eps, axis=1))
            g = eps * (lb - jax.nn.logsumexp((f[:, None] - c) / eps, axis=0))
            pm = jnp.exp((f[:, None] + g[None, :] - c) / eps)
            err = jnp.sum(jnp.abs(pm.sum(1) - jnp.exp(la)))
            return f, g, err, it + 1
        f, g, err, it = lax.while_loop(cond, body, (jnp.zeros(n), jnp.zeros(m), jnp.float32(1.0), 0))
        plan = jnp.exp((f[:, None] + g[None, :] - c) / eps)
        return jnp.sum(plan * c), plan @ y, it
    return fn, (S((n, d), F32), S((m, d), F32), S((), F32))


def mobilenet_invres_bf16(b=16, hw=32, c=32, expand=4, classes=10):
    """MobileNetV2 inverted residuals: 1x1 expand, depthwise 3x3, 1x1 project, batch-norm in training mode, ReLU6."""
    ce = c * expand
    dn = ("NHWC", "HWIO", "NHWC")
    def bn(x, g, bb):
        x32 = x.astype(F32)
        m = x32.mean((0, 1, 2))
        v = x32.var((0, 1, 2))
        return ((x32 - m) * lax.rsqrt(v + 1e-5) * g + bb).astype(BF16)
    def block(p, x, i):
        h = lax.conv_general_dilated(x, p[f"e{i}"], (1, 1), "SAME", dimension_numbers=dn)
        h = jnp.clip(bn(h, p[f"ge{i}"], p[f"be{i}"]), 0, 6)
        h = lax.conv_general_dilated(h, p[f"d{i}"], (1, 1), "SAME", dimension_numbers=dn, feature_group_count=ce)
        h = jnp.clip(bn(h, p[f"gd{i}"], p[f"bd{i}"]), 0, 6)
        h = lax.conv_general_dilated(h, p[f"p{i}"], (1, 1), "SAME", dimension_numbers=dn)
        return x + bn(h, p[f"gp{i}"], p[f"bp{i}"])
    def loss(p, x, y):
        h = lax.conv_general_dilated(x, p["stem"], (1, 1), "SAME", dimension_numbers=dn)
        for i in range(2):
            h = block(p, h, i)
        return _xent((h.mean((1, 2)) @ p["head"]).astype(F32), y)
    p = dict(stem=S((3, 3, 3, c), BF16), head=S((c, classes), BF16))
    for i in range(2):
        p.update({f"e{i}": S((1, 1, c, ce), BF16), f"d{i}": S((3, 3, 1, ce), BF16), f"p{i}": S((1, 1, ce, c), BF16),
                  f"ge{i}": S((ce,), F32), f"be{i}": S((ce,), F32), f"gd{i}": S((ce,), F32),
                  f"bd{i}": S((ce,), F32), f"gp{i}": S((c,), F32), f"bp{i}": S((c,), F32)})
    return _sgd(loss), (p, S((b, hw, hw, 3), BF16), S((b,), I32))


def stochastic_round_update_bf16(n=1 << 20, tensors=3):
    """bf16 weights updated in f32 and stochastically rounded back: random bits added below the mantissa."""
    def step(ws, gs, key):
        out = []
        for i, (w, g) in enumerate(zip(ws, gs)):
            upd = w.astype(F32) - 1e-3 * g.astype(F32)
            bits = lax.bitcast_convert_type(upd, U32)
            noise = jax.random.bits(jax.random.fold_in(key, i), (n,), U32) & jnp.uint32(0xFFFF)
            r = lax.bitcast_convert_type((bits + noise) & jnp.uint32(0xFFFF0000), F32)
            out.append(r.astype(BF16))
        return out
    return step, ([S((n,), BF16)] * tensors, [S((n,), BF16)] * tensors, S((2,), U32))


HOLDOUT9 = {
    "vit_layerscale_droppath_bf16": vit_layerscale_droppath_bf16,
    "parallel_qknorm_block_bf16": parallel_qknorm_block_bf16,
    "siglip_loss_train_bf16": siglip_loss_train_bf16,
    "adafactor_tree_f32": adafactor_tree_f32,
    "dlrm_interaction_f32": dlrm_interaction_f32,
    "linear_attn_cumsum_bf16": linear_attn_cumsum_bf16,
    "pointnet_cls_train_f32": pointnet_cls_train_f32,
    "mae_masking_train_bf16": mae_masking_train_bf16,
    "fp8_e5m2_mixed_matmul": fp8_e5m2_mixed_matmul,
    "sinkhorn_while_f32": sinkhorn_while_f32,
    "mobilenet_invres_bf16": mobilenet_invres_bf16,
    "stochastic_round_update_bf16": stochastic_round_update_bf16,
}
