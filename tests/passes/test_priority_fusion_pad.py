"""A pad reads each element of its operand once, however much padding it
adds: XLA's HloCostAnalysis::HandlePad sets no operand utilization, so the
operand keeps the default relative utilization 1.0 and
GpuHloCostAnalysis::FusionCalculateUtilizations evaluates a value under a
pad once per element of that value -- not once per element of the padded
result (an interior pad doubles the result; counting per output element
doubled the flops of everything under it).

Checked on the held-out assoc_scan_bf16 program (``lax.associative_scan``,
XLA's own before_optimizations): each down-sweep level is
``add(pad(concatenate(...)), pad(previous level))`` with a divergent
concatenate (400 flops per element).  With the operand counted twice the
concatenates could never fuse into their pads and stayed six kInput
concatenate kernels (XLA: one); now they fuse like XLA's, and the kernel
kinds match XLA's kInput count."""

from __future__ import annotations

from pathlib import Path

import pytest

import hlorun
from hlorun.analysis.kernels import kernel_list
from hlorun.evaluate import compare_values, evaluate, output_types, random_inputs, tolerance_types
from hlorun.passes.priority_fusion.model import DEVICES, concatenate_flops, estimate
from hlorun.pipeline.loader import load_pipeline
from hlorun.pipeline.run import RunOptions, run_pipeline
from hlorun.text.parser import parse_module

DUMP = Path(__file__).resolve().parents[2] / "testdata" / "xla-dumps-holdout" / "assoc_scan_bf16"

# one down-sweep level of assoc_scan_bf16 as XLA fuses it (fused_reduce of
# its after_optimizations, without the reduction): the level's concatenate
# interleaved with the previous level by two interior pads
_LEVEL = """HloModule level
%fused (p0: bf16[8,1,256], p1: bf16[8,511,256], p2: bf16[8,512,256]) -> bf16[8,1024,256] {
  %p0 = bf16[8,1,256]{2,1,0} parameter(0)
  %p1 = bf16[8,511,256]{2,1,0} parameter(1)
  %c = bf16[8,512,256]{2,1,0} concatenate(%p0, %p1), dimensions={1}
  %z = bf16[] constant(0)
  %lo = bf16[8,1024,256]{2,1,0} pad(%c, %z), padding=0_0_0x0_1_1x0_0_0
  %p2 = bf16[8,512,256]{2,1,0} parameter(2)
  %hi = bf16[8,1024,256]{2,1,0} pad(%p2, %z), padding=0_0_0x1_0_1x0_0_0
  ROOT %r = bf16[8,1024,256]{2,1,0} add(%lo, %hi)
}
ENTRY %e (a: bf16[8,1,256], b: bf16[8,511,256], c: bf16[8,512,256]) -> bf16[8,1024,256] {
  %a = bf16[8,1,256]{2,1,0} parameter(0)
  %b = bf16[8,511,256]{2,1,0} parameter(1)
  %c = bf16[8,512,256]{2,1,0} parameter(2)
  ROOT %f = bf16[8,1024,256]{2,1,0} fusion(%a, %b, %c), kind=kLoop, calls=%fused
}
"""


def test_a_value_under_a_pad_is_evaluated_once_per_element():
    f = parse_module(_LEVEL).entry.root
    concat = next(i for i in f.fused_computation.instructions if i.opcode == "concatenate")
    assert concatenate_flops(concat) == 400  # a warp can straddle the 1-row operand
    e = estimate([f], f, DEVICES["H100"])
    n_out, n_concat = 8 * 1024 * 256, 8 * 512 * 256
    # the add (bf16: XLA's default 3 flops) once per output element, the
    # concatenate once per element of its own result (not of the pad's)
    assert e.flops == 3 * n_out + 400 * n_concat
    # every input element read once (bf16: 2 bytes), none twice
    assert e.read_bytes == 2 * (8 * 1 * 256 + 8 * 511 * 256 + n_concat)


def _concat_kernels(module):
    return [k for k in kernel_list(module)
            if k.instruction.opcode == "fusion"
            and k.instruction.fused_computation.root.opcode == "concatenate"]


@pytest.fixture(scope="module")
def compiled():
    module = hlorun.load_module(next(DUMP.glob("*before_optimizations.txt")))
    res = run_pipeline(module, load_pipeline("gpu-cuda"), RunOptions())
    assert res.exit_code == 0
    return module


def test_assoc_scan_concatenates_fuse_into_their_pads_like_xla(compiled):
    xla = hlorun.load_module(next(DUMP.glob("*after_optimizations.txt*")))
    theirs = _concat_kernels(xla)
    assert len(theirs) == 1  # XLA keeps one level's concatenate apart
    ours = _concat_kernels(compiled)
    assert len(ours) == len(theirs)
    kinds = lambda m: sorted(k.kind for k in kernel_list(m) if k.kind == "kInput")
    assert kinds(compiled) == kinds(xla)  # the concatenate and the reduction
    # every other level's concatenate sits in a loop fusion under its pad
    fused = [i for k in kernel_list(compiled) if k.instruction.opcode == "fusion"
             and k.kind == "kLoop" for i in k.instruction.fused_computation.instructions
             if i.opcode == "concatenate"]
    assert fused and all(u.opcode == "pad" for c in fused for u in c.users)


def test_assoc_scan_compiles_to_the_same_values(compiled):
    before = hlorun.load_module(next(DUMP.glob("*before_optimizations.txt")))
    args = random_inputs(before, 0)
    cmp = compare_values(evaluate(before, args), evaluate(compiled, args), output_types(before),
                         tolerance_types=tolerance_types(before))
    assert cmp.ok, "; ".join(leaf.describe() for leaf in cmp.leaves if not leaf.ok)
