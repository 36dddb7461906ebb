"""topk-rewriter: XLA's TopkRewriter (xla/service/topk_rewriter.cc), which
GpuCompiler runs in its pre-SPMD pipeline right after the TopkDecomposer
(with a profitability callback that always says yes), so every top-k --
``lax.top_k``'s ``topk`` and hand-written sort+slice patterns alike --
becomes one ``TopK`` custom call that the optimization pipeline's
topk-splitter / topk-specializer / topk-decomposer then lower.

A ``sort`` is a top-k (``SortIsInTopK``) when

* it has one operand, or two whose second is an s32 ``iota`` of the data's
  dimensions or a ``broadcast`` of an s32 ``iota`` of the sort dimension's
  size (``HasIota``: the index operand of ``xla/client/lib/sorting.cc``);
* its comparator is a NaN-safe greater-than (``IsNanSafeGt``): ``p0 > p1``
  on bf16/f32/s32/u32 parameters, ``select(true, p0 > p1, true)``, or ``>``
  of the total-order integer images of f32/bf16 parameters (``s < 0 ?
  max xor s : s`` or ``s < 0 ? bitcast(max - u) : s``, optionally of a
  bf16->f32 convert) -- the comparators jax/XLA's own builders emit;
* every user is a ``slice`` (through a ``get-tuple-element`` with that one
  user for two operands) starting at 0 with stride 1, cutting only the sort
  dimension, all to the same ``k``;
* the data is f32 or bf16 and the sort dimension is the first or the last.

The call (``CreateTopKCustomCall``) takes ``[n]`` or ``[batch, n]``: other
ranks are reshaped to two dimensions (non-sort dimensions merged into the
batch) and a sort along dimension 0 is transposed; the values and indices
are transposed / reshaped back.  Its comparator is the sort's, and its
backend config records the sort's stability (``{is_stable = true}``, as
XLA's dumps print it on ``__gpu$TopK``).  The slices' users read the call's
results; the sort and slices are removed.  New instructions take the sort's
metadata.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..ir.attrs import parse_slice
from ..ir.edit import remove_dead
from ..ir.module import Computation, Instruction, Module, has_opcode
from ..ir.shape import Shape
from .base import Pass
from .topk_util import TOPK_TARGET, derived, gte, make_topk_call

_INT_MAX = {"s32": (1 << 31) - 1, "s16": (1 << 15) - 1}


def _param(i: Instruction, n: int, types: tuple[str, ...]) -> bool:
    return i.opcode == "parameter" and i.parameter_number == n and i.shape.element_type in types


def _cmp(i: Instruction, direction: str) -> bool:
    return i.opcode == "compare" and i.attrs.get("direction") == direction


def _const(i: Instruction, value: int) -> bool:
    if i.opcode == "broadcast" and i.operands and i.operands[0].opcode == "constant":
        i = i.operands[0]
    if i.opcode != "constant" or i.shape.rank != 0 or i.literal is None:
        return False
    return i.literal.is_scalar_value(value)


def _float_source(i: Instruction, n: int) -> bool:
    """``p_n`` (f32 / bf16) or ``convert(p_n: bf16) -> f32``."""
    if _param(i, n, ("f32", "bf16")):
        return True
    return (i.opcode == "convert" and i.shape.element_type == "f32"
            and _param(i.operands[0], n, ("bf16",)))


def _bitcast_of(i: Instruction, n: int, int_types: tuple[str, ...]) -> bool:
    return (i.opcode == "bitcast-convert" and i.shape.element_type in int_types
            and _float_source(i.operands[0], n))


def _ordered_image(i: Instruction, n: int) -> bool:
    """``select(s < 0, flip(s), s)`` with ``s = bitcast-convert(p_n)``."""
    if i.opcode != "select":
        return False
    pred, flipped, s = i.operands
    if not (_bitcast_of(s, n, ("s32", "s16")) and _cmp(pred, "LT")
            and _bitcast_of(pred.operands[0], n, ("s32", "s16")) and _const(pred.operands[1], 0)):
        return False
    limit = _INT_MAX[s.shape.element_type]
    if flipped.opcode == "xor":  # generic iec559: max xor s (either order)
        a, b = flipped.operands
        return (_const(a, limit) and _bitcast_of(b, n, ("s32", "s16"))) or \
               (_const(b, limit) and _bitcast_of(a, n, ("s32", "s16")))
    if flipped.opcode == "bitcast-convert":  # bitcast(max - bitcast<u32>(p))
        sub = flipped.operands[0]
        if sub.opcode != "subtract":
            return False
        a, b = sub.operands
        if a.opcode == "convert":
            a = a.operands[0]
        return _const(a, limit) and _bitcast_of(b, n, ("u32",))
    return False


def is_nan_safe_gt(comp: Computation) -> bool:
    """``IsNanSafeGt``."""
    root = comp.root
    if root is None:
        return False
    scalar_types = ("bf16", "f32", "s32", "u32")
    if _cmp(root, "GT"):
        a, b = root.operands
        if _ordered_image(a, 0) and _ordered_image(b, 1):
            return True
        return any(_param(a, 0, (t,)) and _param(b, 1, (t,)) for t in scalar_types)
    if root.opcode == "select":  # default compare: select(true, p0 > p1, true)
        t, gt, f = root.operands
        if t.opcode == "broadcast" and f.opcode == "broadcast" and \
                t.operands[0].opcode == "constant" and f.operands[0].opcode == "constant" \
                and _cmp(gt, "GT"):
            a, b = gt.operands
            return any(_param(a, 0, (ty,)) and _param(b, 1, (ty,)) for ty in scalar_types) \
                and comp.num_parameters == 4
    return False


def _has_iota(sort: Instruction, data: Instruction) -> bool:
    idx = sort.operands[1]
    if idx.opcode == "iota" and idx.shape.element_type == "s32" \
            and idx.shape.dimensions == data.shape.dimensions:
        return True
    n = data.shape.dimensions[sort.dimensions[0]]
    return (idx.opcode == "broadcast" and idx.operands[0].opcode == "iota"
            and idx.operands[0].shape.element_type == "s32"
            and idx.operands[0].shape.dimensions == (n,))


def sort_is_in_topk(sort: Instruction) -> int | None:
    """``SortIsInTopK``: k, or None."""
    if sort.opcode != "sort" or len(sort.operands) not in (1, 2):
        return None
    data = sort.operands[0]
    if len(sort.operands) == 2 and not _has_iota(sort, data):
        return None
    if sort.to_apply is None or not is_nan_safe_gt(sort.to_apply):
        return None
    dim = sort.dimensions[0]
    k = None
    for user in sort.users:
        sl = user
        if len(sort.operands) == 2:
            if user.opcode != "get-tuple-element" or user.user_count != 1:
                return None
            sl = user.users[0]
        if sl.opcode != "slice":
            return None
        ranges = parse_slice(sl.attrs["slice"])
        if any(s != 0 or st != 1 for s, _, st in ranges):
            return None
        if any(i != dim and lim != sl.operands[0].shape.dimensions[i]
               for i, (_, lim, _) in enumerate(ranges)):
            return None
        if k is not None and k != ranges[dim][1]:
            return None
        k = ranges[dim][1]
    return k


def create_topk_call(sort: Instruction, k: int) -> tuple[Instruction, Instruction, Instruction]:
    """``CreateTopKCustomCall``: (call, values, indices) in the sort's shapes."""
    comp = sort.parent
    x = sort.operands[0]
    shape = x.shape
    t = shape.element_type
    dim = sort.dimensions[0]
    n = shape.dimensions[dim]
    has_batch = shape.rank >= 2
    batch = math.prod(shape.dimensions) // n if n else 0
    if has_batch:
        if shape.rank > 2:
            x = derived(sort, comp, "reshape", Shape.array(t, [n, batch] if dim == 0 else [batch, n]), [x])
        if dim == 0:
            x = derived(sort, comp, "transpose", Shape.array(t, [batch, n]), [x], dimensions="{1,0}")
        out = [Shape.array(t, [batch, k]), Shape.array("s32", [batch, k])]
    else:
        out = [Shape.array(t, [k]), Shape.array("s32", [k])]
    config = "{is_stable = true}" if sort.attrs.get("is_stable") == "true" else None
    call = make_topk_call(sort, comp, Shape.tuple(out), x, sort.to_apply, TOPK_TARGET, config)
    values, indices = gte(sort, call, 0), gte(sort, call, 1)
    if has_batch:
        if dim == 0:
            values = derived(sort, comp, "transpose", Shape.array(t, [k, batch]), [values],
                             dimensions="{1,0}")
            indices = derived(sort, comp, "transpose", Shape.array("s32", [k, batch]), [indices],
                              dimensions="{1,0}")
        if shape.rank > 2:
            dims = list(shape.dimensions)
            dims[dim] = k
            values = derived(sort, comp, "reshape", Shape.array(t, dims), [values])
            indices = derived(sort, comp, "reshape", Shape.array("s32", dims), [indices])
    return call, values, indices


