"""algsimp's "Replace Use(ReduceMax(Arg)) with Use(Gte(ReduceArgMax, 0))"
(XLA's HandleReduce, MatchArgMax / MatchArgMin) on the sort-dispatched MoE's
router (testdata/xla-dumps-holdout/moe_sort_dispatch_bf16): JAX's
``argmax(logits)`` is a variadic (max, index) reduce and ``softmax(logits)``
reduces the same logits with ``max``; XLA's softmax reads the argmax's max
(``input_reduce_fusion.1#0`` feeds ``fused_reduce.5``'s subtract)."""

from __future__ import annotations

import gzip
from pathlib import Path

from hlorun.passes.algsimp import AlgebraicSimplifier
from hlorun.passes.algsimp.argminmax import matches_arg
from hlorun.text.parser import parse_module

# the router of moe_sort_dispatch_bf16's before_optimizations, after call
# inlining (JAX 0.11's argmax reducer, region_0.1, verbatim)
_ROUTER = """HloModule moe_router

%region_0.1 (reduce.4: f32[], reduce.5: s32[], reduce.6: f32[], reduce.7: s32[]) -> (f32[], s32[]) {
  %reduce.4 = f32[] parameter(0)
  %reduce.6 = f32[] parameter(2)
  %gt.1 = pred[] compare(%reduce.4, %reduce.6), direction=GT
  %ne.1 = pred[] compare(%reduce.4, %reduce.4), direction=NE
  %or.2 = pred[] or(%gt.1, %ne.1)
  %select_n.2 = f32[] select(%or.2, %reduce.4, %reduce.6)
  %eq.1 = pred[] compare(%reduce.4, %reduce.6), direction=EQ
  %reduce.5 = s32[] parameter(1)
  %reduce.7 = s32[] parameter(3)
  %lt.1 = pred[] compare(%reduce.5, %reduce.7), direction=LT
  %and.1 = pred[] and(%eq.1, %lt.1)
  %or.3 = pred[] or(%or.2, %and.1)
  %select_n.3 = s32[] select(%or.3, %reduce.5, %reduce.7)
  ROOT %tuple.1 = (f32[], s32[]) tuple(%select_n.2, %select_n.3)
}

%region_1.3 (reduce_max.3: f32[], reduce_max.4: f32[]) -> f32[] {
  %reduce_max.3 = f32[] parameter(0)
  %reduce_max.4 = f32[] parameter(1)
  ROOT %reduce_max.5 = f32[] maximum(%reduce_max.3, %reduce_max.4)
}

%region_2.4 (reduce_sum.3: f32[], reduce_sum.4: f32[]) -> f32[] {
  %reduce_sum.3 = f32[] parameter(0)
  %reduce_sum.4 = f32[] parameter(1)
  ROOT %reduce_sum.5 = f32[] add(%reduce_sum.3, %reduce_sum.4)
}

ENTRY %main (x: bf16[2048,256], router: bf16[256,8]) -> (s32[2048], f32[2048]) {
  %x = bf16[2048,256]{1,0} parameter(0)
  %router = bf16[256,8]{1,0} parameter(1)
  %dot_general.7 = bf16[2048,8]{1,0} dot(%x, %router), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %convert_element_type.8 = f32[2048,8]{1,0} convert(%dot_general.7)
  %iota.3 = s32[2048,8]{1,0} iota(), iota_dimension=1
  %constant.27 = f32[] constant(-inf)
  %constant.26 = s32[] constant(0)
  %reduce.11 = (f32[2048]{0}, s32[2048]{0}) reduce(%convert_element_type.8, %iota.3, %constant.27, %constant.26), dimensions={1}, to_apply=%region_0.1
  %reduce.13 = s32[2048]{0} get-tuple-element(%reduce.11), index=1
  %constant.51 = f32[] constant(-inf)
  %reduce_max.14 = f32[2048]{0} reduce(%convert_element_type.8, %constant.51), dimensions={1}, to_apply=%region_1.3
  %sub.11 = f32[2048,8]{1,0} broadcast(%reduce_max.14), dimensions={0}
  %sub.12 = f32[2048,8]{1,0} subtract(%convert_element_type.8, %sub.11)
  %exp.1 = f32[2048,8]{1,0} exponential(%sub.12)
  %constant.50 = f32[] constant(0)
  %reduce_sum.49 = f32[2048]{0} reduce(%exp.1, %constant.50), dimensions={1}, to_apply=%region_2.4
  ROOT %out = (s32[2048]{0}, f32[2048]{0}) tuple(%reduce.13, %reduce_sum.49)
}
"""


