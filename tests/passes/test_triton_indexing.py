"""SymbolicTile derivation through reshapes (passes/triton_indexing.py) on
swin_window_attn_bf16's window layer norm (held-out set): XLA keeps the
window transpose of ``x`` out of the Triton normalization fusion."""

from __future__ import annotations

from hlorun.passes.triton_indexing import fused_pair_refusal, untileable_indexing
from hlorun.text.parser import parse_module

_SWIN = """
HloModule swin

region_add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

fused_transpose {
  p0 = bf16[2,32,32,128]{3,2,1,0} parameter(0)
  c = f32[2,32,32,128]{3,2,1,0} convert(p0)
  b = f32[2,4,8,4,8,128]{5,4,3,2,1,0} bitcast(c)
  ROOT t = f32[2,4,4,8,8,128]{5,4,3,2,1,0} transpose(b), dimensions={0,1,3,2,4,5}
}

fused_norm {
  q0 = f32[PSHAPE]{LAYOUT} parameter(0)
  x = f32[32,64,128]{2,1,0} bitcast(q0)
  z = f32[] constant(0)
  sq = f32[32,64,128]{2,1,0} multiply(x, x)
  r = f32[32,64]{1,0} reduce(sq, z), dimensions={2}, to_apply=region_add
  rb = f32[32,64,128]{2,1,0} broadcast(r), dimensions={0,1}
  ROOT o = f32[32,64,128]{2,1,0} multiply(x, rb)
}

ENTRY main {
  x = bf16[2,32,32,128]{3,2,1,0} parameter(0)
  PRODUCER
  ROOT n = f32[32,64,128]{2,1,0} fusion(pr), kind=kCustom, calls=fused_norm, backend_config={"fusion_backend_config":{"kind":"__triton"}}
}
"""


def _pair(producer: str, pshape: str, layout: str):
    text = (_SWIN.replace("PRODUCER", producer).replace("PSHAPE", pshape)
            .replace("LAYOUT", layout))
    m = parse_module(text)
    entry = m.entry_computation if hasattr(m, "entry_computation") else m.entry
    consumer = entry.root
    return consumer.operands[0], consumer


def test_window_transpose_between_bitcasts_is_refused():
    producer, consumer = _pair(
        "pr = f32[2,4,4,8,8,128]{5,4,3,2,1,0} fusion(x), kind=kLoop, calls=fused_transpose",
        "2,4,4,8,8,128", "5,4,3,2,1,0")
    why = fused_pair_refusal(producer, consumer)
    assert why is not None and "symbolic tile" in why


def test_consumer_alone_is_tileable():
    producer, consumer = _pair(
        "pr = f32[2,4,4,8,8,128]{5,4,3,2,1,0} fusion(x), kind=kLoop, calls=fused_transpose",
        "2,4,4,8,8,128", "5,4,3,2,1,0")
    body = consumer.fused_computation
    assert untileable_indexing(body.root, lambda i: i.parent is body) is None
    t_body = producer.fused_computation
    assert untileable_indexing(t_body.root, lambda i: i.parent is t_body) is None


def test_reshape_without_transpose_is_tileable():
    producer, consumer = _pair(
        "x2 = f32[32,2,32,128]{3,2,1,0} parameter(1)\n"
        "  pr = f32[32,2,32,128]{3,2,1,0} negate(x2)", "32,2,32,128", "3,2,1,0")
    assert fused_pair_refusal(producer, consumer) is None


def test_reshape_splitting_a_root_dimension_is_refused():
    # [32,64,128] read as [2,32,32,128]: (d0 mod 16) * 2 + d1 floordiv 32
    # (XLA bails out on such a reshape too)
    producer, consumer = _pair(
        "pr = f32[2,32,32,128]{3,2,1,0} convert(x)", "2,32,32,128", "3,2,1,0")
    assert fused_pair_refusal(producer, consumer) is not None


def test_mixer_token_transpose_is_tileable():
    # mixer: bf16[2048,64] -> [8,256,64] -> transpose {0,2,1}: the index of
    # the [2048,64] operand is (d0 * 256 + d2, d1), a sum of whole dimensions
    text = """
HloModule mixer

region_add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

fused_norm {
  q0 = f32[2048,64]{1,0} parameter(0)
  b = f32[8,256,64]{2,1,0} bitcast(q0)
  x = f32[8,64,256]{2,1,0} transpose(b), dimensions={0,2,1}
  z = f32[] constant(0)
  r = f32[8,64]{1,0} reduce(x, z), dimensions={2}, to_apply=region_add
  rb = f32[8,64,256]{2,1,0} broadcast(r), dimensions={0,1}
  ROOT o = f32[8,64,256]{2,1,0} subtract(x, rb)
}

ENTRY main {
  y = f32[2048,64]{1,0} parameter(0)
  pr = f32[2048,64]{1,0} negate(y)
  ROOT n = f32[8,64,256]{2,1,0} fusion(pr), kind=kCustom, calls=fused_norm, backend_config={"fusion_backend_config":{"kind":"__triton"}}
}
"""
    m = parse_module(text)
    entry = m.entry_computation if hasattr(m, "entry_computation") else m.entry
    consumer = entry.root
    assert fused_pair_refusal(consumer.operands[0], consumer) is None


def test_block_level_candidate_needs_symbolic_tiles():
    # the swin window layer norm as one fusion body: not a block-level fusion
    from hlorun.passes.triton_support import triton_supported_computation
    text = """
HloModule swin_one

region_add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

fused_norm {
  p0 = f32[2,32,32,128]{3,2,1,0} parameter(0)
  b = f32[2,4,8,4,8,128]{5,4,3,2,1,0} bitcast(p0)
  t = f32[2,4,4,8,8,128]{5,4,3,2,1,0} transpose(b), dimensions={0,1,3,2,4,5}
  x = f32[32,64,128]{2,1,0} bitcast(t)
  z = f32[] constant(0)
  r = f32[32,64]{1,0} reduce(x, z), dimensions={2}, to_apply=region_add
  rb = f32[32,64,128]{2,1,0} broadcast(r), dimensions={0,1}
  ROOT o = f32[32,64,128]{2,1,0} subtract(x, rb)
}

ENTRY main {
  x = f32[2,32,32,128]{3,2,1,0} parameter(0)
  ROOT n = f32[32,64,128]{2,1,0} fusion(x), kind=kLoop, calls=fused_norm
}
"""
    m = parse_module(text)
    entry = m.entry_computation if hasattr(m, "entry_computation") else m.entry
    why = triton_supported_computation(entry.root)
    assert why is not None and "symbolic tile" in why
