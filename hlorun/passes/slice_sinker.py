"""slice-sinker: XLA's SliceSinker (xla/hlo/transforms/simplifiers/slice_sinker.cc),
which GpuCompiler runs in its "simplification" fixed point (after
WhileLoopSimplifier, before ReshapeMover).

A group of elementwise operations on slices becomes one elementwise
operation on the slice sources, followed by one slice per operation:

* an elementwise instruction (with operands and users) all of whose
  operands are ``slice``\\ s taken at the same indices (starts, limits,
  strides) of sources with the same dimensions;
* the group: every user of a slice of the first source that has the same
  opcode and attributes (``SameOp``) and result element type, whose i-th
  operand is a slice of the i-th source, all its slices at one set of
  indices (its own, not necessarily the first instruction's);
* only if the group's results together have at least as many elements as
  the first source (never more elementwise work: slices covering the
  sources, e.g. ``complex(wr[0], wi[0])`` and ``complex(wr[1], wi[1])``
  become ``complex(wr, wi)`` and two slices -- fno_spectral_f32's per-layer
  spectral weights, one kernel instead of two);
* the new operation takes the sources' shape (its own element type) and
  the first instruction's attributes and metadata; each member of the group
  is replaced by a slice of it with the member's first operand's slice
  configuration (the members stay behind, dead, for DCE).

Non-elementwise instructions are not transformed (as in XLA).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..ir.module import Instruction, Module
from ..ir.opcode import is_elementwise
from ..ir.shape import Shape
from .base import Pass

_IGNORED_ATTRS = frozenset({"metadata", "frontend_attributes", "backend_config",
                            "statistics_viz", "sharding"})


def _same_op(a: Instruction, b: Instruction) -> bool:
    """``HloInstruction::SameOp`` for elementwise instructions: opcode and
    opcode-specific attributes (compare direction, ...)."""
    if a.opcode != b.opcode:
        return False
    ka = {k: v for k, v in a.attrs.items() if k not in _IGNORED_ATTRS}
    kb = {k: v for k, v in b.attrs.items() if k not in _IGNORED_ATTRS}
    return ka == kb


def _same_slice(a: Instruction, b: Instruction) -> bool:
    return a.attrs.get("slice") == b.attrs.get("slice")


def _on_similar_slices(instr: Instruction) -> bool:
    """``IsElementwiseOperationOnSimilarSlices``."""
    ops = instr.operands
    if any(o.opcode != "slice" for o in ops):
        return False
    s0 = ops[0]
    return all(o.operands[0].shape.dimensions == s0.operands[0].shape.dimensions
               and _same_slice(s0, o) for o in ops[1:])


def _similar(first: Instruction, cand: Instruction) -> bool:
    """``IsSimilarOperationOnSlices``."""
    if not cand.users:
        return False  # transformed already (or a root: XLA's user_count() == 0)
    if not _same_op(first, cand) or first.shape.element_type != cand.shape.element_type \
            or len(cand.operands) != len(first.operands):
        return False
    s0 = cand.operands[0]
    for i, s in enumerate(cand.operands):
        if s.opcode != "slice" or s.operands[0] is not first.operands[i].operands[0] \
                or not _same_slice(s0, s):
            return False
    return True


def _group(first: Instruction) -> list[Instruction] | None:
    """``FindElementwiseOperationGroup`` with ``ShouldTransform``."""
    source0 = first.operands[0].operands[0]
    group: list[Instruction] = []
    for s in source0.users:
        if s.opcode != "slice":
            continue
        for user in s.users:
            if user not in group and _similar(first, user):
                group.append(user)
    total = sum(math.prod(u.shape.dimensions) for u in group)
    return group if total >= math.prod(source0.shape.dimensions) else None


@dataclass(frozen=True)
class SliceSinker(Pass):
    """Elementwise ops on slices covering their sources -> one op, then slices."""

    name = "slice-sinker"

    def run(self, module: Module) -> bool:
        changed = False
        for comp in list(module.computations):
            for instr in comp.post_order():
                if instr.parent is not comp or not instr.operands \
                        or not is_elementwise(instr.opcode) or not instr.shape.is_array:
                    continue
                if not instr.users:
                    continue  # transformed already, or unused (XLA: user_count() == 0)
                if not _on_similar_slices(instr):
                    continue
                group = _group(instr)
                if not group:
                    continue
                sources = [s.operands[0] for s in instr.operands]
                src = sources[0].shape
                shape = Shape.array(instr.shape.element_type, src.dimensions, src.layout)
                new = Instruction(instr.opcode, shape, list(sources), "", dict(instr.attrs))
                comp.add_instruction(new, instr.opcode)
                for user in group:
                    sl = user.operands[0]
                    rep = Instruction("slice", user.shape, [new], "", dict(sl.attrs))
                    comp.add_instruction(rep, "slice")
                    user.replace_all_uses_with(rep)
                self.remark(new, f"{len(group)} {instr.opcode}s of slices "
                                 f"({', '.join(u.name for u in group)}) became one on "
                                 f"{', '.join(s.name for s in sources)} and slices",
                            derived_from=group)
                changed = True
        return changed


__all__ = ["SliceSinker"]
