"""The training-step modules of bench/models (JAX-made MLP and CNN training
steps): the pre-optimization module and XLA:CPU's optimized module agree
under our evaluator, and our evaluation agrees with XLA:CPU itself."""

from __future__ import annotations

import pytest

from hlorun.evaluate import compare_values, evaluate, output_types, random_inputs, tolerance_types
from hlorun.evaluate.session import leaves
from hlorun.text.fileio import read_text
from hlorun.text.parser import load_module

from ..conftest import REPO
from . import xla_oracle

MODELS = ["mlp_train_f32", "mlp_train_bf16", "cnn_train_f32"]
DIR = REPO / "bench" / "models"


def _cmp(module, a, b):
    cmp = compare_values(a, b, output_types(module), tolerance_types=tolerance_types(module))
    assert cmp.ok, "; ".join(leaf.describe() for leaf in cmp.leaves if not leaf.ok)


@pytest.mark.parametrize("name", MODELS)
def test_xla_cpu_optimized_module_agrees_with_the_input(name):
    before = load_module(DIR / f"{name}.hlo")
    after = load_module(DIR / f"{name}.cpu_after_optimizations.hlo")
    args = random_inputs(before, 0)
    _cmp(before, evaluate(before, args), evaluate(after, args))


@pytest.mark.slow
@pytest.mark.skipif(not xla_oracle.available(), reason="jax is not installed")
@pytest.mark.parametrize("name", MODELS)
def test_training_step_agrees_with_xla_cpu(name):
    path = DIR / f"{name}.hlo"
    module = load_module(path)
    args = random_inputs(module, 1)
    ours = tuple(v for _, v in leaves(evaluate(module, args)))
    theirs = tuple(xla_oracle.run_on_xla_cpu(read_text(path), args))
    _cmp(module, theirs, ours)


# ---------------------------------------------------------------------------
# Real XLA:GPU (H200) compilations of the same programs (bench/gpu_dumps.py)
# ---------------------------------------------------------------------------

H200 = DIR / "h200"


def _h200_inputs(module):
    """The inputs bench/gpu_dumps.py fed the GPU."""
    import numpy as np

    from hlorun.evaluate.dtypes import dtype_of
    rng = np.random.default_rng(0)
    return [rng.uniform(-1.0, 1.0, p.shape.dimensions).astype(np.float64)
            .astype(dtype_of(p.shape.element_type)) for p in module.entry.parameters]


@pytest.mark.parametrize("name", MODELS)
def test_h200_optimized_module_agrees_with_its_input(name):
    before = load_module(H200 / f"{name}.before_optimizations.hlo")
    after = load_module(H200 / f"{name}.sm_9.0a_gpu_after_optimizations.hlo")
    args = _h200_inputs(before)
    _cmp(before, evaluate(before, args), evaluate(after, args))


@pytest.mark.parametrize("name", MODELS)
def test_evaluation_matches_what_the_h200_computed(name):
    """Our evaluation of XLA:GPU's optimized module against the GPU's own
    outputs (first 512 values of each).  f32 dots and convolutions ran in
    TF32 on the GPU (10-bit mantissa), so f32 outputs get f16's tolerance;
    bf16 outputs get bf16's."""
    import numpy as np
    after = load_module(H200 / f"{name}.sm_9.0a_gpu_after_optimizations.hlo")
    ours = [v for _, v in leaves(evaluate(after, _h200_inputs(after)))]
    gpu = np.load(H200 / f"{name}.gpu_outputs_head.npz")
    heads = [np.asarray(v).astype(np.float32).reshape(-1)[:512] for v in ours]
    theirs = [gpu[f"output_{i}"] for i in range(len(ours))]
    types = output_types(after)
    tol = ["f16" if t == "f32" else t for t in types]
    cmp = compare_values(tuple(theirs), tuple(heads), types, tolerance_types=tol)
    assert cmp.ok, "; ".join(leaf.describe() for leaf in cmp.leaves if not leaf.ok)
