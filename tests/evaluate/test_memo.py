"""The memoizing evaluator behind ``--check-numerics=each``: after every
changed pass of a real pipeline it gives bitwise the results of a fresh
evaluation, while re-evaluating only what the pass changed."""

from __future__ import annotations

import numpy as np

from hlorun.evaluate import Evaluator, random_inputs
from hlorun.evaluate.memo import MemoEvaluator
from hlorun.text.parser import load_module
from hlorun.pipeline.run import Listener, RunOptions, run_pipeline
from hlorun.pipeline.loader import load_pipeline

from ..conftest import TESTDATA

MLP = next((TESTDATA / "xla-dumps" / "mlp_train_mixed").glob("*before_optimizations*"))


def _leaves(v):
    return [x for y in v for x in _leaves(y)] if isinstance(v, tuple) else [v]


class _Both(Listener):
    def __init__(self, memo, args):
        self.memo, self.args, self.log = memo, args, []

    def on_after_pass(self, ev, module):
        if not ev.changed:
            return
        fresh = Evaluator(module).evaluate(self.args)
        got = self.memo.evaluate(module)
        same = all(np.array_equal(a, b, equal_nan=True) for a, b in zip(_leaves(fresh), _leaves(got)))
        self.log.append((ev.path, same, self.memo.evaluated, self.memo.reused))


def test_memo_matches_fresh_evaluation_through_the_pipeline():
    m = load_module(MLP)
    args = random_inputs(m, 0)
    memo = MemoEvaluator(args)
    first = memo.evaluate(m)
    assert memo.evaluated > 100 and memo.reused < memo.evaluated  # equal subtrees: once
    fresh = Evaluator(m).evaluate(args)
    assert all(np.array_equal(a, b) for a, b in zip(_leaves(first), _leaves(fresh)))
    lst = _Both(memo, args)
    run_pipeline(m, load_pipeline("gpu-cuda"), RunOptions(listeners=[lst]))
    assert len(lst.log) > 10
    assert all(same for _, same, _, _ in lst.log), [x for x in lst.log if not x[1]]
    # most checks re-evaluate a small part of the module
    total = sum(e + r for _, _, e, r in lst.log)
    evaluated = sum(e for _, _, e, _ in lst.log)
    assert evaluated < total / 3, lst.log
    # a pass that changes no value (e.g. renaming fusions) evaluates nothing new
    renames = [x for x in lst.log if x[0].endswith("rename_fusions")]
    assert renames and all(e == 0 for _, _, e, _ in renames)


def test_memo_sees_a_layout_change_under_a_bitcast():
    from hlorun.text.parser import parse_module
    text = """HloModule m

ENTRY e {
  p = f32[2,3]{1,0} parameter(0)
  c = f32[2,3]{1,0} copy(p)
  ROOT b = f32[3,2]{1,0} bitcast(c)
}
"""
    m = parse_module(text)
    args = [np.arange(6, dtype=np.float32).reshape(2, 3)]
    memo = MemoEvaluator(args)
    before = memo.evaluate(m)
    copy = [i for i in m.entry.instructions if i.opcode == "copy"][0]
    copy.shape = copy.shape.with_layout([0, 1])   # same logical values, other memory order
    after = memo.evaluate(m)
    assert np.array_equal(after, Evaluator(m).evaluate(args))
    assert not np.array_equal(before, after)
