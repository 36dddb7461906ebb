"""gather_simplifier: XLA's GatherSimplifier (xla/service/gather_simplifier.cc;
GpuCompiler runs it first in the ``simplification`` fixed point, after
BatchedGatherScatterNormalizer).

Every gather is brought to XLA's simplified form -- indices ``[N, k]`` with
``index_vector_dim=1``, ``start_index_map={0..k-1}``, no collapsed slice
dimensions, ``offset_dims={1..rank}`` -- with transposes and reshapes
around it:

* any zero slice size: the result is a broadcast zero;
* the operand is transposed so that the ``start_index_map`` dimensions
  come first (the others after, in order);
* the indices become ``[N, k]`` (``TransformStartIndices``);
* the new gather's result ``[N, permuted slice sizes...]`` is transposed
  back, the collapsed slice dimensions are reshaped away, the batch
  dimension is expanded to the indices' (non index-vector) dimensions, or
  removed when there are none, and a final transpose puts the offset
  dimensions where ``offset_dims`` says.

Gathers that still have batching dimensions are left to
batched_gather_scatter_normalizer (XLA runs it before this pass).
Postcondition: every gather is simplified (``is_simplified_gather``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.build import make_constant
from ..ir.module import Instruction, Module
from .base import Pass
from .gather_scatter_utils import (add, array_shape, elide_degenerate_dims,
                                   expand_first_dim_into_n_dims, expand_ops, int_list,
                                   is_identity, maybe_transpose,
                                   operand_start_index_permutations, transform_start_indices)


def is_simplified_gather(g: Instruction) -> bool:
    dims_ok = g.operands[1].shape.rank == 2 and int(g.attrs["index_vector_dim"]) == 1
    offsets = g.int_list("offset_dims")
    return (dims_ok and is_identity(g.int_list("start_index_map"))
            and not g.int_list("collapsed_slice_dims")
            and (not offsets or (offsets[0] == 1 and offsets[-1] == len(offsets))))


def _matches(i: Instruction) -> bool:
    return (i.opcode == "gather" and not i.int_list("operand_batching_dims")
            and not is_simplified_gather(i))


def _zero(g: Instruction) -> Instruction:
    c = make_constant(g.parent, g.shape.element_type, 0)
    return add(g.parent, "broadcast", g.shape, [c], {"dimensions": "{}"})


def simplify_gather(g: Instruction) -> Instruction:
    slice_sizes = list(g.int_list("slice_sizes"))
    if 0 in slice_sizes:
        return _zero(g)
    offset_dims = list(g.int_list("offset_dims"))
    collapsed = list(g.int_list("collapsed_slice_dims"))
    start_index_map = list(g.int_list("start_index_map"))
    ivd = int(g.attrs["index_vector_dim"])
    operand_rank = len(collapsed) + len(offset_dims)
    perm, perm_inv = operand_start_index_permutations(start_index_map, operand_rank)
    operand = maybe_transpose(g.operands[0], perm)
    indices = transform_start_indices(g.operands[1], ivd)
    sizes = [slice_sizes[p] for p in perm]
    out_shape = array_shape(g.shape, [indices.shape.dimensions[0]] + sizes,
                            operand.shape.element_type)
    attrs = {"offset_dims": int_list(range(1, operand_rank + 1)),
             "collapsed_slice_dims": "{}",
             "start_index_map": int_list(range(len(start_index_map))),
             "index_vector_dim": "1",
             "slice_sizes": int_list(sizes)}
    if g.attrs.get("indices_are_sorted") == "true":
        attrs["indices_are_sorted"] = "true"
    result = add(g.parent, "gather", out_shape, [operand, indices], attrs)
    result = maybe_transpose(result, [0] + [d + 1 for d in perm_inv])
    if collapsed:
        result = elide_degenerate_dims(result, [d + 1 for d in collapsed])
    index_dims = [d for i, d in enumerate(g.operands[1].shape.dimensions) if i != ivd]
    if len(index_dims) > 1:
        result = expand_first_dim_into_n_dims(result, index_dims)
    elif not index_dims:
        result = elide_degenerate_dims(result, [0])
    output_rank = len(index_dims) + len(offset_dims)
    offsets = set(offset_dims)
    out_perm, next_offset, next_batch = [], len(index_dims), 0
    for i in range(output_rank):
        if i in offsets:
            out_perm.append(next_offset)
            next_offset += 1
        else:
            out_perm.append(next_batch)
            next_batch += 1
    return maybe_transpose(result, out_perm)


@dataclass(frozen=True)
class GatherSimplifier(Pass):
    """Gathers in XLA's simplified form, with transposes and reshapes around."""

    name = "gather_simplifier"

    def run(self, module: Module) -> bool:
        return expand_ops(self, module, _matches, simplify_gather,
                          "simplified: [N, k] indices, identity start_index_map, no collapsed "
                          "dimensions",
                          opcodes=frozenset({"gather"}))


__all__ = ["GatherSimplifier", "is_simplified_gather", "simplify_gather"]