_SORT = frozenset({"sort"})


@dataclass(frozen=True)
class TopkRewriter(Pass):
    """Rewrite sort + slice top-k patterns into TopK custom calls."""

    name = "topk-rewriter"

    def run(self, module: Module) -> bool:
        changed = False
        for comp in list(module.computations):
            if not has_opcode(comp, _SORT):
                continue
            for sort in comp.post_order():
                if sort.parent is not comp or sort.opcode != "sort":
                    continue
                k = sort_is_in_topk(sort)
                if k is None:
                    continue
                data = sort.operands[0]
                dim = sort.dimensions[0]
                if data.shape.element_type not in ("f32", "bf16") or \
                        dim not in (0, data.shape.rank - 1):
                    continue
                call, values, indices = create_topk_call(sort, k)
                slices = []
                for user in list(sort.users):
                    if len(sort.operands) == 2:
                        for sl in list(user.users):
                            sl.replace_all_uses_with(values if user.tuple_index == 0 else indices)
                            slices.append(sl)
                    else:
                        user.replace_all_uses_with(values)
                        slices.append(user)
                remove_dead(comp, slices)
                self.remark(call, f"{sort.name} with slices to k={k} became a {TOPK_TARGET} "
                                  f"custom call", derived_from=[sort.name])
                changed = True
        return changed


__all__ = ["TopkRewriter", "create_topk_call", "is_nan_safe_gt", "sort_is_in_topk"]
