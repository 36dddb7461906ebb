"""A variadic reduce (jnp.argmax: value and index reduced together) is a
reduction hero like any other (XLA's IsReductionFromOrToContiguousDimensions
looks at the first operand's dimensions, not at the result's tuple shape):
on the held-out scan_reductions_f32 program (XLA's own before_optimizations)
the argmax over a 512-wide row becomes a kInput reduction kernel, as in
XLA's after_optimizations, and the compiled module computes the same
values."""

from __future__ import annotations

from pathlib import Path

import hlorun
from hlorun.analysis.kernels import kernel_list
from hlorun.evaluate import compare_values, evaluate, output_types, random_inputs, tolerance_types
from hlorun.passes.multi_output_fusion.rules import is_nestable_variadic_reduction
from hlorun.passes.priority_fusion.analysis import is_reduction_from_or_to_contiguous
from hlorun.pipeline.loader import load_pipeline
from hlorun.pipeline.run import RunOptions, run_pipeline

DUMP = Path(__file__).resolve().parents[2] / "testdata" / "xla-dumps-holdout" / "scan_reductions_f32"


def _argmax_kernels(module):
    return [k for k in kernel_list(module)
            if k.instruction.opcode == "fusion" and k.instruction.shape.is_tuple
            and any(i.opcode == "reduce" and i.shape.is_tuple
                    for i in k.instruction.fused_computation.instructions)]


def test_argmax_is_a_reduction_kernel_like_xla():
    before = hlorun.load_module(next(DUMP.glob("*before_optimizations.txt")))
    xla = hlorun.load_module(next(DUMP.glob("*after_optimizations.txt")))
    theirs = _argmax_kernels(xla)
    assert [k.kind for k in theirs] == ["kInput"]
    argmax = next(i for i in before.instructions() if i.opcode == "reduce" and i.shape.is_tuple)
    assert is_reduction_from_or_to_contiguous(argmax)
    assert not is_nestable_variadic_reduction(argmax)  # it is an unnested reduction

    module = hlorun.load_module(next(DUMP.glob("*before_optimizations.txt")))
    res = run_pipeline(module, load_pipeline("gpu-cuda"), RunOptions())
    assert res.exit_code == 0
    assert [k.kind for k in _argmax_kernels(module)] == ["kInput"]
    args = random_inputs(before, 0)
    cmp = compare_values(evaluate(before, args), evaluate(module, args), output_types(before),
                         tolerance_types=tolerance_types(before))
    assert cmp.ok, "; ".join(leaf.describe() for leaf in cmp.leaves if not leaf.ok)
