"""Launch dimensions of loop kernels in the fusion cost model follow XLA's
``ComputeLoopFusionConfig`` + ``CalculateLaunchDimensions``: 128 threads
per block, and a loop kernel is unrolled (4 elements per thread, else 2)
only when it has at least as many elements as the GPU has resident threads
(``threads_per_core_limit`` 2048 x 132 SMs on H100/H200) and nothing in it
prevents vectorization (dot, sort, a concatenate of more than 10 operands,
a variadic reduce).  Smaller kernels run one thread per element -- 4x the
blocks an always-unrolled model gives them, which changes their bandwidth
cap (one 32-byte transaction per SM and clock) and so the priorities of
small producers."""

from __future__ import annotations

import pytest

from hlorun.passes.priority_fusion.model import DEVICES, estimate
from hlorun.text.parser import parse_module

# scan_reductions_f32 (held-out dump): XLA's fused_multiply, the cumulative
# product's second level, f32[64,8,16] = 8192 elements
_SMALL = """HloModule small
%region (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %m = f32[] multiply(%a, %b)
}
%fused_multiply (param_0: f32[64,128]) -> f32[64,8,16] {
  %param_0 = f32[64,128]{1,0} parameter(0)
  %bc = f32[64,8,16]{2,1,0} bitcast(%param_0)
  %one = f32[] constant(1)
  %rw = f32[64,8,16]{2,1,0} reduce-window(%bc, %one), window={size=1x1x16 pad=0_0x0_0x15_0}, to_apply=%region
  %s = f32[64,8,1]{2,1,0} slice(%rw), slice={[0:64], [0:8], [15:16]}
  %b2 = f32[64,8]{1,0} bitcast(%s)
  %rw2 = f32[64,9]{1,0} reduce-window(%b2, %one), window={size=1x8 pad=0_0x8_0}, to_apply=%region
  %s2 = f32[64,8]{1,0} slice(%rw2), slice={[0:64], [0:8]}
  %br = f32[64,8,16]{2,1,0} broadcast(%s2), dimensions={0,1}
  ROOT %mul = f32[64,8,16]{2,1,0} multiply(%rw, %br)
}
ENTRY %e (p: f32[64,128]) -> f32[64,8,16] {
  %p = f32[64,128]{1,0} parameter(0)
  ROOT %f = f32[64,8,16]{2,1,0} fusion(%p), kind=kLoop, calls=%fused_multiply
}
"""


def _elementwise(shape: str, op: str = "add", out: str | None = None) -> str:
    out = out or shape
    return f"""HloModule ew
%fused (p0: {shape}, p1: {shape}) -> {out} {{
  %p0 = {shape} parameter(0)
  %p1 = {shape} parameter(1)
  %a = {shape} {op}(%p0, %p1)
  ROOT %c = {out} convert(%a)
}}
ENTRY %e (x: {shape}, y: {shape}) -> {out} {{
  %x = {shape} parameter(0)
  %y = {shape} parameter(1)
  ROOT %f = {out} fusion(%x, %y), kind=kLoop, calls=%fused
}}
"""


def _dims(text: str, device: str = "H100") -> tuple[int, int]:
    f = parse_module(text).entry.root
    e = estimate([f], f, DEVICES[device])
    return e.blocks, e.threads


