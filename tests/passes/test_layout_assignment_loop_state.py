"""layout-assignment lays a while body out first with its parameter free, as
XLA's first round does (a null ComputationLayout for every non-entry
computation): the loop state takes the layouts the body's uses and
producers give it, and the kWhile rule then settles the parameter on the
body's result and lays the body out again with that state mandatory.

Checked against XLA itself:

* XLA's own layout-assignment step on hmm_forward_scan_f32 (session-7 H200
  pass dumps 0035 -> 0036, in testdata/xla-pass-steps/layout-assignment):
  the backward loop's state is f32[199,32,64]{1,0,2} / f32[199,32,64,64]
  {1,0,3,2} (the row-reduction layout of the gradient sums reaches the
  stacked residuals), the forward loop's stays descending;
* transformer_scan_4l_bf16 through gpu-cuda: both loops' states have the
  layouts of XLA's after_optimizations module (the forward loop stacks
  Q/K/V already transposed, bf16[4,4,128,4,64]{2,4,3,1,0}; with the body's
  parameter pinned to descending layouts four elements of one loop and
  three of the other differed).
"""

from __future__ import annotations

from pathlib import Path

import hlorun
from hlorun.pipeline.loader import load_pipeline
from hlorun.pipeline.run import RunOptions, run_pipeline
from hlorun.testing.fixtures import run_passes

ROOT = Path(__file__).resolve().parents[2]
STEPS = ROOT / "testdata" / "xla-pass-steps" / "layout-assignment"
SCAN = ROOT / "testdata" / "xla-dumps" / "transformer_scan_4l_bf16"


def _whiles(module):
    return [i for i in module.entry.instructions if i.opcode == "while"]


def _layouts(shape):
    return [s.minor_to_major if s.is_array else None for s in shape.tuple_shapes]


def test_loop_states_match_xla_layout_assignment_step():
    module = hlorun.load_module(STEPS / "hmm_forward_scan_f32.before.txt.gz")
    expected = hlorun.load_module(STEPS / "hmm_forward_scan_f32.after.txt.gz")
    run_passes(module, [("layout-assignment", {})])
    ours, theirs = _whiles(module), _whiles(expected)
    assert len(ours) == len(theirs) == 2
    for a, b in zip(ours, theirs):
        assert _layouts(a.shape) == _layouts(b.shape)
        body = a.attrs["body"]
        assert _layouts(body.parameter(0).shape) == _layouts(b.attrs["body"].parameter(0).shape)
        assert body.parameter(0).shape == body.root.shape == a.shape
    # the backward loop's stacked residuals are not descending
    assert (1, 0, 2) in _layouts(ours[1].shape)


def test_scan_loop_states_have_xla_layouts():
    module = hlorun.load_module(next(SCAN.glob("*before_optimizations.txt*")))
    xla = hlorun.load_module(next(SCAN.glob("*after_optimizations.txt*")))
    assert run_pipeline(module, load_pipeline("gpu-cuda"), RunOptions()).exit_code == 0
    ours, theirs = _whiles(module), _whiles(xla)
    assert len(ours) == len(theirs) == 2
    for a, b in zip(ours, theirs):
        assert _layouts(a.shape) == _layouts(b.shape)
    assert (2, 4, 3, 1, 0) in _layouts(ours[0].shape)
