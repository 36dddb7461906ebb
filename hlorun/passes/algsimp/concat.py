"""algsimp's concatenate rewrites (XLA's HandleConcatenate):

* a one-operand concatenate is its operand;
* zero-element operands are dropped;
* (layout-insensitive only) ``concat(x, concat(y, z))`` along the same
  dimension -> ``concat(x, y, z)`` -- DotMerger's pairwise merges of three
  Q/K/V projections become one three-way concatenate;
* adjacent unstrided slices of one operand, contiguous along the
  concatenated dimension and equal elsewhere, become one slice.

* a binary concatenate with a scalar broadcast on one side is a ``pad`` of
  the other operand (low padding when the broadcast comes first, else high);
* ``concat(x, x, ...)`` of one operand whose concatenated dimension is 1 is a
  broadcast of ``reshape(x)`` without that dimension.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...ir.attrs import format_int_list, format_padding, format_slice, parse_slice
from ...ir.module import Instruction
from ..dfs_rewrite import add_instruction

if TYPE_CHECKING:
    from .visitor import AlgsimpVisitor


def _dim(concat: Instruction) -> int:
    return concat.dimensions[0]


def _clone(v: "AlgsimpVisitor", concat: Instruction, operands: list[Instruction]) -> Instruction:
    attrs = {k: val for k, val in concat.attrs.items()}
    return v.new("concatenate", concat.shape, operands, **attrs)


def _unstrided(s: Instruction) -> bool:
    return s.opcode == "slice" and all(st == 1 for _, _, st in parse_slice(s.attrs["slice"]))


def handle_concatenate(v: "AlgsimpVisitor", concat: Instruction) -> None:
    ops = list(concat.operands)
    if len(ops) == 1:
        if ops[0].shape.dimensions == concat.shape.dimensions:
            v.replace_with_operand(concat, ops[0])
        return
    nonempty = [o for o in ops if o.shape.element_count != 0]
    if len(nonempty) < len(ops):
        if len(nonempty) <= 1:
            v.replace_with_operand(concat, nonempty[0] if nonempty else ops[0])
        else:
            v.replace_with_new(concat, _clone(v, concat, nonempty))
        return
    if v.layout_sensitive:
        return
    dim = _dim(concat)
    flat: list[Instruction] = []
    for o in ops:
        if o.opcode == "concatenate" and _dim(o) == dim:
            flat.extend(o.operands)
        else:
            flat.append(o)
    if len(flat) != len(ops):
        v.replace_with_new(concat, v.new("concatenate", concat.shape, flat,
                                         dimensions=concat.attrs["dimensions"]))
        return
    merged: list[Instruction] = []
    i = 0
    while i < len(ops):
        if not _unstrided(ops[i]):
            merged.append(ops[i])
            i += 1
            continue
        first = parse_slice(ops[i].attrs["slice"])
        src = ops[i].operands[0]
        end = first[dim][1]
        j = i + 1
        while j < len(ops) and _unstrided(ops[j]) and ops[j].operands[0] is src:
            r = parse_slice(ops[j].attrs["slice"])
            if r[dim][0] != end or any(r[k][0] != first[k][0] for k in range(len(r)) if k != dim):
                break
            end = r[dim][1]
            j += 1
        if j - i > 1:
            dims = list(ops[i].shape.dimensions)
            dims[dim] = end - first[dim][0]
            ranges = [(s, end if k == dim else lim, 1) for k, (s, lim, _) in enumerate(first)]
            new_slice = v.new("slice", ops[i].shape.with_dimensions(dims, ops[i].shape.layout), [src],
                              slice=format_slice(ranges))
            add_instruction(concat.parent, new_slice)
            merged.append(new_slice)
        else:
            merged.append(ops[i])
        i = j
    if len(merged) < len(ops):
        v.replace_with_new(concat, _clone(v, concat, merged))
        return
    if len(ops) == 2:
        low = ops[0].opcode == "broadcast" and ops[0].operands[0].shape.rank == 0
        high = ops[1].opcode == "broadcast" and ops[1].operands[0].shape.rank == 0
        if not (low or high):
            return
        padded, fill = (ops[1], ops[0]) if low else (ops[0], ops[1])
        config = [(0, 0, 0)] * concat.shape.rank
        config[dim] = (ops[0].shape.dimensions[dim], 0, 0) if low else (0, ops[1].shape.dimensions[dim], 0)
        v.replace_with_new(concat, v.new("pad", concat.shape, [padded, fill.operands[0]],
                                         padding=format_padding(config)))
        return
    if all(o is ops[0] for o in ops) and ops[0].shape.dimensions[dim] == 1:
        dims = [d for k, d in enumerate(ops[0].shape.dimensions) if k != dim]
        keep = [k for k in range(concat.shape.rank) if k != dim]
        reshape = v.new("reshape", ops[0].shape.with_dimensions(dims), [ops[0]])
        add_instruction(concat.parent, reshape)
        v.replace_with_new(concat, v.new("broadcast", concat.shape, [reshape],
                                         dimensions=format_int_list(keep)))
