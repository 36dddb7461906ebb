"""hlorun.load from JAX objects: a Lowered (the HLO XLA receives), a
Compiled (XLA's optimized module), a jitted or plain function with example
arguments; and a JAX function compiled end to end."""

from __future__ import annotations

import pytest

import hlorun


jax = pytest.importorskip("jax")


def _f(x, w):
    import jax.numpy as jnp
    return jnp.tanh(x @ w).sum(axis=0)


def _args():
    import numpy as np
    return np.ones((8, 16), np.float32), np.ones((16, 4), np.float32)


def test_load_jax_lowered_gives_the_hlo_xla_receives():
    lowered = jax.jit(_f).lower(*_args())
    m = hlorun.load(lowered)
    assert hlorun.print_module(m).count("dot(") == 1
    assert {i.opcode for i in m.instructions()} >= {"dot", "tanh", "reduce", "parameter"}
    assert not m.is_scheduled  # not XLA's optimized module


def test_load_jitted_function_and_plain_function_with_args():
    a = hlorun.load(jax.jit(_f), *_args())
    b = hlorun.load(_f, *_args())
    assert hlorun.print_module(a) == hlorun.print_module(b)
    assert [p.shape.to_string(False) for p in a.entry.parameters] == ["f32[8,16]", "f32[16,4]"]


def test_load_jax_compiled_gives_xla_optimized_module():
    compiled = jax.jit(_f).lower(*_args()).compile()
    m = hlorun.load(compiled)
    assert m.is_scheduled  # XLA's after-optimizations module


def test_compile_a_jitted_function_end_to_end():
    r = hlorun.compile(hlorun.load(jax.jit(_f), *_args()), "gpu-cuda")
    assert r.ok and r.kernels
    assert any(k.category in ("gemm-fusion", "custom-call:__cublas$gemm") or "cublas" in k.category
               for k in r.kernels)
