"""Generate testdata/transformer/jax_4layer_train_step.hlo.gz: a 4-layer bf16
decoder-only transformer training step (value_and_grad + SGD) lowered by JAX
on CPU.  B=4, S=256, d_model=512, 8 heads, FFN 2048, vocab 4096; LayerNorm,
biases, learned positions, exact GELU, causal softmax attention."""
import gzip, sys
import jax, jax.numpy as jnp

B, S, D, H, F, V, L = 4, 256, 512, 8, 2048, 4096, 4
dt = jnp.bfloat16

def init(key):
    ks = jax.random.split(key, 2 + 6 * L)
    n = lambda k, shape: (jax.random.normal(k, shape, jnp.float32) * 0.02).astype(dt)
    p = {"embed": n(ks[0], (V, D)), "out": n(ks[1], (D, V)), "layers": []}
    p["pos"] = n(ks[-1], (S, D))
    p["gf"], p["cf"] = jnp.ones((D,), dt), jnp.zeros((D,), dt)
    z = lambda m: jnp.zeros((m,), dt)
    for i in range(L):
        k = ks[2 + 6 * i: 8 + 6 * i]
        p["layers"].append({"wq": n(k[0], (D, D)), "wk": n(k[4], (D, D)), "wv": n(k[5], (D, D)),
                            "bq": z(D), "bk": z(D), "bv": z(D), "wo": n(k[1], (D, D)), "bo": z(D),
                            "w1": n(k[2], (D, F)), "b1": z(F), "w2": n(k[3], (F, D)), "b2": z(D),
                            "g1": jnp.ones((D,), dt), "g2": jnp.ones((D,), dt),
                            "c1": z(D), "c2": z(D)})
    return p

def layernorm(x, g, c):
    x32 = x.astype(jnp.float32)
    m = jnp.mean(x32, -1, keepdims=True)
    v = jnp.mean((x32 - m) ** 2, -1, keepdims=True)
    return ((x32 - m) * jax.lax.rsqrt(v + 1e-5)).astype(dt) * g + c

def layer(x, p):
    h = layernorm(x, p["g1"], p["c1"])
    q, k, v = h @ p["wq"] + p["bq"], h @ p["wk"] + p["bk"], h @ p["wv"] + p["bv"]
    sh = lambda t: t.reshape(B, S, H, D // H).transpose(0, 2, 1, 3)
    q, k, v = sh(q), sh(k), sh(v)
    s = (q @ k.transpose(0, 1, 3, 2)) / jnp.sqrt(D // H).astype(dt)
    mask = jnp.tril(jnp.ones((S, S), bool))
    s = jnp.where(mask, s, jnp.asarray(-1e4, dt))
    a = jax.nn.softmax(s.astype(jnp.float32), -1).astype(dt)
    o = (a @ v).transpose(0, 2, 1, 3).reshape(B, S, D)
    x = x + o @ p["wo"] + p["bo"]
    h = layernorm(x, p["g2"], p["c2"])
    return x + jax.nn.gelu(h @ p["w1"] + p["b1"], approximate=False) @ p["w2"] + p["b2"]

def loss(p, tokens, targets):
    x = p["embed"][tokens] + p["pos"]
    for lp in p["layers"]:
        x = layer(x, lp)
    x = layernorm(x, p["gf"], p["cf"])
    logits = (x @ p["out"]).astype(jnp.float32)
    lse = jax.nn.logsumexp(logits, -1)
    tgt = jnp.take_along_axis(logits, targets[..., None], -1)[..., 0]
    return jnp.mean(lse - tgt)

def step(p, tokens, targets):
    l, g = jax.value_and_grad(loss)(p, tokens, targets)
    return l, jax.tree_util.tree_map(lambda w, gw: w - jnp.asarray(1e-3, dt) * gw, p, g)

p = init(jax.random.PRNGKey(0))
tok = jnp.zeros((B, S), jnp.int32)
text = jax.jit(step).lower(p, tok, tok).as_text(dialect="hlo")
with gzip.open(sys.argv[1], "wt") as f:
    f.write(text)
print(len(text.splitlines()), "lines", jax.__version__)
