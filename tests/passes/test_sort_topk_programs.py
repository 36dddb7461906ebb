"""The gpu-cuda pipeline's top-k / sort rewrites on JAX-lowered programs
(testdata/sort-topk, shapes the XLA dumps do not cover): which kernels
they become by XLA's rules (TopkSpecializer: f32/bf16, k <= 16, n >= 1024;
TopkRewriter's rank-3 reshape; StableSortExpander + SortIotaFusion), and
the results are bit-identical before and after on inputs full of ties."""

from __future__ import annotations

import numpy as np
import pytest

from hlorun.analysis.kernels import kernel_list, kind
from hlorun.api import compile as hl_compile
from hlorun.evaluate import evaluate
from hlorun.text.parser import load_module

from ..conftest import TESTDATA

D = TESTDATA / "sort-topk"

CASES = {
    # program: final kernel kinds
    "topk_rank3_bf16": ["__gpu$TopK"],
    "topk_values_only": ["kCustom", "kLoop"],
    "topk_k32": ["kCustom", "kLoop", "kLoop"],
    "argsort_desc": ["kCustom", "kLoop"],
    "sort_kv": ["kCustom"],
    "sort_int_unstable": ["sort"],
}


def _inputs(module, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for p in module.entry.parameters:
        s = p.shape
        vals = rng.integers(-4, 5, s.dimensions)  # many ties
        import ml_dtypes
        dt = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "s32": np.int32}[s.element_type]
        out.append(vals.astype(dt))
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_kernels_and_numerics(name):
    before = load_module(D / f"{name}.hlo")
    r = hl_compile(before)
    r.raise_for_status()
    after = r.module
    assert sorted(kind(k.instruction) for k in kernel_list(after)) == sorted(CASES[name])
    assert not any(i.opcode == "topk" for c in after.computations for i in c.instructions)
    args = _inputs(before)
    got, want = evaluate(after, args), evaluate(before, args)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.ascontiguousarray(g).view(np.uint8), np.ascontiguousarray(w).view(np.uint8))
