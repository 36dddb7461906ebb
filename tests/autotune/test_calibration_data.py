"""The measured calibration set shipped as package data (issue 20)."""

from __future__ import annotations

import pytest

from hlorun.autotune import dataset as D
from hlorun.autotune.calibrate import pick_best


@pytest.mark.parametrize("device", ["H200", "H100"])
def test_dataset_loads_from_package_data(device):
    gemms = D.load(device)
    assert len(gemms) >= 200
    env = D.environment(device)
    assert env["jax"] == "0.11.2" and env["driver"] and env["xla_backend_versions"]["CUBLASLT"]
    assert {g.split for g in gemms} == {"train", "test"}
    dtypes = {g.case["dtype"] for g in gemms}
    assert dtypes == {"bf16", "f16", "tf32", "f32", "fp8", "int8"}
    # the split is by shape: no shape on both sides
    shapes = {s: {(g.problem.batch, g.problem.m, g.problem.n, g.problem.k) for g in gemms if g.split == s}
              for s in ("train", "test")}
    assert not shapes["train"] & shapes["test"]


@pytest.mark.parametrize("device", ["H200", "H100"])
def test_xla_choice_is_its_rule_on_its_measurements(device):
    """The chosen backend in XLA's autotune results is PickBestConfig over
    the logged times (what the calibration evaluates the model against)."""
    agree = total = 0
    for g in D.load(device):
        best = pick_best(g.candidates, lambda c: c.ns, lambda c: c.scratch_bytes)
        total += 1
        agree += best.backend == g.xla_backend
    assert agree / total >= 0.97


def test_unknown_device_is_a_clear_error():
    with pytest.raises(FileNotFoundError, match="no calibration data for MI300X"):
        D.load("MI300X")
