"""batched_gather_scatter_normalizer: XLA's BatchedGatherScatterNormalizer
(xla/service/batched_gather_scatter_normalizer.cc; first pass of GpuCompiler's
``optimization`` pipeline).

A gather with ``operand_batching_dims`` (a scatter with
``input_batching_dims``) -- ``jnp.take_along_axis`` and its gradient emit
them -- becomes one without: the batching dimensions turn into explicit
start indices.

* The indices' element type is promoted (to s32, else s64) when a batching
  dimension's size does not fit it (``PromoteTypeForSize``; a convert).
* An implicit index vector dimension (``index_vector_dim == rank``) is made
  explicit with a reshape to ``[..., 1]``.
* One ``iota`` per indices batching dimension, of the indices' shape with
  the index vector dimension set to 1, counts along that dimension; the
  iotas and the indices are concatenated along the index vector dimension
  (iotas first, in ``start_indices_batching_dims`` order).
* Gather: ``start_index_map`` = operand batching dims + old map;
  ``collapsed_slice_dims`` = sorted(old + operand batching dims).
  Scatter: ``scatter_dims_to_operand_dims`` = input batching dims + old map;
  ``inserted_window_dims`` = sorted(old + input batching dims).
* ``indices_are_sorted`` survives only if the new index map is sorted;
  ``unique_indices``, offsets/window dims, slice sizes and the index vector
  dimension are unchanged.

Postcondition: no gather or scatter has batching dimensions (except one
whose batching dimensions are also indexed: it is left alone).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.module import Instruction, Module
from ..ir.shape import is_integral
from .base import Pass
from .gather_scatter_utils import add, array_shape, expand_ops, int_list

_RANGES = {"s2": (-2, 1), "s4": (-8, 7), "s8": (-2**7, 2**7 - 1), "s16": (-2**15, 2**15 - 1),
           "s32": (-2**31, 2**31 - 1), "s64": (-2**63, 2**63 - 1), "u2": (0, 3), "u4": (0, 15),
           "u8": (0, 255), "u16": (0, 2**16 - 1), "u32": (0, 2**32 - 1), "u64": (0, 2**64 - 1)}


def _fits(size: int, t: str) -> bool:
    lo, hi = _RANGES.get(t, (-2**63, 2**63 - 1))
    return lo <= size <= hi


def _promote(t: str, size: int) -> str:
    """``PromoteTypeForSize``."""
    if not is_integral(t) or _fits(size, t):
        return t
    return "s32" if _fits(size, "s32") else "s64"


def is_batched(instr: Instruction) -> bool:
    """A gather/scatter with batching dimensions none of which is also an
    indexed dimension (XLA's newer InstructionMatchesPattern leaves such an
    overlapping one alone: the new index map would name it twice)."""
    if instr.opcode == "gather":
        batching, mapped = instr.int_list("operand_batching_dims"), instr.int_list("start_index_map")
    elif instr.opcode == "scatter":
        batching = instr.int_list("input_batching_dims")
        mapped = instr.int_list("scatter_dims_to_operand_dims")
    else:
        return False
    return bool(batching) and not set(batching) & set(mapped)


def _concat_indices(inst: Instruction, indices: Instruction, index_vector_dim: int,
                    batching_dims: tuple[int, ...]) -> Instruction:
    """``CreateConcatIndices``."""
    comp = inst.parent
    t = indices.shape.element_type
    for d in batching_dims:
        t = _promote(t, indices.shape.dimensions[d])
    if t != indices.shape.element_type:
        indices = add(comp, "convert", indices.shape.with_element_type(t), [indices])
    dims = list(indices.shape.dimensions)
    on_last = index_vector_dim == len(dims)
    if on_last:
        dims.append(1)
        indices = add(comp, "reshape", array_shape(indices.shape, dims, t), [indices])
    iota_dims = list(dims)
    iota_dims[index_vector_dim] = 1
    iota_shape = array_shape(indices.shape, iota_dims, t)
    parts = [add(comp, "iota", iota_shape, [], {"iota_dimension": str(d)}) for d in batching_dims]
    parts.append(indices)
    concat_dims = list(iota_dims)
    concat_dims[index_vector_dim] = len(batching_dims) + (1 if on_last else dims[index_vector_dim])
    return add(comp, "concatenate", array_shape(indices.shape, concat_dims, t), parts,
               {"dimensions": int_list([index_vector_dim])})


def _copy_flags(old: Instruction, attrs: dict, index_map: list[int]) -> None:
    if old.attrs.get("indices_are_sorted") == "true" and index_map == sorted(index_map):
        attrs["indices_are_sorted"] = "true"
    if old.attrs.get("unique_indices") == "true":
        attrs["unique_indices"] = "true"


def normalize_gather(g: Instruction) -> Instruction:
    obd = list(g.int_list("operand_batching_dims"))
    sibd = g.int_list("start_indices_batching_dims")
    ivd = int(g.attrs["index_vector_dim"])
    start_index_map = obd + list(g.int_list("start_index_map"))
    indices = _concat_indices(g, g.operands[1], ivd, sibd)
    collapsed = sorted(list(g.int_list("collapsed_slice_dims")) + obd)
    attrs = {"offset_dims": int_list(g.int_list("offset_dims")),
             "collapsed_slice_dims": int_list(collapsed),
             "start_index_map": int_list(start_index_map),
             "index_vector_dim": str(ivd),
             "slice_sizes": int_list(g.int_list("slice_sizes"))}
    _copy_flags(g, attrs, start_index_map)
    return add(g.parent, "gather", g.shape, [g.operands[0], indices], attrs)


def normalize_scatter(s: Instruction) -> Instruction:
    n = (len(s.operands) - 1) // 2
    operands, updates = s.operands[:n], s.operands[n + 1:]
    ibd = list(s.int_list("input_batching_dims"))
    sibd = s.int_list("scatter_indices_batching_dims")
    ivd = int(s.attrs["index_vector_dim"])
    s2o = ibd + list(s.int_list("scatter_dims_to_operand_dims"))
    indices = _concat_indices(s, s.operands[n], ivd, sibd)
    inserted = sorted(list(s.int_list("inserted_window_dims")) + ibd)
    attrs = {"update_window_dims": int_list(s.int_list("update_window_dims")),
             "inserted_window_dims": int_list(inserted),
             "scatter_dims_to_operand_dims": int_list(s2o),
             "index_vector_dim": str(ivd),
             "to_apply": s.attrs["to_apply"]}
    _copy_flags(s, attrs, s2o)
    return add(s.parent, "scatter", s.shape, list(operands) + [indices] + list(updates), attrs)


@dataclass(frozen=True)
class BatchedGatherScatterNormalizer(Pass):
    """Batching dimensions of gathers and scatters become iota start indices."""

    name = "batched_gather_scatter_normalizer"

    def run(self, module: Module) -> bool:
        return expand_ops(self, module, is_batched,
                          lambda i: normalize_gather(i) if i.opcode == "gather"
                          else normalize_scatter(i),
                          "has batching dimensions: they became iota start indices",
                          opcodes=frozenset({"gather", "scatter"}))


__all__ = ["BatchedGatherScatterNormalizer", "is_batched", "normalize_gather",
           "normalize_scatter"]
