"""Bitcast users in priority fusion's cost model (XLA's
CalculateProducerPriority: CanFuseWithAllNonBitcastUsers skips bitcast users,
but EstimateRunTimes is given all of ``producer->users()``, bitcasts
included).  A bitcast user is never fused into, so it keeps the producer
alive: fusing the producer into its other users recomputes it there, and the
bitcast's term (the producer fused into a bitcast: its reads and compute,
with the non-tiled model) says so.  After hoist-fused-bitcasts every GEMM fusion reads its
operands through such bitcasts.

The module is the gradient accumulation of a transformer's residual stream
(transformer_2l_bf16's add_any chain, scaled up): the summed gradient feeds
the weight-gradient GEMM through a bitcast and the next accumulation."""

from __future__ import annotations

import hlorun
from hlorun.pipeline.loader import load_pipeline
from hlorun.pipeline.run import RunOptions, run_pipeline
from hlorun.text.parser import parse_module

from ..conftest import TESTDATA

_S = "bf16[16,1024,1024]{2,1,0}"
_RESIDUAL_GRAD = f"""HloModule resid_grad

%gemm_computation (a: bf16[16384,1024], b: bf16[1024,1024]) -> bf16[16384,1024] {{
  %a = bf16[16384,1024]{{1,0}} parameter(0)
  %b = bf16[1024,1024]{{1,0}} parameter(1)
  ROOT %d = bf16[16384,1024]{{1,0}} dot(%a, %b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}

ENTRY %main (g0: bf16[16,1024,1024], g1: bf16[16,1024,1024], g2: bf16[16,1024,1024], w: bf16[1024,1024], g3: bf16[16,1024,1024], g4: bf16[16,1024,1024]) -> (bf16[16384,1024], bf16[16,1024,1024]) {{
  %g0 = {_S} parameter(0)
  %g1 = {_S} parameter(1)
  %g3 = {_S} parameter(4)
  %g4 = {_S} parameter(5)
  %add_any.27 = {_S} add(%g0, %g1)
  %add_any.28 = {_S} add(%g3, %g4)
  %add_any.29 = {_S} add(%add_any.27, %add_any.28)
  %bitcast.444 = bf16[16384,1024]{{1,0}} bitcast(%add_any.29)
  %w = bf16[1024,1024]{{1,0}} parameter(3)
  %gemm_fusion_dot = bf16[16384,1024]{{1,0}} fusion(%bitcast.444, %w), kind=kCustom, calls=%gemm_computation, backend_config={{"fusion_backend_config":{{"kind":"__triton_gemm"}}}}
  %g2 = {_S} parameter(2)
  %add_any.33 = {_S} add(%add_any.29, %g2)
  ROOT %t = (bf16[16384,1024]{{1,0}}, {_S}) tuple(%gemm_fusion_dot, %add_any.33)
}}
"""


def _run(text: str):
    module = parse_module(text)
    res = run_pipeline(module, load_pipeline("gpu-cuda"),
                       RunOptions(enable_only=["fusion/priority-fusion"]))
    assert res.exit_code == 0
    return module, [getattr(r, "message", str(r)) for _, r in res.remarks]


def _adds(module) -> int:
    """Kernels that compute the first accumulation (g0 + g1)."""
    n = 0
    for i in module.entry.instructions:
        if i.opcode == "fusion" and i.fused_computation is not None and any(
                x.opcode == "add" and {o.opcode for o in x.operands} == {"parameter"}
                and len(x.operands) == 2 and all(
                    i.operands[o.parameter_number].name in ("g0", "g1") for o in x.operands)
                for x in i.fused_computation.instructions):
            n += 1
    return n


def test_summed_gradient_read_through_a_bitcast_is_computed_once():
    """Not costing the bitcast user, the sum looks free to recompute inside
    the next accumulation (it was fused there and kept for the GEMM: the
    three adds ran twice); costed as XLA does, fusing it into the
    accumulation loses, and the sum is one kernel both read."""
    module, remarks = _run(_RESIDUAL_GRAD)
    assert _adds(module) == 1
    assert any("into add_any.33 rejected" in m for m in remarks), remarks
    acc = module.entry.root.operands[1]
    assert acc.opcode == "add"  # the accumulation stays a kernel of its own


def test_only_bitcast_users_is_still_ineligible():
    text = _RESIDUAL_GRAD.replace("%add_any.33 = {_S} add(%add_any.29, %g2)".format(_S=_S),
                                  "%add_any.33 = {_S} add(%g2, %g2)".format(_S=_S))
    module, remarks = _run(text)
    assert any("only bitcast users" in m for m in remarks), remarks


def test_embed_xent_fissioned_gemm_epilogue_keeps_one_layout():
    """embed_xent_train_bf16: once hoist-fused-bitcasts moved the embedding
    gradient's root bitcast out, the GEMM fusion keeps the dot's {0,1}
    output and its epilogue (the SGD update); the autotuner picks cuBLAS and
    the GEMM rewriter pins the call's output to {1,0}.  The subtract, laid
    out {0,1}, reads a copy in its own layout (a transpose after layout
    normalization), so the module verifies."""
    d = TESTDATA / "xla-dumps-holdout" / "embed_xent_train_bf16"
    before = next(d.glob("*before_optimizations.txt*"))
    r = hlorun.compile(hlorun.load(str(before)))
    assert not r.failures and not r.violations
    targets = [i.attrs.get("custom_call_target") for i in r.module.entry.instructions
               if i.opcode == "custom-call"]
    assert '"__cublas$lt$matmul"' in targets or "__cublas$lt$matmul" in targets