def test_a_small_loop_kernel_runs_one_thread_per_element():
    assert _dims(_SMALL) == (8192 // 128, 128)


@pytest.mark.parametrize("n, blocks", [
    (270336, 270336 // 4 // 128),        # exactly 2048 x 132 threads: unrolled 4x
    (270338, -(-270338 // 2 // 128)),    # divisible by 2 only: unrolled 2x
    (270337, -(-270337 // 128)),         # odd: not unrolled
    (270332, -(-270332 // 128)),         # fewer elements than resident threads
])
def test_large_loop_kernels_unroll_like_xla(n, blocks):
    assert _dims(_elementwise(f"f32[{n}]{{0}}"))[0] == blocks


def test_sub_byte_outputs_are_unrolled_to_whole_bytes():
    # s4 output: at least 2 elements per thread even in a small kernel
    assert _dims(_elementwise("s8[4096]{0}", out="s4[4096]{0}"))[0] == 4096 // 2 // 128


@pytest.mark.parametrize("k, unrolled", [(10, True), (11, False)])
def test_a_concatenate_of_many_operands_is_not_unrolled(k, unrolled):
    n = 27648 if k == 10 else 25600
    total = n * k  # 276480 / 281600: more elements than resident threads, divisible by 4
    params = ", ".join(f"p{i}: f32[{n}]" for i in range(k))
    ops = ", ".join(f"%p{i}" for i in range(k))
    body = "".join(f"  %p{i} = f32[{n}]{{0}} parameter({i})\n" for i in range(k))
    text = f"""HloModule cat
%fused ({params}) -> f32[{total}] {{
{body}  ROOT %c = f32[{total}]{{0}} concatenate({ops}), dimensions={{0}}
}}
ENTRY %e ({params}) -> f32[{total}] {{
{body}  ROOT %f = f32[{total}]{{0}} fusion({ops}), kind=kLoop, calls=%fused
}}
"""
    assert total >= 2048 * 132 and total % 4 == 0
    assert _dims(text)[0] == total // (4 if unrolled else 1) // 128


# transformer_2l_bf16 (known dump): XLA's fused_multiply_reduce, the final
# layer norm's backward row sum over 256 features of 512 rows, reading bf16
# activations; the f32 twin reads f32 only
def _row_sum(rows: int, row: int, dtype: str = "bf16") -> str:
    return f"""HloModule rowsum
%add (a: f32[], b: f32[]) -> f32[] {{
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}}
%fused_reduce (p0: {dtype}[{rows},{row}], p1: f32[{row}]) -> f32[{rows}] {{
  %p0 = {dtype}[{rows},{row}]{{1,0}} parameter(0)
  %c = f32[{rows},{row}]{{1,0}} convert(%p0)
  %p1 = f32[{row}]{{0}} parameter(1)
  %b = f32[{rows},{row}]{{1,0}} broadcast(%p1), dimensions={{1}}
  %m = f32[{rows},{row}]{{1,0}} multiply(%c, %b)
  %z = f32[] constant(0)
  ROOT %r = f32[{rows}]{{0}} reduce(%m, %z), dimensions={{1}}, to_apply=%add
}}
ENTRY %e (x: {dtype}[{rows},{row}], w: f32[{row}]) -> f32[{rows}] {{
  %x = {dtype}[{rows},{row}]{{1,0}} parameter(0)
  %w = f32[{row}]{{0}} parameter(1)
  ROOT %f = f32[{rows}]{{0}} fusion(%x, %w), kind=kInput, calls=%fused_reduce
}}
"""


@pytest.mark.parametrize("rows, row, dtype, dims", [
    # RowReductionFusion: 16 elements per thread -> 32 threads along the row,
    # 8 rows per block (256 threads), one block across the row (vector 4 for
    # bf16 inputs, 2 for f32): 512 / 8 blocks
    (512, 256, "bf16", (64, 256)),
    (512, 256, "f32", (64, 256)),
    # a long row: 1024 threads along it, vector 2, 8 x 1024 x 2 elements per
    # block tile -> 4 blocks per row
    (8, 65536, "f32", (8 * 4, 1024)),
    # MultiRowReductionFusion: a 32-element f32 row fits one warp's 2-vectors;
    # 16 threads per row, 16 rows per block
    (8192, 32, "f32", (8192 // 16, 256)),
    # ... but not if the blocks would not fill the GPU's 132 SMs: the vector
    # halves to 1 (32 threads per row, 8 rows per block)
    (2048, 32, "f32", (2048 // 8, 256)),
])
def test_row_reductions_launch_like_xlas_mlir_emitters(rows, row, dtype, dims):
    assert _dims(_row_sum(rows, row, dtype)) == dims
