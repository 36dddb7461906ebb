"""XLA:GPU's ``FusionCanShareBufferHint``: may a fusion write its output
into the buffer of one of its (dead) operands?

Yes when the fusion reads the parameter in the same iteration order it
writes the output: every op on the paths from the parameter to the output
is elementwise on that operand, a bitcast or a tuple; a dynamic-slice that
reads exactly the slice the root dynamic-update-slice writes; the
update operand of a root DUS; a scatter input of a root scatter; the
matching operand of a root sort; and anything below the reduction
emitter's hero (the reduction runs first).  Multi-output fusions must not
reach another output with a different iteration order (a transpose or copy
hero).  Shapes must agree in element count and bit width.

The hero analysis here is a simplification of ``HloFusionAnalysis``: a
root's hero is found by walking up single-operand elementwise, bitcast,
reshape and bitcast-like transposes; a ``reduce`` hero makes the fusion a
reduction fusion.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ir.module import Instruction
from ..ir.shape import bit_width, is_array_type

if TYPE_CHECKING:
    from .alias_rules import AliasRules

_INTERMEDIATE = frozenset({"bitcast", "reshape", "convert", "negate", "abs", "copy",
                           "exponential", "log", "sqrt", "rsqrt", "tanh", "logistic",
                           "bitcast-convert", "reduce-precision", "sign", "floor", "ceil",
                           "not", "cosine", "sine", "round-nearest-even", "round-nearest-afz"})


def fusion_roots(fusion: Instruction) -> list[Instruction]:
    body = fusion.fused_computation
    if body is None or body.root is None:
        return []
    root = body.root
    return list(root.operands) if root.opcode == "tuple" else [root]


def hero_of(root: Instruction) -> Instruction:
    hero = root
    while (hero.opcode in _INTERMEDIATE and len(hero.operands) == 1
           and hero.operands[0].opcode != "parameter" and len(hero.operands[0]._users) == 1):
        if hero.opcode == "copy" and hero.shape.layout != hero.operands[0].shape.layout:
            break
        hero = hero.operands[0]
    return hero


def reduction_hero(fusion: Instruction) -> Instruction | None:
    for root in fusion_roots(fusion):
        h = hero_of(root)
        if h.opcode == "reduce" and h.operands and not h.operands[0].shape.is_scalar:
            return h
    return None


def _elementwise_on(rules: "AliasRules", hlo: Instruction, operand: Instruction) -> bool:
    return all(rules.is_elementwise_on_operand(hlo, i) for i, o in enumerate(hlo.operands)
               if o is operand)


def fusion_can_share(rules: "AliasRules", operand: Instruction, user: Instruction,
                     user_index: tuple) -> bool:
    body = user.fused_computation
    if body is None or body.root is None or operand not in user.operands:
        return False
    sub = user.shape.subshape(user_index) if user_index else user.shape
    oshape = operand.shape
    if oshape != sub:
        if not (oshape.is_array and sub.is_array):
            return False
        if oshape.element_count != sub.element_count:
            return False
        if not (is_array_type(oshape.element_type) and is_array_type(sub.element_type)) or \
                bit_width(oshape.element_type) != bit_width(sub.element_type):
            return False
    hero = reduction_hero(user)
    param = body.parameters[user.operands.index(operand)]
    if param is None:
        return False
    output = body.root
    for i in user_index:
        if output.opcode != "tuple":
            break
        output = output.operands[i]
    nbr = output.operands[0] if output.opcode == "bitcast" and output.operands else output
    queue = [param]
    visited = {param}
    found = False
    while queue:
        cur = queue.pop(0)
        if cur is output:
            found = True
        if cur is hero:
            continue
        for hlo in cur._users:
            if hlo not in visited:
                visited.add(hlo)
                queue.append(hlo)
            if hlo is nbr and hlo.opcode == "scatter":
                n_in = len(hlo.shape.tuple_shapes) if hlo.shape.is_tuple else 1
                if hlo.operands.index(cur) < n_in and hlo.operands.count(cur) == 1:
                    continue
            if hlo is nbr and hlo.opcode == "sort" and hlo.operands.count(cur) == 1:
                if user_index != (hlo.operands.index(cur),):
                    return False
                continue
            if (nbr.opcode == "dynamic-update-slice" and hlo.opcode == "dynamic-slice"
                    and nbr.operands[0] is hlo.operands[0]
                    and len(nbr.operands) > 1 and hlo.shape == nbr.operands[1].shape):
                if not (_effective_scalar(hlo.shape) and _effective_scalar(nbr.operands[1].shape)):
                    for k in range(1, len(hlo.operands)):
                        if k + 1 >= len(nbr.operands) or hlo.operands[k] is not nbr.operands[k + 1]:
                            return False
            elif ((not _elementwise_on(rules, hlo, cur) or hlo.opcode == "copy")
                  and hlo.opcode not in ("bitcast", "tuple") and hlo is not hero):
                if not (hlo is nbr and hlo.opcode == "dynamic-update-slice"
                        and hlo.operands.index(cur) == 1):
                    return False
    roots = fusion_roots(user)
    if body.root.opcode == "tuple" and len(roots) > 1:
        other = False
        transpose_hero = False
        for r in roots:
            if r in visited:
                if r is not output:
                    other = True
                h = hero_of(r)
                if h.opcode == "transpose" or (h.opcode == "copy" and h.operands
                                              and h.shape.layout != h.operands[0].shape.layout):
                    transpose_hero = True
        if other and (not rules.is_elementwise(nbr) or transpose_hero):
            return False
    return found


def _effective_scalar(shape) -> bool:
    return shape.is_array and shape.element_count == 1
