"""Whether XLA's ``SymbolicTileAnalysis`` can derive a symbolic tile for
every instruction of a generic Triton fusion: the
``SymbolicTile::FromIndexingMap`` step (xla/codegen/tiling/
size_and_stride_expression.cc) that hlorun's other tiling checks
(:mod:`.triton_tiling`) leave out.

The analysis composes, for every instruction reached from the fusion root
(fusion operands included), the indexing map from the root's index
``(d0, ..., dn)`` to that instruction's index, simplifies it, and extracts
from each result expression (less its offset) a size and a stride:

* a single summand ``d``, ``d * c``, ``d mod c``, ``d floordiv c`` or
  ``(d floordiv a) mod c`` of a root dimension always has one; a reduce's
  range variable ``s`` only whole (``s mod c`` and ``s floordiv c`` fail);
* a sum of two or more summands (a reshape or bitcast collapsing dimensions
  reached with several root dimensions) has one only if every summand's size
  is a constant or exactly a root dimension (``CombineStrides``): ``d * c``
  or whole range variables, not ``d floordiv c`` / ``d mod c``; and, sorted
  by stride, each stride must be the next one times its range.

A transpose between two reshapes is what breaks it in practice: swin's
window layer norm reads ``x`` through ``bitcast -> transpose -> bitcast``,
so the index of ``x``'s second dimension is
``((d0 floordiv 4) mod 4) * 8 + d1 floordiv 8``.  XLA's priority fusion
therefore keeps the window transposes (and the mean reduce read through
them) out of the Triton normalization fusion: no ``__triton`` fusion in the
XLA dumps has a transpose feeding a reduce.

Representation: each dimension index is a sum of *digits*
``((v floordiv div) mod size) * mult`` of one variable ``v`` (a root
dimension or a reduce's range variable); reshapes re-split the digits of the
linear (physical) index at the operand's dimension boundaries.  Digits of a
variable that follow one another merge (as XLA's simplifier folds
``(d floordiv 4) * 4 + d mod 4`` into ``d``).  Ops whose indexing is not
modelled here (pad, concatenate, gather, dot, dynamic slices, ...) end the
walk along that path without a refusal (stated simplification).
"""

from __future__ import annotations

import math

from ..ir.module import Instruction
from ..ir.opcode import ELEMENTWISE

_PASS_THROUGH = ELEMENTWISE | {"convert", "copy"}
_REGROUP_CHAIN = frozenset({"bitcast", "reshape", "convert", "copy"})


def _norm(pieces) -> tuple:
    """Drop size-1 digits and merge consecutive digits of one variable."""
    ps = sorted((p for p in pieces if p[2] > 1), key=lambda p: (p[0], p[1]))
    out: list = []
    for p in ps:
        if out:
            v, div, size, mult = out[-1]
            if v == p[0] and p[1] == div * size and p[3] == mult * size:
                out[-1] = (v, div, size * p[2], mult)
                continue
        out.append(p)
    return tuple(sorted(out, key=lambda p: -p[3]))


def _dim_ok(pieces) -> bool:
    """``ExtractSizeAndStride`` succeeds on one normalized dimension index
    (a variable's last element is its range)."""
    if not pieces:
        return True
    whole = [p[1] == 1 and p[2] >= p[0][-1] for p in pieces]
    if len(pieces) == 1:
        return whole[0] or p_is_dim(pieces[0])
    if not all(whole):
        return False
    for prev, cur in zip(pieces, pieces[1:]):
        if cur[0][-1] * cur[3] != prev[3]:
            return False
    return True


def p_is_dim(piece) -> bool:
    return piece[0][0] == "d"


def _physical(shape) -> list[int]:
    """Logical dimensions from minor to major."""
    lay = shape.layout
    if lay is not None and len(lay.minor_to_major) == len(shape.dimensions):
        return list(lay.minor_to_major)
    return list(reversed(range(len(shape.dimensions))))


