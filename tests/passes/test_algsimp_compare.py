"""algsimp's HandleCompare rules that decide a comparison outright, and
reshape(iota) -> iota, on moe_topk_train's scatter index: JAX wraps negative
indices (``select(i < 0, i + 512, i)``) of the token ``arange``; XLA folds
the wrap away before fusion, and its fused_concatenate starts from
``s32[512,2,1] iota(), iota_dimension=0``."""

from __future__ import annotations

from hlorun.passes.algsimp import AlgebraicSimplifier
from hlorun.passes.algsimp.compare import decided
from hlorun.passes.dce import HloDCE
from hlorun.text.parser import parse_module

# moe_topk_train's before_optimizations (token index half of the scatter-add
# indices), as JAX 0.11 emits it
_MOE_INDEX = """HloModule moe_index
ENTRY %main (k: s32[512,2]) -> s32[512,2,2] {
  %iota.1 = s32[512]{0} iota(), iota_dimension=0
  %broadcast_in_dim.20 = s32[512,1]{1,0} reshape(%iota.1)
  %constant.36 = s32[] constant(0)
  %lt.5 = s32[512,1]{1,0} broadcast(%constant.36), dimensions={}
  %lt.6 = pred[512,1]{1,0} compare(%broadcast_in_dim.20, %lt.5), direction=LT
  %constant.35 = s32[] constant(512)
  %add.12 = s32[512,1]{1,0} broadcast(%constant.35), dimensions={}
  %add.13 = s32[512,1]{1,0} add(%broadcast_in_dim.20, %add.12)
  %select_n.3 = s32[512,1]{1,0} select(%lt.6, %add.13, %broadcast_in_dim.20)
  %broadcast_in_dim.21 = s32[512,1,1]{2,1,0} broadcast(%select_n.3), dimensions={0,1}
  %broadcast_in_dim.22 = s32[512,1]{1,0} reshape(%broadcast_in_dim.21)
  %broadcast_in_dim.23 = s32[512,2,1]{2,1,0} broadcast(%broadcast_in_dim.22), dimensions={0,2}
  %k = s32[512,2]{1,0} parameter(0)
  %lt.4 = s32[512,2]{1,0} broadcast(%constant.36), dimensions={}
  %lt.7 = pred[512,2]{1,0} compare(%k, %lt.4), direction=LT
  %constant.33 = s32[] constant(8)
  %add.11 = s32[512,2]{1,0} broadcast(%constant.33), dimensions={}
  %add.14 = s32[512,2]{1,0} add(%k, %add.11)
  %select_n.4 = s32[512,2]{1,0} select(%lt.7, %add.14, %k)
  %broadcast_in_dim.24 = s32[512,2,1]{2,1,0} reshape(%select_n.4)
  ROOT %concatenate.1 = s32[512,2,2]{2,1,0} concatenate(%broadcast_in_dim.23, %broadcast_in_dim.24), dimensions={2}
}
"""


def test_moe_token_index_wrap_folds_to_an_iota():
    m = parse_module(_MOE_INDEX)
    assert AlgebraicSimplifier().run(m)
    HloDCE().run(m)
    root = m.entry.root
    assert root.opcode == "concatenate"
    tok = root.operands[0]
    assert tok.opcode == "iota" and str(tok.shape) == "s32[512,2,1]{2,1,0}" \
        and tok.int_attr("iota_dimension") == 0
    # the expert indices' wrap compares a parameter: kept
    ops = {i.opcode for i in m.entry.instructions}
    assert "select" in ops and "compare" in ops
    assert sum(1 for i in m.entry.instructions if i.opcode == "compare") == 1


_SMALL = """HloModule cmp
ENTRY %e (p: s32[8]) -> (pred[8], pred[8], pred[8], pred[8], pred[8], pred[8], pred[8]) {
  %i = s32[8]{0} iota(), iota_dimension=0
  %z = s32[] constant(0)
  %zb = s32[8]{0} broadcast(%z), dimensions={}
  %one = s32[] constant(1)
  %ob = s32[8]{0} broadcast(%one), dimensions={}
  %p = s32[8]{0} parameter(0)
  %a = pred[8]{0} compare(%i, %zb), direction=LT
  %b = pred[8]{0} compare(%zb, %i), direction=GT
  %c = pred[8]{0} compare(%i, %zb), direction=GE
  %d = pred[8]{0} compare(%zb, %i), direction=LE
  %e = pred[8]{0} compare(%p, %p), direction=NE
  %f = pred[8]{0} compare(%i, %ob), direction=LT
  %g = pred[8]{0} compare(%p, %zb), direction=LT
  ROOT %t = (pred[8]{0}, pred[8]{0}, pred[8]{0}, pred[8]{0}, pred[8]{0}, pred[8]{0}, pred[8]{0}) tuple(%a, %b, %c, %d, %e, %f, %g)
}
"""


def test_decided_comparisons():
    m = parse_module(_SMALL)
    by = {i.name: i for i in m.entry.instructions}
    assert [decided(by[n]) for n in "abcdefg"] == [False, False, True, True, False, None, None]
