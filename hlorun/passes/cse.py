"""``cse``: XLA's HloCSE (xla/service/hlo_cse.cc).

Per computation: first identical constants (same shape and value) are
combined into the first one; then, walking the instructions in post order,
an instruction identical to an earlier one (same opcode, shape, operands,
attributes and backend config; commutative binary ops in either operand
order; iota operands compared by value; called computations compared
structurally) is replaced by it and removed with the operands that become
dead.  Zero-operand instructions (other than partition-id/replica-id or ones
marked ``_xla_cse_safe_zero_operand``), side-effecting instructions,
``MUST_FUSE`` ones and instructions with control dependencies stay.  In a
multi-output fusion computation, users of duplicated root elements are
pointed at the first copy (dce then drops the duplicates).

``is_layout_sensitive`` (XLA's constructor argument): compare shapes with
layouts (after layout assignment) or without (before).

Postcondition: no two instructions of a computation are CSE-equivalent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..ir.attrs import parse_frontend_attributes
from ..ir.edit import SideEffects, is_dead, is_safely_removable, remove_instruction_and_unused_operands
from ..ir.module import Computation, Instruction, Module
from .base import Pass

COMMUTATIVE = frozenset({"add", "multiply", "mulhi", "maximum", "minimum", "and", "or", "xor"})
#: Attributes XLA's Identical() does not compare (metadata, frontend
#: attributes other than the sdy sharding) or that get special treatment.
_IGNORED_ATTRS = frozenset({"metadata", "frontend_attributes", "sharding", "backend_config",
                            "statistics", "origin", "original_value"})
_SDY_SHARDING = "xla.sdy.sharding"
_VALUE_KEY_LIMIT = 1024  # elements; bigger constants compare by text


@dataclass(frozen=True)
class HloCSE(Pass):
    """Common-subexpression elimination: merge identical constants and identical instructions."""

    name = "cse"
    is_layout_sensitive: bool = False
    ignore_control_dependencies: bool = False
    only_fusion_computations: bool = False

    def run(self, module: Module) -> bool:
        ctx = _Context(self.is_layout_sensitive)
        fusion_of: dict[Computation, Instruction] = {}
        for comp in module.computations:
            for i in comp._instructions:
                if i.opcode == "fusion":
                    fc = i.fused_computation
                    if fc is not None:
                        fusion_of.setdefault(fc, i)
        changed = False
        for comp in list(module.computations):
            if self.only_fusion_computations and comp not in fusion_of:
                continue
            changed |= self._run_on_computation(comp, ctx, fusion_of.get(comp))
        return changed

    # -- constants ---------------------------------------------------------------
    def _combine_constants(self, comp: Computation, ctx: "_Context") -> bool:
        consts = []
        for i in comp._instructions:
            op = i.opcode
            if op == "constant":
                consts.append(i)
            elif op == "domain":
                return False  # XLA combines per sharding domain; stay conservative
        if len(consts) < 2:
            return False  # nothing to combine
        seen: dict[tuple, Instruction] = {}
        combined = 0
        for instr in consts:
            if instr.parent is not comp:
                continue
            key = ctx.constant_key(instr)
            match = seen.get(key)
            if match is None:
                seen[key] = instr
                continue
            instr.replace_all_uses_with(match)
            if instr.control_predecessors or instr.control_successors:
                continue  # XLA's RemoveInstruction would fail; keep it
            comp.remove_instruction(instr)
            self.remark(instr.name, f"combined with identical constant {match.name}",
                        derived_from=[match])
            combined += 1
        return combined > 0

    # -- instructions --------------------------------------------------------------
    def _should_eliminate(self, instr: Instruction, effects: SideEffects) -> bool:
        fa_text = instr.attrs.get("frontend_attributes")
        fa = parse_frontend_attributes(fa_text) if fa_text else {}
        if not instr.operands and instr.opcode not in ("partition-id", "replica-id") \
                and "_xla_cse_safe_zero_operand" not in fa:
            return False
        if "MUST_FUSE" in fa:
            return False
        return not effects.instruction(instr)

    def _run_on_computation(self, comp: Computation, ctx: "_Context",
                            fusion: Instruction | None) -> bool:
        changed = self._combine_constants(comp, ctx)
        if not _distinct_keys(comp, ctx.cheap_key):
            changed |= self._eliminate(comp, ctx)
        if fusion is not None and fusion.parent is not None and comp.root is not None \
                and comp.root.opcode == "tuple" and fusion.shape.is_tuple:
            root = comp.root
            first: dict[Instruction, int] = {}
            for idx, op in enumerate(root.operands):
                first.setdefault(op, idx)
            if len(first) < len(root.operands):
                for user in fusion.users:
                    if user.opcode == "get-tuple-element":
                        new = first[root.operands[user.tuple_index]]
                        if new != user.tuple_index:
                            user.attrs["index"] = str(new)
                            changed = True
        return changed

    def _eliminate(self, comp: Computation, ctx: "_Context") -> bool:
        """The post-order walk that replaces instructions by identical
        earlier ones."""
        changed = False
        effects = SideEffects()
        # Keys in two levels: the opcode, shape and operands first; the rest
        # of the key (attributes, called computations' structure) only for
        # instructions that share those -- one alone there can match
        # nothing, and nothing later can match it unless it shares them
        # too.  A bucket holds its one instruction until a second arrives,
        # then a dict full key -> instruction, as one dict of full keys
        # would (the operands of an instruction already walked do not
        # change; a removed one is dropped, as its entry would be ignored).
        buckets: dict[tuple, Any] = {}
        ignore_cd = self.ignore_control_dependencies
        side_effect = effects.instruction
        cheap_key, full_key = ctx.cheap_key, ctx.full_key
        for instr in comp.post_order():
            if instr.parent is not comp:
                continue
            # _should_eliminate and is_safely_removable, inlined for the
            # common case (operands, no frontend attributes, no control
            # dependencies; a parameter has no operands)
            if not instr.operands or "frontend_attributes" in instr.attrs:
                if not self._should_eliminate(instr, effects):
                    continue
                if not is_safely_removable(instr, ignore_cd):
                    continue
            else:
                if side_effect(instr):
                    continue
                if not ignore_cd and (instr.control_predecessors or instr.control_successors):
                    continue
            ck = cheap_key(instr)
            reps = buckets.get(ck)
            if reps is None:
                buckets[ck] = instr
                key = None
                rep = None
            else:
                if type(reps) is not dict:
                    first = reps
                    buckets[ck] = reps = {}
                    if first.parent is comp:
                        reps[full_key(first, ck)] = first
                key = full_key(instr, ck)
                rep = reps.get(key)
            if rep is not None and rep.parent is comp:
                name = instr.name
                instr.replace_all_uses_with(rep)
                remove_instruction_and_unused_operands(
                    comp, instr, self.ignore_control_dependencies, side_effects=effects)
                self.remark(name, f"replaced by identical {rep.name}", derived_from=[rep])
                changed = True
                continue
            if key is not None:
                reps[key] = instr
            ops = instr.operands
            for i, a in enumerate(ops):
                if a.opcode != "iota":
                    continue
                for j in range(i + 1, len(ops)):
                    b = ops[j]
                    if a is b or b.opcode != "iota" or ctx.iota_key(a) != ctx.iota_key(b):
                        continue
                    instr.set_operand(j, a)
                    changed = True
                    if is_dead(b) and not b.control_predecessors and not b.control_successors:
                        comp.remove_instruction(b)
        return changed


def _distinct_keys(comp: Computation, cheap_key) -> bool:
    """True when :meth:`HloCSE._eliminate` would change nothing in ``comp``:
    no two instructions it could eliminate share the first part of their
    key (opcode, shape, operands), and none has two iota operands (the
    iota rule).  Nothing is replaced then, so no key changes during the
    walk either.  (Counted conservatively: every instruction with
    operands, and the zero-operand ones ``_should_eliminate`` may accept.)
    One scan without the post order or the side-effect analysis: most
    computations, in most runs, have nothing to eliminate."""
    seen: set = set()
    add = seen.add
    n = 0
    for i in comp._instructions:
        ops = i.operands
        if not ops:
            if i.opcode not in ("partition-id", "replica-id") and "frontend_attributes" not in i.attrs:
                continue  # never eliminated
        elif len(ops) > 1:
            iotas = 0
            for o in ops:
                if o.opcode == "iota":
                    iotas += 1
            if iotas > 1:
                return False
        add(cheap_key(i))
        n += 1
        if len(seen) != n:
            return False
    return True


class _Context:
    """Keys that make XLA's equivalence (Identical with CSE's operand and
    computation comparators) a dict lookup."""

    def __init__(self, layout_sensitive: bool):
        self.layout_sensitive = layout_sensitive
        self._comp_keys: dict[Computation, Any] = {}
        self._shape_keys: dict[Any, Any] = {}

    def shape_key(self, shape) -> Any:
        if self.layout_sensitive:
            return shape
        got = self._shape_keys.get(shape)
        if got is None:
            got = self._shape_keys[shape] = shape.without_layout()
        return got

    def constant_key(self, instr: Instruction) -> tuple:
        lit = instr.literal
        shape = self.shape_key(instr.shape)
        if lit is None:
            return (shape, None, id(instr))
        if instr.shape.is_array and instr.shape.element_count <= _VALUE_KEY_LIMIT:
            try:
                value = lit.value
                return (shape, "v", value.dtype.str, value.tobytes())
            except Exception:  # undecodable literal: compare its text
                pass
        return (shape, "t", lit.text)

    def iota_key(self, instr: Instruction) -> tuple:
        return ("iota", instr.attrs.get("iota_dimension"), self.shape_key(instr.shape))

    def _operand_key(self, op: Instruction) -> Any:
        return self.iota_key(op) if op.opcode == "iota" else op.id

    def _attrs_key(self, instr: Instruction, computation_key) -> tuple:
        out = []
        for k, v in instr.attrs.items():
            if k in _IGNORED_ATTRS:
                continue
            if type(v) is str:  # most values
                out.append((k, v))
                continue
            if isinstance(v, Computation):
                v = computation_key(v)
            elif isinstance(v, list):
                v = tuple(computation_key(c) if isinstance(c, Computation) else c for c in v)
            out.append((k, v))
        out.sort()
        return tuple(out)

    def _sharding_key(self, instr: Instruction) -> tuple:
        fa = instr.attrs.get("frontend_attributes")
        sdy = parse_frontend_attributes(fa).get(_SDY_SHARDING) if fa and _SDY_SHARDING in fa else None
        return (instr.attrs.get("sharding"), sdy)

    def key(self, instr: Instruction) -> tuple:
        return self.full_key(instr, self.cheap_key(instr))

    def cheap_key(self, instr: Instruction) -> tuple:
        """The key's first part: opcode, shape and operands."""
        ops = [o.id if o.opcode != "iota" else self.iota_key(o) for o in instr.operands]
        op = instr.opcode
        if op in COMMUTATIVE and len(ops) == 2:
            ops.sort(key=repr)
        return (op, self.shape_key(instr.shape), tuple(ops))

    def full_key(self, instr: Instruction, cheap: tuple) -> tuple:
        """The whole key, given its first part ``cheap``."""
        a = instr.attrs
        if not a:
            return cheap + ((None, None), None, ())
        return cheap + (self._sharding_key(instr), a.get("backend_config"),
                        self._attrs_key(instr, self.computation_key))

    def computation_key(self, comp: Computation) -> Any:
        """Structural identity of a computation (``HloComputation::operator==``:
        layout-sensitive, names ignored, compared from the root)."""
        got = self._comp_keys.get(comp)
        if got is not None:
            return got
        self._comp_keys[comp] = ("cycle", id(comp))
        if comp.root is None:
            key: Any = ("empty", comp.num_parameters)
        else:
            index: dict[Instruction, int] = {}
            rows = []
            order: list[Instruction] = []
            stack = [(comp.root, False)]
            while stack:
                cur, done = stack.pop()
                if cur in index:
                    continue
                if done:
                    index[cur] = len(order)
                    order.append(cur)
                    continue
                stack.append((cur, True))
                for o in reversed(cur.operands):
                    if o not in index:
                        stack.append((o, False))
            for i in order:
                extra: Any = None
                if i.opcode == "parameter":
                    extra = i.parameter_number
                elif i.opcode == "constant" and i.literal is not None:
                    extra = i.literal.text
                rows.append((i.opcode, i.shape, tuple(index[o] for o in i.operands), extra,
                             i.attrs.get("backend_config"),
                             self._attrs_key(i, self.computation_key)))
            key = (comp.num_parameters, comp.execution_thread, tuple(rows))
        self._comp_keys[comp] = key
        return key
