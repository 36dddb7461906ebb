"""hoist-fused-bitcasts: XLA's HoistFusedBitcasts
(xla/backends/gpu/transforms/hoist_fused_bitcasts.cc).

GEMM fusions (every fusion holding a dot, except ``__cudnn$fusion``) get
their bitcasts and reshapes moved out to the callers, so that the fusion's
parameters and result have the shapes the dot reads and writes:

1. **Root.**  The shape the fusion's root would have if every bitcast /
   reshape between the dot and the root were gone is computed by walking the
   dot's users downward (elementwise ops keep the shape, a bitcast/reshape
   takes its operand's, a broadcast or transpose the shape it gets when the
   bitcast moves below it (its own when it cannot), any other op stops the
   walk).  When it differs from the root's shape, the
   root gets a bitcast to it, and each caller's result is bitcast back to
   the old shape outside.
2. **Upward.**  Then every bitcast/reshape inside (consumers first) whose
   transitive producers are used only on the way to it (a closed set), of
   the same element type as its operand, is removed: its producers take new
   shapes (elementwise ops the same as their user's, parameters a bitcast in
   every caller, broadcasts and transposes new dimensions and an operand
   shape, :mod:`.bitcast_utils`), a nested bitcast/reshape stops the
   propagation (it is hoisted on its own turn).  A plan that meets any other
   op, or a broadcast/transpose the bitcast cannot cross, is dropped and the
   bitcast stays.

Not done (XLA does it): re-shaping a constant on the way; such a plan is
dropped.

XLA runs it in "hlo normalization" right after the GEMM fusion rewriter;
so does gpu-cuda (since session 6).  With it, kv_decode_step_bf16 gets XLA's
structure (16 of 16 kernels matched: the cache updates are duplicated into
the output transposes because their only other user is now a bitcast, and
copy insertion keeps the two cache copies).  Two things had to follow XLA
for the transformers not to lose kernels: priority fusion costs bitcast
users (a gradient sum read by a GEMM through a bitcast is no longer
recomputed in the next accumulation), and a cuBLAS fission whose epilogue
kept the dot's non-descending layout (a root bitcast that crossed a scalar
broadcast, embed_xent_train_bf16) gives the epilogue a copy in its layout
when the GEMM rewriter pins the call's output.
Postcondition: no GEMM fusion has a parameter whose only user is a bitcast
or reshape that could be hoisted as above.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from ..ir.module import Computation, Instruction, Module
from ..ir.opcode import is_elementwise
from ..ir.shape import Shape
from .base import Pass
from .bitcast_utils import (BitcastRefused, bitcast_of_broadcast, bitcast_of_transpose,
                            broadcast_of_bitcast, transpose_of_bitcast)
from .dfs_rewrite import nonfusion_computations

_BITCASTS = ("bitcast", "reshape")


class _Refused(Exception):
    """A plan XLA would refuse (it logs and moves on)."""


def _retyped(shape: Shape, like: Shape) -> Shape:
    """``CopyElementType(like, &shape)``."""
    return shape if shape.element_type == like.element_type else \
        shape.with_element_type(like.element_type)


def _consumer_set(instr: Instruction) -> list[Instruction]:
    """Transitive users in breadth-first (def-before-use) order."""
    seen: dict[Instruction, None] = {}
    work = deque(instr.users)
    while work:
        u = work.popleft()
        if u not in seen:
            seen[u] = None
            work.extend(u.users)
    return list(seen)


def _producer_set(instr: Instruction) -> dict[Instruction, None]:
    seen: dict[Instruction, None] = {}
    work = deque(instr.operands)
    while work:
        o = work.popleft()
        if o not in seen:
            seen[o] = None
            work.extend(o.operands)
    return seen


def _root_shape(dot: Instruction) -> Shape:
    """``ComputeRootShapeAfterHoistingBitcasts``."""
    if dot.is_root():
        return dot.shape
    operand_shape: dict[Instruction, Shape] = {}

    def set_operand_shape(users, shape: Shape) -> None:
        for u in users:
            new = _retyped(shape, u.operands[0].shape)
            old = operand_shape.setdefault(u, new)
            if old != new:
                raise _Refused(f"conflicting shapes for {u.name}")
    set_operand_shape(dot.users, dot.shape)
    for instr in _consumer_set(dot):
        shape = operand_shape.get(instr)
        if shape is None:
            continue
        if instr.opcode in ("broadcast", "transpose"):
            move = broadcast_of_bitcast if instr.opcode == "broadcast" else transpose_of_bitcast
            try:
                result = move(instr, shape)[0]
            except BitcastRefused:
                result = instr.shape  # XLA keeps the op's shape when the bitcast cannot pass
        elif instr.opcode in _BITCASTS or is_elementwise(instr.opcode):
            result = shape
        else:
            raise _Refused(f"cannot hoist bitcast past {instr.name}")
        if instr.is_root():
            return _retyped(result, instr.shape)
        set_operand_shape(instr.users, result)
    raise _Refused("no root found")


def _insert_root_bitcast(dot: Instruction, callers: list[Instruction]) -> bool:
    """``MaybeInsertRootBitcast``."""
    try:
        shape = _root_shape(dot)
    except _Refused:
        return False
    comp = dot.parent
    root = comp.root
    if root.shape == shape:
        return False
    comp.root = comp.add_instruction(Instruction("bitcast", shape, [root]), "bitcast")
    for caller in callers:
        outer = caller.parent
        back = outer.add_instruction(Instruction("bitcast", caller.shape, [caller]), "bitcast")
        caller.replace_all_uses_with(back, keep=lambda u: u is not back)
        if outer.root is caller:
            outer.root = back
        caller.shape = shape
    return True


def _plan(bitcast: Instruction, order: list[Instruction]) -> list[tuple[Instruction, Shape]]:
    """``PlanHoistBitcastUpwardsToCallers``: the new shapes, consumers first."""
    producers = _producer_set(bitcast)
    for p in producers:
        for u in p.users:
            if u is not bitcast and u not in producers:
                raise _Refused(f"{p.name} is also used by {u.name}")
    if bitcast.shape.element_type != bitcast.operands[0].shape.element_type:
        raise _Refused("bitcast with a type conversion")
    shapes: dict[Instruction, Shape] = {}

    def set_result_shape(instrs, shape: Shape) -> None:
        for i in instrs:
            new = _retyped(shape, i.shape)
            old = shapes.setdefault(i, new)
            if old != new:
                raise _Refused(f"conflicting shapes for {i.name}")
    set_result_shape(bitcast.operands, bitcast.shape)
    plan: list[tuple[Instruction, Shape]] = []
    for instr in reversed(order):
        new = shapes.get(instr)
        if new is None or new == instr.shape:
            continue
        plan.append((instr, new))
        op = instr.opcode
        if op == "parameter" or op in _BITCASTS:
            continue
        if op == "constant":
            raise _Refused(f"re-shaping constant {instr.name} is not implemented")
        if op in ("broadcast", "transpose"):
            move = bitcast_of_broadcast if op == "broadcast" else bitcast_of_transpose
            try:
                operand_shape, _ = move(instr, new)
            except BitcastRefused as e:
                raise _Refused(str(e)) from None
            set_result_shape(instr.operands, operand_shape)
            continue
        if not is_elementwise(op):
            raise _Refused(f"cannot hoist bitcast past {instr.name}")
        set_result_shape(instr.operands, new)
    return plan


def _hoist(bitcast: Instruction, callers: list[Instruction], order: list[Instruction]) -> bool:
    """``HoistBitcastUpwardsToCallers``."""
    try:
        plan = _plan(bitcast, order)
    except _Refused:
        return False
    for instr, shape in plan:
        if instr.opcode == "parameter":
            n = instr.parameter_number
            for caller in callers:
                arg = caller.operands[n]
                new = caller.parent.add_instruction(Instruction("bitcast", shape, [arg]), "bitcast")
                caller.set_operand(n, new)
        elif instr.opcode in ("broadcast", "transpose"):
            move = bitcast_of_broadcast if instr.opcode == "broadcast" else bitcast_of_transpose
            instr.set_int_list("dimensions", move(instr, shape)[1])
        instr.shape = shape
    comp = bitcast.parent
    src = bitcast.operands[0]
    bitcast.replace_all_uses_with(src)
    comp.remove_instruction(bitcast)
    return True


def _first_dot(comp: Computation) -> Instruction | None:
    for i in comp.instructions:
        if i.opcode in ("dot", "scaled-dot"):
            return i
    return None


def _targeted(fusion: Instruction) -> bool:
    cfg = fusion.backend_config
    if isinstance(cfg, dict):
        kind = (cfg.get("fusion_backend_config") or {}).get("kind")
        if kind == "__cudnn$fusion":
            return False
    return True


@dataclass(frozen=True)
class HoistFusedBitcasts(Pass):
    """Bitcasts and reshapes inside GEMM fusions move out to the callers."""

    name = "hoist-fused-bitcasts"

    def run(self, module: Module) -> bool:
        callers: dict[Computation, list[Instruction]] = {}
        for comp in nonfusion_computations(module):
            for i in comp.instructions:
                if i.opcode == "fusion" and i.fused_computation is not None:
                    callers.setdefault(i.fused_computation, []).append(i)
        changed = False
        for comp, fusions in callers.items():
            dot = _first_dot(comp)
            if dot is None or not all(_targeted(f) for f in fusions):
                continue
            changed |= self._rewrite(comp, dot, fusions)
        return changed

    def _rewrite(self, comp: Computation, dot: Instruction, fusions: list[Instruction]) -> bool:
        changed = _insert_root_bitcast(dot, fusions)
        order = comp.make_instruction_post_order()
        hoisted = []
        for instr in reversed(order):
            if instr.opcode in _BITCASTS and instr.parent is comp and _hoist(instr, fusions, order):
                hoisted.append(instr.name)
                order = comp.make_instruction_post_order()
        if hoisted:
            self.remark(fusions[0], f"bitcasts {', '.join(hoisted)} hoisted out of the GEMM fusion",
                        rule="hoist")
        return changed or bool(hoisted)
