"""Whether the block-level (generic Triton) emitter can tile the reshapes of
a fusion: the part of XLA's ``TritonEmitterConstraints`` that
``SymbolicTileAnalysis`` applies to bitcasts and reshapes.

Triton tiles are padded to powers of two.  For every bitcast/reshape in a
generic Triton fusion, XLA evaluates the constraints of the reshape's own
symbolic tile (derived from its output-to-input indexing map) on the
*padded* output tile sizes.  Collapsing input dimensions ``[a1, ..., ak]``
into one output dimension indexes input dimension ``i`` with
``(d floordiv s_i) mod a_i``; a tile of padded size ``p`` along ``d`` is
tileable only if ``p`` and every modulus divide one another.

The tile of a dimension a reduce reduces is the whole dimension, so a
reshape that collapses two or more non-degenerate dimensions into a reduced
dimension whose size ``n`` is not a power of two is never tileable:
``p = 2^ceil(log2 n)`` is a multiple of no non-power-of-two modulus and
larger than the moduli.  Example (mlp_train_mixed): the loss
``reduce(bitcast f32[256,10] -> f32[2560])`` cannot join the log-softmax
``__triton`` fusion, and XLA keeps it as a native reduction kernel.

A column reduction (one that keeps the minor dimension) computed from a
row reduction's result (which reduced it) would need both reduced extents
in one tile -- one block, or the row reduction recomputed per output tile;
no XLA ``__triton`` fusion in the dumps has one (XLA's tiled cost model
rejects them), so :func:`column_after_row` refuses such fusions (gpt_ln's
layer-norm gradient keeps its bias/scale gradient sums apart).

Simplification (stated): only reshapes whose result reaches a reduce's
reduced dimension through same-shape elementwise ops inside one fusion unit
are checked; dimensions the tiling search may tile freely (powers of two,
down to 1) always admit a tiling that satisfies the constraints.
"""

from __future__ import annotations

from ..ir.module import Instruction
from ..ir.opcode import ELEMENTWISE


def _pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def collapsed_groups(in_dims, out_dims) -> dict[int, list[int]]:
    """Output dimension -> the input dimension sizes it collapses (only
    output dimensions formed from two or more input dimensions, none of a
    many-to-many group)."""
    out: dict[int, list[int]] = {}
    i = j = 0
    n_in, n_out = len(in_dims), len(out_dims)
    while i < n_in and j < n_out:
        gi, gj = [i], [j]
        pi, pj = in_dims[i], out_dims[j]
        i += 1
        j += 1
        while pi != pj:
            if pi < pj:
                if i >= n_in:
                    return out
                pi *= in_dims[i]
                gi.append(i)
                i += 1
            else:
                if j >= n_out:
                    return out
                pj *= out_dims[j]
                gj.append(j)
                j += 1
        if len(gj) == 1 and len(gi) > 1:
            out[gj[0]] = [in_dims[k] for k in gi]
    return out


def _reshape_feeding(op: Instruction, members: set) -> Instruction | None:
    """The bitcast/reshape member whose result reaches ``op`` through
    same-shape elementwise members, or None."""
    seen = 0
    while op in members and seen < 64:
        if op.opcode in ("bitcast", "reshape"):
            return op
        if op.opcode not in ELEMENTWISE or not op.operands:
            return None
        nxt = [o for o in op.operands if o.shape.is_array
               and tuple(o.shape.dimensions) == tuple(op.shape.dimensions)]
        if len(nxt) != 1:
            return None
        op = nxt[0]
        seen += 1
    return None


def untileable_reshape(instructions) -> str | None:
    """Why the Triton emitter cannot tile a reshape among ``instructions``
    (one fusion body's or unit's members), or None."""
    members = set(instructions)
    for r in instructions:
        if r.opcode != "reduce" or r.shape.is_tuple:
            continue
        src = _reshape_feeding(r.operands[0], members)
        if src is None or not src.operands[0].shape.is_array:
            continue
        dims = tuple(src.shape.dimensions)
        groups = collapsed_groups(tuple(src.operands[0].shape.dimensions), dims)
        for d in r.dimensions:
            sizes = [s for s in groups.get(d, ()) if s != 1]
            if len(sizes) > 1 and not _pow2(dims[d]):
                return (f"{src.name}: collapsing {sizes} into the reduced dimension {d} "
                        f"({dims[d]}, padded to a power of two) cannot be tiled")
    return None


