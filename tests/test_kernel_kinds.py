"""Final kernels kind for kind against XLA's after_optimizations (issue 14
targets), on every real dump: ../shared/xla-dumps and testdata/xla-dumps
(JAX 0.11, H100/H200).  A kernel's kind is the fusion kind with the backend
kind of kCustom fusions, the custom-call target, or the opcode
(hlorun.analysis.kernels.kind); ``python bench/kernel_lists.py`` prints the table.

Targets: per program our kernel count within +-10% of XLA's, and over all
programs >= 90% of XLA's kernels matched kind for kind.  Where hlorun is not
there yet the test pins today's figures (so they cannot silently get worse)
and the known reasons are stated in KNOWN_COUNT.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

#: programs whose kernel count is not yet within +-10% of XLA's, and why
KNOWN_COUNT: dict[str, str] = {
    # moe_topk_train (26 vs 29 in session 3) is within +-10% since XLA's
    # gather/scatter normalisation passes (28 vs 29); nothing is exempt now.
}

#: the target: overall kind-for-kind figure on the dumps present
MIN_MATCHED = 0.90

SMALL = ("gemm_bias_gelu_bf16", "fp8_matmul_scaled", "permute_rows_donated",
         "dot_general_gqa_cublaslt", "int8_gemm", "adam_update")


def _rows(names=None):
    import kernel_lists
    dumps = kernel_lists.all_dumps()
    if names is not None:
        dumps = [d for d in dumps if d.name in names]
    if not dumps:
        pytest.skip("no XLA dumps found")
    return [kernel_lists.compare_row(d) for d in dumps]


def test_small_programs_match_kind_for_kind():
    """The small programs: every XLA kernel matched, same count (adam_update:
    XLA keeps the bias-correction scalar as a kernel of its own -- its
    op-profile cost model prices the pow recomputed per element -- while
    hlorun's one-flop-per-op model duplicates it into the 12 updates)."""
    for r in _rows(SMALL):
        assert r.failure is None, f"{r.program}: {r.failure}"
        missing = 1 if r.program == "adam_update" else 0
        assert r.matched >= len(r.theirs) - missing, \
            f"{r.program}: {r.matched}/{len(r.theirs)}: {r.differences()}"
        assert r.count_ok, f"{r.program}: {len(r.ours)} kernels vs XLA's {len(r.theirs)}"


@pytest.mark.slow
def test_all_dumps_kind_for_kind():
    rows = _rows()
    for r in rows:
        assert r.failure is None, f"{r.program}: {r.failure}"
        if r.program in KNOWN_COUNT:
            continue
        assert r.count_ok, (f"{r.program}: {len(r.ours)} kernels vs XLA's {len(r.theirs)} "
                            f"({r.differences()})")
    total = sum(len(r.theirs) for r in rows)
    matched = sum(r.matched for r in rows)
    assert matched / total >= MIN_MATCHED, f"{matched}/{total} matched kind for kind"


def test_sort_and_topk_like_xla():
    """The sort / top-k rewrites (topk-decomposer, topk-rewriter,
    topk-specializer, stable-sort-expander, sort-iota-fusion):
    sort_total_order's jnp.sort and jnp.argsort are XLA's two kCustom sort
    fusions and its lax.top_k(k=8, n=4096) XLA's __gpu$TopK kernel;
    moe_topk_train's top-2 of 8 experts (n < 1024) is a kCustom sort fusion
    like XLA's, with no topk instruction left."""
    rows = {r.program: r for r in _rows(("sort_total_order", "moe_topk_train"))}
    sto = rows["sort_total_order"]
    assert sto.failure is None, sto.failure
    assert sto.matched == len(sto.theirs) == len(sto.ours) == 3, sto.differences()
    moe = rows["moe_topk_train"]
    assert moe.failure is None, moe.failure
    kinds = {k: (a, b) for k, a, b in moe.kinds}
    assert kinds["kCustom"] == (1, 1), moe.differences()
    assert "topk" not in kinds and "__gpu$TopK" not in kinds, moe.differences()
    sorts = [k for k in moe.ours if k.instruction.opcode == "fusion"
             and any(i.opcode == "sort" for i in k.instruction.fused_computation.instructions)]
    assert len(sorts) == 1 and sorts[0].instruction.shape.tuple_shapes[0].dimensions == (512, 8)


def _reduces(k) -> int:
    return sum(1 for i in k.instruction.fused_computation.instructions if i.opcode == "reduce")


def test_softmax_and_multi_output_structure_like_xla():
    """transformer_2l_bf16: the attention softmax forward and backward are
    one generic Triton kernel each, holding 2 (forward) and 3-4 (backward)
    reductions, like XLA's fusion.201/.207; the multi-output fusions are
    XLA's in number and arity (the adam_update parameter updates: 12 kernels
    of 3 outputs each)."""
    rows = {r.program: r for r in _rows(("transformer_2l_bf16", "adam_update"))}
    if "transformer_2l_bf16" in rows:
        r = rows["transformer_2l_bf16"]

        def multi(ks):
            return sorted(_reduces(k) for k in ks if k.kind == "kCustom:__triton" and _reduces(k) >= 2)
        ours, theirs = multi(r.ours), multi(r.theirs)
        assert len(ours) == len(theirs) == 4
        assert ours[:2] == theirs[:2] == [2, 2]

        def mof(ks):
            return [k for k in ks if k.instruction.opcode == "fusion" and k.instruction.shape.is_tuple]
        # within 2: XLA's two reduce+transpose multi-output kernels over the
        # attention-output GEMMs (input_reduce_transpose_fusion) are separate
        # kernels here (priority / multi-output fusion choices)
        assert abs(len(mof(r.ours)) - len(mof(r.theirs))) <= 2

        def concat_gemms(ks):
            return [k for k in ks if k.kind == "kCustom:__triton_nested_gemm_fusion" and any(
                i.opcode == "concatenate" for i in k.instruction.fused_computation.instructions)]
        # the Q/K/V gradient concatenate is inside the weight-gradient GEMM
        # (triton-gemm-rewriter fuses concatenates along the non-contracting
        # dimension), as XLA's gemm_fusion_dot.91/.95
        assert len(concat_gemms(r.ours)) == len(concat_gemms(r.theirs)) == 2
    if "adam_update" in rows:
        r = rows["adam_update"]
        arity = sorted(len(k.instruction.shape.tuple_shapes) for k in r.ours
                       if k.instruction.opcode == "fusion" and k.instruction.shape.is_tuple)
        assert arity.count(3) == 12


def test_entry_result_layout_copies_like_xla():
    """attention_dpa: the four gradients leave the GEMMs in head-major
    layouts; the entry result asks for descending ones, so layout assignment
    copies each differing tuple element (XLA's CreateCopyWithNewLayout) and
    they end as the transpose kernels XLA has (loop_transpose_fusion x2,
    input_transpose_fusion x2 as __triton).  The result is laid out as
    entry_computation_layout says."""
    (r,) = _rows(("attention_dpa",))
    assert r.failure is None, r.failure

    def transposes(ks):
        return sorted(k.kind for k in ks if "transpose" in k.name and "wrapped" not in k.name)
    assert transposes(r.ours) == transposes(r.theirs) == \
        ["kCustom:__triton", "kCustom:__triton", "kLoop", "kLoop"]
    assert r.count_ok
    root = r.ours[0].instruction.parent.root
    assert all(tuple(s.minor_to_major) == (3, 2, 1, 0) for s in root.shape.tuple_shapes)


def test_mlp_loss_and_bias_gradients_like_xla():
    """mlp_train_f32: the loss's row sum and batch mean become one reduce over
    both dimensions (algsimp's reduce-of-reduce merge), which Triton cannot
    fuse (one reduced dimension only), so the loss ends as XLA's native
    reduction kernel plus a scalar loop kernel; the 10-class bias gradient
    (a column reduction 10 wide) is a generic Triton fusion as in XLA."""
    (r,) = _rows(("mlp_train_f32",))
    assert r.failure is None, r.failure

    def scalar_kinds(ks):
        return sorted(k.kind for k in ks if k.instruction.shape.is_array
                      and k.instruction.shape.rank == 0)
    assert scalar_kinds(r.ours) == scalar_kinds(r.theirs) == ["kInput", "kLoop"]

    def narrow_bias(ks):
        return [k.kind for k in ks if k.instruction.shape.is_array
                and tuple(k.instruction.shape.dimensions) == (10,) and "reduce" in k.name]
    assert narrow_bias(r.ours) == narrow_bias(r.theirs) == ["kCustom:__triton"]
    assert r.count_ok
