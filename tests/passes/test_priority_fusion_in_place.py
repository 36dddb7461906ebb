"""Priority fusion's in-place rule (XLA's ``ShouldFuseInPlaceOp``,
hlorun/passes/priority_fusion/in_place.py): on the real KV-cache decode step
and on small modules taken from it."""

from __future__ import annotations

import pytest

import hlorun
from hlorun.passes.priority_fusion.in_place import in_place_pairs, in_place_refusal
from hlorun.text.parser import parse_module

from ..conftest import TESTDATA

KV = TESTDATA / "xla-dumps-holdout" / "kv_decode_step_bf16"

_CACHE = """HloModule kv

ENTRY e {
  vc = bf16[8,1024,2,64]{3,2,1,0} parameter(0)
  upd = bf16[8,2,1,64]{3,2,1,0} parameter(1)
  pos = s32[] parameter(2)
  z = s32[] constant(0)
  t = bf16[8,2,1024,64]{3,2,1,0} transpose(vc), dimensions={0,2,1,3}
  n = bf16[8,2,1,64]{3,2,1,0} negate(upd)
  s = bf16[8,2,1,64]{3,2,1,0} slice(t), slice={[0:8], [0:2], [0:1], [0:64]}
  s5 = bf16[8,2,1,64]{3,2,1,0} slice(t), slice={[0:8], [0:2], [5:6], [0:64]}
  d = bf16[8,2,1024,64]{3,2,1,0} dynamic-update-slice(t, n, z, z, pos, z)
  c = bf16[8,2,1024,64]{3,2,1,0} dynamic-update-slice(t, s, z, z, z, z)
  c5 = bf16[8,2,1024,64]{3,2,1,0} dynamic-update-slice(t, s5, z, z, z, z)
  ROOT r = tuple(d, c, c5)
}
"""


def _get(m, name):
    return m.entry.get_instruction(name)


def test_in_place_pairs_of_a_dus():
    m = parse_module(_CACHE)
    assert in_place_pairs(_get(m, "d")) == [(0, ())]
    assert in_place_pairs(_get(m, "t")) == []


def test_transpose_into_the_buffer_it_updates_is_refused():
    """The cache transpose cannot be fused into the update that writes over
    its result: XLA keeps it as a kernel of its own."""
    m = parse_module(_CACHE)
    assert in_place_refusal(_get(m, "t"), _get(m, "d")) == \
        "unrecognized inplace update non-elementwise output pair"


def test_elementwise_update_and_matching_slice_are_allowed():
    m = parse_module(_CACHE)
    # the update operand is not the buffer
    assert in_place_refusal(_get(m, "n"), _get(m, "d")) is None
    # a slice of the buffer at the DUS's own (constant) start indices
    assert in_place_refusal(_get(m, "s"), _get(m, "c")) is None


def test_slice_at_other_indices_is_refused():
    m = parse_module(_CACHE)
    assert in_place_refusal(_get(m, "s5"), _get(m, "c5")) == "DUS and slice index mismatch"


@pytest.fixture(scope="module")
def kv_result():
    before = next(KV.glob("*before_optimizations.txt*"))
    return hlorun.compile(hlorun.load(str(before)))


def test_kv_decode_cache_transposes_stay_kernels(kv_result):
    """On the real decode step both cache transposes stay outside the cache
    updates (XLA: wrapped_transpose and wrapped_transpose.1), for the reason
    XLA gives."""
    module = kv_result.module
    refused = [r for r in kv_result.remarks
               if r.pass_name == "priority-fusion"
               and "unrecognized inplace update non-elementwise output pair" in r.message]
    assert len(refused) == 2
    entry = module.entry
    transposes = [i for i in entry.instructions if i.opcode == "fusion"
                  and i.fused_computation.root.opcode == "transpose"
                  and i.operands[0].opcode == "parameter"
                  and len(i.fused_computation.instructions) == 2]
    assert sorted(t.operands[0].name for t in transposes) == ["kc.1", "vc.1"]


def test_kv_decode_matches_xla(kv_result):
    """With XLA's HoistFusedBitcasts after the GEMM fusion rewriter, the
    score GEMM reads the updated cache through a bitcast, so the cache
    update (a producer whose other user is a bitcast) is also recomputed
    inside each output transpose; the update fusion writes in place over a
    transposed cache the output transpose still reads, so copy insertion
    keeps a copy of each: XLA's 16 kernels, kind for kind."""
    from hlorun.analysis.kernels import kernel_list, kinds_matched
    after = next(KV.glob("*after_optimizations.txt*"))
    r = kv_result
    assert not r.failures
    ours = kernel_list(r.module)
    theirs = kernel_list(hlorun.load_module(after))
    assert len(theirs) == 16
    assert kinds_matched(ours, theirs) == 16
    assert sum(1 for k in ours if k.kind == "copy") == 2
    dus = [k for k in ours if k.instruction.opcode == "fusion" and any(
        i.opcode == "dynamic-update-slice" for i in k.instruction.fused_computation.instructions)]
    assert len(dus) == 4  # two cache updates, each also inside its output transpose
