"""priority-fusion's incremental priorities (hlorun/passes/priority_fusion/
costs.py) against the straightforward definition (``reference: true``:
every re-queued producer re-estimated from scratch over all its users):
the same final module text and the same remarks, on real models run
through gpu-cuda up to the fusion pipeline."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from hlorun.text.parser import load_module
from hlorun.passes.priority_fusion import PriorityFusion
from hlorun.passes.priority_fusion.costs import exact, exact_sum
from hlorun.pipeline.run import Listener, RunOptions, run_pipeline
from hlorun.pipeline.loader import load_pipeline
from hlorun.text.parser import parse_module
from hlorun.text.printer import print_module

from ..conftest import shared_path

REPO = Path(__file__).resolve().parents[2]
CORPUS = ("corpus", "xla", "files")


class _StopBefore(Exception):
    pass


class _Grab(Listener):
    def on_before_pass(self, ev, module):
        if ev.name == "priority-fusion":
            raise _StopBefore()


def pre_fusion(path):
    """The module as gpu-cuda hands it to priority-fusion."""
    m = load_module(str(path))
    try:
        res = run_pipeline(m, load_pipeline("gpu-cuda"),
                           RunOptions(verify_each=False, listeners=[_Grab()]))
    except _StopBefore:
        return m
    pytest.skip(f"{path.name}: priority-fusion not reached ({res.failure})")


def fuse(module, reference):
    p = PriorityFusion(reference=reference)
    changed = p.run(module)
    remarks = Counter((r.instruction, r.message, r.kind) for r in p.remarks)
    return changed, print_module(module), remarks


MODELS = [
    REPO / "testdata" / "transformer" / "jax_4layer_train_step.hlo.gz",
    REPO / "testdata" / "s2" / "cnn_fp16.hlo",
    REPO / "bench" / "models" / "mlp_train_bf16.hlo",
    ("xla__tools__benchmarks__hlo__nv_maxtext_1n1g_jit_train_step_before_optimization.hlo"),
    ("xla__tools__data__benchmarking__mobilenet_v2.hlo"),
]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: Path(str(m)).name.split(".")[0][-40:])
def test_incremental_matches_reference(model):
    path = model if isinstance(model, Path) else shared_path(*CORPUS, model)
    before = print_module(pre_fusion(path))
    # both from the same text: instruction ids (the queue's tie-break) agree
    ref = fuse(parse_module(before), reference=True)
    inc = fuse(parse_module(before), reference=False)
    assert ref[0] and inc[0]
    assert inc[1] != before
    assert inc[1] == ref[1]
    assert inc[2] == ref[2]


def test_exact_sums_do_not_depend_on_order():
    xs = [0.1, 1e-9, 3.25, 1e6 / 3, 2.0 ** -1070, 7.000000000000001]
    fwd = exact_sum(sum(exact(x) for x in xs))
    bwd = exact_sum(sum(exact(x) for x in reversed(xs)))
    assert fwd == bwd
    import math
    assert fwd == math.fsum(xs)
    # removing a term is exact too
    s = sum(exact(x) for x in xs) - exact(3.25)
    assert exact_sum(s) == math.fsum([x for x in xs if x != 3.25])
