"""Reduction strategies on real modules: each one, applied to all of its
units, to halves and to single units, gives a module that prints,
re-parses and passes the hlo-verifier (no new kind of finding), and does
what it says."""

from __future__ import annotations

import pytest

from hlorun.text.parser import load_module
from hlorun.ir.clone import clone_module
from hlorun.text.parser import parse_module
from hlorun.text.printer import print_module
from hlorun.reduce.driver import finding_key
from hlorun.reduce.edit import cleanup
from hlorun.reduce.strategies import STRATEGIES, make_strategies
from hlorun.reduce.strategies.dims_graph import DimGraph
from hlorun.verifier.checkers import HloVerifier

from ..conftest import TESTDATA, shared_path

LLAMA = ("corpus", "xla", "files", "xla__tools__benchmarks__hlo__hlo_llama31_70b_bf16_16x8.hlo")
MOBILENET = ("corpus", "xla", "files", "xla__tools__data__benchmarking__mobilenet_v2.hlo")
CNN_FUSED = ("xla-dumps", "cnn_fp16",
             "module_14585.jit_model.0061.post-fusion_optimization.after_pipeline-start."
             "before_rename_fusions.txt")
S0_DUMP = ("xla-dumps", "dot_general_gqa_cublaslt",
           "module_1988.jit__lambda.0024.hlo_normalization.after_cublas-gemm-rewriter."
           "before_cublas-gemm-broadcast-folding-rewriter.txt")
ATTENTION = TESTDATA / "reduce" / "s0_attention_block.hlo"


def _valid(module, base) -> list[str]:
    text = print_module(module)
    again = parse_module(text, "candidate")
    assert print_module(again) == text  # printing is a fixed point
    return [d.message for d in HloVerifier().check(again) if finding_key(d.message) not in base]


def _apply(module, strategy, units):
    c = clone_module(module)
    if not strategy.apply(c, units):
        return None
    cleanup(c)
    return c


MODULES = [pytest.param(lambda: ATTENTION, id="attention"),
           pytest.param(lambda: shared_path(*LLAMA), id="llama70b"),
           pytest.param(lambda: shared_path(*CNN_FUSED), id="cnn-fused"),
           pytest.param(lambda: shared_path(*S0_DUMP), id="s0-cublas-dump")]


