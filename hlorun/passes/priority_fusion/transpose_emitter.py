"""Which transposes XLA:GPU runs with its shared-memory transpose emitter
(``GetDescriptionForTiledTransposeEmitter`` and the packed-transpose tile
check ``GetPackedTransposeTileSizes``, xla/service/gpu/ir_emission_utils.cc),
written from their rules.

A transpose (on descending layouts, as after layout normalization) is first
normalized: size-1 dimensions dropped and runs of dimensions that stay
adjacent and in order merged (``[1,16,16,3,3] {0,1,3,4,2}`` is
``[16,16,9] -> [16,9,16]``, permutation ``{0,2,1}``).  It is a *tiled*
transpose when

* the packed emitter can take it: elements narrower than a 32-bit shared
  memory bank, the canonical ``[.., T2, .., A, T1, B] -> [.., T1, .., A, T2, B]``
  form has no trailing ``B``, and the tile (``T1`` and ``T2`` capped at
  32 banks x elements per bank, ``A`` filling what ``T1`` leaves) has at
  least 10 bank-vectors of rows and of columns, rows / columns / the ``T2``
  remainder divisible by the vector; or
* the most minor dimension stays minor (a "102" transpose): the moved rows
  are at most 64 bits wide and at least 16 bytes x the smaller swapped
  dimension; or
* the most minor dimension moves: both minor dimensions (operand's and
  result's) at least 16, or both at least 8 with a product of at least
  64 x 128 -- never for 4-bit elements.

Anything else is left to the loop emitter.
"""

from __future__ import annotations

import math

from ...ir.module import Instruction
from ...ir.shape import bit_width

MIN_DIMENSION_TO_TRANSPOSE_TILED = 16
MIN_DIMENSION_TO_TRANSPOSE_TILED2 = 8
MIN_TOTAL_DIMENSIONS_TO_TRANSPOSE_TILED = 64 * 128
MAX_BITS_IN_MOST_MINOR_DIMENSION = 8 * 8
NUM_SHMEM_BANKS = 32
BANK_BITWIDTH = 32


def _bits(element_type: str) -> int:
    return 8 if element_type == "pred" else bit_width(element_type)


def normalized_transpose(operand_dims, permutation) -> tuple[list[int], list[int]]:
    """(normalized result dimensions, normalized permutation):
    ``GetNormalizedLogicalTransposeShape`` on descending layouts."""
    kept = [d for d in range(len(operand_dims)) if operand_dims[d] != 1]
    index = {d: i for i, d in enumerate(kept)}
    order = [index[p] for p in permutation if operand_dims[p] != 1]
    groups: list[list[int]] = []
    for d in order:
        if groups and groups[-1][-1] + 1 == d:
            groups[-1].append(d)
        else:
            groups.append([d])
    rank_of = {g: r for r, g in enumerate(sorted(range(len(groups)), key=lambda g: groups[g][0]))}
    dims = [math.prod(operand_dims[kept[d]] for d in grp) for grp in groups]
    return dims, [rank_of[g] for g in range(len(groups))]


def _inverse(perm):
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return inv


def packed_transpose_ok(dims, perm, bits: int) -> bool:
    """``GetPackedTransposeTileSizes(PackedTransposeDescription(...)).ok()``."""
    if bits >= BANK_BITWIDTH:
        return False
    out, cperm = list(dims), list(perm)
    if cperm[-1] != len(out) - 1:
        cperm.append(len(out))
        out.append(1)
    rank = len(out)
    if cperm[rank - 3] != rank - 3:
        out.insert(rank - 2, 1)
        cperm = [p + 1 if p > rank - 3 else p for p in cperm]
        cperm.insert(rank - 2, rank - 2)
    inv = _inverse(cperm)
    inp = [out[inv[i]] for i in range(len(out))]
    r = len(inp)
    t1, a, t2, b = inp[r - 2], inp[r - 3], inp[cperm[r - 2]], inp[r - 1]
    vector = BANK_BITWIDTH // bits
    shmem_dim = NUM_SHMEM_BANKS * vector
    tile_t1 = min(t1, shmem_dim)
    tile_a = min(a, shmem_dim // tile_t1)
    tile_t2 = min(t2, shmem_dim)
    rows, cols = tile_t2, tile_a * tile_t1
    if cols < 10 * vector or rows < 10 * vector:
        return False
    return not (b != 1 or rows % vector or cols % vector or (t2 % tile_t2) % vector)


def tiled_transpose_description(instr: Instruction) -> tuple[list[int], list[int]] | None:
    """(normalized dimensions, permutation) when ``instr`` is a transpose the
    shared-memory transpose emitter takes, else None."""
    if instr.opcode != "transpose" or not instr.shape.is_array:
        return None
    operand = instr.operands[0].shape
    dims, perm = normalized_transpose(list(operand.dimensions), list(instr.dimensions))
    if len(perm) < 2:
        return None
    bits = _bits(instr.shape.element_type)
    operand_dims = [dims[i] for i in _inverse(perm)]
    if packed_transpose_ok(dims, perm, bits):
        return dims, perm
    if perm[-1] == len(dims) - 1:  # the minor dimension stays minor
        op_minor = operand_dims[-2]
        row_bits = bits * dims[-1]
        if row_bits <= MAX_BITS_IN_MOST_MINOR_DIMENSION and \
                row_bits * min(op_minor, dims[-2]) >= 8 * MIN_DIMENSION_TO_TRANSPOSE_TILED:
            return dims, perm
        return None
    op_minor, out_minor = operand_dims[-1], dims[-1]
    if (op_minor >= MIN_DIMENSION_TO_TRANSPOSE_TILED and out_minor >= MIN_DIMENSION_TO_TRANSPOSE_TILED) \
            or (op_minor >= MIN_DIMENSION_TO_TRANSPOSE_TILED2 and out_minor >= MIN_DIMENSION_TO_TRANSPOSE_TILED2
                and op_minor * out_minor >= MIN_TOTAL_DIMENSIONS_TO_TRANSPOSE_TILED):
        return None if bits == 4 else (dims, perm)
    return None
