"""algsimp's reduce rewrites (XLA's ``AlgebraicSimplifierVisitor::HandleReduce``),
in XLA's order; the rewrites XLA has that are not listed here are not
implemented (reduce of concatenate, of dot, of broadcast, arg-min/max of a
broadcast constant):

* a zero-element input or result -> ``broadcast(init)``;
* a reduce that keeps the element count -> a reshape (layout-sensitive:
  only where that reshape is a bitcast);
* (the rest runs only layout-insensitive)
* ``reduce(negate(x), 0, add)`` on floats -> ``negate(reduce(x))``;
* single-output only: ``reduce(transpose(x))`` reduces ``x``'s dimensions
  (plus a transpose of the result when the kept dimensions change order),
  when the result has rank < 2, the transpose has one user, or all its
  users are reduces -- or always, with
  ``unconditionally_simplify_reduce_of_transpose_or_reshape`` (XLA:GPU's
  setting, the default here);
* ``reduce(reduce(x))`` with the same init value and an equivalent reducer
  (the same computation, or both add / multiply / and / or of the two
  parameters) -> one reduce over both sets of dimensions;
* ``reduce(reshape(x))``: when every kept dimension is one the reshape
  leaves alone, reduce ``x`` directly; when every reduced dimension is one
  the reshape leaves alone (and the reshape has one user, or always with
  that option), reduce ``x`` and reshape the result;
* a max (min) reduce with init -inf (+inf) next to an argmax (argmin) of the
  same input over the same dimensions -> element 0 of the argmax
  (``argminmax.py``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ...ir.attrs import format_int_list
from ...ir.module import Computation, Instruction
from ...ir.shape import (Shape, delete_dimensions, dimensions_unmodified_by_reshape,
                         is_floating, reshape_is_bitcast)
from ..dfs_rewrite import add_instruction
from .argminmax import share_with_arg

if TYPE_CHECKING:
    from .visitor import AlgsimpVisitor

_COMMUTATIVE = {"add": "add", "multiply": "mul", "and": "and", "or": "or"}


def _reducer_kind(comp: Computation) -> str | None:
    params = [p for p in comp.parameters if p is not None]
    if len(params) != 2:
        return None
    root = comp.root
    if root.opcode not in _COMMUTATIVE or len(root.operands) != 2:
        return None
    if {o.parameter_number for o in root.operands if o.opcode == "parameter"} != {0, 1}:
        return None
    return _COMMUTATIVE[root.opcode]


def reducers_equivalent(a: Computation, b: Computation) -> bool:
    """``ReductionComputationsEquivalent``."""
    if a is b:
        return True
    ka, kb = _reducer_kind(a), _reducer_kind(b)
    return ka is not None and ka == kb


def _identical_constants(a: Instruction, b: Instruction) -> bool:
    if a is b:
        return True
    if a.opcode != "constant" or b.opcode != "constant" or a.shape != b.shape:
        return False
    if a.literal is None or b.literal is None:
        return a.literal is b.literal
    try:
        return bool(np.array_equal(a.literal.value, b.literal.value, equal_nan=True))
    except Exception:  # undecodable literal: compare its text
        return a.literal.text == b.literal.text


def _is_zero(x: Instruction) -> bool:
    return x.opcode == "constant" and x.shape.is_array and x.shape.rank == 0 \
        and x.literal is not None and x.literal.is_scalar_value(0)


def _reduce(v: "AlgsimpVisitor", shape: Shape, arg: Instruction, init: Instruction,
            dims, to_apply: Computation) -> Instruction:
    return v.new("reduce", shape, [arg, init], dimensions=format_int_list(sorted(dims)),
                 to_apply=to_apply)


def handle_reduce(v: "AlgsimpVisitor", reduce: Instruction) -> None:
    if reduce.shape.is_tuple or len(reduce.operands) != 2:
        return  # variadic reduces: none of the rewrites below is implemented for them
    arg, init = reduce.operands
    shape = reduce.shape
    dims = list(reduce.dimensions)
    to_apply = reduce.attrs["to_apply"]
    n_in, n_out = math.prod(arg.shape.dimensions), math.prod(shape.dimensions)
    if n_in == 0 or n_out == 0:
        v.replace_with_new(reduce, v.new("broadcast", shape, [init], dimensions="{}"))
        return
    if n_in == n_out and (not v.layout_sensitive or (
            shape.layout is not None and arg.shape.layout is not None
            and reshape_is_bitcast(arg.shape, shape))):
        v.replace_with_new(reduce, v.new("reshape", shape, [arg]))
        return
    if v.layout_sensitive:
        return
    if is_floating(shape.element_type) and arg.opcode == "negate" and _is_zero(init) \
            and _reducer_kind(to_apply) == "add":
        inner = add_instruction(reduce.parent, _reduce(v, shape, arg.operands[0], init, dims,
                                                       to_apply))
        v.replace_with_new(reduce, v.new("negate", shape, [inner]))
        return
    unconditional = v.owner.unconditionally_simplify_reduce_of_transpose_or_reshape
    if arg.opcode == "transpose" and (unconditional or shape.rank < 2 or arg.user_count == 1 or
                                      all(u.opcode == "reduce" for u in arg.users)):
        perm = list(arg.dimensions)
        new_dims = [perm[d] for d in dims]
        src = arg.operands[0]
        new_shape = delete_dimensions(src.shape, new_dims)
        kept = [d for d in perm if d not in new_dims]
        if kept == sorted(kept):
            v.replace_with_new(reduce, _reduce(v, shape, src, init, new_dims, to_apply))
            return
        inner = add_instruction(reduce.parent, _reduce(v, new_shape, src, init, new_dims,
                                                       to_apply))
        tperm = [d - sum(1 for r in new_dims if d > r) for d in kept]
        v.replace_with_new(reduce, v.new("transpose", shape, [inner],
                                         dimensions=format_int_list(tperm)))
        return
    if arg.opcode == "reduce" and len(arg.operands) == 2 and not arg.shape.is_tuple \
            and _identical_constants(init, arg.operands[1]) \
            and reducers_equivalent(to_apply, arg.attrs["to_apply"]):
        arg_dims = sorted(arg.dimensions)
        outer = sorted(dims)
        for a in arg_dims:
            outer = [d + 1 if d >= a else d for d in outer]
        merged = sorted(arg_dims + outer)
        v.replace_with_new(reduce, _reduce(v, shape, arg.operands[0], init, merged, to_apply))
        return
    if arg.opcode == "reshape":
        src = arg.operands[0]
        unmodified = dimensions_unmodified_by_reshape(src.shape, arg.shape)
        in_output = [d not in dims for d in range(arg.shape.rank)]
        kept_by_reshape = [False] * arg.shape.rank
        for _, out in unmodified:
            kept_by_reshape[out] = True
        if all(kept_by_reshape[i] for i in range(arg.shape.rank) if in_output[i]):
            keep = {i for i, o in unmodified if in_output[o]}
            new_dims = [i for i in range(src.shape.rank) if i not in keep]
            v.replace_with_new(reduce, _reduce(v, shape, src, init, new_dims, to_apply))
            return
        if (arg.user_count == 1 or unconditional) and all(kept_by_reshape[d] for d in dims):
            new_dims = [next(i for i, o in unmodified if o == d) for d in dims]
            inner = add_instruction(reduce.parent, _reduce(
                v, delete_dimensions(src.shape, new_dims), src, init, new_dims, to_apply))
            v.replace_with_new(reduce, v.new("reshape", shape, [inner]))
            return
    share_with_arg(v, reduce, arg, init)


__all__ = ["handle_reduce", "reducers_equivalent"]
