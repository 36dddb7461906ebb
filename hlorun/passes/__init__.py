"""The pass registry: one explicit alphabetical dict, name -> "module:Class".

Names are XLA's (``reshape-decomposer``, ``cublas-gemm-rewriter`` ...).
Modules are imported on use.  tests/passes/test_registry.py checks that each
key equals the class's ``name``, that each pass has fixtures, and that every
pass named in hlorun/pipelines/*.yaml is registered.
"""

from __future__ import annotations

import difflib
from importlib import import_module

from .base import OpcodeRewriter, Pass, Remark, Target

REGISTRY: dict[str, str] = {
    "algorithm-checker": "hlorun.passes.algorithm_checker:AlgorithmChecker",
    "algsimp": "hlorun.passes.algsimp:AlgebraicSimplifier",
    "associative-scan-rewriter":
        "hlorun.passes.reduce_window_rewriter:AssociativeScanRewriter",
    "autotuner": "hlorun.passes.autotuner:Autotuner",
    "batched_gather_scatter_normalizer":
        "hlorun.passes.batched_gather_scatter_normalizer:BatchedGatherScatterNormalizer",
    "call-inliner": "hlorun.passes.call_inliner:CallInliner",
    "comparison-expander": "hlorun.passes.comparison_expander:ComparisonExpander",
    "config-assigner": "hlorun.passes.config_assigner:ConfigAssigner",
    "constant-folding": "hlorun.passes.constant_folding:ConstantFolding",
    "conv-padding-legalization": "hlorun.passes.conv_padding_legalization:ConvPaddingLegalization",
    "conv-rewriter": "hlorun.passes.conv_rewriter:ConvRewriter",
    "convert-mover": "hlorun.passes.convert_mover:ConvertMover",
    "convert_triton_gemm_config": "hlorun.passes.convert_triton_gemm_config:ConvertTritonGemmConfig",
    "copy-insertion": "hlorun.passes.copy_insertion:CopyInsertion",
    "copy_fusion": "hlorun.passes.copy_fusion:CopyFusion",
    "cse": "hlorun.passes.cse:HloCSE",
    "cublas-gemm-broadcast-folding-rewriter":
        "hlorun.passes.gemm_broadcast_folding_rewriter:GemmBroadcastFoldingRewriter",
    "cublas-gemm-rewriter": "hlorun.passes.gemm_rewriter:GemmRewriter",
    "cudnn-fused-convolution-rewriter":
        "hlorun.passes.cudnn_fused_conv_rewriter:CudnnFusedConvRewriter",
    "cudnn_pad_for_convolutions": "hlorun.passes.cudnn_pad_for_convolutions:CudnnPadForConvolutions",
    "dce": "hlorun.passes.dce:HloDCE",
    "dot-algorithm-rewriter": "hlorun.passes.dot_algorithm_rewriter:DotAlgorithmRewriter",
    "dot-dimension-merger": "hlorun.passes.dot_dimension_merger:DotDimensionMerger",
    "dot-merger": "hlorun.passes.dot_merger:DotMerger",
    "dot-strength-reduction": "hlorun.passes.dot_strength_reduction:DotStrengthReduction",
    "dot_decomposer": "hlorun.passes.dot_decomposer:DotDecomposer",
    "dynamic-slice-fusion-rewriter":
        "hlorun.passes.dynamic_slice_fusion_rewriter:DynamicSliceFusionRewriter",
    "float-normalization-bf16": "hlorun.passes.float_normalization:FloatNormalization",
    "fusion-block-level-rewriter":
        "hlorun.passes.fusion_block_level_rewriter:FusionBlockLevelRewriter",
    "fusion-wrapper": "hlorun.passes.fusion_wrapper:FusionWrapper",
    "gather_simplifier": "hlorun.passes.gather_simplifier:GatherSimplifier",
    "gemm-fusion": "hlorun.passes.gemm_fusion:GemmFusionAlias",
    "gemv-rewriter": "hlorun.passes.gemv_rewriter:GemvRewriter",
    "hoist-fused-bitcasts": "hlorun.passes.hoist_fused_bitcasts:HoistFusedBitcasts",
    "layout-assignment": "hlorun.passes.layout_assignment:LayoutAssignment",
    "layout_normalization": "hlorun.passes.layout_normalization:LayoutNormalization",
    "move_copy_to_users": "hlorun.passes.move_copy_to_users:MoveCopyToUsers",
    "multi_output_fusion": "hlorun.passes.multi_output_fusion:MultiOutputFusion",
    "operand_converter": "hlorun.passes.dot_operand_converter:DotOperandConverter",
    "priority-fusion": "hlorun.passes.priority_fusion:PriorityFusion",
    "reduce-window-rewriter": "hlorun.passes.reduce_window_rewriter:ReduceWindowRewriter",
    "reduction-degenerate-dim-remover":
        "hlorun.passes.reduction_degenerate_dim_remover:ReductionDegenerateDimRemover",
    "reduction-dimension-grouper":
        "hlorun.passes.reduction_rewriters:ReductionDimensionGrouper",
    "reduction-layout-normalizer": "hlorun.passes.reduction_layout_normalizer:ReductionLayoutNormalizer",
    "reduction-splitter": "hlorun.passes.reduction_rewriters:ReductionSplitter",
    "rename_fusions": "hlorun.passes.rename_fusions:RenameFusions",
    "reshape-decomposer": "hlorun.passes.reshape_decomposer:ReshapeDecomposer",
    "reshape-mover": "hlorun.passes.reshape_mover:ReshapeMover",
    "scatter_simplifier": "hlorun.passes.scatter_simplifier:ScatterSimplifier",
    "select_and_scatter_expander":
        "hlorun.passes.select_and_scatter_expander:SelectAndScatterExpander",
    "simplify-fp-conversions": "hlorun.passes.simplify_fp_conversions:SimplifyFPConversions",
    "slice-sinker": "hlorun.passes.slice_sinker:SliceSinker",
    "softmax-rewriter-triton": "hlorun.passes.softmax_rewriter_triton:SoftmaxRewriterTriton",
    "sort-iota-fusion": "hlorun.passes.sort_iota_fusion:SortIotaFusion",
    "splitk-rewriter": "hlorun.passes.splitk_rewriter:SplitkRewriter",
    "stable-sort-expander": "hlorun.passes.stable_sort_expander:StableSortExpander",
    "topk-decomposer": "hlorun.passes.topk_decomposer:TopkDecomposer",
    "topk-rewriter": "hlorun.passes.topk_rewriter:TopkRewriter",
    "topk-specializer": "hlorun.passes.topk_specializer:TopkSpecializer",
    "topk-splitter": "hlorun.passes.topk_specializer:TopKSplitter",
    "transpose-folding": "hlorun.passes.transpose_folding:TransposeFolding",
    "tree-reduction-rewriter": "hlorun.passes.reduction_rewriters:TreeReductionRewriter",
    "triangular-solve-rewriter": "hlorun.passes.triangular_solve_rewriter:TriangularSolveRewriter",
    "triton-gemm-rewriter": "hlorun.passes.gemm_fusion:GemmFusion",
    "tuple-simplifier": "hlorun.passes.tuple_simplifier:TupleSimplifier",
    "while-loop-simplifier": "hlorun.passes.while_loop_simplifier:WhileLoopSimplifier",
}


def pass_class(name: str) -> type[Pass]:
    spec = REGISTRY.get(name)
    if spec is None:
        from ..errors import UsageError
        near = difflib.get_close_matches(name, REGISTRY, n=3, cutoff=0.5)
        raise UsageError(f"unknown pass '{name}'" + (f"; did you mean {', '.join(near)}?" if near else ""))
    module, attr = spec.split(":")
    return getattr(import_module(module), attr)


def closest_passes(name: str, n: int = 3) -> list[str]:
    return difflib.get_close_matches(name, REGISTRY, n=n, cutoff=0.5)


__all__ = ["OpcodeRewriter", "Pass", "REGISTRY", "Remark", "Target", "closest_passes", "pass_class"]
