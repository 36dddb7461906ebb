"""The JAX programs of the XLA:GPU oracle set (testdata/xla-dumps/).

Each builder returns ``(fn, args)``: a plain Python function (jitted by the
caller under the program's name, so XLA's module is ``jit_<name>``) and its
arguments as ``jax.ShapeDtypeStruct`` (nothing is allocated or run; the
programs are only lowered and compiled). Used by bench/xla_oracle_dumps.py.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax

S = jax.ShapeDtypeStruct
BF16, F32 = jnp.bfloat16, jnp.float32


# ---- transformer ---------------------------------------------------------

def _layer_shapes(d, ff, dtype, stack=None):
    pre = () if stack is None else (stack,)
    return dict(ln1=S(pre + (d,), dtype), wqkv=S(pre + (d, 3 * d), dtype), wo=S(pre + (d, d), dtype),
                ln2=S(pre + (d,), dtype), w1=S(pre + (d, ff), dtype), w2=S(pre + (ff, d), dtype))


def _rmsnorm(x, g):
    x32 = x.astype(F32)
    y = x32 * lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + 1e-6)
    return (y * g.astype(F32)).astype(x.dtype)


def _block(p, x, heads, prec=None):
    b, t, d = x.shape
    hd = d // heads
    h = _rmsnorm(x, p["ln1"])
    qkv = jnp.einsum("btd,de->bte", h, p["wqkv"], precision=prec)
    q, k, v = (a.reshape(b, t, heads, hd) for a in jnp.split(qkv, 3, axis=-1))
    s = jnp.einsum("bthd,bshd->bhts", q, k, precision=prec).astype(F32) / math.sqrt(hd)
    mask = jnp.tril(jnp.ones((t, t), bool))
    s = jnp.where(mask, s, -1e30)
    a = jax.nn.softmax(s, axis=-1).astype(x.dtype)
    o = jnp.einsum("bhts,bshd->bthd", a, v, precision=prec).reshape(b, t, d)
    x = x + jnp.einsum("btd,de->bte", o, p["wo"], precision=prec)
    h = _rmsnorm(x, p["ln2"])
    f = jax.nn.gelu(jnp.einsum("btd,df->btf", h, p["w1"], precision=prec))
    return x + jnp.einsum("btf,fd->btd", f, p["w2"], precision=prec)


def transformer_train(layers, scan=False, dtype=BF16, prec=None, b=4, t=128, d=256, ff=1024, heads=4, vocab=1024,
                      remat=False):
    block = jax.checkpoint(_block, static_argnums=(2, 3)) if remat else _block

    def loss_fn(params, tokens, targets):
        x = params["embed"][tokens]
        if scan:
            x, _ = lax.scan(lambda c, p: (block(p, c, heads, prec), None), x, params["layers"])
        else:
            for p in params["layers"]:
                x = block(p, x, heads, prec)
        x = _rmsnorm(x, params["lnf"])
        logits = jnp.einsum("btd,vd->btv", x, params["embed"], precision=prec).astype(F32)
        logp = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.mean(jnp.take_along_axis(logp, targets[..., None], axis=-1))

    def step(params, tokens, targets):
        loss, g = jax.value_and_grad(loss_fn)(params, tokens, targets)
        new = jax.tree_util.tree_map(lambda p, gp: (p - 1e-3 * gp.astype(p.dtype)).astype(p.dtype), params, g)
        return new, loss

    lay = _layer_shapes(d, ff, dtype, stack=layers) if scan else [_layer_shapes(d, ff, dtype) for _ in range(layers)]
    params = dict(embed=S((vocab, d), dtype), lnf=S((d,), dtype), layers=lay)
    tok = S((b, t), jnp.int32)
    return step, (params, tok, tok)


# ---- MLP / conv net ------------------------------------------------------

def mlp_train_mixed(b=256, sizes=(784, 1024, 1024, 512, 10)):
    """f32 master weights, bf16 compute (the usual mixed-precision step)."""
    def loss_fn(params, x, y):
        h = x.astype(BF16)
        for i, (w, bias) in enumerate(params):
            h = h @ w.astype(BF16) + bias.astype(BF16)
            if i < len(params) - 1:
                h = jax.nn.relu(h)
        logp = jax.nn.log_softmax(h.astype(F32))
        return -jnp.mean(jnp.sum(logp * y, axis=-1))

    def step(params, x, y):
        loss, g = jax.value_and_grad(loss_fn)(params, x, y)
        return jax.tree_util.tree_map(lambda p, gp: p - 0.01 * gp, params, g), loss

    params = [(S((a, c), F32), S((c,), F32)) for a, c in zip(sizes[:-1], sizes[1:])]
    return step, (params, S((b, sizes[0]), F32), S((b, sizes[-1]), F32))


def convnet_train_bf16(b=16, hw=32):
    dn = ("NHWC", "HWIO", "NHWC")

    def loss_fn(params, x, y):
        h = x
        for w in params["convs"]:
            h = lax.conv_general_dilated(h, w, (1, 1), "SAME", dimension_numbers=dn)
            h = jax.nn.relu(h)
            h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        h = h.reshape(h.shape[0], -1)
        logits = (h @ params["dense"]).astype(F32)
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * y, axis=-1))

    def step(params, x, y):
        loss, g = jax.value_and_grad(loss_fn)(params, x, y)
        return jax.tree_util.tree_map(lambda p, gp: p - 0.01 * gp, params, g), loss

    chans = [3, 32, 64, 128]
    convs = [S((3, 3, a, c), BF16) for a, c in zip(chans[:-1], chans[1:])]
    side = hw // 8
    params = dict(convs=convs, dense=S((side * side * chans[-1], 10), BF16))
    return step, (params, S((b, hw, hw, 3), BF16), S((b, 10), F32))


# ---- attention / decode --------------------------------------------------

def attention_dpa(implementation=None, b=2, t=256, h=8, hd=64):
    def fn(q, k, v):
        def f(q, k, v):
            return jnp.sum(jax.nn.dot_product_attention(q, k, v, is_causal=True,
                                                        implementation=implementation).astype(F32))
        out = jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation=implementation)
        return out, jax.grad(f, argnums=(0, 1, 2))(q, k, v)

    a = S((b, t, h, hd), BF16)
    return fn, (a, a, a)


def gqa_decode(b=4, tmax=512, d=512, hq=8, hkv=2, hd=64, steps=16):
    """Greedy-free decode: ``steps`` positions through one GQA attention
    layer, the KV cache updated in place inside a fori_loop."""
    g = hq // hkv

    def fn(params, x0, kc, vc, start):
        def body(i, carry):
            x, kc, vc = carry
            pos = start + i
            q = (x @ params["wq"]).reshape(b, hkv, g, hd)
            k = (x @ params["wk"]).reshape(b, 1, hkv, hd)
            v = (x @ params["wv"]).reshape(b, 1, hkv, hd)
            kc = lax.dynamic_update_slice(kc, k, (0, pos, 0, 0))
            vc = lax.dynamic_update_slice(vc, v, (0, pos, 0, 0))
            s = jnp.einsum("bhgd,bshd->bhgs", q, kc, preferred_element_type=F32) / math.sqrt(hd)
            s = jnp.where(jnp.arange(tmax) <= pos, s, -1e30)
            p = jax.nn.softmax(s, axis=-1).astype(BF16)
            o = jnp.einsum("bhgs,bshd->bhgd", p, vc).reshape(b, hq * hd)
            x = x + o @ params["wo"]
            return x, kc, vc
        return lax.fori_loop(0, steps, body, (x0, kc, vc))

    params = dict(wq=S((d, hq * hd), BF16), wk=S((d, hkv * hd), BF16), wv=S((d, hkv * hd), BF16),
                  wo=S((hq * hd, d), BF16))
    cache = S((b, tmax, hkv, hd), BF16)
    return fn, (params, S((b, d), BF16), cache, cache, S((), jnp.int32))


# ---- low precision GEMMs -------------------------------------------------

def fp8_scaled_matmul(m=1024, k=1024, n=1024):
    """fp8 x fp8 -> f32 dot, then the per-tensor scales and a bf16 result."""
    def fn(a, b, sa, sb):
        acc = lax.dot_general(a, b, (((1,), (0,)), ((), ())), preferred_element_type=F32)
        return (acc * (sa * sb)).astype(BF16)
    f8 = jnp.float8_e4m3fn
    return fn, (S((m, k), f8), S((k, n), f8), S((), F32), S((), F32))


def int8_gemm(m=512, k=1024, n=768):
    def fn(a, b, scale):
        acc = lax.dot(a, b, preferred_element_type=jnp.int32)
        return acc, acc.astype(F32) * scale
    return fn, (S((m, k), jnp.int8), S((k, n), jnp.int8), S((n,), F32))


DOT_ALGORITHMS = {  # preset -> operand dtype it is used with
    "BF16_BF16_F32": F32, "BF16_BF16_F32_X3": F32, "BF16_BF16_F32_X6": F32, "BF16_BF16_F32_X9": F32,
    "TF32_TF32_F32": F32, "TF32_TF32_F32_X3": F32, "F32_F32_F32": F32, "F16_F16_F32": jnp.float16,
    "F16_F16_F16": jnp.float16, "BF16_BF16_BF16": BF16, "ANY_F8_ANY_F8_F32": jnp.float8_e4m3fn,
    "ANY_F8_ANY_F8_F32_FAST_ACCUM": jnp.float8_e4m3fn, "BF16_BF16_F32@bf16": BF16,
}


def _algo_dot(key, m=256, k=512, n=384):
    preset = getattr(lax.DotAlgorithmPreset, key.split("@")[0])
    dt = DOT_ALGORITHMS[key]

    out = None if key in ("F16_F16_F16", "BF16_BF16_BF16") else F32

    def fn(a, b):
        return lax.dot(a, b, precision=preset, preferred_element_type=out)
    return fn, (S((m, k), dt), S((k, n), dt))


def dot_algorithms(keys):
    """One module with a dot per algorithm in ``keys`` (those this GPU
    compiles; bench/xla_oracle_dumps.py probes them one by one first)."""
    parts = [_algo_dot(k) for k in keys]

    def fn(*args):
        return tuple(f(*args[2 * i:2 * i + 2]) for i, (f, _) in enumerate(parts))
    return fn, tuple(a for _, args in parts for a in args)


def mixed_dtype_dot(m=256, k=512, n=384):
    """bf16 x f32 operands, f32 result (lax.dot_general takes mixed inputs)."""
    def fn(a, b):
        return lax.dot_general(a, b, (((1,), (0,)), ((), ())), preferred_element_type=F32)
    return fn, (S((m, k), BF16), S((k, n), F32))


# ---- MoE / optimizer / control flow --------------------------------------

def moe_train(t=512, d=256, ff=512, experts=8, topk=2):
    def loss_fn(params, x):
        logits = (x @ params["router"]).astype(F32)
        probs = jax.nn.softmax(logits, axis=-1)
        gates, idx = lax.top_k(probs, topk)
        gates = gates / jnp.sum(gates, axis=-1, keepdims=True)
        combine = jnp.zeros((t, experts), F32).at[jnp.arange(t)[:, None], idx].add(gates)
        h = jax.nn.silu(jnp.einsum("td,edf->tef", x, params["w1"]))
        y = jnp.einsum("tef,efd->ted", h, params["w2"])
        out = jnp.einsum("ted,te->td", y.astype(F32), combine)
        aux = jnp.mean(jnp.sum(probs, axis=0) * jnp.sum(combine > 0, axis=0)) * experts / t
        return jnp.mean(out * out) + 0.01 * aux

    def step(params, x):
        loss, g = jax.value_and_grad(loss_fn)(params, x)
        return jax.tree_util.tree_map(lambda p, gp: (p - 1e-3 * gp).astype(p.dtype), params, g), loss

    params = dict(router=S((d, experts), BF16), w1=S((experts, d, ff), BF16), w2=S((experts, ff, d), BF16))
    return step, (params, S((t, d), BF16))


def adam_update():
    shapes = [(1024, 256), (256,), (256, 768), (768,), (256, 256), (256,), (256, 1024), (1024,),
              (1024, 256), (256,), (256,), (256,)]

    def fn(params, grads, m, v, count):
        b1, b2, eps, lr = 0.9, 0.999, 1e-8, 1e-3
        c = count + 1
        m = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, m, grads)
        v = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, v, grads)
        bc1 = 1 - b1 ** c.astype(F32)
        bc2 = 1 - b2 ** c.astype(F32)
        params = jax.tree_util.tree_map(
            lambda p, m, v: p - lr * (m / bc1) / (jnp.sqrt(v / bc2) + eps), params, m, v)
        return params, m, v, c

    tree = {f"p{i}": S(s, F32) for i, s in enumerate(shapes)}
    return fn, (tree, tree, tree, tree, S((), jnp.int32))


def cond_while(b=64, d=256):
    def fn(x, w1, w2, pred, which):
        y = lax.cond(pred, lambda x: jax.nn.relu(x @ w1), lambda x: jnp.tanh(x @ w2), x)
        y = lax.switch(which, [lambda y: y * 2, lambda y: y @ w1, lambda y: jnp.exp(y)], y)

        def cond(c):
            return (jnp.max(jnp.abs(c[0])) > 1.0) & (c[1] < 20)

        def body(c):
            return (c[0] * 0.5).astype(c[0].dtype), c[1] + 1
        return lax.while_loop(cond, body, (y, jnp.int32(0)))

    return fn, (S((b, d), BF16), S((d, d), BF16), S((d, d), BF16), S((), bool), S((), jnp.int32))


def sort_total_order(n=4096):
    """jnp.sort / argsort / lax.top_k on f32: sort comparators in total order
    (XLA prints ``compare(...), direction=LT, order=TOTAL``)."""
    def fn(x, y):
        return jnp.sort(x, axis=-1), jnp.argsort(y, axis=-1), lax.top_k(x, 8)
    return fn, (S((8, n), F32), S((8, n), F32))


def mlp_train_f32(b=256, sizes=(784, 1024, 1024, 512, 10)):
    """The MLP step in f32 with default precision (TF32 GEMMs on GPU)."""
    def loss_fn(params, x, y):
        h = x
        for i, (w, bias) in enumerate(params):
            h = h @ w + bias
            if i < len(params) - 1:
                h = jax.nn.relu(h)
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(h) * y, axis=-1))

    def step(params, x, y):
        loss, g = jax.value_and_grad(loss_fn)(params, x, y)
        return jax.tree_util.tree_map(lambda p, gp: p - 0.01 * gp, params, g), loss

    params = [(S((a, c), F32), S((c,), F32)) for a, c in zip(sizes[:-1], sizes[1:])]
    return step, (params, S((b, sizes[0]), F32), S((b, sizes[-1]), F32))


def dropout_mlp_train(b=128, sizes=(512, 1024, 1024, 256), rate=0.1):
    """bf16 MLP training step with dropout after each hidden layer
    (jax.random.bernoulli: threefry2x32 as plain u32 HLO ops)."""
    def loss_fn(params, key, x, y):
        for i, (w, c) in enumerate(params):
            x = x @ w + c
            if i < len(params) - 1:
                x = jax.nn.relu(x)
                keep = jax.random.bernoulli(jax.random.fold_in(key, i), 1 - rate, x.shape)
                x = jnp.where(keep, x / (1 - rate), 0).astype(BF16)
        return jnp.mean((x.astype(F32) - y) ** 2)

    def step(params, key, x, y):
        loss, g = jax.value_and_grad(loss_fn)(params, key, x, y)
        return jax.tree_util.tree_map(lambda p, gp: p - 0.01 * gp, params, g), loss

    params = [(S((a, c), BF16), S((c,), BF16)) for a, c in zip(sizes[:-1], sizes[1:])]
    return step, (params, S((2,), jnp.uint32), S((b, sizes[0]), BF16), S((b, sizes[-1]), F32))


PROGRAMS = {
    "transformer_2l_bf16": lambda: transformer_train(2),
    "transformer_4l_bf16": lambda: transformer_train(4),
    "transformer_scan_4l_bf16": lambda: transformer_train(4, scan=True),
    "transformer_2l_f32_algo_bf16": lambda: transformer_train(2, dtype=F32, prec=lax.DotAlgorithmPreset.BF16_BF16_F32),
    "mlp_train_mixed": mlp_train_mixed,
    "convnet_train_bf16": convnet_train_bf16,
    "attention_dpa": attention_dpa,
    "attention_dpa_cudnn": lambda: attention_dpa("cudnn"),
    "gqa_decode_loop": gqa_decode,
    "fp8_scaled_matmul": fp8_scaled_matmul,
    "int8_gemm": int8_gemm,
    "dot_algorithms": None,  # built from the probed presets
    "mixed_dtype_dot": mixed_dtype_dot,
    "moe_topk_train": moe_train,
    "adam_update": adam_update,
    "cond_while": cond_while,
    "sort_total_order": sort_total_order,
    "transformer_remat_2l_bf16": lambda: transformer_train(2, remat=True),
    "transformer_12l_bf16": lambda: transformer_train(12),
    "mlp_train_f32": mlp_train_f32,
    "dot_algorithms_no_triton": None,  # dot_algorithms with Triton GEMMs off
    "dropout_mlp_train_bf16": dropout_mlp_train,
}
#: XLA flags a program adds to the dump flags.
EXTRA_FLAGS = {"dot_algorithms_no_triton": "--xla_gpu_enable_triton_gemm=false"}
DONATE = {"adam_update": (0, 2, 3), "gqa_decode_loop": (2, 3),
          "lion_tree_update": (0, 1), "embed_adagrad_rows_f32": (0, 1),
          "shampoo_newton_f32": (0, 2, 3),
          "rmsprop_tree_donated_f32": (0, 1, 2, 3), "lbfgs_two_loop_f32": (0, 2),
          "adafactor_tree_f32": (0, 2, 3, 4), "ftrl_update_f32": (0, 1, 2),
          "kv_prefill_cache_bf16": (2, 3), "dino_centering_ema_f32": (0, 1, 2)}

# The held-out programs (testdata/xla-dumps-holdout/); bench/ is on sys.path
# wherever this module is imported (xla_oracle_dumps.py puts it there).
from xla_holdout_programs import HOLDOUT  # noqa: E402
from xla_holdout3_programs import HOLDOUT3  # noqa: E402
from xla_holdout4_programs import HOLDOUT4  # noqa: E402
from xla_holdout5_programs import HOLDOUT5  # noqa: E402
from xla_holdout6_programs import HOLDOUT6  # noqa: E402
from xla_holdout7_programs import HOLDOUT7  # noqa: E402
from xla_holdout8_programs import HOLDOUT8  # noqa: E402
from xla_holdout9_programs import HOLDOUT9  # noqa: E402
from xla_holdout10_programs import HOLDOUT10  # noqa: E402

PROGRAMS.update(HOLDOUT)
PROGRAMS.update(HOLDOUT3)
PROGRAMS.update(HOLDOUT4)
PROGRAMS.update(HOLDOUT5)
PROGRAMS.update(HOLDOUT6)
PROGRAMS.update(HOLDOUT7)
PROGRAMS.update(HOLDOUT8)
PROGRAMS.update(HOLDOUT9)
PROGRAMS.update(HOLDOUT10)
