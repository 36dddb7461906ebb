"""``while-loop-simplifier``: part of XLA's WhileLoopSimplifier
(xla/hlo/transforms/simplifiers/while_loop_simplifier.cc).

Four of its rewrites, tried per while loop in XLA's order (after a
successful dead- or constant-parameter removal the loop is done for this
run, as in XLA):

* ``TryRemoveDeadWhileParams`` (:mod:`.while_dead_params`): loop elements
  nothing after the loop, in the condition or in the other elements' next
  values reads leave the loop state with the body instructions computing
  them;
* ``TryRemoveConstantParams``: a tuple element whose init value and whose
  next value (body root) are constants with the same literal leaves the
  loop state; the body, the condition and the loop's users read the
  constant instead.
* ``TryPropagateConstant``: a scalar element the body passes through
  unchanged (``gte(param, i)`` at root index ``i``) whose init value is a
  constant is that constant everywhere in the body and the condition.
* ``TryMergeInductionVariables`` (for s8, u8, s32, u32, s64, u64): the trip
  counter is the first element that starts at the constant 0 and does
  ``x + 1``; every other element doing ``x + c`` for a scalar constant ``c``
  (an induction variable) is read as ``x + counter * c`` in the body, the
  condition and by the loop's users, and the body passes it through.
  ``lax.fori_loop`` carries its own index next to the scan's counter; after
  this rewrite, constant propagation and constant-parameter removal the
  loop has one counter, as in XLA (one scalar kernel and one copy fewer).

Loops are left alone when their init or body root is not a tuple
instruction, when the body or condition is called by anything else, or
(where this pass would need XLA's whole-parameter replacement) when the
body or condition parameter has users other than get-tuple-elements.  Not
implemented: adding a trip counter to a loop that has none, repeated
tuple indices, tuple flattening, trivial compares, removing loops of
zero or one trip.

Like XLA's pass it ends with a dead-code elimination when it changed
anything.

Postcondition: no loop handled here has a removable constant element, a
propagatable constant element, or an induction variable beside its trip
counter.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.module import Computation, Instruction, Module
from ..ir.shape import Shape, compatible
from .base import Pass
from .while_dead_params import dead_indices, remove_dead_params

_INDUCTION_TYPES = ("s8", "u8", "s32", "u32", "s64", "u64")


def _add(comp: Computation, opcode: str, shape: Shape, operands: list[Instruction],
         attrs: dict | None = None) -> Instruction:
    return comp.add_instruction(Instruction(opcode, shape, operands, "", dict(attrs or {})),
                                opcode)


def _gte(comp: Computation, src: Instruction, i: int) -> Instruction:
    return _add(comp, "get-tuple-element", src.shape.tuple_shapes[i], [src], {"index": str(i)})


def _clone_constant(comp: Computation, c: Instruction) -> Instruction:
    new = Instruction("constant", c.shape, [], "", {k: v for k, v in c.attrs.items()
                                                    if k != "metadata"})
    new.literal = c.literal
    return comp.add_instruction(new, "constant")


def _literal_equal(a: Instruction, b: Instruction) -> bool:
    if a.shape.element_type != b.shape.element_type or a.shape.dimensions != b.shape.dimensions:
        return False
    if a.literal is None or b.literal is None:
        return False
    if a.literal.text == b.literal.text:
        return True
    try:
        return bool(np.array_equal(np.asarray(a.literal.value), np.asarray(b.literal.value)))
    except Exception:  # undecodable literal text: compare texts only
        return False


def _effective_scalar(s: Shape) -> bool:
    return s.is_array and all(d == 1 for d in s.dimensions)


def _is_all(c: Instruction, x: int) -> bool:
    return c.opcode == "constant" and c.literal is not None and c.literal.is_scalar_value(x)


class _Loop:
    """One while loop and the facts the rewrites need."""

    def __init__(self, w: Instruction):
        self.w = w
        self.init = w.operands[0]
        self.body: Computation = w.attrs["body"]
        self.cond: Computation = w.attrs["condition"]

    def usable(self, callers: dict[Computation, int]) -> bool:
        if self.init.opcode != "tuple" or self.body.root.opcode != "tuple":
            return False
        if callers.get(self.body, 0) != 1 or callers.get(self.cond, 0) != 1:
            return False
        for comp in (self.body, self.cond):
            if comp.num_parameters != 1:
                return False
            if any(u.opcode != "get-tuple-element" for u in comp.parameter(0).users):
                return False
        return True

    def param_gtes(self, comp: Computation, index: int) -> list[Instruction]:
        return [u for u in comp.parameter(0).users if u.tuple_index == index]


def _rebuild_users(loop: _Loop, read: dict[int, "callable"]) -> None:
    """Route the loop's users through ``read[i](comp)`` for element ``i``
    (the old form of the loop's result); other elements are read as is."""
    w = loop.w
    comp = w.parent
    n = len(loop.init.operands)
    old_form: Instruction | None = None

    def element(i: int) -> Instruction:
        return read[i](comp) if i in read else _gte(comp, w, i)

    for user in list(w.users):
        if user.opcode == "get-tuple-element":
            if user.tuple_index in read:
                user.replace_all_uses_with(element(user.tuple_index))
            continue
        if old_form is None:
            old_form = _add(comp, "tuple", w.shape, [element(i) for i in range(n)])
        user.replace_operand_with(w, old_form)
    if comp.root is w:
        if old_form is None:
            old_form = _add(comp, "tuple", w.shape, [element(i) for i in range(n)])
        comp.root = old_form


def remove_constant_params(loop: _Loop) -> list[int]:
    """``TryRemoveConstantParams``; returns the removed indices."""
    root = loop.body.root
    n = len(loop.init.operands)
    gone = [i for i in range(n)
            if loop.init.operands[i].opcode == "constant" and root.operands[i].opcode == "constant"
            and _literal_equal(loop.init.operands[i], root.operands[i])]
    if not gone:
        return []
    keep = [i for i in range(n) if i not in gone]
    new_index = {old: new for new, old in enumerate(keep)}
    old_shape = loop.init.shape
    new_shape = Shape.tuple([old_shape.tuple_shapes[i] for i in keep])
    consts = {i: loop.init.operands[i] for i in gone}
    for comp in (loop.body, loop.cond):
        param = comp.parameter(0)
        for g in list(param.users):
            i = g.tuple_index
            if i in consts:
                g.replace_all_uses_with(_clone_constant(comp, consts[i]))
            else:
                g.attrs["index"] = str(new_index[i])
        param.shape = new_shape
    new_root = _add(loop.body, "tuple", new_shape, [root.operands[i] for i in keep])
    loop.body.root = new_root
    if not root.users:
        loop.body.remove_instruction(root)
    parent = loop.w.parent
    old_init = loop.init
    new_init = _add(parent, "tuple", new_shape, [old_init.operands[i] for i in keep])
    w = loop.w
    # the loop's users see the old shape: kept elements re-indexed, removed ones constant
    users = list(w.users)
    was_root = parent.root is w
    w.replace_operand_with(old_init, new_init)
    w.shape = new_shape
    old_form = None
    for user in users:
        if user.opcode == "get-tuple-element":
            i = user.tuple_index
            if i in consts:
                user.replace_all_uses_with(consts[i])
            else:
                user.attrs["index"] = str(new_index[i])
            continue
        if old_form is None:
            old_form = _old_form_tuple(parent, w, old_shape, consts, new_index)
        user.replace_operand_with(w, old_form)
    if was_root:
        parent.root = old_form or _old_form_tuple(parent, w, old_shape, consts, new_index)
    if not old_init.users and old_init is not parent.root:
        parent.remove_instruction(old_init)
    loop.init = new_init
    return gone


def _old_form_tuple(comp, w, old_shape, consts, new_index) -> Instruction:
    elems = [consts[i] if i in consts else _gte(comp, w, new_index[i])
             for i in range(len(old_shape.tuple_shapes))]
    return _add(comp, "tuple", old_shape, elems)


def propagate_constants(loop: _Loop) -> list[int]:
    """``TryPropagateConstant``; returns the indices propagated."""
    root = loop.body.root
    param = loop.body.parameter(0)
    found = {}
    for i, op in enumerate(root.operands):
        if op.opcode == "get-tuple-element" and op.operands[0] is param and op.tuple_index == i \
                and op.shape.is_array and op.shape.rank == 0 \
                and loop.init.operands[i].opcode == "constant":
            found[i] = loop.init.operands[i]
    changed = []
    for comp in (loop.cond, loop.body):
        for g in list(comp.parameter(0).users):
            c = found.get(g.tuple_index)
            if c is not None and (g.users or g is comp.root):
                g.replace_all_uses_with(_clone_constant(comp, c))
                changed.append(g.tuple_index)
    return sorted(set(changed))


def _match_increment(root: Instruction, i: int, param: Instruction, elem_ty: str
                     ) -> Instruction | None:
    """The constant ``c`` if root operand ``i`` is ``gte(param, i) + c``."""
    op = root.operands[i]
    if op.opcode != "add" or op.shape.element_type != elem_ty:
        return None
    a, b = op.operands
    for g, c in ((a, b), (b, a)):
        if g.opcode == "get-tuple-element" and g.operands[0] is param and g.tuple_index == i \
                and c.opcode == "constant" and _effective_scalar(c.shape):
            return c
    return None


def merge_induction_variables(loop: _Loop, elem_ty: str) -> list[int]:
    """``TryMergeInductionVariables`` for loops that have a trip counter;
    returns the induction variables rewritten."""
    root = loop.body.root
    param = loop.body.parameter(0)
    counter = None
    steps: dict[int, Instruction] = {}
    for i in range(len(root.operands)):
        c = _match_increment(root, i, param, elem_ty)
        if c is None:
            continue
        init = loop.init.operands[i]
        if counter is None and _is_all(c, 1) and _is_all(init, 0):
            counter = i
        else:
            steps[i] = c
    if counter is None or not steps:
        return []
    shapes = loop.init.shape.tuple_shapes
    steps = {i: c for i, c in steps.items() if compatible(shapes[i], shapes[counter])}
    if not steps:
        return []

    def reified(comp: Computation, src: Instruction, i: int) -> Instruction:
        """``src[i] + src[counter] * c``."""
        mul = _add(comp, "multiply", shapes[i],
                   [_gte(comp, src, counter), _clone_constant(comp, steps[i])])
        return _add(comp, "add", shapes[i], [_gte(comp, src, i), mul])

    passthrough = {i: _gte(loop.body, param, i) for i in steps}
    for comp in (loop.body, loop.cond):
        p = comp.parameter(0)
        for g in list(p.users):
            if g.tuple_index in steps and not (comp is loop.body and
                                               g is passthrough[g.tuple_index]):
                if g.users or g is comp.root:
                    g.replace_all_uses_with(reified(comp, p, g.tuple_index))
    for i, g in passthrough.items():
        root.set_operand(i, g)
    _rebuild_users(loop, {i: (lambda comp, i=i: reified(comp, loop.w, i)) for i in steps})
    return sorted(steps)


def _callers(module: Module) -> dict[Computation, int]:
    out: dict[Computation, int] = {}
    for comp in module.computations:
        for instr in comp.instructions:
            if instr.attrs:
                for c in instr.called_computations():
                    out[c] = out.get(c, 0) + 1
    return out


@dataclass(frozen=True)
class WhileLoopSimplifier(Pass):
    """Simplify while loops: constant elements, induction variables."""

    name = "while-loop-simplifier"

    def run(self, module: Module) -> bool:
        loops = [i for c in module.computations for i in c.instructions if i.opcode == "while"]
        if not loops:
            return False
        callers = _callers(module)
        changed = False
        for w in loops:
            if w.parent is None:
                continue
            loop = _Loop(w)
            if not loop.usable(callers):
                continue
            dead = sorted(dead_indices(w))
            if dead:
                remove_dead_params(w, set(dead))
                self.remark(w.name, f"dead tuple elements {dead} removed from the loop state "
                            "(nothing after the loop, in the condition or in the other "
                            "elements' next values reads them)")
                changed = True
                continue
            gone = remove_constant_params(loop)
            if gone:
                self.remark(w.name, f"constant tuple elements {gone} removed from the loop "
                            "state (init and next value are the same constant)")
                changed = True
                continue
            propagated = propagate_constants(loop)
            if propagated:
                self.remark(w.name, f"constant tuple elements {propagated} propagated into "
                            "the body and condition")
                changed = True
            for ty in _INDUCTION_TYPES:
                merged = merge_induction_variables(loop, ty)
                if merged:
                    self.remark(w.name, f"{ty} induction variables {merged} merged into the "
                                "trip counter (read as init + counter * step)")
                    changed = True
        if changed:  # XLA's Run ends with HloDCE
            from .dce import HloDCE
            HloDCE().run(module)
        return changed
