"""The call graph the buffer analyses need: who calls each computation, in
which context (XLA's ``CallContext``), and callees in XLA's order.

``control``: called by while/call/conditional/async ops (the callee's values
flow from the caller); ``embedded``: called in a parallel context (fusion,
reduce, map, sort, custom-call ...), whose parameters define their own
values; ``both``: called both ways; ``none``: unreachable from any caller.
"""

from __future__ import annotations

from ..ir.module import Computation, Instruction, Module

CONTROL_FLOW_OPCODES = frozenset({"call", "conditional", "while", "async-start",
                                  "async-update", "async-done"})
EMBEDDED_OPCODES = frozenset({
    "all-reduce", "reduce-scatter", "all-reduce-start", "map", "reduce",
    "reduce-window", "scatter", "select-and-scatter", "sort", "topk", "fusion",
    "custom-call", "scan",
})


def instruction_context(instr: Instruction) -> str:
    op = instr.opcode
    if op in CONTROL_FLOW_OPCODES:
        return "control"
    if op in EMBEDDED_OPCODES:
        return "embedded"
    return "none"


class CallGraph:
    """Callers, callees and call contexts of every computation."""

    def __init__(self, module: Module):
        self.module = module
        comps = module.computations
        self.callsites: dict[Computation, list[Instruction]] = {c: [] for c in comps}
        self.callers: dict[Computation, list[Instruction]] = {c: [] for c in comps}
        self.callees: dict[Computation, list[Computation]] = {c: [] for c in comps}
        for comp in comps:
            seen: set[Computation] = set()
            callees = self.callees[comp]
            for instr in comp._instructions:
                if not instr.attrs:
                    continue
                called = instr.called_computations()
                if not called:
                    continue
                self.callsites[comp].append(instr)
                for callee in called:
                    if callee not in self.callers:
                        continue
                    self.callers[callee].append(instr)
                    if callee not in seen:
                        seen.add(callee)
                        callees.append(callee)
        self.context: dict[Computation, str] = {c: "none" for c in comps}
        self._set_contexts()

    def _set_contexts(self) -> None:
        work: list[Computation] = []
        for comp in self.module.computations:
            if comp is self.module.entry or not self.callers[comp]:
                self.context[comp] = "control"
                work.append(comp)
        while work:
            comp = work.pop()
            ctx = self.context[comp]
            for site in self.callsites[comp]:
                add = "embedded" if instruction_context(site) == "embedded" else ctx
                for callee in site.called_computations():
                    if callee not in self.context:
                        continue
                    old = self.context[callee]
                    new = _union(old, add)
                    if new != old:
                        self.context[callee] = new
                        work.append(callee)

    def has_callers(self, comp: Computation) -> bool:
        return bool(self.callers.get(comp))

    def visit_order(self) -> list[Computation]:
        """``CallGraph::VisitNodes`` (unreachable nodes included): callees
        before callers, starting from each caller-less computation in module
        order."""
        order: list[Computation] = []
        visited: set[Computation] = set()
        for root in self.module.computations:
            if self.callers[root]:
                continue
            stack = [(root, iter(self.callees[root]))]
            visited.add(root)
            while stack:
                comp, it = stack[-1]
                nxt = next(it, None)
                if nxt is None:
                    stack.pop()
                    order.append(comp)
                elif nxt not in visited:
                    visited.add(nxt)
                    stack.append((nxt, iter(self.callees[nxt])))
        return order


def _union(a: str, b: str) -> str:
    if a == "none":
        return b
    if b == "none" or a == b:
        return a
    return "both"
