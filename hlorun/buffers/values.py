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


def _color(shape: Shape) -> int:
    lay = shape.layout
    return lay.memory_space if lay is not None and shape.is_array else 0


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


class Dataflow:
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
                    branches = _branches(user)
                    for j, b in enumerate(branches):
                        if j + 1 < len(user.operands) and user.operands[j + 1] is instr and b.parameters:
                            add(b.parameters[0])
                elif uop in ("async-update", "async-done"):
                    wrapped = _async_wrapped(user)
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

    # -- per-opcode updates -----------------------------------------------------------
    def _assign(self, instr: Instruction, index: Index, new: list[HloValue]) -> bool:
        vs = self.value_sets[instr]
        if vs.get(index) != new:
            vs[index] = list(new)
            return True
        return False

    def _forward_all(self, instr: Instruction, src: Instruction) -> bool:
        """The whole value set of ``src`` becomes ``instr``'s."""
        changed = False
        svs = self.value_sets[src]
        for ix in self.value_sets[instr]:
            changed |= self._assign(instr, ix, svs.get(ix, []))
        return changed

    def _update(self, instr: Instruction) -> bool:
        op = instr.opcode
        ops = instr.operands
        if op in ("bitcast", "add-dependency", "domain", "opt-barrier"):
            return bool(ops) and self._forward_all(instr, ops[0])
        if op == "get-tuple-element":
            k = int(instr.attrs.get("index", 0))
            svs = self.value_sets[ops[0]]
            changed = False
            for ix in self.value_sets[instr]:
                changed |= self._assign(instr, ix, svs.get((k,) + ix, []))
            return changed
        if op == "tuple":
            changed = False
            for k, o in enumerate(ops):
                for ix, vals in self.value_sets[o].items():
                    changed |= self._assign(instr, (k,) + ix, vals)
            return changed
        if op == "copy":
            changed = False
            svs = self.value_sets[ops[0]]
            for ix in self.value_sets[instr]:
                if ix:
                    changed |= self._assign(instr, ix, svs.get(ix, []))
            return changed
        if op == "parameter":
            return self._update_parameter(instr)
        if op == "call":
            callee = instr.to_apply
            return callee is not None and callee.root is not None and \
                self._forward_all(instr, callee.root)
        if op == "while":
            body = instr.attrs.get("body")
            if not isinstance(body, Computation) or body.root is None or not ops:
                return False
            return self._phi(instr, [self.value_sets[body.root], self.value_sets[ops[0]]])
        if op == "conditional":
            roots = [b.root for b in _branches(instr) if b.root is not None]
            return self._phi(instr, [self.value_sets[r] for r in roots])
        if op == "send":
            changed = False
            for ix, vals in self.value_sets[ops[0]].items():
                changed |= self._assign(instr, (0,) + ix, vals)
            return changed
        if op == "recv-done":
            changed = False
            svs = self.value_sets[ops[0]]
            for ix in self.value_sets[instr]:
                if ix and ix[0] == 0:
                    changed |= self._assign(instr, ix, svs.get(ix, []))
            return changed
        if op == "copy-start":
            return self._assign(instr, (1,), self.value_sets[ops[0]].get((), []))
        if op == "copy-done":
            return self._assign(instr, (), self.value_sets[ops[0]].get((0,), []))
        if op == "all-reduce-done":
            return self._forward_all(instr, ops[0])
        if op == "all-gather-start":
            changed = False
            for k, o in enumerate(ops):
                out = (0, k) if len(ops) > 1 else (0,)
                changed |= self._assign(instr, out, self.value_sets[o].get((), []))
            return changed
        if op == "all-gather-done":
            changed = False
            svs = self.value_sets[ops[0]]
            for ix in self.value_sets[instr]:
                if not _tuple_shaped(instr.shape, ix):
                    changed |= self._assign(instr, ix, svs.get((1,) + ix, []))
            return changed
        if op == "collective-permute-start":
            return self._update_cp_start(instr)
        if op == "collective-permute-done":
            svs = self.value_sets[ops[0]]
            if instr.shape.is_tuple:
                changed = False
                for k in range(len(instr.shape.tuple_shapes)):
                    changed |= self._assign(instr, (k,), svs.get((1, k), []))
                return changed
            return self._assign(instr, (), svs.get((1,), []))
        if op in ("async-start", "async-update", "async-done"):
            return self._update_async(instr)
        return False

    def _update_parameter(self, param: Instruction) -> bool:
        comp = param.parent
        cg = self.call_graph
        if comp is None or cg.context.get(comp) != "control" or not cg.callers.get(comp):
            return False
        inputs: list[dict] = []
        need_phi = False
        for site in cg.callers[comp]:
            op = site.opcode
            n = param.parameter_number or 0
            if op == "call":
                if n < len(site.operands):
                    inputs.append(self.value_sets[site.operands[n]])
            elif op == "while":
                inputs.append(self.value_sets[site.operands[0]])
                body = site.attrs.get("body")
                if isinstance(body, Computation) and body.root is not param and body.root is not None:
                    inputs.append(self.value_sets[body.root])
                need_phi = True
            elif op == "conditional":
                for j, b in enumerate(_branches(site)):
                    if b is comp and j + 1 < len(site.operands):
                        inputs.append(self.value_sets[site.operands[j + 1]])
                        break
                need_phi = True
            elif op == "async-start":
                bound = _async_bound_operands(site)
                if n < len(bound):
                    inputs.append(self.value_sets[bound[n]])
        if not inputs:
            return False
        if need_phi:
            return self._phi(param, inputs)
        changed = False
        for ix in self.value_sets[param]:
            union: dict[int, HloValue] = {}
            for inp in inputs:
                for v in inp.get(ix, []):
                    union[v.id] = v
            changed |= self._assign(param, ix, [union[k] for k in sorted(union)])
        return changed

    def _update_cp_start(self, instr: Instruction) -> bool:
        ops = instr.operands
        changed = False
        inplace = len(ops) == 4
        if not inplace and len(ops) > 1:
            for k, o in enumerate(ops):
                changed |= self._assign(instr, (0, k), self.value_sets[o].get((), []))
        elif ops[0].shape.is_tuple:
            for k in range(len(ops[0].shape.tuple_shapes)):
                changed |= self._assign(instr, (0, k), self.value_sets[ops[0]].get((k,), []))
        else:
            changed |= self._assign(instr, (0,), self.value_sets[ops[0]].get((), []))
        return changed

    def _update_async(self, instr: Instruction) -> bool:
        changed = False
        shape = instr.shape
        vs = self.value_sets[instr]
        op = instr.opcode
        if op in ("async-start", "async-update"):
            bound = instr.operands if op == "async-start" else _async_bound_operands(instr)
            for k, o in enumerate(bound):
                for ix, vals in self.value_sets[o].items():
                    sub = o.shape.subshape(ix) if ix else o.shape
                    if _is_array_or_token(sub) and (0, k) + ix in vs:
                        changed |= self._assign(instr, (0, k) + ix, vals)
        if op == "async-update" and instr.operands:
            prev = self.value_sets[instr.operands[0]]
            for ix in vs:
                if ix and ix[0] > 1 and not _tuple_shaped(shape, ix):
                    changed |= self._assign(instr, ix, prev.get(ix, []))
        wrapped = _async_wrapped(instr)
        if wrapped is not None and wrapped.root is not None:
            root = wrapped.root
            pre = (1,) if op != "async-done" else ()
            for ix, vals in self.value_sets[root].items():
                sub = root.shape.subshape(ix) if ix else root.shape
                if not _is_array_or_token(sub):
                    continue
                out = pre + ix
                if out in vs and not _tuple_shaped(shape, out):
                    changed |= self._assign(instr, out, vals)
        return changed

    # -- phis ---------------------------------------------------------------------------
    def _phi(self, instr: Instruction, inputs: list[dict]) -> bool:
        changed = False
        vs = self.value_sets[instr]
        for ix, cur_list in vs.items():
            cur = cur_list[0] if len(cur_list) == 1 else None
            ids: list[HloValue] = []
            for inp in inputs:
                ids.extend(inp.get(ix, ()))
            defined_here = cur is not None and cur.instruction is instr and cur.index == ix
            if not ids:
                continue
            if len(ids) == 1:
                new = ids[0]
                if cur is None or cur is not new:
                    if cur is not None and defined_here:
                        self._deleted.add(cur.id)
                    vs[ix] = [new]
                    changed = True
            else:
                if cur is None or not (defined_here and cur.is_phi):
                    phi = self._new_value(instr, ix, is_phi=True)
                    vs[ix] = [phi]
                    self._phi_inputs[phi.id] = [v.id for v in ids]
                    changed = True
                else:
                    new_ids = [v.id for v in ids]
                    if set(self._phi_inputs.get(cur.id, ())) != set(new_ids):
                        self._phi_inputs[cur.id] = new_ids
                        changed = True
        return changed

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


