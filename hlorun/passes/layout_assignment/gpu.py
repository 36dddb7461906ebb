"""GpuLayoutAssignment's dot constraints (backends/gpu/transforms/layout_assignment.cc)
and the matrix-layout rule they use (service/gpu/matmul_utils.cc)."""

from __future__ import annotations

from typing import Sequence

from ...ir.module import Instruction
from ...ir.opcode import is_elementwise
from ...ir.shape import SUB_BYTE_TYPES, Layout, Shape, default_layout
from ..gemm_rewriter.matmul import batch_row_col
from .propagation import Propagation


def batch_row_col_layout(shape: Shape, batch: Sequence[int], rows: Sequence[int],
                         cols: Sequence[int]) -> tuple[int, ...] | None:
    """``GetBatchRowColumnShape``'s layout of the [batch, rows, cols] view
    (minor_to_major of the 3 groups), or None when a group is not physically
    contiguous (the GEMM rewriter's :func:`batch_row_col`)."""
    got = batch_row_col(shape, batch, rows, cols)
    return None if got is None else got[1]


def matrix_layout_ok(shape: Shape, batch: Sequence[int], rows: Sequence[int],
                     cols: Sequence[int]) -> bool:
    """``MatrixLayout::For(shape, batch, rows, cols).ok()``: each group is
    contiguous and the batch is not the most minor of the three."""
    brc = batch_row_col_layout(shape, batch, rows, cols)
    if brc is None:
        return False
    code = 64 * brc[2] + 8 * brc[1] + brc[0]
    return code in (0o12, 0o21, 0o102, 0o201)


def _dims(instr: Instruction, key: str) -> list[int]:
    return list(instr.int_list(key))


def non_contracting(rank: int, batch: Sequence[int], contracting: Sequence[int]) -> list[int]:
    return [d for d in range(rank) if d not in batch and d not in contracting]


def dot_can_support_layout(dot: Instruction, shape: Shape) -> bool:
    """``DotCanSupportShapeWithLayout``."""
    lhs, rhs = dot.operands
    nb = max(len(_dims(dot, "lhs_batch_dims")), len(_dims(dot, "rhs_batch_dims")))
    n_rows = lhs.shape.rank - len(_dims(dot, "lhs_contracting_dims")) - len(_dims(dot, "lhs_batch_dims"))
    n_cols = rhs.shape.rank - len(_dims(dot, "rhs_contracting_dims")) - len(_dims(dot, "rhs_batch_dims"))
    if shape.rank != nb + n_rows + n_cols:
        return False
    dims = list(range(shape.rank))
    return matrix_layout_ok(shape, dims[:nb], dims[nb:nb + n_rows], dims[shape.rank - n_cols:])


def _major_to_minor_layout(major_to_minor: Sequence[int]) -> Layout:
    return Layout(list(reversed(list(major_to_minor))))


def set_dot_operand_layout(prop: Propagation, dot: Instruction, k: int, batch, rows, cols,
                           mandatory: bool = True) -> None:
    # Layout assignment clears layouts first, so there is no "existing"
    # layout to keep: try the descending one, then batch/rows/cols.
    d = dot.operands[k].shape.with_default_layout()
    if matrix_layout_ok(d, batch, rows, cols):
        prop.set_operand_layout(d.layout, dot, k, mandatory=mandatory)
        return
    prop.set_operand_layout(_major_to_minor_layout(list(batch) + list(rows) + list(cols)),
                            dot, k, mandatory=mandatory, dfs=mandatory)


def set_dot_operand_layout_minor_contracting(prop: Propagation, dot: Instruction, k: int,
                                             batch, contracting, noncontracting) -> None:
    prop.set_operand_layout(_major_to_minor_layout(list(batch) + list(noncontracting)
                                                   + list(contracting)), dot, k)


def set_dot_layout(prop: Propagation, dot: Instruction) -> None:
    """``SetDotLayout``: a layout a user already asked for, if the dot can
    write it; else the descending layout."""
    for user in dot.users:
        for i, op in enumerate(user.operands):
            if op is not dot:
                continue
            c = prop.operands.get((user, i))
            if c is not None and dot_can_support_layout(dot, dot.shape.with_layout(c.layout)):
                prop.set_buffer_layout(c.layout, dot)
                return
    prop.set_buffer_layout(default_layout(dot.shape.rank), dot)


_FP8_FOR_MINOR_CONTRACTING = ("f8e4m3fn", "f8e5m2fnuz")


def is_packed_instruction(instr: Instruction, memo: dict | None = None) -> bool:
    """``IsPackedInstruction``: going up chains of single-operand ops, and
    through both operands of elementwise binary ops, some producer has a
    sub-byte (non-pred) element type -- an int4 weight dequantized on the
    way to a dot.  ``memo`` (instruction -> verdict) is shared by the calls
    of one layout-assignment run, so that every dot of a 256-layer residual
    chain does not walk the chain again (linear in the computation)."""
    if memo is None:
        memo = {}
    got = memo.get(instr)
    if got is not None:
        return got
    # an explicit post-order stack (a residual chain of adds exceeds Python's
    # recursion limit); a verdict is final once all its producers have one
    stack = [(instr, False)]
    while stack:
        i, expanded = stack.pop()
        if i in memo:
            continue
        kids = _packed_producers(i)
        if expanded:
            memo[i] = any(memo[k] for k in kids)
            continue
        if i.shape.is_array and i.shape.element_type in SUB_BYTE_TYPES:
            memo[i] = True
            continue
        stack.append((i, True))
        for k in reversed(kids):
            if k not in memo:
                stack.append((k, False))
    return memo[instr]


