"""Parser fixes found while building the verifier, each as XLA's parser
behaves: shapes are inferred only for XLA's CanInferShape opcodes (with
inference errors reported at the instruction), send/recv-done/after-all/
replica-id & co take the shape XLA computes from their operands, and
output_to_operand_aliasing takes negative operand numbers (the verifier
reports them)."""

from __future__ import annotations

import pytest

import hlorun
from hlorun.errors import HloParseError
from hlorun.verifier.checkers import HloVerifier


def test_shape_is_inferred_only_where_xla_can():
    m = hlorun.parse_module("ENTRY e {\n  p = f32[4,2]{0,1} parameter(0)\n"
                            "  ROOT n = negate(p)\n}\n")
    assert str(m.entry.root.shape) == "f32[4,2]{0,1}"  # the operand's layout, as XLA
    with pytest.raises(HloParseError) as e:
        hlorun.parse_module("ENTRY e {\n  p = f32[4] parameter(0)\n"
                            "  ROOT s = slice(p), slice={[0:2]}\n}\n")
    assert "cannot infer shape for opcode: slice" in e.value.message
    assert e.value.line == 3


def test_inference_error_is_a_located_parse_error():
    with pytest.raises(HloParseError) as e:
        hlorun.parse_module("ENTRY e {\n  p = f32[4] parameter(0)\n  q = s32[4] parameter(1)\n"
                            "  ROOT a = add(p, q)\n}\n")
    assert e.value.message.startswith("failed to infer shape for opcode: add, error: Binary op "
                                      "add with different element types")
    assert (e.value.line, e.value.column) == (4, 12)  # at the opcode


def test_send_done_takes_xla_computed_shape():
    """XLA's HloTest ChannelVerifierAsyncSend writes send-done with a tuple
    shape; XLA's parser ignores it (send-done is a token)."""
    text = """HloModule test
ENTRY main_spmd {
  data = f32[16] parameter(0)
  after_all = token[] after-all()
  send = (f32[16], u32[], token[]) send(after_all, data), channel_id=1
  ROOT send_done = (f32[16], token[]) send-done(send), channel_id=1
}
"""
    m = hlorun.parse_module(text)
    assert str(m.entry.root.shape) == "token[]"
    assert str(m.entry.get_instruction("send").shape) == "(token[], u32[], token[])"
    assert HloVerifier().check(m) == []


def test_negative_aliasing_operand_parses_and_is_reported():
    text = """HloModule module
async_computation {
  p0 = f32[32] parameter(0)
  ROOT custom-call = (f32[32]) custom-call(p0), custom_call_target="foo"
}
ENTRY main {
  p = f32[32] parameter(0)
  async-start = ((f32[32]), (f32[32]), s32[]) async-start(p), calls=async_computation,
      output_to_operand_aliasing={{1, 0}: (-1, {})}
  async-update = ((f32[32]), (f32[32]), s32[]) async-update(async-start)
  ROOT async-done = (f32[32]) async-done(async-update)
}
"""
    m = hlorun.parse_module(text)
    assert [d.message for d in HloVerifier().check(m)] == [
        "Negative operand number in aliasing config."]
    assert "output_to_operand_aliasing={{1, 0}: (-1, {})}" in hlorun.print_module(m)