def _branches(instr: Instruction) -> list[Computation]:
    b = instr.attrs.get("branch_computations")
    if isinstance(b, list):
        return b
    out = []
    for key in ("true_computation", "false_computation"):
        c = instr.attrs.get(key)
        if isinstance(c, Computation):
            out.append(c)
    return out


def _async_wrapped(instr: Instruction) -> Computation | None:
    cur = instr
    for _ in range(64):
        c = cur.attrs.get("calls")
        if isinstance(c, Computation):
            return c
        if isinstance(c, list) and c:
            return c[0]
        if not cur.operands or cur.operands[0].opcode not in ("async-start", "async-update"):
            return None
        cur = cur.operands[0]
    return None


def _async_bound_operands(instr: Instruction) -> list[Instruction]:
    """Operands bound so far along an async chain (start's operands plus
    each update's extra operands)."""
    chain: list[Instruction] = []
    cur = instr
    while cur.opcode in ("async-update", "async-done") and cur.operands:
        chain.append(cur)
        cur = cur.operands[0]
    bound = list(cur.operands) if cur.opcode == "async-start" else []
    for c in reversed(chain):
        bound.extend(c.operands[1:])
    return bound


class PhiGraph:
    """XLA's ``PhiGraph::Optimize``: a phi whose inputs (minus itself) are
    all one value, or a closure of phis fed by exactly one non-phi value, is
    replaced by that value.  Returns {phi id: replacement id}."""

    def __init__(self, phi_inputs: dict[int, list[int]], deleted: set[int]):
        self.inputs = {k: list(v) for k, v in phi_inputs.items() if k not in deleted}
        self.forward: dict[int, int] = {}

    def find(self, x: int) -> int:
        path = []
        while x in self.forward:
            path.append(x)
            x = self.forward[x]
        for p in path:
            self.forward[p] = x
        return x

    def optimize(self) -> dict[int, int]:
        phis = self.inputs
        changed = True
        while changed:
            changed = False
            checked: set[int] = set()
            for node in list(phis):
                if node in self.forward:
                    continue
                ops = [self.find(x) for x in phis[node]]
                ops = [x for x in ops if x != node]
                phis[node] = ops
                if not ops:
                    continue
                if all(x == ops[0] for x in ops):
                    self.forward[node] = ops[0]
                    changed = True
                    continue
                if node in checked:
                    continue
                work = [node]
                seen: set[int] = set()
                non_phi: int | None = None
                ok = True
                while work:
                    t = self.find(work.pop(0))
                    if t in seen:
                        continue
                    seen.add(t)
                    checked.add(t)
                    if t in phis and t not in self.forward:
                        work.extend(phis[t])
                    else:
                        if non_phi is not None and non_phi != t:
                            ok = False
                            break
                        non_phi = t
                if ok and non_phi is not None:
                    for t in seen:
                        if t != non_phi and t in phis:
                            self.forward[t] = non_phi
                            changed = True
        return {k: self.find(k) for k in self.forward}
