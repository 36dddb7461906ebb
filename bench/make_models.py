"""Regenerate bench/models/*.hlo with JAX (pip install '.[bench]').

mlp_train_{f32,bf16}: one SGD step of a 784-1024-1024-10 MLP with softmax
cross-entropy, batch 256 (the pre-optimization HLO JAX hands to XLA).
cnn_train_f32: one SGD step of a small conv net (two 3x3 convs, max-pool,
dense), batch 32 on 28x28x1 images.
Each also gets ``<name>.cpu_after_optimizations.hlo``: XLA:CPU's optimized
module (the host's jaxlib), an independent "after" for ``hlorun compare``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import jax.numpy as jnp

OUT = Path(__file__).resolve().parent / "models"


def mlp_train(dtype):
    sizes = [784, 1024, 1024, 10]
    keys = jax.random.split(jax.random.PRNGKey(0), len(sizes))
    params = [(jax.random.normal(k, (a, b), dtype) * 0.05, jnp.zeros((b,), dtype))
              for k, a, b in zip(keys, sizes[:-1], sizes[1:])]

    def loss(params, x, y):
        h = x
        for i, (w, b) in enumerate(params):
            h = h @ w + b
            if i < len(params) - 1:
                h = jax.nn.relu(h)
        logp = jax.nn.log_softmax(h.astype(jnp.float32))
        return -jnp.mean(jnp.sum(logp * y, axis=-1))

    def step(params, x, y):
        l, g = jax.value_and_grad(loss)(params, x, y)
        return jax.tree_util.tree_map(lambda p, d: p - 0.01 * d.astype(p.dtype), params, g), l

    x = jnp.zeros((256, 784), dtype)
    y = jnp.zeros((256, 10), jnp.float32)
    return jax.jit(step).lower(params, x, y)


def cnn_train():
    k = jax.random.split(jax.random.PRNGKey(1), 3)
    params = {"c1": jax.random.normal(k[0], (3, 3, 1, 16)) * 0.1,
              "c2": jax.random.normal(k[1], (3, 3, 16, 32)) * 0.1,
              "d": jax.random.normal(k[2], (7 * 7 * 32, 10)) * 0.01}

    def loss(p, x, y):
        dn = ("NHWC", "HWIO", "NHWC")
        h = jax.nn.relu(jax.lax.conv_general_dilated(x, p["c1"], (1, 1), "SAME", dimension_numbers=dn))
        h = jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        h = jax.nn.relu(jax.lax.conv_general_dilated(h, p["c2"], (1, 1), "SAME", dimension_numbers=dn))
        h = jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        logits = h.reshape(h.shape[0], -1) @ p["d"]
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * y, axis=-1))

    def step(p, x, y):
        l, g = jax.value_and_grad(loss)(p, x, y)
        return jax.tree_util.tree_map(lambda a, b: a - 0.01 * b, p, g), l

    return jax.jit(step).lower(params, jnp.zeros((32, 28, 28, 1)), jnp.zeros((32, 10)))


def main() -> int:
    OUT.mkdir(exist_ok=True)
    for name, lowered in [("mlp_train_f32", mlp_train(jnp.float32)),
                          ("mlp_train_bf16", mlp_train(jnp.bfloat16)),
                          ("cnn_train_f32", cnn_train())]:
        text = lowered.compiler_ir("hlo").as_hlo_text()
        (OUT / f"{name}.hlo").write_text(text)
        # what XLA:CPU makes of it (fusions, layouts): an "after" module
        cpu = lowered.compile().as_text()
        (OUT / f"{name}.cpu_after_optimizations.hlo").write_text(cpu)
        print(f"{name}: {len(text.splitlines())} lines, XLA:CPU output {len(cpu.splitlines())} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