def _reshape(instr: Instruction, index) -> tuple | None:
    """The operand index of a bitcast/reshape (None: not modelled)."""
    out_shape, in_shape = instr.shape, instr.operands[0].shape
    digits = []  # (var, div, size, place)
    place = 1
    for d in _physical(out_shape):
        n = out_shape.dimensions[d]
        expect = 1
        for v, div, size, mult in sorted(index[d], key=lambda p: p[3]):
            if mult != expect:
                return None
            digits.append((v, div, size, place * mult))
            expect = mult * size
        if expect > n:
            return None
        place *= n
    bounds = []
    place = 1
    for d in _physical(in_shape):
        bounds.append((d, place, place * in_shape.dimensions[d]))
        place *= in_shape.dimensions[d]
    cuts = {b for _, b, _ in bounds}
    split = []
    for v, div, size, p in digits:
        while True:
            cut = next((c for c in sorted(cuts) if p < c < p * size), None)
            if cut is None:
                break
            if cut % p or size % (cut // p):
                return None
            k = cut // p
            split.append((v, div, k, p))
            v, div, size, p = v, div * k, size // k, cut
        split.append((v, div, size, p))
    result = [[] for _ in in_shape.dimensions]
    for v, div, size, p in split:
        for d, lo, hi in bounds:
            if lo <= p < hi:
                if p % lo:
                    return None
                result[d].append((v, div, size, p // lo))
                break
    return tuple(_norm(r) for r in result)


def operand_indices(instr: Instruction, index, fresh) -> list | None:
    """Per operand, its index reached from ``instr``'s ``index`` (None: the
    op's indexing is not modelled); ``fresh(instr, dim, size)``: a reduce's
    range variable."""
    op = instr.opcode
    if op in _PASS_THROUGH:
        return [index if o.shape.is_array and len(o.shape.dimensions) == len(index) else None
                for o in instr.operands]
    if op == "broadcast":
        return [tuple(index[d] for d in instr.dimensions)]
    if op == "transpose":
        perm = instr.dimensions
        out = [()] * len(perm)
        for j, p in enumerate(perm):
            out[p] = index[j]
        return [tuple(out)]
    if op in ("bitcast", "reshape"):
        return [_reshape(instr, index)]
    if op == "slice":
        from ..ir.attrs import parse_slice
        try:
            spec = parse_slice(instr.attrs["slice"])
        except Exception:
            return None
        out = []
        for d, pieces in enumerate(index):
            stride = spec[d][2] if len(spec[d]) > 2 else 1
            out.append(_norm((v, div, size, mult * stride) for v, div, size, mult in pieces))
        return [tuple(out)]
    if op == "reduce" and not instr.shape.is_tuple and len(instr.operands) == 2:
        src = instr.operands[0].shape
        reduced = set(instr.dimensions)
        kept = iter(index)
        out = []
        for d, n in enumerate(src.dimensions):
            out.append(fresh(instr, d, n) if d in reduced else next(kept))
        return [tuple(out), ()]
    return None


def fresh(instr, d, n):
    """A reduce's range variable (its last element: its range; variables
    compare as before it was added, as equal prefixes mean equal ranges)."""
    return (((("s", id(instr), d, n)), 1, n, 1),) if n > 1 else ()


def root_index(root: Instruction) -> tuple:
    """The index of the fusion root: ``(d0, ..., dn)``, each variable with
    its range as last element."""
    return tuple(_norm([(("d", k, n), 1, n, 1)]) for k, n in enumerate(root.shape.dimensions))


def untileable_indexing(root: Instruction, inside, link=None) -> str | None:
    """Why ``SymbolicTileAnalysis`` cannot tile the fusion whose root is
    ``root``, or None.  ``inside(x)``: whether ``x`` is an instruction of
    the fusion being formed (others are its operands: checked, not walked
    through); ``link(x)``: for a fusion parameter (or an operand that is a
    fusion) ``x``, the instruction it stands for (a fused producer's root, or
    the fusion's operand)."""
    start = root_index(root)

    seen = set()
    stack = [(root, tuple(start))]
    while stack:
        instr, index = stack.pop()
        key = (id(instr), index)
        if key in seen:
            continue
        seen.add(key)
        # a bitcast/reshape/convert/copy inside the fusion is not checked
        # itself: its operand's index is, and a round trip through reshapes
        # that recombines there (bf16[512,384] -> [4,128,384] -> convert ->
        # [512,384]) is what XLA's simplifier leaves as one plain column
        # (gpt_ln_3l's layer-norm gradient sums: Triton, 7 of 7)
        check = instr.opcode not in _REGROUP_CHAIN or not inside(instr)
        for d, pieces in enumerate(index if check else ()):
            if not _dim_ok(pieces):
                return (f"{instr.name}: no symbolic tile for its index along dimension {d} "
                        f"(a reshape of a transposed or split index)")
        if not inside(instr):
            continue
        if instr.opcode == "parameter":
            nxt = link(instr) if link is not None else None
            if nxt is not None:
                stack.append((nxt, index))
            continue
        got = operand_indices(instr, index, fresh)
        if got is None:
            continue
        for o, idx in zip(instr.operands, got):
            if idx is not None and o.shape.is_array and len(idx) == len(o.shape.dimensions):
                stack.append((link(o) if link is not None and o.opcode == "fusion" else o, idx))
    return None


def fused_pair_refusal(producer: Instruction, consumer: Instruction) -> str | None:
    """:func:`untileable_indexing` for ``producer`` fused into ``consumer``
    (either may be a fusion or a single instruction)."""
    if consumer.shape.is_tuple or producer.shape.is_tuple:
        return None
    links: dict = {}
    bodies = []
    for unit in (consumer, producer):
        if unit.opcode == "fusion":
            body = unit.fused_computation
            bodies.append(body)
            for p in body.parameters:
                if p is not None:
                    links[p] = unit.operands[p.parameter_number]
    p_root = producer.fused_computation.root if producer.opcode == "fusion" else producer
    units = {producer, consumer}

    def inside(x):
        return any(x.parent is b for b in bodies) or (x in units and x.opcode != "fusion")

    def link(x):
        src = links.get(x, x)
        return p_root if src is producer else src

    root = consumer.fused_computation.root if consumer.opcode == "fusion" else consumer
    return untileable_indexing(root, inside, link)


__all__ = ["fused_pair_refusal", "operand_indices", "untileable_indexing"]
