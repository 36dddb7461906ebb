"""Buffers: XLA's ``HloAliasAnalysis``.  Values that must live in the same
memory are merged into one :class:`HloBuffer`:

* an entry root value with the entry parameter it is aliased to by the
  module's ``input_output_alias`` (donation);
* a while's init value, body/condition parameters, body root and the while
  itself; a conditional's branch roots and the conditional;
* the input and output of every in-place pair (``AliasRules.in_place_pairs``:
  dynamic-update-slice, scatter, declared ``output_to_operand_aliasing`` ...).

Buffer ids follow XLA's numbering (the order of the surviving value sets);
``live_out`` holds the buffers reachable from the entry root.
"""

from __future__ import annotations

from ..ir.module import Instruction, Module
from .alias_rules import AliasRules
from .values import Dataflow, HloValue, shape_indices


class HloBuffer:
    __slots__ = ("id", "values", "live_out")

    def __init__(self, bid: int, values: list[HloValue]):
        self.id = bid
        self.values = values
        self.live_out = False

    def __repr__(self) -> str:
        return f"<buffer {self.id}: {', '.join(v.short() for v in self.values)}>"


class AliasAnalysis:
    def __init__(self, dataflow: Dataflow, rules: AliasRules, io_alias: list | None = None):
        self.dataflow = dataflow
        self.rules = rules
        self.module = dataflow.module
        #: (output index, parameter, parameter index, kind): the module's
        #: input_output_alias plus matched buffer donors.
        self.io_alias = list(self.module.input_output_alias if io_alias is None else io_alias)
        self._io = {out: (p, pidx) for out, p, pidx, _kind in self.io_alias}
        values = dataflow.values
        host: dict[int, list[HloValue]] = {}
        set_of: dict[int, int] = {}  # value id -> host key (value id owning the set)
        for v in values:
            host[v.id] = [v]
            set_of[v.id] = v.id
        for v in values:
            aliased = self._aliased_values(v)
            if len(aliased) < 2:
                continue
            keyed = []
            seen_sets: set[int] = set()
            for a in aliased:
                s = set_of[a.id]
                keyed.append((len(host[s]), -a.id, s))
            union = max(keyed)[2]
            for _n, _i, s in keyed:
                if s == union or s in seen_sets or not host[s]:
                    continue
                seen_sets.add(s)
                for x in host[s]:
                    set_of[x.id] = union
                host[union].extend(host[s])
                host[s] = []
        self.buffers: list[HloBuffer] = []
        self.buffer_of: dict[int, HloBuffer] = {}
        for v in values:
            members = host[v.id]
            if not members:
                continue
            members.sort(key=lambda x: x.id)
            b = HloBuffer(len(self.buffers), members)
            self.buffers.append(b)
            for x in members:
                self.buffer_of[x.id] = b
        entry = self.module.entry
        if entry is not None and entry.root is not None:
            root = entry.root
            for ix in shape_indices(root.shape):
                for val in dataflow.value_set(root, ix):
                    self.buffer_of[val.id].live_out = True

    # -- queries -----------------------------------------------------------------
    def buffer(self, value: HloValue) -> HloBuffer:
        return self.buffer_of[value.id]

    def value_lives_out(self, value: HloValue) -> bool:
        return self.buffer_of[value.id].live_out

    def buffers_at(self, instr: Instruction, index: tuple = ()) -> list[HloBuffer]:
        out: dict[int, HloBuffer] = {}
        for v in self.dataflow.value_set(instr, index):
            b = self.buffer_of[v.id]
            out[b.id] = b
        return [out[k] for k in sorted(out)]

    def live_out_buffers(self) -> list[HloBuffer]:
        return [b for b in self.buffers if b.live_out]

    # -- aliasing rules ------------------------------------------------------------
    def _values_at(self, instr: Instruction, index: tuple) -> list[HloValue]:
        return self.dataflow.value_set(instr, index)

    def _aliased_values(self, value: HloValue) -> list[HloValue]:
        out: dict[int, HloValue] = {value.id: value}
        df = self.dataflow
        cg = df.call_graph
        entry = self.module.entry
        # input/output aliasing (donation)
        if self._io and entry is not None:
            for instr, ix in value.positions:
                if instr is entry.root and ix in self._io:
                    p, pidx = self._io[ix]
                    if p < len(entry.parameters) and entry.parameters[p] is not None:
                        for a in self._values_at(entry.parameters[p], pidx):
                            out[a.id] = a
        # while loops
        for user, _k, opidx in value.uses:
            if user.opcode == "while":
                for a in self._values_at(user, opidx):
                    out[a.id] = a
        definer = value.instruction
        if definer.opcode == "parameter" and definer.parent is not None:
            for site in cg.callers.get(definer.parent, ()):
                if site.opcode == "while":
                    for a in self._values_at(site, value.index):
                        out[a.id] = a
        for instr, ix in value.positions:
            comp = instr.parent
            if comp is None or comp.root is not instr:
                continue
            for site in cg.callers.get(comp, ()):
                if site.opcode == "while" and site.attrs.get("body") is comp:
                    for a in self._values_at(site, ix):
                        out[a.id] = a
                elif site.opcode == "conditional":
                    for a in self._values_at(site, ix):
                        out[a.id] = a
        # in-place operations
        rules = self.rules
        for instr, ix in value.positions:
            for (opnd, oidx), outix in rules.in_place_pairs(instr):
                if outix == ix and opnd < len(instr.operands):
                    for a in self._values_at(instr.operands[opnd], oidx):
                        out[a.id] = a
        for user, k, opidx in value.uses:
            for (opnd, oidx), outix in rules.in_place_pairs(user):
                if opnd == k and oidx == opidx:
                    for a in self._values_at(user, outix):
                        out[a.id] = a
        return list(out.values())


