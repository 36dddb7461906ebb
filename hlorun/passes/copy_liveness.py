"""Buffer-liveness helpers of copy-insertion (``copy_insertion.py``): who
reads a buffer, what runs before an instruction, which fusions update an
operand in place, and the copies a loop body keeps (``body_copies``)."""

from __future__ import annotations

from ..ir.module import Computation, Instruction
from .buffer_sharing import can_share


def _copy(comp: Computation, value: Instruction) -> Instruction:
    c = Instruction("copy", value.shape, [value])
    comp.add_instruction(c, "copy")
    return c


def _readers(value: Instruction) -> list[Instruction]:
    """The instructions that read ``value``'s buffer (through bitcasts).  The
    buffer of a get-tuple-element is the tuple producer's element: every
    get-tuple-element of the same producer and index reads it (XLA's
    dataflow analysis has one HloValue per element, however many
    get-tuple-elements name it)."""
    starts = [value]
    if value.opcode == "get-tuple-element":
        src = value.operands[0]
        starts = [g for g in src.users
                  if g.opcode == "get-tuple-element" and g.tuple_index == value.tuple_index]
    out, stack = [], [u for g in starts for u in g.users]
    while stack:
        u = stack.pop()
        if u.opcode == "bitcast":
            stack.extend(u.users)
        elif u not in out:
            out.append(u)
    return out


def _ancestors(instr: Instruction) -> set[Instruction]:
    """Everything ``instr`` depends on (operands and control predecessors,
    transitively): these run before it in any schedule."""
    seen: set[Instruction] = set()
    stack = list(instr.operands) + list(instr.control_predecessors)
    while stack:
        x = stack.pop()
        if x in seen:
            continue
        seen.add(x)
        stack.extend(x.operands)
        stack.extend(x.control_predecessors)
    return seen


def _elementwise_in_place(user: Instruction, param: Instruction) -> bool:
    """Can ``user`` write its output over ``param`` (HloDataflowAnalysis::
    CanShareOperandBufferWithUser, for the loop-fusion case): a loop fusion
    whose only reads of ``param`` are elementwise, same shape."""
    if user.opcode != "fusion":
        return user.shape.is_array and user.shape.dimensions == param.shape.dimensions and \
            user.opcode not in ("gather", "transpose", "reverse", "slice", "concatenate", "pad")
    if user.fusion_kind != "kLoop":
        return False
    body = user.fused_computation
    for i, op in enumerate(user.operands):
        if op is not param:
            continue
        p = body.parameters[i]
        stack, seen = list(p.users), set()
        while stack:
            x = stack.pop()
            if x in seen:
                continue
            seen.add(x)
            if x.opcode in ("tuple",):
                continue
            if x.opcode not in ("bitcast",) and not (
                    x.shape.is_array and tuple(x.shape.dimensions) == tuple(param.shape.dimensions)
                    and x.opcode not in ("gather", "transpose", "reverse", "slice", "concatenate",
                                         "pad", "reduce", "dynamic-slice", "broadcast")):
                return False
            stack.extend(x.users)
    return True


def _in_place_operand(fusion: Instruction) -> int | None:
    """The operand a fusion updates in place: its root is a
    dynamic-update-slice or a single-output scatter whose updated array is a
    fusion parameter (through bitcasts).  An unfused dynamic-update-slice or
    single-operand scatter updates its operand 0 (HloDataflowAnalysis::
    GetInPlaceInputOutputPairs)."""
    if fusion.opcode in ("dynamic-update-slice", "scatter") and fusion.shape.is_array:
        return 0
    body = fusion.fused_computation
    if body is None:
        return None
    root = body.root
    while root.opcode == "bitcast":
        root = root.operands[0]
    if root.opcode not in ("dynamic-update-slice", "scatter") or not root.shape.is_array:
        return None
    x = root.operands[0]
    while x.opcode == "bitcast":
        x = x.operands[0]
    if x.opcode != "parameter" or x.parameter_number is None:
        return None
    return x.parameter_number


