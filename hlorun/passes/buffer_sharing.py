"""XLA:GPU's buffer-sharing hint as copy-insertion asks it
(xla/service/gpu/buffer_sharing.cc, ``CanShareBufferHint``): may a user write
its output into the buffer of one of its operands?

* a fusion: ``FusionCanShareBufferHint``, implemented once in
  ``hlorun.buffers.fusion_hint`` (the buffer assigner asks the same question);
* a cuBLAS-LT call may write over its bias (operand 2) when beta is not 0;
* anything else: None, the generic dataflow rules decide.
"""

from __future__ import annotations

from ..buffers.alias_rules import AliasRules
from ..buffers.fusion_hint import fusion_can_share as _fusion_hint
from ..ir.module import Instruction

# One rules object (building its custom-call table costs ~30 us); its
# per-fusion elementwise memo is cleared on every question, because the
# passes between two copy insertions rewrite fusions.
_RULES = AliasRules("cuda")



def fusion_can_share(fusion: Instruction, operand_index: int, output_index: int | None = None) -> bool:
    """``FusionCanShareBufferHint(fusion, fusion.operands[operand_index],
    {output_index})``."""
    if output_index is None and fusion.shape.is_tuple:
        return False
    index = () if output_index is None else (output_index,)
    _RULES._elementwise_cache.clear()
    return _fusion_hint(_RULES, fusion.operands[operand_index], fusion, index)


def can_share(user: Instruction, operand: Instruction, output_index: int | None = None) -> bool | None:
    """``CanShareBufferHint``: True / False where XLA:GPU decides, None where
    the generic dataflow rules do."""
    if user.opcode == "fusion":
        if operand not in user.operands:
            return False
        return fusion_can_share(user, user.operands.index(operand), output_index)
    if user.opcode == "custom-call":
        target = user.custom_call_target or ""
        if target == "__cublas$lt$matmul":
            cfg = user.backend_config or {}
            gemm = cfg.get("gemm_backend_config", cfg) if isinstance(cfg, dict) else {}
            beta = float(gemm.get("beta", 0) or 0) if isinstance(gemm, dict) else 0.0
            return beta != 0.0 and len(user.operands) > 2 and user.operands[2] is operand
        return False
    return None


__all__ = ["can_share", "fusion_can_share"]
