"""reshape-is-bitcast's ``check_changes`` (re-examines only what the
ModuleTracker reports changed) returns exactly what ``check`` returns:
random edits of every kind (the verifier's fuzz edits: shapes and layouts
assigned directly, fusion ``calls`` pointed elsewhere, instructions moved
between computations ...) on a real XLA dump and on the JAX transformer as
gpu-cuda hands it to the reshape-decomposer; and through the pipeline on
the S0 scenario, where the violation appears."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from hlorun.passes.reshape_is_bitcast import ReshapeIsBitcast
from hlorun.pipeline.loader import load_pipeline
from hlorun.pipeline.run import Listener, RunOptions, run_pipeline
from hlorun.text.fileio import read_text
from hlorun.text.parser import load_module, parse_module
from hlorun.text.printer import print_module

from ..conftest import shared_path
from hlorun.ir.changes import ModuleTracker
from hlorun.ir.shape import Shape

from .test_incremental import EDITS, _instrs, _key, _pick

REPO = Path(__file__).resolve().parents[2]


class _Stop(Exception):
    pass


class _Grab(Listener):
    def on_before_pass(self, ev, module):
        if ev.name == "reshape-decomposer":
            raise _Stop()


def _relayout(rng, m):
    """A reshape or one of its operands gets another layout (as a pass that
    pins a layout does): it may stop being a bitcast, or become one again."""
    r = _pick(rng, [i for i in _instrs(m) if i.opcode == "reshape"])
    if r is None:
        return
    x = r if rng.random() < 0.5 else r.operands[0]
    s = x.shape
    if s.is_array and s.layout is not None and len(s.dimensions) > 1:
        perm = list(s.minor_to_major)
        rng.shuffle(perm)
        x.shape = Shape.array(s.element_type, s.dimensions, perm)


def _fusion_calls(rng, m):
    """A fusion's ``calls`` pointed at another computation (in place): the
    reshapes there become fused, those of its old body unfused."""
    f = _pick(rng, [i for i in _instrs(m) if i.opcode == "fusion"])
    if f is not None:
        f.attrs["calls"] = rng.choice(m.computations)


def _fuzz(m, seed: int, steps: int) -> int:
    rng = random.Random(seed)
    fns = [f for f, w in EDITS for _ in range(w)] + [_relayout] * 12 + [_fusion_calls] * 8
    check = ReshapeIsBitcast()
    tracker = ModuleTracker()
    tracker.scan(m)
    assert _key(check.check_changes(m, tracker)) == _key(check.check(m))
    findings = 0
    for step in range(steps):
        for _ in range(rng.choice((1, 1, 2, 3))):
            fn = rng.choice(fns)
            fn(rng, m)
        tracker.scan(m)
        inc = check.check_changes(m, tracker)
        full = check.check(m)
        assert _key(inc) == _key(full), f"seed {seed} step {step} after {fn.__name__}"
        assert not any("crashed" in d.message for d in full)
        findings += len(full)
    return findings


def _transformer_text() -> str:
    m = load_module(str(REPO / "testdata" / "xla-dumps" / "transformer_2l_bf16" /
                        "module_0000.jit_transformer_2l_bf16.before_optimizations.txt.gz"))
    try:
        run_pipeline(m, load_pipeline("gpu-cuda"), RunOptions(verify_each=False,
                                                              listeners=[_Grab()]))
    except _Stop:
        return print_module(m)
    pytest.skip("reshape-decomposer not reached")


def test_incremental_equals_full_under_random_edits_on_an_xla_dump():
    path = shared_path("xla-dumps", "cnn_fp16", "module_14585.jit_model.0043.hlo_normalization."
                       "after_triton-gemm-rewriter.before_hoist-fused-bitcasts.txt")
    text = read_text(str(path))
    total = 0
    for seed in range(6):
        total += _fuzz(parse_module(text, str(path)), seed, 40)
    assert total > 0  # the edits do make reshapes that are not bitcasts


def test_incremental_equals_full_under_random_edits_on_the_transformer():
    text = _transformer_text()
    m = parse_module(text)
    assert sum(1 for i in m.instructions() if i.opcode == "reshape") > 10
    total = 0
    for seed in range(3):
        total += _fuzz(parse_module(text), 100 + seed, 40)
    assert total > 0


def test_pipeline_names_the_same_pass_with_incremental_and_full_checks():
    """S0 (gpu-rocm-41481, the BLAS path): the GEMM rewriter pins a layout
    and a reshape stops being a bitcast; both modes report it after the
    same pass."""
    src = REPO / "testdata" / "s0" / "jit_dot_general_consumer.hlo"
    got = []
    for incremental in (True, False):
        m = load_module(str(src))
        res = run_pipeline(m, load_pipeline("gpu-rocm-41481"),
                           RunOptions(incremental_checks=incremental, keep_going=True,
                                      disable=["triton-gemm-rewriter"]))
        got.append(sorted((v.rule, v.instruction, v.after_pass, v.message)
                          for v in res.violations if v.rule == "reshape-is-bitcast"))
    assert got[0] and got[0] == got[1]
    assert "cublas-gemm-rewriter" in got[0][0][2]
