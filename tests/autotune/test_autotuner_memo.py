"""The autotuner computes each GEMM's candidates once per run for GEMMs
with the same canonical body and problem (hlorun/passes/autotuner:
``shared_candidates``) and shares their JSON between records: on the JAX
4-layer transformer (every layer's GEMMs alike) the decisions, records and
final module are those of computing every GEMM's candidates afresh."""

from __future__ import annotations

import json
from pathlib import Path

from hlorun.passes import pass_class
from hlorun.pipeline.loader import load_pipeline
from hlorun.pipeline.run import Listener, RunOptions, run_pipeline
from hlorun.text.parser import load_module, parse_module
from hlorun.text.printer import print_module

AT = pass_class("autotuner")
MODEL = Path(__file__).resolve().parents[2] / "testdata" / "transformer" / "jax_4layer_train_step.hlo.gz"


class _Stop(Exception):
    pass


class _Before(Listener):
    def on_before_pass(self, ev, module):
        if ev.name == "autotuner":
            raise _Stop()


def _pre_autotuner() -> str:
    m = load_module(str(MODEL))
    try:
        run_pipeline(m, load_pipeline("gpu-cuda"), RunOptions(verify_each=False,
                                                               listeners=[_Before()]))
    except _Stop:
        return print_module(m)
    raise AssertionError("autotuner not reached")


def _tune(text: str, fresh: bool, monkeypatch):
    calls = []
    orig = AT.candidates

    def counting(self, g, p, d, force):
        calls.append(g.name)
        return orig(self, g, p, d, force)
    monkeypatch.setattr(AT, "candidates", counting)
    if fresh:
        monkeypatch.setattr(AT, "shared_candidates",
                            lambda self, g, p, d, key: self.candidates(g, p, d, None))
    m = parse_module(text)
    p = AT()
    p.run(m)
    monkeypatch.undo()
    recs = json.dumps(p.records, sort_keys=True, default=str)
    remarks = [(r.instruction, r.message, r.kind) for r in p.remarks]
    return print_module(m), recs, remarks, calls, p


def test_shared_candidates_same_decisions(monkeypatch):
    text = _pre_autotuner()
    shared = _tune(text, False, monkeypatch)
    fresh = _tune(text, True, monkeypatch)
    gemms = len(fresh[3])
    assert gemms >= 20
    assert len(shared[3]) < gemms / 2  # the layers' GEMMs share candidates
    assert shared[0] == fresh[0]
    assert shared[1] == fresh[1]
    assert shared[2] == fresh[2]
    # each GEMM's decision still lists its own candidate list
    ds = shared[4].decisions
    assert len({id(d.candidates) for d in ds}) == len(ds)
