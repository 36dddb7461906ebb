"""A bitcast is fusible when it keeps the bit width (XLA's IsFusibleBitcast:
hlo_instruction_utils::KeepsBitwidth), not only when it keeps the element
type: jax.random's uniform turns random u32 bits into f32 by a same-width
bitcast (bitcast_convert_type), and a bf16 <-> f16 or f32 <-> s32
reinterpretation is free like any bitcast.  Such a bitcast is fused into
its users first (infinite priority) and does not stop its producer from
fusing; a bitcast that changes the width (s8[..., 2] -> s16) stays
unfusible."""

from __future__ import annotations

from hlorun.passes.priority_fusion.analysis import is_fusible, is_fusible_bitcast
from hlorun.pipeline.loader import load_pipeline
from hlorun.pipeline.run import RunOptions, run_pipeline
from hlorun.text.parser import parse_module

# the tail of jax.random.uniform as XLA's dropout dump computes it: random
# u32 bits -> mantissa | 1.0f -> bitcast to f32 -> [1, 2) - 1 -> compare
_UNIFORM = """HloModule uniform, entry_computation_layout={(u32[128,1024]{1,0}, f32[128,1024]{1,0})->(pred[128,1024]{1,0}, f32[128,1024]{1,0})}

ENTRY %e (bits: u32[128,1024], x: f32[128,1024]) -> (pred[128,1024], f32[128,1024]) {
  %bits = u32[128,1024]{1,0} parameter(0)
  %c9 = u32[] constant(9)
  %nine = u32[128,1024]{1,0} broadcast(%c9), dimensions={}
  %mantissa = u32[128,1024]{1,0} shift-right-logical(%bits, %nine)
  %c1f = u32[] constant(1065353216)
  %onef = u32[128,1024]{1,0} broadcast(%c1f), dimensions={}
  %or = u32[128,1024]{1,0} or(%mantissa, %onef)
  %as_f32 = f32[128,1024]{1,0} bitcast(%or)
  %c1 = f32[] constant(1)
  %one = f32[128,1024]{1,0} broadcast(%c1), dimensions={}
  %u = f32[128,1024]{1,0} subtract(%as_f32, %one)
  %cp = f32[] constant(0.9)
  %p = f32[128,1024]{1,0} broadcast(%cp), dimensions={}
  %keep = pred[128,1024]{1,0} compare(%u, %p), direction=LT
  %x = f32[128,1024]{1,0} parameter(1)
  %zero = f32[128,1024]{1,0} broadcast(%c1), dimensions={}
  %y = f32[128,1024]{1,0} select(%keep, %x, %zero)
  ROOT %t = (pred[128,1024]{1,0}, f32[128,1024]{1,0}) tuple(%keep, %y)
}
"""


def _priority_fusion(text: str):
    module = parse_module(text)
    spec = load_pipeline("gpu-cuda")
    res = run_pipeline(module, spec, RunOptions(enable_only=["fusion/priority-fusion"]))
    assert res.exit_code == 0
    return module


def test_same_width_bitcasts_are_fusible():
    m = parse_module(_UNIFORM)
    bc = next(i for i in m.entry.instructions if i.name == "as_f32")
    assert is_fusible_bitcast(bc) and is_fusible(bc)
    packing = parse_module("""HloModule pack
ENTRY %e (p: s8[3,5,2]) -> s16[3,5] {
  %p = s8[3,5,2]{2,1,0} parameter(0)
  %n = s8[3,5,2]{2,1,0} negate(%p)
  ROOT %b = s16[3,5]{1,0} bitcast(%n)
}
""")
    b = packing.entry.root
    assert not is_fusible_bitcast(b) and not is_fusible(b)


def test_random_bits_fuse_through_the_f32_bitcast():
    m = _priority_fusion(_UNIFORM)
    top = [i for i in m.entry.instructions
           if i.opcode not in ("parameter", "constant", "tuple", "get-tuple-element")]
    # no bitcast is left between the bit twiddling and the float compare: the
    # u32 ops end up in the kernels that compute the mask
    assert not [i for i in top if i.opcode == "bitcast"], [i.name for i in top]
    assert all(i.opcode == "fusion" for i in top), [i.opcode for i in top]
    bodies = [i.fused_computation for i in top]
    assert any(any(x.opcode == "shift-right-logical" for x in b.instructions) and
               any(x.opcode == "compare" for x in b.instructions) for b in bodies)
