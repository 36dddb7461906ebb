"""scatter_simplifier: XLA's ScatterSimplifier (xla/service/scatter_simplifier.cc).

GpuCompiler runs it in the ``simplification`` fixed point (after
gather_simplifier) and again after each post-layout LayoutNormalization
("layout normalization will create scatters that are not simplified and
also have unsorted update_window_dims").

A scatter is *simplified* when its index vector dimension is the last
dimension of the indices, the updates have at most one scatter dimension,
which is their first, ``update_window_dims`` is sorted and
``inserted_window_dims`` is empty.  Any other scatter is rewritten:

* the indices become ``[N, k]`` (``TransformStartIndices``);
* each update is transposed to put its scatter dimensions first (in
  order) and the window dimensions after, the scatter dimensions are
  reshaped into one (or a leading 1 is inserted when there is none), and a
  size-1 dimension is inserted for every inserted window dimension;
* the new scatter has ``update_window_dims={1..rank}``,
  ``inserted_window_dims={}``, the same ``scatter_dims_to_operand_dims``,
  ``index_vector_dim=1``, the same operands, combiner and flags.

Not modelled: the scatter on a rank-0 operand (XLA inlines the combiner;
such scatters are left as they are) and the ``reorder_operand_dims_for_
coalescing`` option (off by default: the operand keeps its dimension order).
Postcondition: every scatter on a non-scalar operand is simplified.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.module import Instruction, Module
from .base import Pass
from .gather_scatter_utils import (add, collapse_first_n_dims, expand_ops,
                                   insert_degenerate_dims, int_list, maybe_transpose,
                                   transform_start_indices)


def _parts(s: Instruction):
    n = (len(s.operands) - 1) // 2
    return s.operands[:n], s.operands[n], s.operands[n + 1:]


def is_simplified_scatter(s: Instruction) -> bool:
    operands, indices, updates = _parts(s)
    if operands[0].shape.rank == 0:
        return False
    uwd = list(s.int_list("update_window_dims"))
    return (int(s.attrs["index_vector_dim"]) + 1 == indices.shape.rank
            and updates[0].shape.rank - len(uwd) <= 1
            and 0 not in uwd and uwd == sorted(uwd)
            and not s.int_list("inserted_window_dims"))


def _matches(i: Instruction) -> bool:
    if i.opcode != "scatter" or i.int_list("input_batching_dims"):
        return False
    operands, _, _ = _parts(i)
    return operands[0].shape.rank > 0 and not is_simplified_scatter(i)


def _flatten_update(update: Instruction, uwd: list[int], iwd: list[int]) -> Instruction:
    """``FlattenAndTransposeUpdates``."""
    rank = update.shape.rank
    window = set(uwd)
    perm = [i for i in range(rank) if i not in window] + uwd
    n_scatter = rank - len(uwd)
    update = maybe_transpose(update, perm)
    if n_scatter > 1:
        update = collapse_first_n_dims(update, n_scatter)
    elif n_scatter == 0:
        update = insert_degenerate_dims(update, [0])
    if iwd:
        update = insert_degenerate_dims(update, [i + 1 for i in iwd])
    return update


def simplify_scatter(s: Instruction) -> Instruction:
    operands, indices, updates = _parts(s)
    uwd = list(s.int_list("update_window_dims"))
    iwd = list(s.int_list("inserted_window_dims"))
    operand_rank = len(uwd) + len(iwd)
    new_indices = transform_start_indices(indices, int(s.attrs["index_vector_dim"]))
    new_updates = [_flatten_update(u, uwd, iwd) for u in updates]
    attrs = {"update_window_dims": int_list(range(1, operand_rank + 1)),
             "inserted_window_dims": "{}",
             "scatter_dims_to_operand_dims": int_list(s.int_list("scatter_dims_to_operand_dims")),
             "index_vector_dim": "1",
             "to_apply": s.attrs["to_apply"]}
    for flag in ("indices_are_sorted", "unique_indices"):
        if s.attrs.get(flag) == "true":
            attrs[flag] = "true"
    return add(s.parent, "scatter", s.shape, list(operands) + [new_indices] + new_updates, attrs)


@dataclass(frozen=True)
class ScatterSimplifier(Pass):
    """Scatters in XLA's simplified form ([N, k] indices, one leading scatter
    dimension in the updates, no inserted window dimensions)."""

    name = "scatter_simplifier"

    def run(self, module: Module) -> bool:
        return expand_ops(self, module, _matches, simplify_scatter,
                          "simplified: [N, k] indices, updates [N, window...], no inserted "
                          "window dimensions",
                          opcodes=frozenset({"scatter"}))


__all__ = ["ScatterSimplifier", "is_simplified_scatter", "simplify_scatter"]
