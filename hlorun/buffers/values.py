"""Logical values: XLA's ``HloDataflowAnalysis`` in SSA form with bitcasts
forwarding their operand (``ssa_form=true, bitcast_defines_value=false``,
what ``HloAliasAnalysis`` and buffer assignment use).

Every array or tuple position an instruction produces holds a set of
:class:`HloValue` s.  Most instructions define a new value at each index of
their shape (tuple elements separately).  Forwarding instructions define
none or only their top level: bitcast, get-tuple-element, tuple (top only),
copy (top only), call/while/conditional (values flow through the called
computations), domain, opt-barrier, add-dependency, and the async pairs
(send, recv-done, copy-start/done, all-gather/all-reduce/collective-permute
start/done, async-start/update/done).  While loops and conditionals create
phi values where several values meet; phis that resolve to one value are
removed afterwards (XLA's phi-graph optimisation), so value ids have the
same holes as XLA's.

Postcondition: ``values`` sorted by id, each with its positions (defining
position first) and uses (``MayUseOperandValue`` rules: tuple and GTE do
not read nested values; a computation root always uses what it returns).
"""

from __future__ import annotations

import heapq
from functools import lru_cache
from typing import Iterator

from ..ir.module import Computation, Instruction, Module
from ..ir.shape import Shape
from .callgraph import CallGraph
from .forwarding import Forwarding, async_wrapped, branches
from .phi import PhiGraph

Index = tuple  # ShapeIndex


class HloValue:
    """One logical value: defined at (instruction, index), maybe a phi."""

    __slots__ = ("id", "instruction", "index", "is_phi", "positions", "uses",
                 "shape", "color", "live_out")

    def __init__(self, vid: int, instruction: Instruction, index: Index, is_phi: bool):
        self.id = vid
        self.instruction = instruction
        self.index = index
        self.is_phi = is_phi
        self.positions: list[tuple[Instruction, Index]] = [(instruction, index)]
        self.uses: list[tuple[Instruction, int, Index]] = []
        self.shape: Shape = instruction.shape.subshape(index) if index else instruction.shape
        self.color = 0  # XLA:GPU colours every buffer 0 (collective memory aside)
        self.live_out = False

    def __repr__(self) -> str:
        return self.short()

    def __lt__(self, other: "HloValue") -> bool:
        return self.id < other.id

    @property
    def defining_position(self) -> tuple[Instruction, Index]:
        return self.positions[0]

    def short(self) -> str:
        """XLA's ``HloValue::ToShortString``: ``<12 fusion{0} @0>``."""
        idx = index_str(self.index) if self.instruction.shape.is_tuple else ""
        return f"<{self.id} {self.instruction.name}{idx}{' (phi)' if self.is_phi else ''} @{self.color}>"

    def label(self) -> str:
        """``name{index}`` as XLA's live-range dump writes it."""
        return f"{self.instruction.name}{index_str(self.index)}"


def index_str(index: Index) -> str:
    return "{" + ",".join(str(i) for i in index) + "}"


@lru_cache(maxsize=4096)
def shape_indices(shape: Shape) -> tuple[Index, ...]:
    """Every subshape index of ``shape`` in XLA's pre-order (``{}`` first)."""
    if not shape.is_tuple:
        return ((),)
    out: list[Index] = [()]
    for i, sub in enumerate(shape.tuple_shapes):
        out.extend((i,) + rest for rest in shape_indices(sub))
    return tuple(out)


def _tuple_shaped(shape: Shape, index: Index) -> bool:
    return shape.subshape(index).is_tuple if index else shape.is_tuple


def _is_array_or_token(shape: Shape) -> bool:
    return shape.is_array or shape.is_token


#: Opcodes whose value set is recomputed from operands / callees.
_FORWARDING = frozenset({
    "add-dependency", "all-gather-start", "all-gather-done", "async-start",
    "async-update", "async-done", "bitcast", "domain", "copy", "get-tuple-element",
    "tuple", "parameter", "call", "while", "send", "recv-done", "copy-start",
    "copy-done", "conditional", "all-reduce-done", "collective-permute-start",
    "collective-permute-done", "opt-barrier",
})


