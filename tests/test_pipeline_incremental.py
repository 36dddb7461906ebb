"""The pipeline's incremental machinery against the plain one, pass by
pass on real modules and pipelines:

* every incremental checker run (``check_changes``) returns what a full
  ``check`` returns at that point;
* every snapshot (diff and full forms) equals a fresh print;
* the whole run (violations, pass table, output, dumps) is the same with
  ``incremental_checks`` off;
* ``--check-changed`` agrees with the fingerprint of the printed module.
"""

from __future__ import annotations

import pytest

import hlorun
from hlorun.pipeline import snapshots as S
from hlorun.text.parser import load_module
from hlorun.text.fingerprint import fingerprint
from hlorun.pipeline.run import Listener, RunOptions, run_pipeline
from hlorun.pipeline.loader import load_pipeline
from hlorun.text.printer import print_module
from hlorun.verifier.checkers import Checker, HloVerifier

from .conftest import TESTDATA, shared_path

INPUTS = [
    TESTDATA / "s0" / "jit_dot_general_consumer.hlo",
    ("xla-dumps", "cnn_fp16",
     "module_14585.jit_model.0011.simplification.after_reshape-mover.before_constant_folding.txt"),
    ("xla-dumps", "gemm_bias_gelu_bf16", "module_2651.jit__lambda.before_optimizations.txt"),
    ("corpus", "xla", "files", "xla__backends__cpu__benchmarks__hlo__gemma3_1b_flax_call.hlo.gz"),
]


def _path(p):
    return p if not isinstance(p, tuple) else shared_path(*p)


def _key(diags):
    return [(d.rule, d.computation, d.instruction, d.message) for d in diags]


@pytest.fixture
def paranoid(monkeypatch):
    """Every incremental check is compared with a full one."""
    calls = []
    for cls in {HloVerifier, *_checker_classes()}:
        orig = cls.check_changes

        def check_changes(self, module, tracker, _orig=orig):
            got = _orig(self, module, tracker)
            assert _key(got) == _key(self.check(module)), type(self).__name__
            calls.append(len(got))
            return got
        monkeypatch.setattr(cls, "check_changes", check_changes)
    return calls


def _checker_classes():
    from hlorun.verifier.checkers import CHECKERS, checker_class
    return [checker_class(n) for n in CHECKERS]


class SnapshotChecker(Listener):
    """After every pass: the shared snapshot cache prints what the printer
    prints."""

    def __init__(self, cache):
        self.cache = cache
        self.compared = 0

    def on_run_start(self, run, module):
        self.cache.attach(run)

    def on_after_pass(self, ev, module):
        assert self.cache.module_text(module) == print_module(module), ev.path
        assert self.cache.texts(module, "diff") == {
            c.name: t for c, t in _fresh(module, "diff")}, ev.path
        self.compared += 1


def _fresh(module, form):
    from hlorun.text.printer import PRESETS, print_computation
    return [(c, print_computation(c, PRESETS[form], scheduled=module.is_scheduled))
            for c in module.print_order()]


@pytest.mark.parametrize("pipeline", ["gpu-cuda", "gpu-rocm-41481"])
@pytest.mark.parametrize("inp", [0, 1, 2, pytest.param(3, marks=pytest.mark.slow)])
def test_incremental_checks_and_snapshots_equal_full_ones(pipeline, inp, paranoid):
    m = load_module(str(_path(INPUTS[inp])))
    cache = S.SnapshotCache()
    snap = SnapshotChecker(cache)
    res = run_pipeline(m, load_pipeline(pipeline),
                       RunOptions(keep_going=True, check_changed=True, listeners=[snap]))
    assert snap.compared == len(res.events) - (res.failure is not None)
    assert paranoid  # the checkers did run incrementally
    assert not [e for e in res.events if e.changed_mismatch]


class Fingerprints(Listener):
    def __init__(self):
        self.fps = []

    def on_before_pass(self, ev, module):
        self.fps.append(fingerprint(module))

    def on_after_pass(self, ev, module):
        before = self.fps.pop()
        assert (fingerprint(module) != before) == ev.changed, ev.path


def test_check_changed_agrees_with_fingerprints():
    m = load_module(str(_path(INPUTS[1])))
    res = run_pipeline(m, load_pipeline("gpu-cuda"),
                       RunOptions(check_changed=True, listeners=[Fingerprints()]))
    assert res.exit_code == 0 and any(e.changed for e in res.events)


@pytest.mark.parametrize("inp", [0, 1])
def test_run_is_the_same_without_incremental_checks(inp, tmp_path):
    out = {}
    for inc in (True, False):
        d = tmp_path / str(inc)
        res = hlorun.compile(_path(INPUTS[inp]), "gpu-rocm-41481", dump_to=str(d / "dump"),
                             keep_going=True, incremental_checks=inc, lineage=False)
        r = res.run
        out[inc] = (res.exit_code,
                    [(v.rule, v.instruction, v.after_pass, v.message) for v in r.violations],
                    [(e.path, e.changed, e.instructions_after) for e in r.events],
                    res.text(),
                    {p.name: p.read_text() for p in (d / "dump").iterdir()
                     if not p.name.endswith(".json")})
    assert out[True] == out[False]
