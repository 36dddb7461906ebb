"""bench/config_assigner_choices.py: XLA's measured native / block-level
emitter choices, and the fusion bodies XLA measured both ways on one GPU
model (the config-assigner times both emitters and keeps the faster, so a
near tie can go either way between two programs)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))


def _dumps(*names):
    dumps = [ROOT / "testdata" / "xla-dumps-holdout" / n for n in names]
    if not all(d.is_dir() for d in dumps):
        pytest.skip("no held-out dumps")
    return dumps


def test_same_column_sum_measured_both_ways_on_h200():
    """pointnet_cls_train_f32's input_reduce_fusion.8 and mobilenet_invres_bf16's
    28 deduplicated batch-norm sums are the same fusion (f32[128,128] summed
    over dimension 0) compiled on the same H200 by the same JAX 0.11.2: XLA
    measured the first faster on Triton and the second (one measurement for
    all 28 copies) faster on the native column-reduction emitter."""
    import config_assigner_choices as C
    rows = list(C.choices(_dumps("pointnet_cls_train_f32", "mobilenet_invres_bf16")))
    found = [c for c in C.contradictions(rows)
             if "f32[128]{0} reduce(f32[128,128]{1,0}" in c[1] and "dimensions={0}" in c[1]]
    assert len(found) == 1
    device, body, triton, native = found[0]
    assert device == "NVIDIA H200"
    assert {(r.program, r.fusion) for r in triton} == {
        ("pointnet_cls_train_f32", "input_reduce_fusion.8")}
    assert {r.program for r in native} == {"mobilenet_invres_bf16"}
    assert len(native) == 28
    assert "to_apply=add" in body
    # hlorun makes one choice for both (its model sees the same fusion)
    assert len({r.ours_triton for r in triton + native}) == 1


def test_summary_counts_measurements_once_per_program():
    import config_assigner_choices as C
    rows = list(C.choices(_dumps("mobilenet_invres_bf16")))
    s = C.summarize(rows)["short-column-reduction"]
    # 40+ instances, but the deduplicated copies are a handful of measurements
    assert s["instances"] > 3 * len(s["measurements"])
