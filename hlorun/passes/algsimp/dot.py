"""algsimp's dot rewrites (``AlgebraicSimplifierVisitor::HandleDot``), in
XLA's order: zero-element dot, dot without contracting dimensions ->
multiply, batch+contracting-only operand -> multiply + reduce (strength
reduction), degenerate (unit) dimensions removed from the operands."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...ir.attrs import format_int_list
from ...ir.build import delete_dimensions, make_scalar_computation, permute_dimensions
from ...ir.literal import Literal
from ...ir.module import Instruction
from ...ir.shape import Shape, is_floating
from ..dfs_rewrite import add_instruction
from ..dot_utils import algorithm

if TYPE_CHECKING:
    from .visitor import AlgsimpVisitor


def _supported_precision(dot: Instruction) -> bool:
    """``SupportedDotPrecisionConfig``: unset or dot_f32_f32_f32."""
    return algorithm(dot) in (None, "dot_f32_f32_f32")


def _add(v: "AlgsimpVisitor", dot: Instruction, opcode: str, shape: Shape,
         operands: list[Instruction], derived: bool = True, **attrs) -> Instruction:
    instr = Instruction(opcode, shape, operands, "", dict(attrs))
    if derived and "metadata" in dot.attrs:  # SetupDerivedInstruction
        instr.attrs["metadata"] = dot.attrs["metadata"]
    return add_instruction(dot.parent, instr)


def _normalize_operand(v, dot, operand: Instruction, batch: tuple[int, ...],
                       contracting: tuple[int, ...]) -> Instruction:
    """``NormalizeDotOperandToBatchMajorAndContractingMinor``."""
    perm = list(batch) + [i for i in range(operand.shape.rank)
                          if i not in batch and i not in contracting] + list(contracting)
    if perm == sorted(perm):
        return operand
    return _add(v, dot, "transpose", permute_dimensions(perm, operand.shape), [operand],
                derived=False, dimensions=format_int_list(perm))


def _as_type(v, dot, x: Instruction, t: str) -> Instruction:
    if x.shape.element_type == t:
        return x
    return _add(v, dot, "convert", x.shape.with_element_type(t), [x], derived=False)


def _scalar_add(v: "AlgsimpVisitor", t: str):
    comp = v.scalar_add.get(t)
    if comp is None:
        comp = v.scalar_add[t] = make_scalar_computation(
            v.current.parent.module, "add", t, "scalar_add_computation")
    return comp


def _zero(v, dot, t: str) -> Instruction:
    c = Instruction("constant", Shape.array(t, ()), [], "", {})
    c.literal = Literal.from_array(np.zeros(()), c.shape)
    return add_instruction(dot.parent, c)


def handle_dot(v: "AlgsimpVisitor", dot: Instruction) -> None:
    if v.layout_sensitive:
        return
    v.current = dot
    lhs, rhs = dot.operands
    lb, lc = dot.int_list("lhs_batch_dims"), dot.int_list("lhs_contracting_dims")
    rb, rc = dot.int_list("rhs_batch_dims"), dot.int_list("rhs_contracting_dims")
    shapes = (dot.shape, lhs.shape, rhs.shape)
    if any(0 in s.dimensions for s in shapes):
        z = _zero(v, dot, dot.shape.element_type)
        v.replace_with_new(dot, Instruction("broadcast", dot.shape, [z], "", {"dimensions": "{}"}))
        v.owner.remark(dot, "zero-element dot replaced by a broadcast of 0", derived_from=[dot])
        return
    if _supported_precision(dot) and v.owner.enable_dot_to_multiply_rewrite and not lc:
        _rewrite_as_multiply(v, dot, lhs, rhs, lb, rb)
        return
    only_bc = (len(lb) + len(lc) == lhs.shape.rank) or (len(rb) + len(rc) == rhs.shape.rank)
    if _supported_precision(dot) and v.owner.enable_dot_strength_reduction and only_bc:
        _strength_reduce(v, dot, lhs, rhs, lb, lc, rb, rc)
        return
    _remove_degenerate_dims(v, dot, lhs, rhs, lb, lc, rb, rc)


def _rewrite_as_multiply(v, dot, lhs, rhs, lb, rb) -> None:
    """``RewriteAsMultiplyDotWithZeroLhsContractingDim``."""
    t = dot.shape.element_type
    new_lhs = _as_type(v, dot, _normalize_operand(v, dot, lhs, lb, ()), t)
    new_rhs = _as_type(v, dot, _normalize_operand(v, dot, rhs, rb, ()), t)
    if dot.shape.rank != lhs.shape.rank:
        new_lhs = _add(v, dot, "broadcast", dot.shape, [new_lhs],
                       dimensions=format_int_list(range(lhs.shape.rank)))
    if dot.shape.rank != rhs.shape.rank:
        dims = list(range(len(lb))) + list(range(lhs.shape.rank, dot.shape.rank))
        new_rhs = _add(v, dot, "broadcast", dot.shape, [new_rhs], dimensions=format_int_list(dims))
    mul = Instruction("multiply", dot.shape, [new_lhs, new_rhs], "", {})
    if "metadata" in dot.attrs:
        mul.attrs["metadata"] = dot.attrs["metadata"]
    v.owner.remark(dot, "dot without contracting dimensions rewritten to a multiply of broadcasts",
                   derived_from=[dot], rule="dot-to-multiply")
    v.replace_with_new(dot, mul)


def _strength_reduce(v, dot, lhs, rhs, lb, lc, rb, rc) -> None:
    """``RewriteBatchPlusContractingAsReduce``."""
    t = dot.shape.element_type
    new_lhs = _as_type(v, dot, _normalize_operand(v, dot, lhs, lb, lc), t)
    new_rhs = _as_type(v, dot, _normalize_operand(v, dot, rhs, rb, rc), t)
    lhs_outer = lhs.shape.rank - (len(lb) + len(lc))
    rhs_outer = rhs.shape.rank - (len(rb) + len(rc))
    if rhs_outer > 0:
        dims = list(range(len(lb))) + list(range(len(lb) + rhs_outer, len(lb) + rhs_outer
                                                  + lhs.shape.rank - len(lb)))
        new_lhs = _add(v, dot, "broadcast", new_rhs.shape, [new_lhs], derived=False,
                       dimensions=format_int_list(dims))
    elif lhs_outer > 0:
        dims = list(range(len(rb))) + list(range(len(rb) + lhs_outer, len(rb) + lhs_outer
                                                  + rhs.shape.rank - len(rb)))
        new_rhs = _add(v, dot, "broadcast", new_lhs.shape, [new_rhs], derived=False,
                       dimensions=format_int_list(dims))
    flow = _add(v, dot, "multiply", new_lhs.shape, [new_lhs, new_rhs], derived=False)
    acc = ("f64" if t == "f64" else "f32") if is_floating(t) else t
    flow = _as_type(v, dot, flow, acc)
    outer = max(lhs_outer, rhs_outer)
    reduce_dims = list(range(outer + len(lb), outer + len(lb) + len(lc)))
    zero = _zero(v, dot, flow.shape.element_type)
    comp = _scalar_add(v, acc)
    shape = delete_dimensions(reduce_dims, flow.shape)
    flow = _add(v, dot, "reduce", shape, [flow, zero], derived=False,
                dimensions=format_int_list(reduce_dims), to_apply=comp)
    flow = _as_type(v, dot, flow, t)
    v.owner.remark(dot, (f"an operand has only batch and contracting dimensions: dot strength-"
                         f"reduced to multiply + reduce in {acc}"), derived_from=[dot],
                   rule="strength-reduction")
    v.replace_instruction(dot, flow)


def _remove_degenerate_dims(v, dot, lhs, rhs, lb, lc, rb, rc) -> None:
    """``RemoveDegenerateDimensionFromDot``."""
    def dim_map(shape: Shape) -> tuple[list[int], int]:
        out, n = [], 0
        for i, d in enumerate(shape.dimensions):
            if d == 1:
                n += 1
                out.append(-1)
            else:
                out.append(i - n)
        return out, n
    lmap, nl = dim_map(lhs.shape)
    rmap, nr = dim_map(rhs.shape)
    if nl == 0 and nr == 0:
        return
    attrs: dict[str, str] = {}
    for key, dims, m in (("lhs_batch_dims", lb, lmap), ("lhs_contracting_dims", lc, lmap),
                         ("rhs_batch_dims", rb, rmap), ("rhs_contracting_dims", rc, rmap)):
        kept = [m[d] for d in dims if m[d] != -1]
        if kept or key.endswith("contracting_dims"):
            attrs[key] = format_int_list(kept)
    order = ("lhs_batch_dims", "lhs_contracting_dims", "rhs_batch_dims", "rhs_contracting_dims")
    attrs = {k: attrs[k] for k in order if k in attrs}

    def squeeze(x: Instruction, n: int) -> Instruction:
        if n == 0:
            return x
        s = x.shape
        keep = [i for i, d in enumerate(s.dimensions) if d != 1]
        return _add(v, dot, "reshape", delete_dimensions(
            [i for i in range(s.rank) if i not in keep], s), [x], derived=False)
    new_lhs, new_rhs = squeeze(lhs, nl), squeeze(rhs, nr)
    for key in ("operand_precision", "algorithm"):
        if key in dot.attrs:
            attrs[key] = dot.attrs[key]
    # MakeDotHlo infers the shape: batch, lhs non-contracting, rhs non-contracting.
    lbk = [lmap[d] for d in lb if lmap[d] != -1]
    lck = [lmap[d] for d in lc if lmap[d] != -1]
    rbk = [rmap[d] for d in rb if rmap[d] != -1]
    rck = [rmap[d] for d in rc if rmap[d] != -1]
    dims = [new_lhs.shape.dimensions[d] for d in lbk]
    dims += [d for i, d in enumerate(new_lhs.shape.dimensions) if i not in lbk and i not in lck]
    dims += [d for i, d in enumerate(new_rhs.shape.dimensions) if i not in rbk and i not in rck]
    new_dot = _add(v, dot, "dot", Shape.array(dot.shape.element_type, dims), [new_lhs, new_rhs],
                   **attrs)
    for key in ("frontend_attributes", "sharding"):
        if key in dot.attrs:
            new_dot.attrs[key] = dot.attrs[key]
    v.owner.remark(dot, (f"unit dimensions removed from the operands ({lhs.shape.to_string(False)} x "
                         f"{rhs.shape.to_string(False)} -> {new_lhs.shape.to_string(False)} x "
                         f"{new_rhs.shape.to_string(False)}), giving dot {new_dot.name}"),
                   derived_from=[dot], rule="remove-degenerate-dims", new_dot=new_dot.name,
                   before=f"{lhs.shape.to_string(False)} x {rhs.shape.to_string(False)}",
                   after=f"{new_lhs.shape.to_string(False)} x {new_rhs.shape.to_string(False)}")
    if new_dot.shape.dimensions == dot.shape.dimensions:
        v.replace_instruction(dot, new_dot)
    else:
        v.replace_with_new(dot, Instruction("reshape", dot.shape, [new_dot], "", {}))


def _is_iota_permutation(dims: tuple[int, ...]) -> bool:
    return sorted(dims) == list(range(len(dims)))


def transpose_of_dot(v: "AlgsimpVisitor", t: Instruction) -> bool:
    """``HandleTranspose``'s transpose(dot(a, b)) -> dot(b, a) for the
    canonical dots GPU keeps (``supports_non_canonical_dots`` is off on
    GPU, so only this form runs): the dot has no other user, equal batch
    dimensions that are its leading dimensions, and one non-contracting
    dimension per operand; the transpose swaps the last two dimensions.
    The swapped dot computes the transposed result directly (the weight
    gradients ``x^T dy`` of every linear layer, the Q/K gradients of
    attention), so no transpose kernel is left.  The new dot takes the
    transpose's shape (layout included) and, as ``ReplaceWithNewInstruction``
    does, its metadata; operand precisions are swapped."""
    if not v.owner.enable_transpose_of_dot:
        return False
    dot = t.operands[0]
    if dot.opcode != "dot" or dot.user_count != 1 or dot.attrs.get("sparsity"):
        return False
    lhs, rhs = dot.operands[0], dot.operands[1]
    lb, lc = dot.int_list("lhs_batch_dims"), dot.int_list("lhs_contracting_dims")
    rb, rc = dot.int_list("rhs_batch_dims"), dot.int_list("rhs_contracting_dims")
    if lb != rb or not _is_iota_permutation(lb):
        return False
    if not lc or len(lc) + len(lb) + 1 != lhs.shape.rank:
        return False
    if not rc or len(rc) + len(rb) + 1 != rhs.shape.rank:
        return False
    rank = dot.shape.rank
    expected = list(range(rank))
    expected[-1], expected[-2] = expected[-2], expected[-1]
    if list(t.dimensions) != expected:
        return False
    attrs: dict = {}
    if lb:
        attrs["lhs_batch_dims"] = format_int_list(rb)
    attrs["lhs_contracting_dims"] = format_int_list(rc)
    if rb:
        attrs["rhs_batch_dims"] = format_int_list(lb)
    attrs["rhs_contracting_dims"] = format_int_list(lc)
    prec = dot.attrs.get("operand_precision")
    if prec:
        parts = [p.strip() for p in prec.strip("{}").split(",")]
        if len(parts) == 2:
            prec = "{" + parts[1] + "," + parts[0] + "}"
        attrs["operand_precision"] = prec
    if "algorithm" in dot.attrs:  # the rest of the precision config
        attrs["algorithm"] = dot.attrs["algorithm"]
    if "metadata" in t.attrs:
        attrs["metadata"] = t.attrs["metadata"]
    new = Instruction("dot", t.shape, [rhs, lhs], "", attrs)
    v.replace_with_new(t, new)
    v.owner.remark(t, "transpose of a dot swapping its two non-batch dimensions: the dot "
                      "with its operands swapped", derived_from=[t, dot])
    return True
