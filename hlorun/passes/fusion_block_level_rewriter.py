"""fusion-block-level-rewriter: XLA's FusionBlockLevelRewriter
(xla/backends/gpu/transforms/fusion_block_level_rewriter.cc) as
``FusionDispatchPipeline`` runs it on Ampere and newer GPUs, after
pre-scheduling copy insertion -- that is, after the config-assigner has
made its measured native/Triton choices.

Without ``xla_gpu_experimental_enable_fusion_block_level_rewriter`` the
pass rewrites to the generic (block-level) Triton emitter only the fusions
that the native emitters are known to handle badly
(``ShouldTryRewriteFusion``):

* slow loop transposes (``ShouldRewriteLoopTransposeFusion``): a ``kLoop``
  fusion whose root is a transpose of a parameter, or of a bitcast of a
  parameter whose minor-most dimension is a power of two (Triton's tiles
  are powers of two), with a major-to-minor result layout, where -- on the
  normalized logical transpose -- the result's minor-most dimension comes
  from an input dimension ``m`` that is swapped with the input's minor-most
  dimension and ``m`` is neither of the two minor-most input dimensions
  (``[A,B,C] -> [C,B,A]``: neither the loop emitter nor the shared-memory
  transpose emitter reads or writes it coalesced);
* reductions of s32 (``ShouldRewriteReductionFusion``): a single-output
  fusion whose root is a reduce with s32 operands and an s32 result (s32
  dots rewritten as reductions).

A candidate is rewritten only if the Triton emitter supports its whole
computation (:func:`.triton_support.triton_supported_computation`,
``IsTritonSupportedComputation`` plus hlorun's tiling checks standing in
for ``TryFindBestTilingForFusion``) and it has no block-level config yet.
The result is ``kind=kCustom`` with ``{"kind":"__triton",
"block_level_fusion_config":...}``; every rewrite is a remark.

Postcondition: no fusion outside a nested computation is a supported slow
loop transpose or s32 reduction left on a native emitter.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.module import Instruction, Module
from .base import Pass
from .priority_fusion.analysis import fusible_computations
from .priority_fusion.transpose_emitter import normalized_transpose
from .triton_support import make_block_level, triton_supported_computation


def _major_to_minor(shape) -> bool:
    if shape.layout is None:
        return True
    return tuple(shape.minor_to_major) == tuple(reversed(range(shape.rank)))


def slow_loop_transpose(fusion: Instruction) -> bool:
    """``ShouldRewriteLoopTransposeFusion``."""
    if fusion.fusion_kind != "kLoop":
        return False
    root = fusion.fused_computation.root
    if root.opcode != "transpose" or not _major_to_minor(root.shape):
        return False
    dims, perm = normalized_transpose(list(root.operands[0].shape.dimensions),
                                      list(root.dimensions))
    rank = len(dims)
    if rank < 3:
        return False
    m = perm[-1]
    if not (perm[m] == rank - 1 and perm[rank - 1] < rank - 2):
        return False
    src = root.operands[0]
    if src.opcode == "parameter":
        return True
    if src.opcode == "bitcast" and src.operands[0].opcode == "parameter":
        minor = src.shape.dimensions[src.shape.minor_to_major[0]] if src.shape.layout \
            else src.shape.dimensions[-1]
        return minor > 0 and minor & (minor - 1) == 0
    return False


def s32_reduction(fusion: Instruction) -> bool:
    """``ShouldRewriteReductionFusion``: a single-output s32 reduce fusion."""
    root = fusion.fused_computation.root
    if root.opcode != "reduce" or root.shape.is_tuple:
        return False
    return root.shape.element_type == "s32" and all(
        o.shape.is_array and o.shape.element_type == "s32" for o in root.operands)


@dataclass(frozen=True)
class FusionBlockLevelRewriter(Pass):
    """Rewrite slow loop transposes and s32 reductions to generic Triton fusions."""

    name = "fusion-block-level-rewriter"

    def run(self, module: Module) -> bool:
        changed = False
        for comp in fusible_computations(module):
            for instr in comp.post_order():
                if instr.opcode == "fusion":
                    changed |= self._process(instr)
        return changed

    def _process(self, fusion: Instruction) -> bool:
        if fusion.fused_computation is None or fusion.fusion_kind == "kCustom":
            return False
        if slow_loop_transpose(fusion):
            why = "a slow loop transpose (the minor dimension swapped with a far one)"
        elif s32_reduction(fusion):
            why = "an s32 reduction"
        else:
            return False
        refusal = triton_supported_computation(fusion)
        if refusal is not None:
            self.remark(fusion, f"{fusion.name}: {why}, but not supported by the Triton "
                                f"emitter: {refusal}", "missed")
            return False
        bc = fusion.backend_config
        fbc = bc.get("fusion_backend_config") if isinstance(bc, dict) else None
        if isinstance(fbc, dict) and "block_level_fusion_config" in fbc:
            return False
        tiles = make_block_level(fusion)
        self.remark(fusion, f"{fusion.name} becomes a block-level Triton fusion: {why}; "
                            f"output tile [{','.join(tiles)}]", "applied")
        return True


__all__ = ["FusionBlockLevelRewriter", "s32_reduction", "slow_loop_transpose"]
