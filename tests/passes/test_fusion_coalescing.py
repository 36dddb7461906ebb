"""XLA's read-coalescing heuristic in the fusion cost model
(IsReadCoalescedHeuristic / TransposesMinorDimension), on XLA's own fused
rope_gqa_train_bf16 program (H100, JAX 0.11.2)."""

from __future__ import annotations

from pathlib import Path

import pytest

import hlorun
from hlorun.passes.priority_fusion.coalescing import has_bad_transpose, transposes_minor_dimension
from hlorun.passes.priority_fusion.model import DEVICES, estimate

ROOT = Path(__file__).resolve().parents[2]
ROPE = ROOT / "testdata" / "xla-dumps-holdout" / "rope_gqa_train_bf16"


@pytest.fixture(scope="module")
def rope():
    after = sorted(ROPE.glob("*gpu_after_optimizations.txt*"))
    if not after:
        pytest.skip("rope_gqa_train_bf16 dump not present")
    m = hlorun.load_module(after[0])
    return {i.name: i for i in m.entry.instructions}


def _members(f):
    return [i for i in f.fused_computation.instructions if i.opcode != "parameter"]


def test_transposes_minor_dimension(rope):
    """The split-K transpose kernel swaps the two minor dimensions twice
    ({0,2,1} then {0,1,3,2}); the RoPE concatenate kernel moves no data
    across dimensions."""
    t = rope["input_transpose_fusion.1"]
    transposes = [i for i in _members(t) if i.opcode == "transpose"]
    assert len(transposes) == 2 and all(transposes_minor_dimension(x) for x in transposes)
    assert has_bad_transpose(_members(t))
    assert not has_bad_transpose(_members(rope["input_concatenate_fusion"]))


def test_transpose_kernel_reads_coalesced_alone_but_not_fused(rope):
    """Alone the kernel gets the transpose emitter: its read is coalesced.
    Fused into the concatenate kernel (not a transpose kernel) the
    heuristic calls *every* read of the fused kernel uncoalesced -- also the
    cos/sin tables the transpose never touches -- so XLA keeps the two
    kernels apart (its after_optimizations has both)."""
    dev = DEVICES["H100"]
    t, c = rope["input_transpose_fusion.1"], rope["input_concatenate_fusion"]
    alone = estimate([t], t, dev)
    assert alone.kind == "transpose" and alone.uncoalesced == []
    fused = estimate([t, c], c, dev)
    assert fused.kind != "transpose"
    operands = {o.name for o in t.operands} | {o.name for o in c.operands if o is not t}
    assert set(fused.uncoalesced) == operands
    consumer = estimate([c], c, dev)
    assert consumer.uncoalesced == []
    # reading the f32 split-K partials at the 4-byte transaction rate costs more
    # than the launch and the bf16 round trip fusing saves
    assert fused.time_us > alone.time_us + consumer.time_us


def test_two_reductions_read_uncoalesced():
    """XLA's embed_xent_train_bf16 keeps its per-token partial sums
    (f32[2048,128]) and their final row sums (f32[2048]) as two reduction
    kernels.  Fused into one reduction kernel, the heuristic calls every read
    uncoalesced (two input-fusible reductions); each alone reads coalesced."""
    after = sorted((ROOT / "testdata" / "xla-dumps-holdout" / "embed_xent_train_bf16")
                   .glob("*gpu_after_optimizations.txt*"))
    if not after:
        pytest.skip("embed_xent_train_bf16 dump not present")
    m = hlorun.load_module(after[0])
    byname = {i.name: i for i in m.entry.instructions}
    p, c = byname["input_reduce_fusion.1"], byname["input_reduce_fusion.3"]
    dev = DEVICES["H100"]
    assert estimate([p], p, dev).uncoalesced == [] and estimate([c], c, dev).uncoalesced == []
    fused = estimate([p, c], c, dev)
    assert fused.kind == "reduction"
    assert set(fused.uncoalesced) == {o.name for o in p.operands} | \
        {o.name for o in c.operands if o is not p}
