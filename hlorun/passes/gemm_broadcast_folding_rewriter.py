"""``cublas-gemm-broadcast-folding-rewriter``: XLA:GPU's
GemmBroadcastFoldingRewriter.

A BLAS GEMM (``__cublas$gemm`` / ``__cublas$lt$matmul``) whose lhs or rhs is
a ``broadcast`` that only adds the batch dimensions (as leading, new
dimensions) reads the broadcast's operand directly instead: the operand's
batch dimensions are dropped from the dot dimension numbers and its
contracting dimension shifts down, so the library runs a strided batched
GEMM with a zero batch stride for that operand and the broadcast is never
materialized.  (The broadcast itself is left in place; DCE removes it,
as in XLA.)

Postcondition: no GEMM operand is a broadcast that only adds its batch
dimensions.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.module import Computation, Instruction, Module, has_opcode, module_has_opcode
from .base import Pass
from .gemm_rewriter.config import CUBLAS_GEMM, CUBLAS_LT_MATMUL, read_gemm_config, write_gemm_config


def nonfusion_computations(module: Module) -> list[Computation]:
    fused: set[Computation] = set()
    for comp in module.computations:
        for instr in comp.instructions:
            if instr.opcode == "fusion":
                fused.update(instr.called_computations())
    return [c for c in module.computation_post_order() if c not in fused]


_CUSTOM_CALL = frozenset({"custom-call"})


@dataclass(frozen=True)
class GemmBroadcastFoldingRewriter(Pass):
    """Fold batch-only broadcasts of GEMM operands into strided batched GEMMs."""

    name = "cublas-gemm-broadcast-folding-rewriter"

    def run(self, module: Module) -> bool:
        changed = False
        if not module_has_opcode(module, _CUSTOM_CALL):
            return False  # no GEMM call to fold into
        for comp in nonfusion_computations(module):
            if not has_opcode(comp, _CUSTOM_CALL):
                continue
            for instr in comp.post_order():
                if (instr.parent is comp and instr.opcode == "custom-call"
                        and instr.custom_call_target in (CUBLAS_GEMM, CUBLAS_LT_MATMUL)):
                    changed |= self._fold(instr)
        return changed

    def _fold(self, gemm: Instruction) -> bool:
        ops = gemm.operands
        if ops[0].opcode == "broadcast":
            bcast = ops[0]
        elif len(ops) > 1 and ops[1].opcode == "broadcast":
            bcast = ops[1]
        else:
            return False
        index = ops.index(bcast)
        side = "rhs" if index == 1 else "lhs"
        cfg = read_gemm_config(gemm)
        dims = cfg["dot_dimension_numbers"]
        source = bcast.operands[0]
        num_bcast_dims = bcast.shape.rank - source.shape.rank
        batch = [int(d) for d in dims.get(f"{side}_batch_dimensions", [])]
        num_batch = len(dims.get("lhs_batch_dimensions", []))

        def missed(why: str, **data) -> bool:
            self.remark(gemm, f"broadcast {bcast.name} ({side}) not folded: {why}", kind="missed",
                        broadcast=bcast.name, **data)
            return False

        for d in bcast.dimensions:
            if d < num_bcast_dims:
                return missed(f"operand dimension maps to output dimension {d}, one of the "
                              f"{num_bcast_dims} leading broadcast dimensions")
            if d in batch:
                return missed(f"operand dimension maps to batch dimension {d}")
        if num_bcast_dims <= 0:
            return missed("the broadcast adds no dimension")
        if num_bcast_dims != num_batch:
            return missed(f"it adds {num_bcast_dims} dimension(s) but the GEMM has {num_batch} batch "
                          f"dimension(s)", broadcast_dims=num_bcast_dims, batch_dims=num_batch)
        contracting = [int(d) for d in dims[f"{side}_contracting_dimensions"]]
        if len(contracting) != 1:
            return missed("the operand has more than one contracting dimension")
        dims[f"{side}_contracting_dimensions"] = [str(contracting[0] - num_batch)]
        dims[f"{side}_batch_dimensions"] = []
        gemm.set_operand(index, source)
        write_gemm_config(gemm, cfg)
        self.remark(gemm, f"folded broadcast {bcast.name} into the strided GEMM {gemm.name} ({side} "
                          f"batch stride 0)", broadcast=bcast.name, operand=index)
        return True
