"""Multi-output fusion surgery, the way XLA's HloFusionInstruction does it
(``FuseInstructionIntoMultiOutput`` / ``MergeFusionInstructionIntoMultiOutput``).

:func:`fuse_into_multi_output` puts ``other`` (an instruction or a fusion,
whose body is inlined) into ``fusion``'s body and makes every value of
``other`` an output of ``fusion``: the body's root becomes a tuple (the
fusion's old outputs first, ``other``'s appended), the fusion's shape the
matching tuple, and the users of ``fusion`` and of ``other`` read
``get-tuple-element``\\ s of it.  When ``fusion`` read ``other`` (producer ->
consumer multi-output fusion) that operand is replaced inside the body by
the clone, as in single-output fusion.
"""

from __future__ import annotations

from ...ir.module import Computation, Instruction
from ...ir.shape import Shape
from ..priority_fusion.fuse import _clone, _param_for, _remove_parameter, create_fusion


def _gte(comp: Computation, tup: Instruction, index: int, shape: Shape) -> Instruction:
    g = Instruction("get-tuple-element", shape, [tup], "", {"index": str(index)})
    comp.add_instruction(g, "get-tuple-element")
    return g


def _outputs(body: Computation) -> list[Instruction]:
    root = body.root
    return list(root.operands) if root.opcode == "tuple" else [root]


def _set_outputs(fusion: Instruction, body: Computation, outs: list[Instruction]) -> None:
    old = body.root
    tup = Instruction("tuple", Shape.tuple([o.shape for o in outs]), outs)
    body.add_instruction(tup, "tuple")
    body.root = tup
    if old.opcode == "tuple" and not old.users:
        body.remove_instruction(old)
    fusion.shape = tup.shape


def _make_multi_output(fusion: Instruction) -> list[Instruction]:
    """Turn a single-output fusion into a one-output tuple fusion whose
    users read get-tuple-element 0; returns the current outputs."""
    body = fusion.fused_computation
    if body.root.opcode == "tuple":
        return _outputs(body)
    root = body.root
    users = list(fusion.users)
    was_root = fusion.parent.root is fusion
    _set_outputs(fusion, body, [root])
    g = _gte(fusion.parent, fusion, 0, root.shape)
    for u in users:
        u.replace_operand_with(fusion, g)
    if was_root:
        fusion.parent.root = g
    return [root]


def as_fusion(instr: Instruction, kind: str) -> Instruction:
    """``instr`` itself if it is a fusion, else a new fusion of ``kind``
    wrapping it (which takes its place)."""
    if instr.opcode == "fusion":
        return instr
    from ..priority_fusion.fuse import replace_with_fusion
    fusion = create_fusion(instr, kind)
    replace_with_fusion(instr, fusion)
    return fusion


def fuse_into_multi_output(fusion: Instruction, other: Instruction) -> None:
    """Fuse ``other`` into ``fusion`` as extra outputs; ``other`` goes."""
    comp = fusion.parent
    body = fusion.fused_computation
    outs = _make_multi_output(fusion)
    # the values of `other`, cloned into the body
    if other.opcode == "fusion":
        obody = other.fused_computation
        mapping: dict[Instruction, Instruction] = {}
        for p in obody.parameters:
            if p is not None:
                mapping[p] = _param_for(fusion, body, other.operands[p.parameter_number])
        other_is_tuple = obody.root.opcode == "tuple"
        for i in obody.post_order():
            if i.opcode == "parameter" or (other_is_tuple and i is obody.root):
                continue  # a multi-output root's values become outputs directly
            mapping[i] = _clone(body, i, [mapping[o] for o in i.operands])
        new_outs = [mapping[o] for o in _outputs(obody)]
    else:
        ops = [_param_for(fusion, body, o) for o in other.operands]
        new_outs = [_clone(body, other, ops)]
        other_is_tuple = False
    # producer -> consumer: the body stops reading `other`
    if other in fusion.operands:
        n = fusion.operands.index(other)
        param = body.parameters[n]
        if other_is_tuple:
            for u in list(param.users):
                if u.opcode == "get-tuple-element":
                    u.replace_all_uses_with(new_outs[u.tuple_index])
                    body.remove_instruction(u)
        else:
            param.replace_all_uses_with(new_outs[0])
        if not param.users:
            _remove_parameter(fusion, body, n)
    base = len(outs)
    _set_outputs(fusion, body, outs + new_outs)
    # users of `other` read the new outputs
    was_root = comp.root is other
    for u in list(other.users):
        if u is fusion:
            continue
        if other_is_tuple and u.opcode == "get-tuple-element":
            u.replace_operands([fusion])
            u.attrs["index"] = str(base + u.tuple_index)
        else:
            g = _gte(comp, fusion, base, new_outs[0].shape)
            u.replace_operand_with(other, g)
    if was_root:
        if other_is_tuple:
            raise ValueError("multi-output root fused away")  # never chosen as a candidate
        comp.root = _gte(comp, fusion, base, new_outs[0].shape)
    comp.remove_instruction(other)
    if other.opcode == "fusion" and comp.module is not None and \
            comp.module.has_computation(other.fused_computation):
        comp.module.remove_computation(other.fused_computation)


__all__ = ["as_fusion", "fuse_into_multi_output"]
