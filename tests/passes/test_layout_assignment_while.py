"""layout-assignment's while-loop rule (XLA's AddMandatoryConstraints for
kWhile: the body parameter takes the layout the body's result gets, and the
loop, its condition and its init value follow) and copy-insertion's
donated-output rule, on XLA's own gqa_decode_loop module (a KV-cache decode
loop): the loop state carries the caches in the layouts the in-loop dots
read -- the layouts of XLA's after_optimizations -- the caches are
transposed once before and once after the loop, no donated output is
copied, and the values are unchanged."""

from __future__ import annotations

from pathlib import Path

import hlorun
from hlorun.evaluate import compare_values, evaluate, output_types, random_inputs, tolerance_types
from hlorun.pipeline.loader import load_pipeline
from hlorun.pipeline.run import RunOptions, run_pipeline

DUMP = Path(__file__).resolve().parents[2] / "testdata" / "xla-dumps" / "gqa_decode_loop"


def _while(module):
    return next(i for i in module.entry.instructions if i.opcode == "while")


def _layouts(shape):
    return [s.minor_to_major if s.is_array else None for s in shape.tuple_shapes]


def test_loop_state_takes_the_layouts_the_body_computes():
    before = hlorun.load_module(next(DUMP.glob("*before_optimizations.txt")))
    module = hlorun.load_module(next(DUMP.glob("*before_optimizations.txt")))
    xla = hlorun.load_module(next(DUMP.glob("*after_optimizations.txt")))
    assert run_pipeline(module, load_pipeline("gpu-cuda"), RunOptions()).exit_code == 0
    w = _while(module)
    body, cond = w.attrs["body"], w.attrs["condition"]
    # one layout for the loop state everywhere (XLA's verifier requires it)
    assert body.parameter(0).shape == body.root.shape == w.shape == cond.parameter(0).shape
    assert w.operands[0].shape == w.shape
    # the caches' layouts are XLA's ({1,3,2,0} and {3,1,2,0})
    ours = [l for l in _layouts(w.shape) if l is not None and len(l) == 4]
    theirs = [l for l in _layouts(_while(xla).shape) if l is not None and len(l) == 4]
    assert ours == theirs and ours[0] != (3, 2, 1, 0)
    # transposes in and out of the loop, not inside it; no copy of a donated output
    entry_fusions = [i for i in module.entry.instructions if i.opcode == "fusion"]
    assert len(entry_fusions) == 4
    assert not any(i.opcode == "copy" for i in module.entry.root.operands)
    args = random_inputs(before, 0)
    cmp = compare_values(evaluate(before, args), evaluate(module, args), output_types(before),
                         tolerance_types=tolerance_types(before))
    assert cmp.ok, "; ".join(leaf.describe() for leaf in cmp.leaves if not leaf.ok)


SCALAR_LOOP = """HloModule WhileWithScalarS32Result_module, entry_computation_layout={()->s32[]}

%body.v3 (prev.1: s32[]) -> s32[] {
  %constant = s32[] constant(1)
  %prev.1 = s32[] parameter(0)
  ROOT %add = s32[] add(s32[] %constant, s32[] %prev.1)
}

%condition.v3 (prev.2: s32[]) -> pred[] {
  %constant.1 = s32[] constant(5)
  %prev.2 = s32[] parameter(0)
  ROOT %greater-than = pred[] compare(s32[] %constant.1, s32[] %prev.2), direction=GT
}

ENTRY %WhileWithScalarS32Result.v2 () -> s32[] {
  %constant.2 = s32[] constant(0)
  ROOT %while = s32[] while(s32[] %constant.2), condition=%condition.v3, body=%body.v3
}
"""


def test_a_loop_over_a_scalar_compiles():
    """XLA's parser test WhileWithScalarS32Result (the loop state is not a
    tuple): the whole default pipeline runs."""
    from hlorun.text.parser import parse_module
    module = parse_module(SCALAR_LOOP)
    assert run_pipeline(module, load_pipeline("gpu-cuda"), RunOptions()).exit_code == 0
