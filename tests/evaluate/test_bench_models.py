"""The training-step modules of bench/models (JAX-made MLP and CNN training
steps): the pre-optimization module and XLA:CPU's optimized module agree
under our evaluator, and our evaluation agrees with XLA:CPU itself."""

from __future__ import annotations

import pytest

from hlorun.evaluate import compare_values, evaluate, output_types, random_inputs, tolerance_types
from hlorun.evaluate.session import leaves
from hlorun.fileio import read_text
from hlorun.parser import load_module

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
