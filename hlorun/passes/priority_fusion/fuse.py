"""Building fusion instructions the way XLA's HloFusionInstruction does.

* :func:`create_fusion` -- ``HloInstruction::CreateFusion(shape, kind,
  consumer)``: a ``fusion`` instruction (named "fusion", uniquified) whose
  computation (named "fused_computation", uniquified) holds a clone of the
  consumer reading one parameter per operand (``param_N``);
* :func:`fuse_into` -- ``FuseInstruction`` / ``MergeFusionInstruction``:
  the producer (an instruction or a fusion, whose body is inlined) is cloned
  into the fusion, reading existing parameters where the producer's operands
  already are fusion operands and new parameters (appended) otherwise; the
  parameter that stood for the producer goes and later parameters are
  renumbered (``RemoveParameter``: new ``param_N`` instructions).

Clones keep the original name (uniquified in the module: ``add.3.0`` ->
``add.3.1``), metadata and attributes.  A fusion takes the consumer's
metadata (and frontend attributes).
"""

from __future__ import annotations

from ...ir.module import Computation, Instruction, Module, stamp
from ...ir.shape import Shape


def fused_computation(fusion: Instruction) -> Computation:
    comp = fusion.fused_computation
    assert comp is not None, fusion
    return comp


def _clone(comp: Computation, instr: Instruction, operands: list[Instruction]) -> Instruction:
    new = Instruction(instr.opcode, instr.shape, operands, "", dict(instr.attrs))
    new.literal = instr.literal
    comp.add_instruction(new, instr.name)
    return new


def _new_parameter(comp: Computation, number: int, shape: Shape) -> Instruction:
    p = Instruction("parameter", shape)
    p.parameter_number = number
    comp.add_instruction(p, f"param_{number}")
    return p


def create_fusion(consumer: Instruction, kind: str) -> Instruction:
    """Wrap ``consumer`` in a new fusion instruction (not yet replacing it)."""
    comp = consumer.parent
    module = comp.module
    body = Computation(module.unique_name("fused_computation"))
    body.module = module
    params: list[Instruction] = []
    operands: list[Instruction] = []
    for op in consumer.operands:
        if op in operands:
            params.append(params[operands.index(op)])
            continue
        operands.append(op)
        params.append(_new_parameter(body, len(operands) - 1, op.shape))
    root = _clone(body, consumer, params)
    body.root = root
    _register(module, body, comp)
    attrs: dict = {"kind": kind, "calls": body}
    for key in ("metadata", "frontend_attributes"):
        if key in consumer.attrs:
            attrs[key] = consumer.attrs[key]
    fusion = Instruction("fusion", consumer.shape, operands, "", attrs)
    comp.add_instruction(fusion, "fusion")
    return fusion


def _register(module: Module, body: Computation, caller: Computation) -> None:
    """Add ``body`` to the module before its caller (callees first); O(1)."""
    module.insert_computation_before(body, caller)


def _param_for(fusion: Instruction, body: Computation, operand: Instruction) -> Instruction:
    try:  # (instructions compare by identity: the first operand that is ``operand``)
        return body.parameters[fusion.operands.index(operand)]
    except ValueError:
        pass
    fusion.add_operand(operand)
    return _new_parameter(body, len(fusion.operands) - 1, operand.shape)


def _remove_parameter(fusion: Instruction, body: Computation, n: int) -> None:
    """``RemoveParameter(n)`` + ``RemoveOperandAt(n)``."""
    param = body.parameters[n]
    later = body.parameters[n + 1:]
    if all(p is not None and p.__class__ is Instruction and not p.control_predecessors
           and not p.control_successors for p in later):
        _renumber_after(body, param, later)
    else:
        from ...ir.edit import remove_parameter
        remove_parameter(body, param)
    ops = list(fusion.operands)
    del ops[n]
    fusion.replace_operands(ops)


def _renumber_after(body: Computation, param: Instruction, later: list) -> None:
    """:func:`hlorun.ir.edit.remove_parameter` for later parameters that no
    tracker has scanned (plain instructions, built since the last scan or
    never scanned) and without control dependencies: each keeps its object
    and users and takes the name (``param_N``, uniquified the same way), the
    number and the place at the end of the instruction order that the new
    parameter XLA's RemoveParameter makes would have.  Nothing outside the
    body can tell the difference (a plain instruction's users were stamped
    when they came to read it), and building, rewiring and removing one
    instruction per later parameter was a quarter of ``fuse_into``."""
    n = param.parameter_number
    body.remove_instruction(param)
    params = body.parameters
    del params[n:]
    module = body.module
    names = body._names
    order = body._instructions
    for i, p in enumerate(later, start=n):
        if names is not None:
            names.pop(p.name, None)
        base = f"param_{i}"
        p.name = module.unique_name(base) if module is not None else base
        p.parameter_number = i
        p.pos = -1
        del order[p]
        order[p] = None
        stamp(p)
        if names is not None:
            names[p.name] = p
        params.append(p)


def fuse_into(fusion: Instruction, producer: Instruction, members=None) -> None:
    """Clone ``producer`` into ``fusion`` (which must read it); ``fusion``
    stops reading ``producer``.  A fusion producer has its body merged
    (``members(body)``: a cache of :func:`fused_instructions`' order)."""
    body = fused_computation(fusion)
    n = fusion.operands.index(producer)
    if producer.opcode == "fusion":
        pbody = fused_computation(producer)
        mapping: dict[Instruction, Instruction] = {}
        for p in pbody.parameters:
            if p is not None:
                mapping[p] = _param_for(fusion, body, producer.operands[p.parameter_number])
        order = members(pbody) if members is not None else \
            [i for i in pbody.post_order() if i.opcode != "parameter"]
        for i in order:
            mapping[i] = _clone(body, i, [mapping[o] for o in i.operands])
        clone = mapping[pbody.root]
    else:
        ops = [_param_for(fusion, body, o) for o in producer.operands]
        clone = _clone(body, producer, ops)
    param = body.parameters[n]
    param.replace_all_uses_with(clone)
    if body.root is param:
        body.root = clone
    _remove_parameter(fusion, body, n)


def replace_with_fusion(consumer: Instruction, fusion: Instruction) -> None:
    """Uses of ``consumer`` read ``fusion``; ``consumer`` goes."""
    comp = consumer.parent
    consumer.replace_all_uses_with(fusion)
    for p in list(consumer.control_predecessors):
        p.add_control_dependency_to(fusion)
    for s in list(consumer.control_successors):
        fusion.add_control_dependency_to(s)
    consumer.drop_all_control_deps()
    comp.remove_instruction(consumer)


def dispose(body: Computation) -> None:
    """Unlink a fused computation that nothing calls any more and nothing
    else refers to (its instructions' operands, users and parent), so that
    reference counting frees it now: merged fusion bodies were cyclic
    garbage that lived until the next full collection (a third of
    priority fusion's memory on the JAX transformers)."""
    for i in body._instructions:
        i.operands = []
        i._users = ()
        i.parent = None
        i.control_predecessors = []
        i.control_successors = []
    body._instructions = {}
    body._names = None
    body.root = None
    body.parameters = []


def fused_instructions(fusion: Instruction) -> list[Instruction]:
    return [i for i in fused_computation(fusion).post_order() if i.opcode != "parameter"]
