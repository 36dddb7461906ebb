"""reshape-mover: XLA's ReshapeMover (xla/service/reshape_mover.cc), with
XLA:GPU's option ``reshape_of_1d_broadcast_is_cheap = true``.

A *rearrange* is a reshape or a transpose.  An elementwise instruction is a
candidate when

1. one of its operands is a non-trivial rearrange (one whose operand cannot
   simply take the rearranged shape itself), and
2. every operand is either a rearrange equivalent to that one (same opcode,
   same result dimensions, and the same permutation / the same operand
   dimensions), or a non-rearrange that can trivially take the inverse
   rearrangement: a constant, a single-use rng, or a broadcast with sorted
   dimensions whose broadcast dimensions keep their relative order under
   the transpose (for a reshape: of a scalar, of an effectively rank-1
   operand, or a reshape that leaves the broadcast dimensions unmodified).

Candidates are dropped while some rearrange operand has a user outside the
candidate set (``TryReshapeMoveOnCandidates``); the remaining ones are
rewritten ``op(rearrange(a), b') -> rearrange(op(a, inverse(b')))``: the
rearrange sinks below the elementwise op, the other operands get the inverse
reshape/transpose (algsimp folds ``transpose(broadcast)`` and
``transpose(transpose)`` afterwards).

On a MoE training step this moves the strength-reduced forward product's
token-major transpose below its multiply, so the broadcast of the routing
weights (the top-k scatter) it shared (after CSE) with the backward outer product is left to
the backward product alone; layout assignment then lays that product out
the way the backward GEMMs read it, as XLA does (XLA's loop_convert_fusion
bf16[8,256,512]{2,1,0} read by both weight-gradient GEMMs).

In gpu-cuda's "simplification" fixed point (after tuple-simplifier), as in
XLA.  The SGD-update transposes it used to sink below their learning-rate
multiply are now turned into dots with swapped operands by algsimp's
transpose-of-dot rule first.  Measured (bench/kernel_lists.py, main b84fe37
-> with this pass): known 1567 -> 1568/1602 kinds, 26 -> 27/27 within +-10%
(moe_topk_train 26 -> 30/29 kernels, 26 -> 27/29 kinds); held-out 1526 ->
1530/1612, 41/41.  Since session 8 it also runs in the
"reshape_mover_after_conv_canonicalization" fixed point, and convert-mover
runs in "simplification-2" and "simplify_after_conv_canonicalization", as in
XLA (moe_topk_train 29/29 kinds).

Remarks: one per rewritten instruction (``applied``), one per candidate
dropped because a rearrange operand has other users (``missed``).

Postcondition: no candidate set remains whose rearrange operands are used
only by candidates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..ir.build import make_reshape, make_transpose
from ..ir.edit import replace_instruction
from ..ir.module import Computation, Instruction, Module
from ..ir.opcode import ELEMENTWISE
from ..ir.shape import inverse_permutation, true_num_dimensions
from .base import Pass
from .dfs_rewrite import nonfusion_computations


def is_rearrange(instr: Instruction) -> bool:
    return instr.opcode in ("reshape", "transpose")


def _identity(perm) -> bool:
    return all(d == i for i, d in enumerate(perm))


def equivalent_rearranges(a: Instruction, b: Instruction) -> bool:
    """``AreEquivalentRearranges``."""
    if a.opcode != b.opcode or a.shape.dimensions != b.shape.dimensions:
        return False
    if a.opcode == "transpose":
        return tuple(a.dimensions) == tuple(b.dimensions)
    return a.operands[0].shape.dimensions == b.operands[0].shape.dimensions


def can_trivially_rearrange(instr: Instruction, rearrange: Instruction,
                            reshape_of_1d_broadcast_is_cheap: bool = True) -> bool:
    """``ReshapeMover::CanTriviallyRearrange``: ``instr`` can take the
    inverse of ``rearrange`` by changing its own shape."""
    if rearrange.opcode == "reshape" and rearrange.shape == rearrange.operands[0].shape:
        return True
    if rearrange.opcode == "transpose" and _identity(rearrange.dimensions):
        return True
    if instr.opcode == "constant":
        return True
    if instr.opcode == "rng" and instr.user_count == 1:
        return True
    if instr.opcode == "broadcast":
        dims = list(instr.dimensions)
        if dims != sorted(dims):
            return False
        if rearrange.opcode == "reshape":
            operand = instr.operands[0].shape
            return operand.rank == 0 or (
                reshape_of_1d_broadcast_is_cheap and true_num_dimensions(operand) <= 1) or (
                reshape_of_1d_broadcast_is_cheap
                and _leaves_dims_unmodified(rearrange, tuple(dims)))
        # transpose: the broadcast dimensions keep their relative order
        inv = inverse_permutation(inverse_permutation(rearrange.dimensions))
        moved = [inv[d] for d in dims]
        return moved == sorted(moved)
    return False


def _leaves_dims_unmodified(reshape: Instruction, dims: tuple[int, ...]) -> bool:
    """``ShapeUtil::ReshapeLeavesDimensionsUnmodified(from=reshape's result,
    to=its operand, dims)``: each of ``dims`` keeps its size and the product
    of the dimensions before it under the inverse reshape."""
    src, dst = reshape.shape.dimensions, reshape.operands[0].shape.dimensions
    for d in dims:
        before = math.prod(src[:d])
        prod, found = 1, False
        for size in dst:
            if prod == before and size == src[d]:
                found = True
                break
            prod *= size
        if not found:
            return False
    return True


@dataclass(frozen=True)
class ReshapeMover(Pass):
    """Sink reshapes and transposes below elementwise ops."""

    name = "reshape-mover"
    #: XLA:GPU sets ReshapeMoverOptions::reshape_of_1d_broadcast_is_cheap
    reshape_of_1d_broadcast_is_cheap: bool = True

    def _trivial(self, instr: Instruction, rearrange: Instruction) -> bool:
        return can_trivially_rearrange(instr, rearrange, self.reshape_of_1d_broadcast_is_cheap)

    def first_nontrivial_rearrange(self, operands) -> Instruction | None:
        for o in operands:
            if is_rearrange(o) and not self._trivial(o.operands[0], o):
                return o
        return None

    def is_candidate(self, instr: Instruction) -> bool:
        """``IsReshapeMoveCandidate``."""
        if instr.opcode not in ELEMENTWISE or not instr.operands:
            return False
        rearrange = self.first_nontrivial_rearrange(instr.operands)
        if rearrange is None:
            return False
        return all((is_rearrange(o) and equivalent_rearranges(o, rearrange))
                   or (not is_rearrange(o) and self._trivial(o, rearrange))
                   for o in instr.operands)

    def run(self, module: Module) -> bool:
        changed = False
        for comp in nonfusion_computations(module):
            candidates = {i: None for i in comp.instructions if self.is_candidate(i)}
            changed |= self._move_candidates(comp, candidates)
        return changed

    def _move_candidates(self, comp: Computation, candidates: dict[Instruction, None]) -> bool:
        """``TryReshapeMoveOnCandidates``."""
        removed = True
        while candidates and removed:
            rearranges: dict[Instruction, None] = {}
            for instr in candidates:
                for o in instr.operands:
                    if is_rearrange(o):
                        rearranges[o] = None
            removed = False
            for r in rearranges:
                if any(u not in candidates for u in r.users):
                    for u in list(r.users):
                        if u in candidates:
                            del candidates[u]
                            removed = True
                            self.remark(u, f"reshape-move missed: {r.name} has users that "
                                           "cannot move it too", "missed")
        if not candidates:
            return False
        for instr in list(candidates):
            self._sink(comp, instr)
        return True

    def _inverse(self, rearrange: Instruction, operand: Instruction) -> Instruction:
        """``ApplyInverseRearrange``."""
        if rearrange.opcode == "reshape":
            shape = rearrange.operands[0].shape.with_element_type(operand.shape.element_type)
            if operand.shape == shape:
                return operand
            if operand.opcode == "reshape" and operand.operands[0].shape == shape:
                # reshape(reshape(x)) back to x's shape is x (XLA's dumps of
                # this pass show the equivalent reshape operand unwrapped)
                return operand.operands[0]
            return make_reshape(operand, shape)
        if _identity(rearrange.dimensions):
            return operand
        return make_transpose(operand, inverse_permutation(rearrange.dimensions))

    def _sink(self, comp: Computation, instr: Instruction) -> None:
        """``SinkRearrangeOperands``."""
        rearrange = self.first_nontrivial_rearrange(instr.operands)
        new_operands = [self._inverse(rearrange, o) for o in instr.operands]
        shape = rearrange.operands[0].shape.with_element_type(instr.shape.element_type)
        attrs = dict(instr.attrs)
        attrs.pop("sharding", None)
        elementwise = comp.add_instruction(
            Instruction(instr.opcode, shape, new_operands, "", attrs), instr.name)
        if rearrange.opcode == "reshape":
            new = Instruction("reshape", instr.shape, [elementwise])
        else:
            new = Instruction("transpose", instr.shape, [elementwise], "",
                              {"dimensions": rearrange.attrs["dimensions"]})
        self.remark(instr, f"{rearrange.opcode} {rearrange.name} sunk below {instr.opcode}: "
                           f"{instr.opcode} now on {shape}", derived_from=[instr])
        replace_instruction(comp, instr, new, check_shape=False)


__all__ = ["ReshapeMover", "can_trivially_rearrange", "equivalent_rearranges", "is_rearrange"]
