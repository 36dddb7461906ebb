"""The pipeline's garbage-collector policy (hlorun.pipeline.gc_policy): frozen input,
raised young threshold while passes run, everything restored afterwards,
and the same output either way."""

from __future__ import annotations

import gc

import pytest

from hlorun.pipeline.gc_policy import pipeline_gc
from hlorun.pipeline.run import Listener, RunOptions, run_pipeline
from hlorun.pipeline.loader import load_pipeline
from hlorun.text.printer import print_module

from .test_pipeline_run import cnn


class _Seen(Listener):
    def __init__(self):
        self.thresholds = []
        self.frozen = []

    def on_before_pass(self, ev, module):
        self.thresholds.append(gc.get_threshold())
        self.frozen.append(gc.get_freeze_count())


def _run(policy):
    m = cnn()
    seen = _Seen()
    before = gc.get_threshold()
    res = run_pipeline(m, load_pipeline("gpu-cuda"),
                       RunOptions(gc_policy=policy, listeners=[seen]))
    assert res.failure is None and not res.violations
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
    return print_module(m), seen, before


def test_pipeline_policy_freezes_and_restores():
    text, seen, before = _run("pipeline")
    assert seen.thresholds and all(t[0] >= 50_000 and t[1:] == before[1:]
                                   for t in seen.thresholds)
    # the parsed module (and everything else alive at the start) is frozen
    assert min(seen.frozen) > 1000
    text_default, seen_default, _ = _run("default")
    assert all(t == before for t in seen_default.thresholds)
    assert all(f == 0 for f in seen_default.frozen)
    assert text == text_default
    text_thr, seen_thr, _ = _run("thresholds")
    assert all(t[0] >= 50_000 for t in seen_thr.thresholds)
    assert all(f == 0 for f in seen_thr.frozen)
    assert text_thr == text


def test_policies_nest_and_reject_unknown_names():
    before = gc.get_threshold()
    with pipeline_gc():
        inner = gc.get_threshold()
        with pipeline_gc():
            assert gc.get_threshold() == inner
        assert gc.get_threshold() == inner
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
    with pytest.raises(ValueError, match="unknown gc policy"):
        with pipeline_gc("never"):
            pass
