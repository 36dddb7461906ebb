"""copy-insertion: the copies XLA's CopyInsertion (xla/service/copy_insertion.cc,
run by XLA:GPU's pre-scheduling-copy-insertion pipeline) keeps, for the
cases hlorun models.  XLA adds copies around every while loop and at the
entry's parameters and root, then removes those that buffer liveness shows
unnecessary; what survives on straight-line JAX programs is:

* **while-loop state** (``AddCopiesForWhile`` / ``RemoveUnnecessaryCopies``):
  an element of the loop's initial tuple that the body *updates* (the body
  root's element is not the body parameter's same element passed through)
  needs a buffer of its own when its initial value is a constant (constants
  are read-only), an entry parameter that is not donated, a value that
  already initialises another element of the same tuple, or a value that
  another instruction reads and need not read before the loop (the loop
  writes over the buffer it is given) -- each gets ``copy(value)``;
* **donated parameters** (``AddCopiesForAliasedInputOutputs``): an output
  aliased with a parameter (``input_output_alias``) that is not the
  parameter itself must be written into the parameter's buffer; when the
  kernel computing it reads the parameter other than elementwise in place
  (a gather of permuted rows, a transpose ...), XLA writes a temporary and
  copies it over: ``copy`` at the root.  An output computed by in-place
  updates of the parameter (a scatter / dynamic-update-slice fusion whose
  updated operand is the parameter, GetInPlaceInputOutputPairs) shares its
  buffer and needs no copy when the parameter's other readers run before the
  update (RemoveUnnecessaryCopies: the live ranges do not interfere);
* **entry root** (``AddSpecialCaseCopies``): an output element that is a
  constant or a non-donated entry parameter is copied;
* **in-place operands** (``AddCopiesForInPlaceOperation``, kept by
  ``RemoveUnnecessaryCopies`` when the buffers interfere): a fusion whose
  root is a dynamic-update-slice or scatter writes over the buffer of the
  operand feeding the updated array (HloDataflowAnalysis::
  GetInPlaceInputOutputPairs); that operand gets ``copy(value)`` when it is
  a constant, a non-donated entry parameter, or read by another
  instruction that need not run before the fusion.

Buffers, not instructions, are what interfere: the readers of a
get-tuple-element's value are the readers of every get-tuple-element of the
same producer and index.

* **loop bodies** (AddCopiesForWhile's parameter and root copies, after
  XLA's loop-schedule-linearizer ordered the readers): ``copy`` of an old
  element a reader needs after the new value exists, or of a new value that
  reads the old one and cannot share its buffer (XLA:GPU's
  FusionCanShareBufferHint, ``buffer_sharing.py``).

Not modelled (stated): elements that change places in a loop body,
conditional branches, and the general liveness analysis.  Every copy is a remark naming the rule.

Postcondition: loop state, donated outputs and root outputs have buffers of
their own where the rules above require.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.module import Computation, Instruction, Module
from ..ir.shape import Shape
from .base import Pass
from .buffer_sharing import can_share
from .priority_fusion.analysis import fusible_computations


def _copy(comp: Computation, value: Instruction) -> Instruction:
    c = Instruction("copy", value.shape, [value])
    comp.add_instruction(c, "copy")
    return c


def _updated_elements(body: Computation) -> set[int]:
    """Indices of the loop state the body changes."""
    root = body.root
    param = body.parameters[0] if body.parameters else None
    if root.opcode != "tuple":
        return set(range(len(root.shape.tuple_shapes))) if root.shape.is_tuple else {0}
    out = set()
    for i, e in enumerate(root.operands):
        passthrough = e.opcode == "get-tuple-element" and e.operands[0] is param and \
            e.tuple_index == i
        if not passthrough:
            out.add(i)
    return out


def _donated(module: Module) -> set[int]:
    return {p for _, p, _, _ in module.input_output_alias}


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


@dataclass(frozen=True)
class CopyInsertion(Pass):
    """Add the copies XLA keeps for while-loop state, donated parameters and the entry root."""

    name = "copy-insertion"

    def run(self, module: Module) -> bool:
        changed = False
        object.__setattr__(self, "_bodies_done", set())
        entry = module.entry
        donated = _donated(module)
        for comp in fusible_computations(module):
            for w in comp.post_order():
                if w.opcode == "while":
                    changed |= self._while(comp, w, donated, comp is entry)
                elif w.opcode == "fusion":
                    changed |= self._in_place(comp, w, donated, comp is entry)
        if entry is not None:
            changed |= self._root(module, entry, donated)
        return changed

    def _while(self, comp: Computation, w: Instruction, donated: set[int], in_entry: bool) -> bool:
        init = w.operands[0]
        body = w.attrs.get("body")
        if init.opcode != "tuple" or body is None or not hasattr(body, "root"):
            return False
        updated = _updated_elements(body)
        seen: set[Instruction] = set()
        ops = list(init.operands)
        changed = False
        if id(body) not in self._bodies_done:
            self._bodies_done.add(id(body))
            changed |= self._body(body)
        for i, e in enumerate(ops):
            why = None
            if i in updated:
                if e.opcode == "constant":
                    why = "a constant (read-only)"
                elif e.opcode == "parameter" and in_entry and e.parameter_number not in donated:
                    why = "an entry parameter that is not donated"
                elif e in seen:
                    why = "shared with another element of the loop state"
                else:
                    late = self._late_readers(e, init, w)
                    if late:
                        why = f"also read by {late[0].name}, which need not run before the loop"
            seen.add(e)
            if why is None:
                continue
            c = _copy(comp, e)
            init.set_operand(i, c)
            self.remark(c, f"{c.name} copies element {i} of {w.name}'s state: it is {why} and the "
                           f"loop body updates it", "applied", rule="while", derived_from=[e.name])
            changed = True
        return changed

    def _body(self, body: Computation) -> bool:
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
                self.remark(c, f"{c.name} copies element {i} of {body.name}'s parameter: "
                               f"{late[0].name} reads the old value after {base.name} computes "
                               f"the new one", "applied", rule="while-body", derived_from=[gs[0].name])
                changed = True
                continue
            if base in readers and not self._updates_in_place(base, gs, out_index):
                c = _copy(body, v)
                root.set_operand(i, c)
                self.remark(c, f"{c.name} copies {v.name}, element {i} of {body.name}'s root: it "
                               f"reads the element's old value and cannot write over it",
                            "applied", rule="while-body", derived_from=[v.name])
                changed = True
        return changed

    @staticmethod
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

    @staticmethod
    def _late_readers(value: Instruction, init: Instruction, w: Instruction) -> list[Instruction]:
        """Readers of ``value``'s buffer other than the loop's initial tuple
        that need not run before the loop ``w`` (DependencyHloOrdering: not an
        ancestor of it).  The loop updates the buffer it is given, so such a
        reader would see the loop's values (XLA: the copy of the initial
        value that AddCopiesForWhile adds survives RemoveUnnecessaryCopies)."""
        base = value
        while base.opcode == "bitcast":
            base = base.operands[0]
        readers = [u for u in _readers(base) if u is not init]
        if not readers:
            return []
        before = _ancestors(w)
        return [u for u in readers if u not in before]

    def _in_place(self, comp: Computation, fusion: Instruction, donated: set[int],
                  in_entry: bool) -> bool:
        i = _in_place_operand(fusion)
        if i is None:
            return False
        value = fusion.operands[i]
        base = value
        while base.opcode == "bitcast":
            base = base.operands[0]
        why = None
        if base.opcode == "constant":
            why = "a constant (read-only)"
        elif base.opcode == "parameter" and in_entry and base.parameter_number not in donated:
            why = "an entry parameter that is not donated"
        else:
            readers = [u for u in _readers(base) if u is not fusion]
            if readers:
                before = _ancestors(fusion)
                late = [u for u in readers if u not in before]
                if late:
                    why = f"also read by {late[0].name}, which need not run before it"
        if why is None:
            return False
        c = _copy(comp, value)
        fusion.set_operand(i, c)
        self.remark(c, f"{c.name} copies {value.name} for {fusion.name}, which updates it in place: "
                       f"it is {why}", "applied", rule="in-place", derived_from=[value.name])
        return True

    def _root(self, module: Module, entry: Computation, donated: set[int]) -> bool:
        root = entry.root
        elements = list(root.operands) if root.opcode == "tuple" else [root]
        alias = {out: p for out, p, _, _ in module.input_output_alias}
        changed = False
        new = list(elements)
        for i, v in enumerate(elements):
            key = (i,) if root.opcode == "tuple" else ()
            why = None
            if key in alias:
                p = entry.parameters[alias[key]]
                base = v
                while base.opcode == "bitcast":
                    base = base.operands[0]
                if base.opcode == "get-tuple-element":
                    src = base.operands[0]
                    init = src.operands[0] if src.opcode == "while" else None
                    if init is not None and init.opcode == "tuple" and \
                            init.operands[base.tuple_index] is p:
                        continue  # the loop updates the donated buffer in place
                    base = src
                if base is not p and p is not None:
                    readers = [u for u in _readers(p) if u is not base]
                    before = _ancestors(base) if readers else set()
                    late = [u for u in readers if u not in before]
                    in_place = _writes_in_place(base, p)
                    if late or (base in _readers(p) and not in_place and
                                not _elementwise_in_place(base, p)):
                        why = (f"output {i} is donated parameter {p.name}'s buffer, and "
                               f"{base.name} reads {p.name} while writing it")
            elif v.opcode == "constant":
                why = f"output {i} is a constant"
            elif v.opcode == "parameter" and v.parameter_number not in donated:
                why = f"output {i} is entry parameter {v.name}"
            if why is None:
                continue
            c = _copy(entry, v)
            new[i] = c
            self.remark(c, f"{c.name}: {why}", "applied", rule="root", derived_from=[v.name])
            changed = True
        if not changed:
            return False
        if root.opcode == "tuple":
            root.replace_operands(new)
        else:
            entry.root = new[0]
        return True


__all__ = ["CopyInsertion"]