# A GPT layer's layer norm at transformer_2l_f32_algo_bf16's sizes (b=4, t=128,
# d=256), written the way it reaches priority fusion after hoist-fused-bitcasts:
# the normalized activations feed the QKV projection (a GEMM fusion, through a
# bitcast) and the gamma gradient (normalized * dY, summed over rows).
_LN_GAMMA_GRAD = """HloModule ln_gamma_grad

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%gemm_computation (p0: f32[512,256], p1: f32[256,768]) -> f32[512,768] {
  %p0 = f32[512,256]{1,0} parameter(0)
  %p1 = f32[256,768]{1,0} parameter(1)
  ROOT %dot = f32[512,768]{1,0} dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

ENTRY %main (x: f32[4,128,256], dy: f32[512,256], w: f32[256,768]) -> (f32[512,768], f32[256]) {
  %x = f32[4,128,256]{2,1,0} parameter(0)
  %zero = f32[] constant(0)
  %sum = f32[4,128]{1,0} reduce(%x, %zero), dimensions={2}, to_apply=%add
  %n = f32[] constant(256)
  %nb = f32[4,128]{1,0} broadcast(%n), dimensions={}
  %mean = f32[4,128]{1,0} divide(%sum, %nb)
  %meanb = f32[4,128,256]{2,1,0} broadcast(%mean), dimensions={0,1}
  %centered = f32[4,128,256]{2,1,0} subtract(%x, %meanb)
  %square = f32[4,128,256]{2,1,0} multiply(%centered, %centered)
  %ssum = f32[4,128]{1,0} reduce(%square, %zero), dimensions={2}, to_apply=%add
  %var = f32[4,128]{1,0} divide(%ssum, %nb)
  %eps = f32[] constant(1e-05)
  %epsb = f32[4,128]{1,0} broadcast(%eps), dimensions={}
  %vare = f32[4,128]{1,0} add(%var, %epsb)
  %rs = f32[4,128]{1,0} rsqrt(%vare)
  %rsb = f32[4,128,256]{2,1,0} broadcast(%rs), dimensions={0,1}
  %xn = f32[4,128,256]{2,1,0} multiply(%centered, %rsb)
  %xn2 = f32[512,256]{1,0} bitcast(%xn)
  %w = f32[256,768]{1,0} parameter(2)
  %gemm = f32[512,768]{1,0} fusion(%xn2, %w), kind=kCustom, calls=%gemm_computation, backend_config={"fusion_backend_config":{"kind":"__triton_gemm"}}
  %dy = f32[512,256]{1,0} parameter(1)
  %dy3 = f32[4,128,256]{2,1,0} bitcast(%dy)
  %g = f32[4,128,256]{2,1,0} multiply(%xn, %dy3)
  %g2 = f32[512,256]{1,0} bitcast(%g)
  %dgamma = f32[256]{0} reduce(%g2, %zero), dimensions={0}, to_apply=%add
  ROOT %t = (f32[512,768]{1,0}, f32[256]{0}) tuple(%gemm, %dgamma)
}
"""


def _run_with_softmax_rewriter(text: str):
    module = parse_module(text)
    res = run_pipeline(module, load_pipeline("gpu-cuda"), RunOptions(enable_only=[
        "hlo_normalization/softmax-rewriter-triton", "fusion/priority-fusion"]))
    assert res.exit_code == 0
    return module, [getattr(r, "message", str(r)) for _, r in res.remarks]


def _reduces_over_rows(module) -> int:
    """Row reductions (the layer norm's mean and variance) over all kernels."""
    return sum(1 for i in module.entry.instructions
               if i.opcode == "fusion" and i.fused_computation is not None
               for x in i.fused_computation.instructions
               if x.opcode == "reduce" and tuple(x.dimensions) == (2,))


def test_triton_layer_norm_read_through_a_bitcast_is_computed_once():
    """gpt_bf16x3_f32_train (an unseen f32 GPT step): with the GEMM's operand a
    bitcast, the Triton layer norm looked cheap to recompute in the
    gamma-gradient multiply (its bitcast user priced with the tiled Triton
    model) and ran twice, four extra kernels over two layers.  XLA prices a
    bitcast user with the non-tiled model (no CanFuse, so no tiled estimate
    is cached for the pair): the norm's reductions, re-read for every
    broadcast element, make the copy for the bitcast cost far more than it
    saves, and XLA keeps one normalized tensor both read."""
    module, remarks = _run_with_softmax_rewriter(_LN_GAMMA_GRAD)
    assert _reduces_over_rows(module) == 2  # mean and variance, once
    assert any(m.startswith("fusion of triton_softmax into") and "rejected" in m
               for m in remarks), remarks


def test_cheap_producer_read_through_a_bitcast_is_still_duplicated():
    """An elementwise producer costs little to compute again for the bitcast
    user, so it is fused into its other user and kept for the GEMM (XLA
    recomputes the first layer's normalization, a plain multiply, in the
    gamma gradient; kv_decode_step_bf16's cache update likewise)."""
    text = _LN_GAMMA_GRAD.replace("%xn = f32[4,128,256]{2,1,0} multiply(%centered, %rsb)",
                                  "%xn = f32[4,128,256]{2,1,0} multiply(%x, %x)")
    _, remarks = _run_with_softmax_rewriter(text)
    assert any(m.startswith("xn fused into") for m in remarks), remarks
