"""call-inliner: XLA's CallInliner (xla/hlo/transforms/simplifiers/call_inliner.cc)
for plain ``call`` instructions.

Every ``call(...) to_apply=%f`` in a non-fusion computation is replaced by a
copy of ``%f``'s body: parameters become the call's operands, the root
replaces the call.  Copies keep the callee instruction's name (made unique in
the module) and get the call's metadata the way XLA's inliner propagates it:
the call's ``op_name`` is prefixed to the instruction's own op_name (or used
as is when it has none), and the call's ``stack_frame_id`` is kept when the
instruction has none.  Callees that nobody calls any more are removed.
Calls carrying a backend config or a ``composite`` / ``inline=false``
frontend attribute are left alone, as in XLA.

Postcondition: no ``call`` instruction remains in the inlined computations.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.attrs import format_metadata, parse_frontend_attributes
from ..ir.module import Computation, Instruction, Module
from .base import Pass
from .dfs_rewrite import nonfusion_computations


def _merged_metadata(call: Instruction, inner: Instruction) -> str | None:
    outer = call.metadata
    own = inner.metadata
    if not outer:
        return inner.attrs.get("metadata")
    merged = dict(own)
    prefix = outer.get("op_name")
    if prefix:
        merged["op_name"] = f"{prefix}/{own['op_name']}" if own.get("op_name") else prefix
    for key in ("source_file", "source_line", "stack_frame_id"):
        if key in outer and key not in merged:
            merged[key] = outer[key]
    return format_metadata(merged) if merged else None


def _inlinable(call: Instruction) -> bool:
    if call.opcode != "call" or call.to_apply is None:
        return False
    if "backend_config" in call.attrs:
        return False
    fa = call.attrs.get("frontend_attributes")
    if fa:
        attrs = parse_frontend_attributes(fa)
        if attrs.get("inline") == "false" or "composite.name" in attrs:
            return False
    return call.to_apply.execution_thread == call.parent.execution_thread


@dataclass(frozen=True)
class CallInliner(Pass):
    """Inline ``call`` instructions into their callers."""

    name = "call-inliner"

    def run(self, module: Module) -> bool:
        changed = False
        for comp in nonfusion_computations(module):
            for call in [i for i in comp.post_order() if _inlinable(i)]:
                self._inline(comp, call)
                changed = True
        if changed:
            self._remove_unreachable(module)
        return changed

    def _inline(self, comp: Computation, call: Instruction) -> None:
        callee = call.to_apply
        mapping: dict[Instruction, Instruction] = {}
        for inner in callee.post_order():
            if inner.opcode == "parameter":
                mapping[inner] = call.operands[inner.parameter_number]
                continue
            attrs = dict(inner.attrs)
            md = _merged_metadata(call, inner)
            if md:
                attrs["metadata"] = md
            clone = Instruction(inner.opcode, inner.shape, [mapping[o] for o in inner.operands],
                                "", attrs)
            clone.literal = inner.literal
            comp.add_instruction(clone, inner.name)
            mapping[inner] = clone
        root = mapping[callee.root]
        self.remark(call, f"call to {callee.name} inlined ({len(mapping)} instructions)",
                    derived_from=[call])
        if root.opcode != "parameter":
            for p in list(call.control_predecessors):
                p.add_control_dependency_to(root)
        call.replace_all_uses_with(root)
        call.drop_all_control_deps()
        comp.remove_instruction(call)

    @staticmethod
    def _remove_unreachable(module: Module) -> None:
        """Drop computations no longer reachable from the entry."""
        reachable: set[Computation] = set()
        stack = [module.entry] if module.entry is not None else []
        while stack:
            c = stack.pop()
            if c in reachable:
                continue
            reachable.add(c)
            for i in c._instructions:
                if i.attrs:
                    stack.extend(i.called_computations())
        for c in list(module.computations):
            if c not in reachable:
                module.remove_computation(c)
