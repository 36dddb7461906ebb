"""Bitcast users in priority fusion's cost model (XLA's
CalculateProducerPriority: CanFuseWithAllNonBitcastUsers skips bitcast users,
but EstimateRunTimes is given all of ``producer->users()``, bitcasts
included).  A bitcast user is never fused into, so it keeps the producer
alive: fusing the producer into its other users recomputes it there, and the
bitcast's term (the producer fused into a bitcast costs about the producer
again) says so.  After hoist-fused-bitcasts every GEMM fusion reads its
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
