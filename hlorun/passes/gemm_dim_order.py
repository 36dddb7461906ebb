"""Dimension orders for Triton GEMM fusion: the part of XLA's
triton_tiling_propagation.cc (``DimensionOrder``, ``GetPropagatedDimOrders``,
``IsSupportedDimOrder``) that decides whether a bitcast, reshape or transpose
next to a dot can join its fusion.

Each dimension of a tensor in a GEMM fusion is labelled with the dot
dimension it carries -- batch, contracting, or non-contracting (for the
output: batch, lhs or rhs non-contracting) -- and its place inside it (a
dot dimension split by a bitcast gets one key per piece, major first).
Labels travel from the dot toward the operands (through the op that would
be fused, onto its operand) and toward the users.  The Triton GEMM emitter
tiles each dot dimension as one linear index, so a tensor is supported only
if, in its physical order, the pieces of every dot dimension are adjacent
(size-1 dimensions aside) and in their logical order.  Fusing a transpose
that interleaves them -- attention's ``bthd -> bhtd`` head transpose in front
of a batched dot over (b, h) -- is refused: XLA leaves such transposes as
kernels of their own, and so does hlorun.
"""

from __future__ import annotations

from ..ir.module import Instruction
from ..ir.opcode import ELEMENTWISE

Order = dict[int, list]  # tensor dimension -> [(label, size)] fragments, major first


def _frag(shape, d: int, label: tuple) -> list:
    return [(label, shape.dimensions[d])]


def operand_order(dot: Instruction, index: int) -> Order:
    shape = dot.operands[index].shape
    side = "lhs" if index == 0 else "rhs"
    batch = dot.int_list(f"{side}_batch_dims")
    contracting = dot.int_list(f"{side}_contracting_dims")
    order: Order = {}
    for k, d in enumerate(batch):
        order[d] = _frag(shape, d, ("b", k))
    for k, d in enumerate(contracting):
        order[d] = _frag(shape, d, ("k", k))
    k = 0
    for d in range(shape.rank):
        if d not in order:
            order[d] = _frag(shape, d, ("n", k))
            k += 1
    return order


def output_order(dot: Instruction) -> Order:
    lhs, rhs = dot.operands[0].shape, dot.operands[1].shape
    nb = len(dot.int_list("lhs_batch_dims"))
    nl = lhs.rank - nb - len(dot.int_list("lhs_contracting_dims"))
    nr = rhs.rank - nb - len(dot.int_list("rhs_contracting_dims"))
    shape = dot.shape
    order: Order = {}
    for d in range(nb):
        order[d] = _frag(shape, d, ("b", d))
    for k in range(nl):
        order[nb + k] = _frag(shape, nb + k, ("m", k))
    for k in range(nr):
        order[nb + nl + k] = _frag(shape, nb + nl + k, ("n", k))
    return order


def _physical(shape) -> list[int]:
    return list(reversed(shape.minor_to_major))


