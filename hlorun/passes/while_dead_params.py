"""``TryRemoveDeadWhileParams`` of XLA's WhileLoopSimplifier
(xla/hlo/transforms/simplifiers/while_loop_simplifier.cc), used by
:mod:`.while_loop_simplifier`.

An element of a loop's state is dead when nothing after the loop reads it,
no side-effecting instruction and no condition result depends on it, and

1. the next value of every *other* element does not depend on it (the
   body computes it only for itself), or
2. it belongs to a group of elements whose body and condition instructions
   are connected only among themselves (XLA's union-find approximation),
   none of them read after the loop unless passed through unchanged.

Dead elements leave the loop state with the body and condition
instructions that depend on them; the loop's users are re-indexed.
"""

from __future__ import annotations

from ..ir.edit import has_side_effect
from ..ir.module import Computation, Instruction
from ..ir.shape import Shape


class _UnionFind:
    def __init__(self):
        self.parent: dict[Instruction, Instruction] = {}

    def find(self, x: Instruction) -> Instruction:
        p = self.parent.setdefault(x, x)
        while p is not self.parent.setdefault(p, p):
            self.parent[x] = p = self.parent[p]
        return p

    def union(self, a: Instruction, b: Instruction) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra is not rb:
            self.parent[ra] = rb


def dead_indices(w: Instruction) -> set[int]:
    """The loop-state indices ``TryRemoveDeadWhileParams`` removes."""
    body: Computation = w.attrs["body"]
    cond: Computation = w.attrs["condition"]
    root = body.root
    n = len(w.shape.tuple_shapes)
    if root.opcode != "tuple" or n == 0:
        return set()
    used_after: set[int] = set()
    if w.parent.root is w or any(u.opcode != "get-tuple-element" for u in w.users):
        used_after = set(range(n))
    else:
        used_after = {u.tuple_index for u in w.users}
    deps: dict[Instruction, frozenset] = {}
    uf = _UnionFind()
    side: set[int] = set()
    for comp in (body, cond):
        param = comp.parameter(0)
        for inst in comp.post_order():
            if inst is param or inst is root:
                continue
            if inst.opcode == "get-tuple-element" and inst.operands[0] is param:
                d = frozenset((inst.tuple_index,))
                out = root.operands[inst.tuple_index]
                if out is not inst:
                    uf.union(out, inst)
            else:
                d = frozenset()
                for o in inst.operands:
                    uf.union(o, inst)
                    d = d | deps.get(o, frozenset())
            deps[inst] = d
            if has_side_effect(inst) or inst is cond.root:
                side |= d
    affecting_others = set()
    for i in range(n):
        for j in deps.get(root.operands[i], frozenset()):
            if j != i:
                affecting_others.add(j)
    dead = {i for i in range(n) if i not in affecting_others and i not in used_after
            and i not in side}
    groups: dict[Instruction, set[int]] = {}
    for i in range(n):
        groups.setdefault(uf.find(root.operands[i]), set()).add(i)
    for comp in (body, cond):
        for g in comp.parameter(0).users:
            groups.setdefault(uf.find(g), set()).add(g.tuple_index)
    bparam = body.parameter(0)
    for members in groups.values():
        if any(i in side or (i in used_after and not (
                root.operands[i].opcode == "get-tuple-element"
                and root.operands[i].operands[0] is bparam and root.operands[i].tuple_index == i))
               for i in members):
            continue
        dead |= members
    return dead


def _drop(comp: Computation, gone: set[int], new_index: dict[int, int], new_shape: Shape,
          keep_root: Instruction | None) -> None:
    """Remove the instructions of ``comp`` that depend on removed elements
    and re-index the others' reads of the parameter."""
    param = comp.parameter(0)
    doomed: dict[Instruction, None] = {}
    for inst in comp.post_order():
        if inst is param or inst is comp.root or inst is keep_root:
            continue
        if (inst.opcode == "get-tuple-element" and inst.operands[0] is param
                and inst.tuple_index in gone) or any(o in doomed for o in inst.operands):
            doomed[inst] = None
    for inst in reversed(list(doomed)):
        for u in list(inst.users):
            if u not in doomed:
                raise AssertionError(f"{inst.name} feeds {u.name}, which the loop keeps")
    for inst in reversed(list(doomed)):
        comp.remove_instruction(inst)
    for g in param.users:
        g.attrs["index"] = str(new_index[g.tuple_index])
    param.shape = new_shape


def remove_dead_params(w: Instruction, gone: set[int]) -> None:
    """``RemoveDeadTupleIndices``: the loop without the elements ``gone``."""
    body: Computation = w.attrs["body"]
    cond: Computation = w.attrs["condition"]
    old_shape = w.shape
    n = len(old_shape.tuple_shapes)
    keep = [i for i in range(n) if i not in gone]
    new_index = {old: new for new, old in enumerate(keep)}
    new_shape = Shape.tuple([old_shape.tuple_shapes[i] for i in keep])
    root = body.root
    new_root = body.add_instruction(
        Instruction("tuple", new_shape, [root.operands[i] for i in keep], "", {}), "tuple")
    body.root = new_root
    body.remove_instruction(root)
    _drop(body, gone, new_index, new_shape, new_root)
    _drop(cond, gone, new_index, new_shape, None)
    parent = w.parent
    init = w.operands[0]
    if init.opcode == "tuple":
        elems = [init.operands[i] for i in keep]
    else:
        elems = [parent.add_instruction(Instruction(
            "get-tuple-element", old_shape.tuple_shapes[i], [init], "", {"index": str(i)}),
            "get-tuple-element") for i in keep]
    new_init = parent.add_instruction(Instruction("tuple", new_shape, elems, "", {}), "tuple")
    w.replace_operand_with(init, new_init)
    if not init.users and init is not parent.root:
        parent.remove_instruction(init)
    w.shape = new_shape
    for u in w.users:
        u.attrs["index"] = str(new_index[u.tuple_index])


__all__ = ["dead_indices", "remove_dead_params"]