def _writes_in_place(value: Instruction, param: Instruction) -> bool:
    """Is ``value`` computed in ``param``'s buffer by in-place updates: the
    chain of in-place input/output pairs (a scatter or dynamic-update-slice
    fusion's updated operand, through bitcasts) from ``value`` reaches
    ``param`` (XLA: the values share one HloBuffer, so the donated output
    needs no copy when the parameter's other readers run first)."""
    x, seen = value, set()
    while x is not param and x not in seen:
        seen.add(x)
        if x.opcode == "bitcast":
            x = x.operands[0]
            continue
        i = _in_place_operand(x) if x.opcode in ("fusion", "dynamic-update-slice",
                                                 "scatter") else None
        if i is None:
            return False
        x = x.operands[i]
    return x is param


def body_copies(body: Computation, remark) -> bool:
    """The copies that stay inside a loop body (AddCopiesForWhile's copies
    of the body parameter and root; XLA's loop-schedule-linearizer first
    orders each element's readers before the instruction that writes the
    element's next value wherever the data flow allows).  For an element
    the body updates, with old value p (the parameter's element) and new
    value v (the root's element):

    * a reader of p that depends on v runs after v is written: the old
      value needs a buffer of its own -> ``copy(p)``, read by all of p's
      readers (the parameter-side copy);
    * otherwise, v itself reads p and cannot write over it (not an
      elementwise loop fusion, not an in-place update of p) -> ``copy(v)``
      at the root (the root-side copy)."""
    param = body.parameters[0] if body.parameters else None
    root = body.root
    if param is None or root is None or root.opcode != "tuple":
        return False
    gtes: dict[int, list[Instruction]] = {}
    for g in param.users:
        if g.opcode == "get-tuple-element":
            gtes.setdefault(g.tuple_index, []).append(g)
    if any(g in root.operands and root.operands.index(g) != g.tuple_index
           for gs in gtes.values() for g in gs):
        return False  # elements that change places: not modelled
    changed = False
    for i, v in enumerate(list(root.operands)):
        gs = gtes.get(i)
        base = v
        while base.opcode == "bitcast":
            base = base.operands[0]
        if not gs or (base.opcode == "get-tuple-element" and base.operands[0] is param):
            continue
        out_index = None
        if base.opcode == "get-tuple-element" and base.operands[0].opcode == "fusion":
            out_index = base.tuple_index  # an output of a multi-output fusion
            base = base.operands[0]
        readers = [u for u in _readers(gs[0]) if u is not root]
        late = [u for u in readers if u is not base and base in _ancestors(u)]
        if late:
            c = _copy(body, gs[0])
            for g in gs:
                for u in list(g.users):
                    if u is not c and u is not root:
                        u.replace_operand_with(g, c)
            remark(c, f"{c.name} copies element {i} of {body.name}'s parameter: "
                           f"{late[0].name} reads the old value after {base.name} computes "
                           f"the new one", "applied", rule="while-body", derived_from=[gs[0].name])
            changed = True
            continue
        if base in readers and not _updates_in_place(base, gs, out_index):
            c = _copy(body, v)
            root.set_operand(i, c)
            remark(c, f"{c.name} copies {v.name}, element {i} of {body.name}'s root: it "
                           f"reads the element's old value and cannot write over it",
                        "applied", rule="while-body", derived_from=[v.name])
            changed = True
    return changed


def _updates_in_place(v: Instruction, old: list[Instruction],
                      out_index: int | None = None) -> bool:
    """Can ``v`` compute its value in the buffer of ``old`` (the
    get-tuple-elements of one parameter element) that it reads."""
    i = _in_place_operand(v) if v.opcode in ("fusion", "dynamic-update-slice",
                                             "scatter") and out_index is None else None
    if i is not None:
        x = v.operands[i]
        while x.opcode == "bitcast":
            x = x.operands[0]
        if x in old and sum(1 for o in v.operands if o in old) == 1:
            return True
    read = [g for g in old if g in v.operands]
    out = [can_share(v, g, out_index) for g in read]
    if all(o is not None for o in out):
        return all(out)
    return all(_elementwise_in_place(v, g) for g in read)


__all__ = ["body_copies"]