def _reshape(src_shape, src_order: Order, dst_shape) -> Order | None:
    """Fragments of ``dst``'s dims, for a layout-preserving reshape from ``src``."""
    frags: list = []
    for d in _physical(src_shape):
        frags += [f for f in src_order.get(d, [(("u",), src_shape.dimensions[d])])]
    out: Order = {}
    i = 0
    for d in _physical(dst_shape):
        size = dst_shape.dimensions[d]
        mine: list = []
        got = 1
        while got < size:
            if i >= len(frags):
                return None
            label, f = frags[i]
            need = size // got
            if size % got:
                return None
            if f <= need:
                if need % f:
                    return None
                mine.append((label, f))
                got *= f
                i += 1
            else:
                if f % need:
                    return None
                mine.append((label + (0,), need))
                frags[i] = (label + (1,), f // need)
                got *= need
        out[d] = mine if mine else [(("u",), 1)]
    return out


def to_operand(instr: Instruction, order: Order, operand_index: int = 0) -> Order | None:
    """Fragments of ``instr``'s operand given those of ``instr``'s output."""
    op = instr.operands[operand_index]
    if instr.opcode == "transpose":
        return {src: order[i] for i, src in enumerate(instr.dimensions)}
    if instr.opcode in ("bitcast", "reshape"):
        if op.shape.layout is None or instr.shape.layout is None:
            return None
        return _reshape(instr.shape, order, op.shape)
    if instr.opcode == "broadcast":
        return _broadcast_operand(instr, order)
    if instr.opcode == "concatenate":
        return _concatenate_operand(instr, order, operand_index)
    if instr.opcode in ELEMENTWISE or instr.opcode in ("slice", "copy"):
        if op.shape.is_array and op.shape.rank == instr.shape.rank:
            if instr.opcode == "slice":
                return _slice_operand(instr, op, order)
            return dict(order)
        return {}
    return None


def _dot_dim(label: tuple) -> tuple:
    """The dot dimension a fragment belongs to (its label without the
    piece indices a split added)."""
    return label[:2]


def _broadcast_operand(instr: Instruction, order: Order) -> Order | None:
    """XLA's kBroadcast propagation toward the operand: the operand keeps the
    fragments of the dimensions it has; a broadcast that creates a piece
    (size > 1) of a dot dimension whose other pieces the operand still
    carries is refused ("Unsupported broadcast") -- GQA's repeat of the KV
    heads, [b, kv, d, s] -> [b, kv, group, d, s] read as batch b*kv*group,
    stays a kernel of its own."""
    out = {j: order[d] for j, d in enumerate(instr.dimensions)}
    present = {_dot_dim(label) for frags in out.values() for label, size in frags
               if size > 1 and label[0] != "u"}
    kept = set(instr.dimensions)
    for d, frags in order.items():
        if d in kept:
            continue
        if any(size > 1 and label[0] != "u" and _dot_dim(label) in present for label, size in frags):
            return None
    return out


def _slice_operand(instr: Instruction, op, order: Order) -> Order | None:
    """XLA's kSlice propagation: only a dimension the slice shortens must be
    one fragment ("Slicing of fragmented dimension"), whose size becomes the
    operand's; a slice to an effective scalar is refused."""
    if all(d == 1 for d in instr.shape.dimensions):
        return None
    out: Order = {}
    for d, frags in order.items():
        if op.shape.dimensions[d] == instr.shape.dimensions[d]:
            out[d] = frags
        elif len(frags) != 1:
            return None
        else:
            out[d] = [(frags[0][0], op.shape.dimensions[d])]
    return out


#: XLA's kMinConcatFragmentSize: every concatenated piece must be a whole
#: number of tiles along the concatenated dimension.
MIN_CONCAT_FRAGMENT = 64


def _concatenate_operand(instr: Instruction, order: Order, k: int) -> Order | None:
    """A concatenate joins a GEMM fusion only along the operand's one
    non-contracting dimension, unsplit, with pieces that are multiples of
    64 elements (triton_tiling_propagation: "Unsupported concatenation",
    "Concatenations on split non-contracting dimensions are unsupported")."""
    dim = instr.dimensions[0]
    nc = [(d, f) for d, frags in order.items() for f in frags if f[0][0] == "n" and f[1] != 1]
    if len(nc) != 1 or nc[0][0] != dim or len([f for f in order[dim] if f[1] != 1]) != 1:
        return None
    if any(o.shape.dimensions[dim] % MIN_CONCAT_FRAGMENT for o in instr.operands):
        return None
    out = dict(order)
    label = nc[0][1][0]
    out[dim] = [(label, instr.operands[k].shape.dimensions[dim])]
    return out


def to_user(user: Instruction, src: Instruction, order: Order) -> Order | None:
    """Fragments of ``user``'s output given those of its operand ``src``."""
    if user.opcode == "transpose":
        return {i: order[s] for i, s in enumerate(user.dimensions)}
    if user.opcode in ("bitcast", "reshape"):
        if src.shape.layout is None or user.shape.layout is None:
            return None
        return _reshape(src.shape, order, user.shape)
    if user.opcode in ELEMENTWISE and user.shape.rank == src.shape.rank:
        return dict(order)
    return None


_NAMES = {"b": "batch", "k": "contracting", "n": "non-contracting", "m": "non-contracting"}


def unsupported(shape, order: Order) -> str | None:
    """Why Triton cannot tile ``shape`` with these fragments (None: it can)."""
    if not shape.is_array or shape.layout is None:
        return None
    seq = [f for d in _physical(shape) for f in order.get(d, []) if f[1] != 1 and f[0][0] != "u"]
    seen: dict[str, tuple] = {}
    closed: set[str] = set()
    prev = None
    for label, _ in seq:
        cat = label[0]
        if cat != prev:
            if cat in closed:
                return f"the {_NAMES.get(cat, cat)} dimension is split by another dimension of the dot"
            if prev is not None:
                closed.add(prev)
        if cat in seen and label < seen[cat]:
            return "the pieces of a dot dimension are out of order"
        seen[cat] = label
        prev = cat
    return None


__all__ = ["operand_order", "output_order", "to_operand", "to_user", "unsupported"]
