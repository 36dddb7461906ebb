"""What a GEMM's memory layout and fusion cost beyond its tiles: rows that
cannot be moved as 16-byte vectors, and the kernels a BLAS fission leaves
behind (``cost.terms`` turns both into time)."""

from __future__ import annotations

from ..ir.shape import bit_width
from .problem import GemmProblem


def unaligned_rows(p: GemmProblem) -> bool:
    """Some matrix's rows (its most minor dimension: k of a K-major operand,
    else m or n; n of the output) are not a multiple of 16 bytes, so its
    loads or stores cannot be 16-byte vectors or TMA copies."""
    ob = max(1, (p.operand_bits + 7) // 8)
    out = max(1, (bit_width(p.out_type) + 7) // 8)
    lhs = p.k if p.lhs_k_major else p.m
    rhs = p.k if p.rhs_k_major else p.n
    return bool(lhs * ob % 16 or rhs * ob % 16 or p.n * out % 16)


def unfused_traffic(problem: GemmProblem) -> tuple[int, int]:
    """Kernels and bytes when the GEMM leaves a fusion: the fused prologue
    (operands with elementwise work, or moved by a concatenate, slice, pad or
    physical transpose) and epilogue become separate kernels, each reading
    and writing its tensor."""
    p = problem
    kernels, nbytes = 0, 0
    if p.prologue_ops:
        kernels += 1
        nbytes += 2 * p.input_bytes
    elif p.prologue_moves:
        # a concatenate, slice, pad or physical transpose of an operand: one
        # kernel per moved operand, writing it (cuBLAS reads it again)
        kernels += p.prologue_moves
        nbytes += 2 * p.prologue_move_bytes
    if p.epilogue_ops or p.epilogue_operands:
        kernels += 1
        # cuBLASLt applies bias/relu/gelu and beta*C in its own epilogue:
        # one extra pass over the output at most
        nbytes += p.output_bytes
    return kernels, nbytes