def untileable(instructions) -> str | None:
    """:func:`untileable_reshape` or :func:`column_after_row` on one fusion
    body or unit (``instructions`` in post order)."""
    return untileable_reshape(instructions) or column_after_row(instructions)


def _is_row(reduce: Instruction) -> bool | None:
    from .priority_fusion.analysis import reduction_dims
    if reduce.shape.is_tuple or not reduce.operands[0].shape.is_array:
        return None
    return reduction_dims(reduce).is_row


def _row_reduced(instructions) -> dict:
    """Member -> whether its value depends on a row reduction (among
    ``instructions``, in post order)."""
    members = set(instructions)
    after: dict[Instruction, bool] = {}
    for i in instructions:
        after[i] = any(after.get(o, False) for o in i.operands if o in members) or (
            i.opcode == "reduce" and bool(_is_row(i)))
    return after


def column_after_row(instructions, seeds=()) -> str | None:
    """Why a column reduction among ``instructions`` (post order) reads a
    row reduction's result, or None; ``seeds``: members whose values come
    from a row reduction outside (a fused producer's)."""
    members = set(instructions)
    after: dict[Instruction, bool] = {s: True for s in seeds}
    for i in instructions:
        up = after.get(i, False) or any(after.get(o, False) for o in i.operands if o in members
                                         or o in after)
        if i.opcode == "reduce" and up and _is_row(i) is False:
            return (f"{i.name}: a column reduction of a row reduction's result cannot be "
                    f"tiled (both reduced extents in one tile)")
        after[i] = up or (i.opcode == "reduce" and bool(_is_row(i)))
    return None


def _order(body, members=None) -> list:
    """A fusion body's instructions in post order (``members``: a cache of
    them without the parameters, which neither walk below needs)."""
    return members(body) if members is not None else body.post_order()


def producer_after_row(unit: Instruction, members=None) -> bool:
    """Whether ``unit``'s (a fusion's or an instruction's) value depends on a
    row reduction (``members``: as for :func:`_order`)."""
    if unit.opcode != "fusion":
        return unit.opcode == "reduce" and bool(_is_row(unit))
    body = unit.fused_computation
    return _row_reduced(_order(body, members)).get(body.root, False)


def tiling_facts(unit: Instruction, members=None) -> tuple[bool, bool]:
    """(:func:`producer_after_row`, whether a column reduction is among its
    instructions) of ``unit``: what :func:`consumer_refuses` asks of a unit."""
    if unit.opcode != "fusion":
        return producer_after_row(unit), unit.opcode == "reduce" and _is_row(unit) is False
    order = _order(unit.fused_computation, members)
    return producer_after_row(unit, members), any(
        i.opcode == "reduce" and _is_row(i) is False for i in order)


def consumer_refuses(producer: Instruction, consumer: Instruction, members=None,
                     facts=None) -> str | None:
    """:func:`column_after_row` for ``producer`` fused into ``consumer``
    (``members``: as for :func:`_order`; ``facts``: a cache of
    :func:`tiling_facts`)."""
    if facts is not None:
        if not facts(producer)[0] or not facts(consumer)[1]:
            return None  # no row reduction to read, or no column reduction reading it
    elif not producer_after_row(producer):
        return None
    if consumer.opcode != "fusion":
        if consumer.opcode == "reduce" and _is_row(consumer) is False:
            return (f"{consumer.name}: a column reduction of a row reduction's result "
                    f"cannot be tiled (both reduced extents in one tile)")
        return None
    body = consumer.fused_computation
    seeds = [body.parameters[n] for n, o in enumerate(consumer.operands) if o is producer]
    return column_after_row(_order(body, members), seeds)


__all__ = ["collapsed_groups", "column_after_row", "consumer_refuses", "untileable",
           "untileable_reshape"]