def _run(text: str, **opts):
    m = parse_module(text)
    changed = AlgebraicSimplifier(**opts).run(m)
    return m, changed


def _softmax_max(m):
    return m.entry.get_instruction("sub.11").operands[0]


def test_jax_argmax_reducer_matches():
    m = parse_module(_ROUTER)
    e = m.entry
    assert matches_arg(e.get_instruction("reduce.11"), is_max=True)
    assert not matches_arg(e.get_instruction("reduce.11"), is_max=False)
    assert not matches_arg(e.get_instruction("reduce_max.14"), is_max=True)


def test_softmax_max_reads_the_argmax():
    m, changed = _run(_ROUTER)
    assert changed
    mx = _softmax_max(m)
    assert mx.opcode == "get-tuple-element" and mx.tuple_index == 0
    assert mx.operands[0].opcode == "reduce" and len(mx.operands[0].operands) == 4
    assert not any(i.opcode == "reduce" and i.attrs.get("to_apply") is not None and
                   i.attrs["to_apply"].name == "region_1.3" for i in m.entry.instructions)


def test_other_dimensions_or_init_are_left_alone():
    # a max over the other dimension
    m, _ = _run(_ROUTER.replace(
        "%reduce_max.14 = f32[2048]{0} reduce(%convert_element_type.8, %constant.51), dimensions={1}",
        "%reduce_max.14 = f32[8]{0} reduce(%convert_element_type.8, %constant.51), dimensions={0}"
    ).replace("%sub.11 = f32[2048,8]{1,0} broadcast(%reduce_max.14), dimensions={0}",
              "%sub.11 = f32[2048,8]{1,0} broadcast(%reduce_max.14), dimensions={1}"))
    assert _softmax_max(m).opcode == "reduce"
    # a max whose init is not -inf
    m, _ = _run(_ROUTER.replace("%constant.51 = f32[] constant(-inf)",
                                "%constant.51 = f32[] constant(0)"))
    assert _softmax_max(m).opcode == "reduce"
    # layout-sensitive algsimp does not run the rule (XLA returns earlier)
    m, _ = _run(_ROUTER, is_layout_sensitive=True)
    assert _softmax_max(m).opcode == "reduce"


def test_min_reads_the_argmin():
    text = (_ROUTER.replace("direction=GT", "direction=LT")
            .replace("constant(-inf)", "constant(inf)")
            .replace("maximum(%reduce_max.3", "minimum(%reduce_max.3"))
    m, _ = _run(text)
    mx = _softmax_max(m)
    assert mx.opcode == "get-tuple-element" and mx.tuple_index == 0
    # a max reduce never takes an argmin's element
    text = _ROUTER.replace("direction=GT", "direction=LT")
    m, _ = _run(text)
    assert _softmax_max(m).opcode == "reduce"


def test_moe_sort_dispatch_router_end_to_end():
    """On the real module the argmax kernel's max feeds the softmax (XLA's
    input_reduce_fusion.1#0), and the kernel count is XLA's 27."""
    import hlorun
    from hlorun.analysis.kernels import kernel_list
    d = Path(__file__).resolve().parents[2] / "testdata/xla-dumps-holdout/moe_sort_dispatch_bf16"
    (path,) = d.glob("*before_optimizations.txt.gz")
    res = hlorun.compile(parse_module(gzip.open(path, "rt").read()))
    assert not res.failures
    argmax = [i for i in res.module.entry.instructions
              if i.opcode == "fusion" and i.shape.is_tuple and
              [s.element_type for s in i.shape.tuple_shapes] == ["f32", "s32"]]
    assert len(argmax) == 1
    assert any(u.opcode == "get-tuple-element" and u.tuple_index == 0 and u.users
               for u in argmax[0].users)
    assert len(kernel_list(res.module)) == 27
