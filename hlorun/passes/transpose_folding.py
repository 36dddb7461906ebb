"""``transpose-folding``: XLA's TransposeFolding for dots, with the GPU
predicate (``CanFoldTransposeOperandIntoDot``).

A ``transpose`` feeding a ``dot`` operand is folded into the dot's dimension
numbers (the dot reads the transpose's operand directly) when the operand's
non-contracting dimensions keep their relative order and the library can
still describe the operand as a (batched) row- or column-major matrix.  All
candidates are collected first, then folded; a folded transpose left without
users is removed.  Convolutions are not folded (the GPU pipeline's
``NeverFoldTranspose`` after layout assignment).

Postcondition: no foldable non-identity transpose feeds a dot operand.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.module import Instruction, Module, has_opcode
from .base import Pass
from .gemm_broadcast_folding_rewriter import nonfusion_computations
from .gemm_rewriter import hlo as H
from .gemm_rewriter.config import DotDims
from .gemm_rewriter.matmul import matrix_layout, non_contracting_dims


def _relative_order(dims: list[int]) -> list[int]:
    return sorted(range(len(dims)), key=lambda i: dims[i])


def can_fold_transpose_operand(dot: Instruction, index: int) -> bool:
    """``CanFoldTransposeOperandIntoDot``."""
    transpose = dot.operands[index]
    perm = transpose.dimensions
    dims = DotDims.of(dot)
    batch = dims.lhs_batch if index == 0 else dims.rhs_batch
    contracting = dims.lhs_contracting if index == 0 else dims.rhs_contracting
    nc = non_contracting_dims(transpose.shape.rank, batch, contracting)
    t = lambda ds: [perm[d] for d in ds]  # noqa: E731
    if _relative_order(nc) != _relative_order(t(nc)):
        return False
    return matrix_layout(transpose.operands[0].shape, t(batch), t(contracting), t(nc)) is not None


def _is_non_identity_transpose(instr: Instruction) -> bool:
    return instr.opcode == "transpose" and any(d != i for i, d in enumerate(instr.dimensions))


_DOT = frozenset({"dot"})


@dataclass(frozen=True)
class TransposeFolding(Pass):
    """Fold transposes of dot operands into the dot dimension numbers."""

    name = "transpose-folding"

    def run(self, module: Module) -> bool:
        foldable: list[tuple[Instruction, list[int]]] = []
        for comp in nonfusion_computations(module):
            if not has_opcode(comp, _DOT):
                continue
            for instr in comp.post_order():
                if instr.opcode != "dot" or any(o.shape.rank < 2 for o in instr.operands):
                    continue
                indices = [i for i in (0, 1) if _is_non_identity_transpose(instr.operands[i])
                           and can_fold_transpose_operand(instr, i)]
                if indices:
                    foldable.append((instr, indices))
        for dot, indices in foldable:
            self._fold(dot, indices)
        return bool(foldable)

    def _fold(self, dot: Instruction, indices: list[int]) -> None:
        dims = DotDims.of(dot)
        lhs, rhs = dot.operands
        if 0 in indices:
            perm = lhs.dimensions
            dims.lhs_contracting = [perm[d] for d in dims.lhs_contracting]
            dims.lhs_batch = [perm[d] for d in dims.lhs_batch]
            lhs = lhs.operands[0]
        if 1 in indices:
            perm = rhs.dimensions
            dims.rhs_contracting = [perm[d] for d in dims.rhs_contracting]
            dims.rhs_batch = [perm[d] for d in dims.rhs_batch]
            rhs = rhs.operands[0]
        comp = dot.parent
        new = H.add(comp, "dot", dot.shape, [lhs, rhs], name=dot.name)
        dims.set_on(new)
        for key, value in dot.attrs.items():
            if key not in ("lhs_batch_dims", "lhs_contracting_dims", "rhs_batch_dims", "rhs_contracting_dims"):
                new.attrs[key] = value
        folded = [dot.operands[i].name for i in indices]
        H.replace(dot, new)
        self.remark(new, f"folded transpose {', '.join(folded)} into dot {new.name}", folded=folded)
