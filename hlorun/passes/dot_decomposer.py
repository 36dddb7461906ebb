"""dot_decomposer: canonicalize dots (XLA's DotDecomposer).

A dot is canonical when each operand has exactly one contracting
dimension, at most one non-contracting dimension, and its batch dimensions
are the leading ones in order.  Every other dot is rewritten, exactly as
XLA does (including its identity transposes and reshapes, which later
simplification removes):

* lhs: transpose to [batch..., non-contracting..., contracting...], reshape
  to [batch..., non-contracting product (omitted when 1), contracting product];
* rhs: transpose to [batch..., contracting..., non-contracting...], reshape
  to [batch..., contracting product, non-contracting product (omitted when 1)];
* a dot with dimension numbers batch={0..}, lhs contracting = the last
  dimension, rhs contracting = the one after the batch dimensions;
* a reshape back to the original result shape.

Postcondition: every dot in the non-fusion computations is canonical.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..ir import attrs as A
from ..ir.module import Computation, Instruction, Module
from ..ir.shape import Shape, intern, permute_dimensions_ignoring_layout
from .base import Pass
from .dfs_rewrite import add_instruction, nonfusion_computations, replace_instruction


def _dims(instr: Instruction, key: str) -> list[int]:
    return list(instr.int_list(key))


def is_canonical(shape: Shape, contracting: list[int], batch: list[int]) -> bool:
    if len(contracting) != 1:
        return False
    if len(batch) + 2 < shape.rank:
        return False
    if not batch and not contracting:
        return False
    return batch == list(range(len(batch)))


def _make_shape(element_type: str, dims: list[int], dynamic: list[bool]) -> Shape:
    return Shape.array(element_type, dims, "default", dynamic if any(dynamic) else None)


class _Canonicalizer:
    def __init__(self, owner: "DotDecomposer", comp: Computation):
        self.owner = owner
        self.comp = comp

    def operand(self, operand: Instruction, batch: list[int], contracting: list[int],
                canonical_batch: list[int], canonical_batch_dyn: list[bool],
                contracting_minor: bool) -> tuple[Instruction, int]:
        """CanonicalizeOperand: (reshaped operand, canonical contracting dim)."""
        s = operand.shape
        non_contracting, c_size, nc_size, c_dyn, nc_dyn = [], 1, 1, False, False
        for i in range(s.rank):
            if i in contracting:
                c_size *= s.dimensions[i]
                c_dyn |= s.is_dynamic_dimension(i)
            elif i not in batch:
                non_contracting.append(i)
                nc_size *= s.dimensions[i]
                nc_dyn |= s.is_dynamic_dimension(i)
        perm = list(batch) + (non_contracting + list(contracting) if contracting_minor
                              else list(contracting) + non_contracting)
        t = add_instruction(self.comp, Instruction(
            "transpose", permute_dimensions_ignoring_layout(perm, s), [operand], "",
            {"dimensions": A.format_int_list(perm)}), metadata_from=operand)
        dims, dyn = list(canonical_batch), list(canonical_batch_dyn)
        if contracting_minor:
            c_dim = len(canonical_batch) + (1 if nc_size != 1 else 0)
            if nc_size != 1:
                dims.append(nc_size)
                dyn.append(nc_dyn)
            dims.append(c_size)
            dyn.append(c_dyn)
        else:
            c_dim = len(canonical_batch)
            dims.append(c_size)
            dyn.append(c_dyn)
            if nc_size != 1:
                dims.append(nc_size)
                dyn.append(nc_dyn)
        r = add_instruction(self.comp, Instruction(
            "reshape", _make_shape(s.element_type, dims, dyn), [t]), metadata_from=t)
        return r, c_dim

    def dot(self, dot: Instruction) -> None:
        lhs, rhs = dot.operands
        lb, lc = _dims(dot, "lhs_batch_dims"), _dims(dot, "lhs_contracting_dims")
        rb, rc = _dims(dot, "rhs_batch_dims"), _dims(dot, "rhs_contracting_dims")
        batch = [lhs.shape.dimensions[i] for i in range(lhs.shape.rank) if i in lb]
        batch_dyn = [lhs.shape.is_dynamic_dimension(i) for i in range(lhs.shape.rank) if i in lb]
        new_lhs, lhs_c = self.operand(lhs, lb, lc, batch, batch_dyn, True)
        dims, dyn = list(batch), list(batch_dyn)
        nb = len(batch)
        lhs_nc = [d for d in range(new_lhs.shape.rank) if d >= nb and d != lhs_c]
        if len(lhs_nc) == 1:
            dims.append(new_lhs.shape.dimensions[lhs_nc[0]])
            dyn.append(new_lhs.shape.is_dynamic_dimension(lhs_nc[0]))
        new_rhs, rhs_c = self.operand(rhs, rb, rc, batch, batch_dyn, False)
        rhs_nc = [d for d in range(new_rhs.shape.rank) if d >= nb and d != rhs_c]
        if len(rhs_nc) == 1:
            dims.append(new_rhs.shape.dimensions[rhs_nc[0]])
            dyn.append(new_rhs.shape.is_dynamic_dimension(rhs_nc[0]))
        attrs = {}
        if nb:
            attrs["lhs_batch_dims"] = A.format_int_list(range(nb))
        attrs["lhs_contracting_dims"] = A.format_int_list([lhs_c])
        if nb:
            attrs["rhs_batch_dims"] = A.format_int_list(range(nb))
        attrs["rhs_contracting_dims"] = A.format_int_list([rhs_c])
        for key in ("operand_precision", "algorithm"):
            if key in dot.attrs:
                attrs[key] = dot.attrs[key]
        # SetupDerivedInstruction: sharding, metadata, frontend attributes,
        # backend config (same opcode).
        for key in ("sharding", "metadata", "frontend_attributes", "backend_config"):
            if key in dot.attrs:
                attrs[key] = dot.attrs[key]
        new_dot = add_instruction(self.comp, Instruction(
            "dot", _make_shape(dot.shape.element_type, dims, dyn), [new_lhs, new_rhs], "", attrs))
        reshape = Instruction("reshape", dot.shape, [new_dot])
        add_instruction(self.comp, reshape)
        self.owner.remark(dot, f"canonicalized to {new_dot.name}: {new_lhs.shape} x {new_rhs.shape} "
                               f"-> {new_dot.shape}", derived_from=[dot])
        replace_instruction(dot, reshape)


@dataclass(frozen=True)
class DotDecomposer(Pass):
    """Canonicalize dots to one batch/contracting/non-contracting dim each."""

    name = "dot_decomposer"

    def run(self, module: Module) -> bool:
        changed = False
        for comp in nonfusion_computations(module):
            todo = [i for i in comp._instructions if i.opcode == "dot" and not (
                is_canonical(i.operands[0].shape, _dims(i, "lhs_contracting_dims"),
                             _dims(i, "lhs_batch_dims"))
                and is_canonical(i.operands[1].shape, _dims(i, "rhs_contracting_dims"),
                                 _dims(i, "rhs_batch_dims")))]
            canon = _Canonicalizer(self, comp)
            for dot in todo:
                canon.dot(dot)
                changed = True
        return changed