@pytest.mark.parametrize("path", MODULES)
def test_every_strategy_keeps_modules_valid(path):
    m = load_module(path())
    base = {finding_key(d.message) for d in HloVerifier().check(m)}
    tried = 0
    for s in make_strategies():
        units = s.units(m)
        n = len(units)
        for sel in ([units, units[: n // 2], units[n // 2:], units[:1], units[-1:]] if n else []):
            c = _apply(m, s, sel)
            if c is None:
                continue
            tried += 1
            assert _valid(c, base) == [], (s.name, len(sel))
    assert tried >= 20


def test_outputs_drops_root_tuple_elements_and_fixes_entry_layout():
    m = load_module(shared_path(*LLAMA))
    s = STRATEGIES["outputs"]()
    units = s.units(m)
    assert len(units) == len(m.entry.root.operands) > 2
    c = _apply(m, s, units[1:])
    assert c.entry.root.opcode == "tuple" and len(c.entry.root.operands) == 1
    params, result = c.entry_computation_layout()
    assert len(result.tuple_shapes) == 1 and len(params) == c.entry.num_parameters
    assert c.instruction_count < m.instruction_count
    # a 1-tuple is unwrapped next
    assert s.units(c) == ["untuple"]
    c2 = _apply(c, s, ["untuple"])
    assert c2.entry.root.opcode != "tuple"


def test_dead_removes_side_effecting_collectives_dce_keeps():
    m = load_module(shared_path(*LLAMA))
    outs = _apply(m, STRATEGIES["outputs"](), STRATEGIES["outputs"]().units(m)[1:])
    s = STRATEGIES["dead"]()
    units = s.units(outs)
    assert units, "collectives with channel ids stay after DCE"
    c = _apply(outs, s, units)
    assert c.instruction_count < outs.instruction_count
    for _ in range(10):  # what fed a removed collective may be dead now
        if not s.units(c):
            break
        c = _apply(c, s, s.units(c))
    assert s.units(c) == []
    assert not any(i.opcode.startswith("all-") for i in c.entry.instructions)


def test_parameters_and_zeros_replace_and_keep_the_name():
    m = load_module(ATTENTION)
    k = ("main", "xh")  # the normalised activations feeding the attention dot
    p = _apply(m, STRATEGIES["parameters"](), [k])
    xh = p.entry.get_instruction("xh")
    assert xh.opcode == "parameter" and xh.shape.to_string() == "f16[2,1,32,512]{3,2,1,0}"
    # the RMS norm in front of it is gone, and so is the input it normalised
    assert p.entry.get_instruction("rs") is None
    z = _apply(m, STRATEGIES["zeros"](), [k])
    xz = z.entry.get_instruction("xh")
    assert xz.opcode == "broadcast" and xz.operands[0].opcode == "constant"
    assert xz.operands[0].literal.text == "0"


def test_forward_replaces_an_instruction_by_its_operand():
    m = load_module(ATTENTION)
    c = _apply(m, STRATEGIES["forward"](), [("main", "xs")])  # multiply(xn, nsb)
    assert c.entry.get_instruction("xs") is None
    assert c.entry.get_instruction("xh").operands[0].name == "xn"


def test_inline_fusions_of_a_real_fused_module():
    m = load_module(shared_path(*CNN_FUSED))
    s = STRATEGIES["inline"]()
    units = s.units(m)
    assert len(units) >= 5
    c = _apply(m, s, units)
    assert not any(i.opcode in ("fusion", "call") for i in c.entry.instructions)
    assert len(c.computations) < len(m.computations)


def test_dims_classes_follow_the_gqa_dot_and_shrink_consistently():
    m = load_module(ATTENTION)
    g = DimGraph(m)
    classes = {k: (members, gcd) for k, members, gcd in g.shrinkable()}
    by_slot = {}
    for key, (members, _) in classes.items():
        for mem in members:
            i, idx, d = g.where[mem]
            by_slot[(i.name, d)] = key
    # batch dims of the dot_general tie lhs dim 0 to rhs dim 1 and the result dim 0
    assert by_slot[("q", 0)] == by_slot[("k_cache.1", 1)] == by_slot[("scores", 0)]
    # contracting: q's head_dim (128) with the key cache's dim 3; frozen, since the
    # reshape that made q splits 512 into 4 x 128 and only its major factor may scale
    slot = {(g.where[k][0].name, g.where[k][2]): k for k in range(len(g.where))}
    assert g.find(slot[("q", 4)]) == g.find(slot[("k_cache.1", 3)])
    assert ("q", 4) not in by_slot
    # the reshape [2,1,32,512] -> [...,4,128] ties 512 to the group dim 4 (most major)
    assert by_slot[("xh", 3)] == by_slot[("q", 3)]
    c = _apply(m, STRATEGIES["dims-min"](), list(classes))
    assert _valid(c, set()) == []
    assert c.instruction_count == m.instruction_count
    els = sum(i.shape.element_count for i in c.entry.instructions if i.shape.is_array)
    assert els < sum(i.shape.element_count for i in m.entry.instructions if i.shape.is_array) / 100


def test_dims_cut_constants_and_full_slices():
    text = """HloModule t
ENTRY main {
  p = f32[8,6]{1,0} parameter(0)
  c = f32[8,6]{1,0} constant({{1,2,3,4,5,6},{1,2,3,4,5,6},{1,2,3,4,5,6},{1,2,3,4,5,6},{1,2,3,4,5,6},{1,2,3,4,5,6},{1,2,3,4,5,6},{1,2,3,4,5,6}})
  a = f32[8,6]{1,0} add(p, c)
  s = f32[8,3]{1,0} slice(a), slice={[0:8], [0:3]}
  ROOT r = f32[8,3]{1,0} negate(s)
}
"""
    m = parse_module(text, "t")
    s = STRATEGIES["dims-min"]()
    units = s.units(m)
    assert len(units) == 1  # dim 0 (8): the sliced dim 1 is frozen
    c = _apply(m, s, units)
    assert c.entry.get_instruction("s").attrs["slice"] == "{[0:1], [0:3]}"
    assert c.entry.get_instruction("c").literal.text == "{ {1, 2, 3, 4, 5, 6} }"
    assert _valid(c, set()) == []


def test_cosmetic_strategies_on_a_real_dump():
    m = load_module(shared_path(*S0_DUMP))
    meta = _apply(m, STRATEGIES["metadata"](), STRATEGIES["metadata"]().units(m))
    t = print_module(meta)
    assert "metadata=" not in t and "StackFrames" not in t and "allow_spmd" not in t
    conf = _apply(m, STRATEGIES["configs"](), STRATEGIES["configs"]().units(m))
    assert "backend_config" not in print_module(conf)
    ren = _apply(m, STRATEGIES["rename"](), STRATEGIES["rename"]().units(m))
    names = {i.name for i in ren.entry.instructions}
    assert {"p0", "p1", "custom-call"} <= names and "main" == ren.entry.name
    lay = load_module(TESTDATA / "s0" / "jit_dot_general.hlo")
    lay.entry.root.shape = lay.entry.root.shape.with_layout([2, 3, 1, 0])
    d = _apply(lay, STRATEGIES["layouts"](), STRATEGIES["layouts"]().units(lay))
    assert str(d.entry.root.shape.layout) == "{3,2,1,0}"
