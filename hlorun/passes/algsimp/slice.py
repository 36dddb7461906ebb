"""algsimp's slice rewrites (XLA's HandleSlice, first two rules):

* a slice whose shape equals its operand's is its operand (no-op slice);
* an unstrided slice of an unstrided slice is one slice of the inner
  slice's operand, its starts and limits shifted by the inner starts
  (DotMerger's pairwise merges leave ``slice(slice(dot))`` chains; XLA
  reads each projection straight out of the merged dot).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...ir.attrs import format_slice, parse_slice
from ...ir.module import Instruction
from .shapes import same_shape

if TYPE_CHECKING:
    from .visitor import AlgsimpVisitor


def _ranges(s: Instruction) -> tuple[tuple[int, int, int], ...]:
    return parse_slice(s.attrs["slice"])


def _unstrided(ranges) -> bool:
    return all(st == 1 for _, _, st in ranges)


def handle_slice(v: "AlgsimpVisitor", slice_: Instruction) -> None:
    op = slice_.operands[0]
    if same_shape(slice_.shape, op.shape, v.layout_sensitive):
        v.replace_with_operand(slice_, op)
        return
    if op.opcode != "slice":
        return
    outer, inner = _ranges(slice_), _ranges(op)
    if not (_unstrided(outer) and _unstrided(inner)):
        return
    merged = [(s + i0, lim + i0, 1) for (s, lim, _), (i0, _, _) in zip(outer, inner)]
    v.replace_with_new(slice_, v.new("slice", slice_.shape, [op.operands[0]],
                                     slice=format_slice(merged)))


__all__ = ["handle_slice"]