class Dataflow(Forwarding):
    """Value sets of every position of every instruction in ``module``."""

    def __init__(self, module: Module, call_graph: CallGraph | None = None):
        self.module = module
        self.call_graph = call_graph or CallGraph(module)
        self.value_sets: dict[Instruction, dict[Index, list[HloValue]]] = {}
        self._next_id = 0
        self._all: dict[int, HloValue] = {}
        self._deleted: set[int] = set()
        self._phi_inputs: dict[int, list[int]] = {}  # phi id -> input ids
        self._post: dict[Computation, list[Instruction]] = {}
        self.computation_order = self.module.computation_post_order()
        self._init_value_sets()
        self._propagate()
        self._optimize_phis()
        self.values: list[HloValue] = sorted(
            (v for i, v in self._all.items() if i not in self._deleted), key=lambda v: v.id)
        self._set_positions_and_uses()

    # -- values ----------------------------------------------------------------
    def _new_value(self, instr: Instruction, index: Index, is_phi: bool = False) -> HloValue:
        v = HloValue(self._next_id, instr, index, is_phi)
        self._all[self._next_id] = v
        self._next_id += 1
        return v

    def value_set(self, instr: Instruction, index: Index = ()) -> list[HloValue]:
        return self.value_sets[instr].get(index, [])

    def unique_value(self, instr: Instruction, index: Index = ()) -> HloValue:
        vs = self.value_sets[instr][index]
        if len(vs) != 1:
            raise ValueError(f"{instr.name}{index_str(index)} holds {len(vs)} values")
        return vs[0]

    def defined_at(self, instr: Instruction, index: Index = ()) -> HloValue | None:
        vs = self.value_sets.get(instr, {}).get(index)
        if vs and len(vs) == 1 and vs[0].instruction is instr and vs[0].index == index:
            return vs[0]
        return None

    def flattened(self, instr: Instruction) -> Iterator[HloValue]:
        seen: set[int] = set()
        for vs in self.value_sets[instr].values():
            for v in vs:
                if v.id not in seen:
                    seen.add(v.id)
                    yield v

    def post_order(self, comp: Computation) -> list[Instruction]:
        """``comp.post_order()``, computed once per analysis."""
        got = self._post.get(comp)
        if got is None:
            got = comp.post_order()
            self._post[comp] = got
        return got

    # -- initialisation ----------------------------------------------------------
    def _init_value_sets(self) -> None:
        cg = self.call_graph
        for comp in self.computation_order:
            ctx = cg.context.get(comp, "control")
            has_callers = cg.has_callers(comp)
            for instr in self.post_order(comp):
                shape = instr.shape
                indices = shape_indices(shape)
                vs: dict[Index, list[HloValue]] = {ix: [] for ix in indices}
                self.value_sets[instr] = vs
                op = instr.opcode
                if op in ("bitcast", "add-dependency", "while", "call", "conditional",
                          "get-tuple-element", "domain", "opt-barrier", "copy-done",
                          "all-reduce-done"):
                    continue
                if op == "parameter":
                    if not has_callers or ctx in ("embedded", "both"):
                        self._define(instr, vs, indices)
                    continue
                if op in ("copy", "tuple"):
                    vs[()].append(self._new_value(instr, ()))
                    continue
                if op == "async-start":
                    self._define(instr, vs, [ix for ix in indices if _tuple_shaped(shape, ix)
                                             or (ix and ix[0] > 1)])
                elif op in ("async-update", "async-done"):
                    self._define(instr, vs, [ix for ix in indices if _tuple_shaped(shape, ix)])
                elif op == "copy-start":
                    self._define(instr, vs, [ix for ix in ((), (0,), (2,)) if ix in vs])
                elif op == "all-gather-start":
                    self._define(instr, vs, [ix for ix in indices if _tuple_shaped(shape, ix)
                                             or (ix and ix[0] == 1)])
                elif op in ("all-gather-done", "collective-permute-done"):
                    if shape.is_tuple:
                        self._define(instr, vs, [()])
                elif op == "collective-permute-start":
                    self._define(instr, vs, [ix for ix in indices
                                             if not ix or ix == (1,) or (len(ix) == 1 and ix[0] >= 2)
                                             or (len(ix) == 2 and ix[0] == 1
                                                 and _tuple_shaped(shape, (1,)))])
                elif op == "recv-done":
                    self._define(instr, vs, [ix for ix in ((), (1,)) if ix in vs])
                elif op == "send":
                    self._define(instr, vs, [ix for ix in ((), (1,), (2,)) if ix in vs])
                else:
                    self._define(instr, vs, indices)

    def _define(self, instr: Instruction, vs: dict, indices) -> None:
        for ix in indices:
            vs[ix].append(self._new_value(instr, ix))

    # -- propagation ---------------------------------------------------------------
    def _propagate(self) -> None:
        ordinal = self._ordinals()
        cg = self.call_graph
        work: list[tuple[int, int, Instruction]] = []
        inwork: set[Instruction] = set()
        seq = 0

        def add(instr: Instruction) -> None:
            nonlocal seq
            if instr not in inwork and instr in self.value_sets:
                inwork.add(instr)
                seq += 1
                heapq.heappush(work, (ordinal.get(instr, 0), seq, instr))

        for comp in self.computation_order:
            for instr in self.post_order(comp):
                if instr.opcode in _FORWARDING:
                    add(instr)
        while work:
            _, _, instr = heapq.heappop(work)
            inwork.discard(instr)
            if not self._update(instr):
                continue
            for user in instr._users:
                add(user)
                uop = user.opcode
                if uop == "conditional":
                    branches = branches(user)
                    for j, b in enumerate(branches):
                        if j + 1 < len(user.operands) and user.operands[j + 1] is instr and b.parameters:
                            add(b.parameters[0])
                elif uop in ("async-update", "async-done"):
                    wrapped = async_wrapped(user)
                    if wrapped is not None:
                        for p in wrapped.parameters:
                            if p is not None:
                                add(p)
                elif user.attrs:
                    for callee in user.called_computations():
                        if cg.context.get(callee) == "control":
                            for k, o in enumerate(user.operands):
                                if o is instr and k < len(callee.parameters) and callee.parameters[k]:
                                    add(callee.parameters[k])
            comp = instr.parent
            if comp is not None and comp.root is instr:
                for site in cg.callers.get(comp, ()):
                    if site.opcode == "while":
                        add(site)
                        for key in ("body", "condition"):
                            c = site.attrs.get(key)
                            if isinstance(c, Computation) and c.parameters and c.parameters[0]:
                                add(c.parameters[0])
                    elif cg.context.get(comp) == "control" or site.opcode == "conditional":
                        add(site)

    def _ordinals(self) -> dict[Instruction, int]:
        """``CalculatePostOrderSchedule``: post order of the entry, recursing
        into call/async-start/conditional callees and while condition+body
        before the calling instruction."""
        ordinal: dict[Instruction, int] = {}
        counter = [0]

        def visit(comp: Computation, depth: int) -> None:
            if depth > 200:
                return
            for instr in self.post_order(comp):
                op = instr.opcode
                if op in ("call", "async-start", "conditional"):
                    for c in instr.called_computations():
                        visit(c, depth + 1)
                elif op == "while":
                    for key in ("condition", "body"):
                        c = instr.attrs.get(key)
                        if isinstance(c, Computation):
                            visit(c, depth + 1)
                if instr not in ordinal:
                    ordinal[instr] = counter[0]
                counter[0] += 1

        if self.module.entry is not None:
            visit(self.module.entry, 0)
        return ordinal

    def _optimize_phis(self) -> None:
        if not self._phi_inputs:
            return
        repl = PhiGraph(self._phi_inputs, self._deleted).optimize()
        if not repl:
            return
        for instr, vs in self.value_sets.items():
            for ix, vals in vs.items():
                if any(v.id in repl for v in vals):
                    new: dict[int, HloValue] = {}
                    for v in vals:
                        t = repl.get(v.id, v.id)
                        if t != v.id:
                            self._deleted.add(v.id)
                        new[t] = self._all[t]
                    vs[ix] = [new[k] for k in sorted(new)]

    # -- positions and uses -----------------------------------------------------------------
    def _set_positions_and_uses(self) -> None:
        live = {v.id for v in self.values}
        entry_root = self.module.entry.root if self.module.entry else None
        for comp in self.module.computations:
            for instr in comp._instructions:
                vs = self.value_sets.get(instr)
                if vs is None:
                    continue
                for ix, vals in vs.items():
                    for v in vals:
                        if v.instruction is not instr and v.id in live:
                            v.positions.append((instr, ix))
        for v in self.values:
            roots = {p[0] for p in v.positions if p[0].parent is not None and p[0].parent.root is p[0]}
            uses = v.uses
            for pinstr, pix in v.positions:
                for user in pinstr._users:
                    uop = user.opcode
                    if uop in ("get-tuple-element", "copy"):
                        may_use = not pix
                    elif uop in ("domain", "tuple"):
                        may_use = False
                    else:
                        may_use = True
                    if not may_use and not (user in roots and user.parent.root is user):
                        continue
                    for k, o in enumerate(user.operands):
                        if o is pinstr:
                            uses.append((user, k, pix))
            if entry_root is not None and entry_root in roots:
                v.live_out = True
