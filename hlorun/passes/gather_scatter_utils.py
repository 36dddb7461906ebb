"""Shared helpers of the gather/scatter normalisation passes, after XLA's
``xla/service/gather_scatter_utils.cc`` and the reshape helpers of
``hlo_creation_utils.cc`` they call (``CollapseFirstNDims``,
``InsertDegenerateDims``, ``ElideDegenerateDims``,
``ExpandFirstDimIntoNDims``, ``MaybeTranspose``), and XLA's
``OpExpanderPass`` driver the three passes share.

New arrays get XLA's default (descending) layout when the module carries
layouts (``MaybeTranspose`` assigns it explicitly; the reshape helpers
build their shapes with ``ShapeUtil::MakeShape``), and none otherwise.
"""

from __future__ import annotations

from typing import Callable, Sequence

from ..ir.module import Computation, Instruction, Module
from ..ir.shape import Shape, default_layout
from .dfs_rewrite import nonfusion_computations, replace_instruction


def int_list(values: Sequence[int]) -> str:
    return "{" + ",".join(str(int(v)) for v in values) + "}"


def array_shape(like: Shape, dims: Sequence[int], element_type: str | None = None) -> Shape:
    """``ShapeUtil::MakeShape(type, dims)`` with the default layout where
    ``like`` has a layout (the module is past the parser's layout step)."""
    t = element_type or like.element_type
    if like.layout is None:
        return Shape.array(t, list(dims))
    return Shape.array(t, list(dims), default_layout(len(dims)))


def add(comp: Computation, opcode: str, shape: Shape, operands: Sequence[Instruction],
        attrs: dict | None = None) -> Instruction:
    instr = Instruction(opcode, shape, list(operands), "", dict(attrs or {}))
    return comp.add_instruction(instr, opcode)


def reshape(operand: Instruction, dims: Sequence[int]) -> Instruction:
    if tuple(dims) == tuple(operand.shape.dimensions):
        return operand
    return add(operand.parent, "reshape", array_shape(operand.shape, dims), [operand])


def is_identity(perm: Sequence[int]) -> bool:
    return all(p == i for i, p in enumerate(perm))


def inverse(perm: Sequence[int]) -> list[int]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return inv


def maybe_transpose(operand: Instruction, perm: Sequence[int]) -> Instruction:
    """``MaybeTranspose``: nothing for the identity, else a transpose with
    the default layout."""
    if is_identity(perm):
        return operand
    dims = [operand.shape.dimensions[p] for p in perm]
    return add(operand.parent, "transpose", array_shape(operand.shape, dims), [operand],
               {"dimensions": int_list(perm)})


def collapse_first_n_dims(operand: Instruction, n: int) -> Instruction:
    dims = list(operand.shape.dimensions)
    size = 1
    for d in dims[:n]:
        size *= d
    return reshape(operand, [size] + dims[n:])


def insert_degenerate_dims(operand: Instruction, dims_to_insert: Sequence[int]) -> Instruction:
    """Size-1 dimensions at the given (sorted) positions of the result."""
    positions = set(dims_to_insert)
    src = iter(operand.shape.dimensions)
    rank = operand.shape.rank + len(positions)
    return reshape(operand, [1 if i in positions else next(src) for i in range(rank)])


def elide_degenerate_dims(operand: Instruction, dims_to_elide: Sequence[int]) -> Instruction:
    drop = set(dims_to_elide)
    return reshape(operand, [d for i, d in enumerate(operand.shape.dimensions) if i not in drop])


def expand_first_dim_into_n_dims(operand: Instruction, expanded: Sequence[int]) -> Instruction:
    return reshape(operand, list(expanded) + list(operand.shape.dimensions[1:]))


def move_dimension_to_end(operand: Instruction, dim: int, rank: int) -> Instruction:
    return maybe_transpose(operand, [i for i in range(rank) if i != dim] + [dim])


def transform_start_indices(indices: Instruction, index_vector_dim: int) -> Instruction:
    """``TransformStartIndices``: indices as ``[N, index_vector]`` (the
    index vector dimension made explicit and last, the others flattened)."""
    rank = indices.shape.rank
    if index_vector_dim == rank:
        indices = insert_degenerate_dims(indices, [index_vector_dim])
        rank += 1
    elif index_vector_dim < rank - 1:
        indices = move_dimension_to_end(indices, index_vector_dim, rank)
    if rank > 2:
        indices = collapse_first_n_dims(indices, rank - 1)
    elif rank == 1:
        indices = insert_degenerate_dims(indices, [0])
    return indices


def operand_start_index_permutations(dim_map: Sequence[int], operand_rank: int
                                     ) -> tuple[list[int], list[int]]:
    """``MakeOperandStartIndexPermutations``: the mapped dimensions first,
    then the others in order; and its inverse."""
    mapped = set(dim_map)
    perm = list(dim_map) + [i for i in range(operand_rank) if i not in mapped]
    return perm, inverse(perm)


def expand_ops(pass_: "object", module: Module, matches: Callable[[Instruction], bool],
               expand: Callable[[Instruction], Instruction], what: str,
               opcodes: frozenset[str] | None = None) -> bool:
    """XLA's ``OpExpanderPass``: every matching instruction of every
    non-fusion computation, in post order, is replaced by its expansion.
    The instructions the expansion adds carry the original's metadata (as
    XLA's dumps show); a replacement with the same opcode keeps the name.

    ``opcodes``: the only opcodes ``matches`` (a pure test) can accept.
    With it, a module or computation where no instruction of those opcodes
    matches is skipped without ordering its instructions (nothing there
    could change)."""
    if opcodes is not None and not any(
            matches(i) for c in module.computations for i in c._instructions
            if i.opcode in opcodes):
        return False
    changed = False
    for comp in nonfusion_computations(module):
        if opcodes is not None and not any(matches(i) for i in comp._instructions
                                           if i.opcode in opcodes):
            continue
        for instr in comp.post_order():
            if instr.parent is not comp or not matches(instr):
                continue
            before = set(comp._instructions)
            new = expand(instr)
            meta = instr.attrs.get("metadata")
            if meta is not None:
                for i in comp._instructions:
                    if i not in before and "metadata" not in i.attrs:
                        i.attrs["metadata"] = meta
            old_name = instr.name
            if new is not instr:
                replace_instruction(instr, new)
            pass_.remark(new, f"{old_name} {what}", "applied", derived_from=[old_name])
            changed = True
    return changed


__all__ = ["add", "array_shape", "collapse_first_n_dims", "elide_degenerate_dims",
           "expand_first_dim_into_n_dims", "expand_ops", "insert_degenerate_dims", "int_list",
           "inverse", "is_identity", "maybe_transpose", "operand_start_index_permutations",
           "reshape", "transform_start_indices"]
