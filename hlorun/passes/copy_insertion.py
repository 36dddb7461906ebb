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

* **conditional branches** (AddCopiesForConditional, kept by
  RemoveUnnecessaryCopies): a branch root element that is an element of the
  branch's parameter, whose operand value is a constant, a non-donated entry
  parameter or read by another instruction that need not run first, is
  copied (``conditional_copies.py``).

Not modelled (stated): elements that change places in a loop body, and the
general liveness analysis.  Every copy is a remark naming the rule.

Postcondition: loop state, donated outputs and root outputs have buffers of
their own where the rules above require.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.module import Computation, Instruction, Module
from ..ir.shape import Shape
from .base import Pass
from .buffer_sharing import can_share
from .conditional_copies import copy_passed_through
from .copy_liveness import (_ancestors, _copy, _elementwise_in_place, _in_place_operand,  # noqa: F401
                            _readers, _writes_in_place, body_copies)
from .priority_fusion.analysis import fusible_computations


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
                elif w.opcode == "conditional":
                    changed |= self._conditional(w, donated, comp is entry)
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
            changed |= body_copies(body, self.remark)
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

    def _conditional(self, cond: Instruction, donated: set[int], in_entry: bool) -> bool:
        """Branches that return their parameter's elements (conditional_copies.py)."""
        def must_copy(value: Instruction) -> str | None:
            base = value
            while base.opcode == "bitcast":
                base = base.operands[0]
            if base.opcode == "constant":
                return "is a constant (read-only)"
            if base.opcode == "parameter" and in_entry and base.parameter_number not in donated:
                return "is an entry parameter that is not donated"
            operand_tuples = {o for o in cond.operands[1:] if o.opcode == "tuple"}
            readers = [u for u in _readers(base) if u not in operand_tuples and u is not cond]
            if readers:
                before = _ancestors(cond)
                late = [u for u in readers if u not in before]
                if late:
                    return f"{late[0].name} also reads and need not run before the conditional"
            return None

        copies = copy_passed_through(cond, must_copy)
        for c, why in copies:
            self.remark(c, f"{c.name}: {why}", "applied", rule="conditional",
                        derived_from=[c.operands[0].name])
        return bool(copies)

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
                out_index = None
                if base.opcode == "get-tuple-element":
                    src = base.operands[0]
                    init = src.operands[0] if src.opcode == "while" else None
                    if init is not None and init.opcode == "tuple" and \
                            init.operands[base.tuple_index] is p:
                        continue  # the loop updates the donated buffer in place
                    out_index = base.tuple_index
                    base = src
                if base is not p and p is not None:
                    readers = [u for u in _readers(p) if u is not base]
                    before = _ancestors(base) if readers else set()
                    late = [u for u in readers if u not in before]
                    in_place = _writes_in_place(base, p)
                    if base.opcode == "fusion" and p in base.operands:
                        # XLA:GPU's FusionCanShareBufferHint (buffer_sharing.py)
                        shares = can_share(base, p, out_index)
                    else:
                        shares = _elementwise_in_place(base, p)
                    if late or (base in _readers(p) and not in_place and not shares):
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