def resolve_buffer_donors(module: Module, size_of) -> list[tuple]:
    """``OptimizeInputOutputBufferAlias`` (registered donors only): match
    each ``buffer_donor`` parameter with an unaliased output of the same size
    (largest first, two pointers).  Returns the effective
    input_output_alias list."""
    aliases = list(module.input_output_alias)
    if not module.buffer_donor or module.entry is None or module.entry.root is None:
        return aliases
    from .values import shape_indices
    aliased_params = {(p, pi) for _o, p, pi, _k in aliases}
    aliased_outs = {o for o, _p, _pi, _k in aliases}
    donor_set = set(module.buffer_donor)
    donors: dict[int, list] = {}
    entry = module.entry
    for pn, param in enumerate(entry.parameters):
        if param is None:
            continue
        for ix in shape_indices(param.shape):
            sub = param.shape.subshape(ix) if ix else param.shape
            if not sub.is_array or sub.is_dynamic or (pn, ix) in aliased_params or (pn, ix) not in donor_set:
                continue
            ms = sub.layout.memory_space if sub.layout else 0
            donors.setdefault(ms, []).append((pn, ix, size_of(sub)))
    root_shape = entry.root.shape
    donees: dict[int, list] = {}
    for ix in shape_indices(root_shape):
        sub = root_shape.subshape(ix) if ix else root_shape
        if not sub.is_array or ix in aliased_outs:
            continue
        ms = sub.layout.memory_space if sub.layout else 0
        donees.setdefault(ms, []).append((ix, size_of(sub)))
    for ms, dv in donors.items():
        ev = donees.get(ms)
        if not ev:
            continue
        dv.sort(key=lambda d: -d[2])
        ev.sort(key=lambda d: -d[1])
        i = j = 0
        while i < len(dv) and j < len(ev):
            if dv[i][2] > ev[j][1]:
                i += 1
            elif dv[i][2] < ev[j][1]:
                j += 1
            else:
                aliases.append((ev[j][0], dv[i][0], dv[i][1], "may-alias"))
                i += 1
                j += 1
    return aliases