def _packed_producers(i: Instruction) -> tuple:
    """The producers :func:`is_packed_instruction` looks through."""
    ops = i.operands
    if len(ops) == 1:
        return (ops[0],)
    if len(ops) == 2 and is_elementwise(i.opcode):
        return (ops[0], ops[1])
    return ()


def add_dot_constraints(prop: Propagation, dot: Instruction, free_output: bool = False,
                        pack_along_k: bool = True, packed_memo: dict | None = None) -> None:
    """``AddDotBackendConstraints``.  ``pack_along_k``:
    xla_gpu_experimental_pack_dot_operands_along_k_dimension (default on):
    an operand computed from sub-byte (int4) values gets the contracting
    dimension minor (SetDotOperandLayoutToMinorContracting)."""
    sides = []
    for k, (bk, ck) in enumerate((("lhs_batch_dims", "lhs_contracting_dims"),
                                  ("rhs_batch_dims", "rhs_contracting_dims"))):
        operand = dot.operands[k]
        batch, contracting = _dims(dot, bk), _dims(dot, ck)
        sides.append((k, operand, batch, contracting,
                      non_contracting(operand.shape.rank, batch, contracting)))
    lt, rt = dot.operands[0].shape.element_type, dot.operands[1].shape.element_type
    s8 = dot.shape.element_type == "s32" and lt == "s8" and rt == "s8"
    fp8 = lt in _FP8_FOR_MINOR_CONTRACTING and rt in _FP8_FOR_MINOR_CONTRACTING
    for k, operand, batch, contracting, nc in sides:
        if s8 or fp8 or (pack_along_k and is_packed_instruction(operand, packed_memo)):
            set_dot_operand_layout_minor_contracting(prop, dot, k, batch, contracting, nc)
        elif batch or len(contracting) > 1 or len(nc) > 1:
            set_dot_operand_layout(prop, dot, k, batch, contracting, nc)
    (_, _, lb, _, lnc), (_, _, _, _, rnc) = sides
    if not free_output and (lb or len(lnc) > 1 or len(rnc) > 1):
        set_dot_layout(prop, dot)


def add_transpose_of_dot_constraint(prop: Propagation, transpose: Instruction) -> None:
    """A transpose of a single-use dot asks for the dot layout that makes
    the transpose a bitcast (if the dot can write it)."""
    operand = transpose.operands[0]
    if operand.opcode != "dot" or operand.user_count > 1:
        return
    shape = operand.shape.with_layout(_major_to_minor_layout(transpose.dimensions))
    if dot_can_support_layout(operand, shape):
        prop.set_operand_layout(shape.layout, transpose, 0)


def add_sort_constraints(prop: Propagation, sort: Instruction) -> None:
    """GpuLayoutAssignment's kSort rule (for a sort whose keys have rank > 1):
    every operand and every output takes the keys' default layout, so the
    sort emitter sees one layout (mandatory operand and buffer constraints,
    added operand by operand)."""
    keys = sort.operands[0].shape
    if not keys.is_array or keys.rank <= 1:
        return
    layout = default_layout(keys.rank)
    for i, operand in enumerate(sort.operands):
        prop.set_operand_layout(layout, sort, i)
        if sort.shape.is_array:
            prop.set_buffer_layout(layout, sort)
        else:
            prop.set_element_layout(layout, sort, i)


def fortran_layout(rank: int) -> Layout:
    """XLA's SetFortranLayout: the default layout with the two minor
    dimensions swapped (column-major matrices, batch dimensions major)."""
    m2m = list(default_layout(rank).minor_to_major)
    m2m[0], m2m[1] = m2m[1], m2m[0]
    return Layout(m2m)


def add_triangular_solve_constraints(prop: Propagation, solve: Instruction) -> None:
    """GpuLayoutAssignment's kTriangularSolve rule: both operands and the
    result in Fortran layout (mandatory operand and buffer constraints)."""
    for k, operand in enumerate(solve.operands):
        prop.set_operand_layout(fortran_layout(operand.shape.rank), solve, k)
    prop.set_buffer_layout(fortran_layout(solve.shape.rank), solve)


def add_fft_constraints(prop: Propagation, fft: Instruction) -> None:
    """GpuLayoutAssignment's kFft rule: cuFFT requires a dim0-major layout,
    so the operand and the result get the default layout."""
    prop.set_operand_layout(default_layout(fft.operands[0].shape.rank), fft, 0)
    prop.set_buffer_layout(default_layout(fft.shape.rank), fft)
