"""config-assigner against XLA's measured emitter choices: every fusion of
XLA's after_optimizations modules (../shared/xla-dumps, testdata/xla-dumps)
that may be a block-level Triton fusion is put back to a plain fusion and
decided again; hlorun must make XLA's choice for most of them (XLA measures
both emitters on the GPU, hlorun models the outcome)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _candidates():
    sys.path.insert(0, str(ROOT / "bench"))
    import kernel_lists

    import hlorun
    from hlorun.analysis.kernels import kernel_list
    for d in kernel_lists.all_dumps():
        after = kernel_lists.dump_files(d)[1]
        for k in kernel_list(hlorun.load_module(after)):
            i = k.instruction
            # fusions priority fusion / softmax-rewriter-triton made Triton are not this pass's
            if i.opcode != "fusion" or i.name.startswith(("fusion", "triton_softmax")):
                continue
            if k.kind.startswith("kCustom") and k.kind != "kCustom:__triton":
                continue
            yield d.name, i, k.kind == "kCustom:__triton"


def test_config_assigner_agrees_with_xla_measurements():
    from hlorun.passes.base import Target
    from hlorun.passes.config_assigner import ConfigAssigner, block_level_candidate
    agree = total = 0
    for _, fusion, xla_triton in _candidates():
        fusion.attrs["kind"] = "kLoop"
        fusion.attrs.pop("backend_config", None)
        if block_level_candidate(fusion) is not None:
            continue
        ours = ConfigAssigner(target=Target(device="H200"))._assign(fusion)
        total += 1
        agree += ours == xla_triton
        if ours:
            assert '"kind":"__triton"' in fusion.attrs["backend_config"]
            assert fusion.fusion_kind == "kCustom"
    if total == 0:
        pytest.skip("no XLA dumps")
    assert total >= 200
    assert agree / total >= 0.85, f"{agree}/{total}"


def _fusion(dump: str, name: str):
    sys.path.insert(0, str(ROOT / "bench"))
    import kernel_lists

    import hlorun
    d = ROOT / "testdata" / dump
    if not d.is_dir():
        # ../shared/xla-dumps (cnn_fp16 ...)
        d = kernel_lists.SHARED / dump
    if not d.is_dir():
        pytest.skip(f"no dump {dump}")
    module = hlorun.load_module(kernel_lists.dump_files(d)[1])
    return next(i for c in module.computations for i in c.instructions if i.name == name)


def _assign_reduction(dump, name, emitter, triton, kind="kInput"):
    """The fusion ``name`` of ``dump`` (a reduction or transpose), made a
    plain ``kind`` fusion again: its native emitter is ``emitter`` and the
    config assigner sends it to the block-level Triton emitter iff
    ``triton``."""
    from hlorun.passes.base import Target
    from hlorun.passes.config_assigner import ConfigAssigner, native_emitter
    fusion = _fusion(dump, name)
    fusion.attrs["kind"] = kind
    fusion.attrs.pop("backend_config", None)
    assert native_emitter(fusion, 132) == emitter
    assert ConfigAssigner(target=Target(device="H200"))._assign(fusion) is triton
    return fusion


@pytest.mark.parametrize("dump,name,emitter,triton", [
    # a gradient leaf's sum of squares: bf16[1024] -> f32[] (XLA: __triton)
    ("xla-dumps-holdout/adamw_clip_tree", "input_reduce_fusion.5", "single-row-reduction", True),
    # second stage of a split sum, f32[2048] -> f32[] (XLA: __triton)
    ("xla-dumps-holdout/adamw_clip_tree", "input_reduce_fusion.8", "single-row-reduction", True),
    # the loss mean over f32[4,128,1] bitcast to f32[512] (XLA: native)
    ("xla-dumps/transformer_2l_bf16", "input_reduce_fusion", "row-reduction", False),
    # lstm's sum over f32[32,8] bitcast to f32[256] (XLA: native)
    ("xla-dumps-holdout/lstm_scan_train_f32", "input_reduce_fusion.1", "row-reduction", False),
])
def test_single_row_reductions(dump, name, emitter, triton):
    fusion = _assign_reduction(dump, name, emitter, triton)
    assert (fusion.fusion_kind == "kCustom") is triton


@pytest.mark.parametrize("dump,name,emitter,triton", [
    # groupnorm's per-group sums: 128 rows of 4 (8 rows to a warp natively; XLA: native)
    ("xla-dumps-holdout/groupnorm_resblock_fp16", "input_reduce_fusion.4", "row-reduction", False),
    ("xla-dumps-holdout/groupnorm_resblock_fp16", "input_reduce_fusion.6", "row-reduction", False),
    # dropout's split loss sum: 128 rows of 256 (one row per warp; XLA: __triton)
    ("xla-dumps/dropout_mlp_train_bf16", "input_reduce_fusion", "short-row-reduction", True),
])
def test_short_row_reductions(dump, name, emitter, triton):
    _assign_reduction(dump, name, emitter, triton)


@pytest.mark.parametrize("dump,name", [
    # second stages of split softmax sums: rows of exactly 32 (XLA: __triton)
    ("xla-dumps-holdout/ctc_loss_scan_f32", "input_reduce_fusion"),
    ("xla-dumps-holdout/ctc_loss_scan_f32", "input_reduce_fusion.3"),
    ("xla-dumps-holdout/sparse_topk_attn_bf16", "input_reduce_fusion.2"),
    ("xla-dumps-holdout/sparse_topk_attn_bf16", "input_reduce_fusion.3"),
])
def test_warp_long_row_reductions(dump, name):
    _assign_reduction(dump, name, "warp-row-reduction", True)


@pytest.mark.parametrize("dump,name,emitter,triton", [
    # split-K second stages of the GNN's weight gradients: f32[64,128,64] ->
    # f32[128,64] (64 rows, 8192 outputs; XLA: __triton)
    ("xla-dumps-holdout/gnn_message_passing_f32", "input_reduce_fusion.2",
     "split-column-reduction", True),
    ("xla-dumps-holdout/gnn_message_passing_f32", "input_reduce_fusion.3",
     "split-column-reduction", True),
    # 128-row f32 columns with many outputs stay native (resnet's batch-norm sums)
    ("xla-dumps-holdout/resnet_bn_train_bf16", "input_reduce_fusion.10", "column-reduction", False),
])
def test_split_column_reductions(dump, name, emitter, triton):
    _assign_reduction(dump, name, emitter, triton)


def _xla_fusions(kind: str):
    sys.path.insert(0, str(ROOT / "bench"))
    import kernel_lists

    import hlorun
    from hlorun.analysis.kernels import kernel_list
    dumps = list(kernel_lists.all_dumps())
    hold = ROOT / "testdata" / "xla-dumps-holdout"
    if hold.is_dir():
        dumps += [d for d in sorted(hold.iterdir()) if d.is_dir() and kernel_lists.dump_files(d)]
    for d in dumps:
        for k in kernel_list(hlorun.load_module(kernel_lists.dump_files(d)[1])):
            if k.kind == kind:
                yield d.name, k.instruction


def test_every_xla_block_level_fusion_passes_the_support_rules():
    """XLA compiled every ``__triton`` fusion of the dumps with the generic
    Triton emitter, so each instruction in them must pass
    ``IsTritonSupportedInstruction`` as hlorun writes it (f32 divides,
    exp/log/rsqrt, scalar constants, bf16 converts, iota ...).  Known gap:
    JAX 0.11.2's emitter also tiles some concatenates (lstm_scan_train_f32),
    which the stored support.cc allows only in nested GEMM fusions."""
    from hlorun.passes.triton_support import unsupported_instruction
    seen = 0
    for name, fusion in _xla_fusions("kCustom:__triton"):
        for i in fusion.fused_computation.instructions:
            why = unsupported_instruction(i)
            if i.opcode == "concatenate":
                continue
            assert why is None, f"{name} {fusion.name} {i.name}: {why}"
            seen += 1
    if seen == 0:
        pytest.skip("no XLA dumps")
    assert seen > 1000


@pytest.mark.parametrize("dump,name,why", [
    # jax.random's threefry bits (u64 iota, u32 shifts/xor): no unsigned
    # types in Triton; XLA kept all four dropout masks native
    ("xla-dumps/dropout_mlp_train_bf16", "loop_select_fusion", "u64"),
    ("xla-dumps/dropout_mlp_train_bf16", "loop_select_fusion.1", "u64"),
    # f16 divide: not in the f16 binary set (f32/f64 only)
    ("xla-dumps-holdout/groupnorm_resblock_fp16", "loop_multiply_fusion.1", "divide on f16"),
    # low padding (a shifted scan)
    ("xla-dumps-holdout/assoc_scan_bf16", "loop_add_fusion.3", "only high padding"),
    # is-finite is in no elementwise set
    ("xla-dumps-holdout/embed_xent_train_bf16", "loop_select_fusion", "is-finite"),
])
def test_triton_support_refuses(dump, name, why):
    from hlorun.passes.config_assigner import block_level_candidate
    from hlorun.passes.triton_support import triton_supported_computation
    fusion = _fusion(dump, name)
    assert why in (triton_supported_computation(fusion) or "")
    fusion.attrs["kind"] = "kLoop"
    fusion.attrs.pop("backend_config", None)
    reason = block_level_candidate(fusion)
    assert reason is not None


@pytest.mark.parametrize("dump,name,emitter", [
    # encdec's f32[4,64,256] -> [256,256] column sums over the collapsed
    # [4,64] (XLA: native, while resnet's plain [128,64] sums went Triton)
    ("xla-dumps-holdout/encdec_cross_attn_bf16", "input_reduce_fusion", "column-reduction"),
    ("xla-dumps-holdout/encdec_cross_attn_bf16", "input_reduce_fusion.2", "column-reduction"),
    # a plain f32[128,64] column sum of the same class stays Triton
    ("xla-dumps-holdout/resnet_bn_train_bf16", "input_reduce_fusion.25", "short-column-reduction"),
    # gpt_ln's f32[512,384] -> [384] layer-norm gradient sums read as a plain
    # [512,384] parameter: Triton (XLA: 7 of 7); the same sums over a
    # collapsed f32[4,128,384] stay native (XLA: 7 of 7)
    ("xla-dumps-holdout/gpt_ln_3l_bf16", "input_reduce_fusion.15", "short-column-reduction"),
    ("xla-dumps-holdout/gpt_ln_3l_bf16", "input_reduce_fusion.1", "column-reduction"),
])
def test_collapsed_reduced_dimension_stays_native(dump, name, emitter):
    _assign_reduction(dump, name, emitter, emitter == "short-column-reduction")


@pytest.mark.parametrize("dump,name,triton", [
    # f16 result rows of 9 elements (18 bytes, less than a 32-byte sector): XLA native
    ("xla-dumps-holdout/depthwise_conv_fp16", "wrapped_transpose.1", False),
    # f16 result rows of 3 elements (cnn_fp16's NCHW -> NHWC input): XLA native
    ("xla-dumps/cnn_fp16", "wrapped_transpose", False),
    # f16 result rows of 16 elements (32 bytes, the OIHW -> OHWI filters): XLA Triton
    ("xla-dumps/cnn_fp16", "wrapped_transpose.2", True),
])
def test_minor_moving_loop_transposes(dump, name, triton):
    _assign_reduction(dump, name, "loop-transpose-minor", triton, kind="kLoop")


@pytest.mark.parametrize("flags,off", [
    ("--xla_gpu_autotune_level=0", True),
    ("--xla_gpu_deterministic_ops=true", True),
    ("--xla_gpu_exclude_nondeterministic_ops", True),
    ("--xla_gpu_experimental_enable_fusion_autotuner=false", True),
    ("--xla_gpu_autotune_level=4 --xla_gpu_deterministic_ops=false", False),
])
def test_flags_without_fusion_autotuning_keep_fusions_native(flags, off):
    """XLA assigns no native/block-level choice to generic fusions when its
    fusion autotuner is off (config_assigner_pass.cc); the GEMM part of the
    config-assigner pipeline still runs."""
    from hlorun.pipeline.loader import load_pipeline
    from hlorun.pipeline.select import parse_xla_flags, select, step_paths
    spec = load_pipeline("gpu-cuda")
    sel = select(spec, parse_xla_flags(flags)["disable"])
    state = {"/".join(p): sel.is_disabled(s) for p, s in step_paths(spec)}
    assert state["config-assigner/config-assigner"] is off
    assert state["config-assigner/convert_triton_gemm_config"] is False


@pytest.mark.parametrize("dump,name,triton", [
    # fp8 delayed scaling: an f32 transpose (bf16 weights converted first)
    # written as f8e4m3fn -- the tile is stored 1 byte wide (XLA: __triton)
    ("xla-dumps-holdout/fp8_delayed_scaling_mlp", "input_transpose_fusion", True),
    ("xla-dumps-holdout/fp8_delayed_scaling_mlp", "input_transpose_fusion.1", True),
    # an f32 Q/K/V split transpose written as f32 stays native (XLA: native)
    ("xla-dumps/transformer_2l_f32_algo_bf16", "input_transpose_fusion.6", False),
])
def test_transpose_width_is_the_narrower_of_hero_and_output(dump, name, triton):
    _assign_reduction(dump, name, "transpose", triton)


@pytest.mark.parametrize("dump,name,triton", [
    # three k=4 split-K partial sums added per output, 262144 outputs (XLA: native)
    ("xla-dumps-holdout/llama_swiglu_2l_bf16", "loop_add_fusion.3", False),
    # a k=16 split-K weight update, 131072 outputs (XLA: native)
    ("xla-dumps-holdout/gumbel_vq_train_bf16", "loop_subtract_fusion.1", False),
    # k=8 plus k=4 partials of vit's residual gradient (XLA: native)
    ("xla-dumps-holdout/vit_infer_bf16", "loop_add_fusion", False),
    # two k=4 sums added, 131072 outputs: fewer than 12 partials (XLA: __triton)
    ("xla-dumps-holdout/flow_matching_mlp_bf16", "loop_add_fusion.1", True),
    # k=16 f32 sums of 98304 outputs, under 1.5 waves (XLA: __triton)
    ("xla-dumps/dot_algorithms", "loop_reduce_fusion.1", True),
])
def test_many_partial_sums_stay_native(dump, name, triton):
    """Loop fusions summing split-K partial results elementally: with 12 or
    more partials per output (over all their reduces) and more than 1.5
    waves of outputs the native loop emitter is kept."""
    _assign_reduction(dump, name, "loop-reduction", triton, kind="kLoop")
