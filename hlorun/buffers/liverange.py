"""Schedules and live ranges: XLA's ``HloLiveRange`` (module scoped).

The sequence of a computation is its instruction order when the module is
``is_scheduled`` (XLA prints scheduled computations in schedule order), or
when that order is a valid topological order; otherwise XLA's post order.
The entry sequence is flattened: the computations a call, conditional or
while runs (condition before body) are spliced in just before the calling
instruction, so every instruction gets one logical time.

A value lives from its definition (parameters: the start of their
computation) to its last use or position (roots: the end of their
computation).  Entry parameters that are not donated live to the end of the
program; donated ones end at their last use.  Values in one buffer are
then made disjoint (``NormalizeAliasedBuffers``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.module import Computation, Instruction, Module
from .alias import AliasAnalysis
from .values import HloValue


def is_valid_order(order: list[Instruction]) -> bool:
    seen: set[Instruction] = set()
    for i in order:
        for o in i.operands:
            if o not in seen:
                return False
        for p in i.control_predecessors:
            if p not in seen:
                return False
        seen.add(i)
    return True


def sequence(comp: Computation, scheduled: bool) -> list[Instruction]:
    """The instruction sequence buffer assignment uses for ``comp``."""
    order = list(comp._instructions)
    if is_valid_order(order):
        return order
    return comp.post_order()


@dataclass
class LiveRange:
    start: int
    end: int
    end_position: tuple  # (instruction, index)


class HloLiveRange:
    def __init__(self, module: Module, alias: AliasAnalysis):
        self.module = module
        self.alias = alias
        self.dataflow = alias.dataflow
        self.flat: list[Instruction] = []
        self.time: dict[Instruction, int] = {}
        self.span: dict[Computation, tuple[int, int]] = {}
        self.sequences: dict[Computation, list[Instruction]] = {}
        if module.entry is not None:
            self._flatten(module.entry)
        self.end_time = len(self.flat)
        self.ranges: dict[int, LiveRange] = {}
        self._compute()
        self._normalize()

    # -- flattening -----------------------------------------------------------------
    def _seq(self, comp: Computation) -> list[Instruction]:
        s = self.sequences.get(comp)
        if s is None:
            s = sequence(comp, self.module.is_scheduled)
            self.sequences[comp] = s
        return s

    def _flatten(self, comp: Computation) -> None:
        """Recursion depth is the nesting depth of control flow, not the
        instruction count."""
        if comp in self.span:
            return
        start = len(self.flat)
        self.span[comp] = (start, start)  # in progress
        for instr in self._seq(comp):
            for callee in self._flatten_callees(instr):
                if callee not in self.span:
                    self._flatten(callee)
            if instr not in self.time:
                self.time[instr] = len(self.flat)
                self.flat.append(instr)
        self.span[comp] = (start, len(self.flat))

    @staticmethod
    def _flatten_callees(instr: Instruction) -> list[Computation]:
        op = instr.opcode
        if op in ("call", "conditional"):
            return instr.called_computations()
        if op == "while":
            out = []
            for key in ("condition", "body"):
                c = instr.attrs.get(key)
                if isinstance(c, Computation):
                    out.append(c)
            return out
        if op == "async-start":
            c = instr.attrs.get("calls")
            if isinstance(c, Computation):
                return [c]
            if isinstance(c, list) and c:
                return [c[0]]
        return []

    # -- live ranges -------------------------------------------------------------------
    def _compute(self) -> None:
        df = self.dataflow
        module = self.module
        entry = module.entry
        io_params = {(p, pidx) for _out, p, pidx, _k in self.alias.io_alias}
        end_time = self.end_time
        span = self.span
        time = self.time
        for instr, t in time.items():
            comp = instr.parent
            cspan = span.get(comp, (t, t + 1))
            start = cspan[0] if instr.opcode == "parameter" else t
            def_end = cspan[1] if comp is not None and comp.root is instr else t
            vs = df.value_sets.get(instr)
            if vs is None:
                continue
            for vals in vs.values():
                for v in vals:
                    if v.instruction is not instr or v.id in self.ranges:
                        continue
                    end, end_pos = def_end, v.positions[0]
                    for pinstr, pix in v.positions[1:]:
                        pc = pinstr.parent
                        if pc is not None and pc.root is pinstr:
                            sp = span.get(pc)
                            if sp is None:
                                continue
                            pt = sp[1]
                        else:
                            pt = time.get(pinstr)
                            if pt is None:
                                continue
                        if pt > end:
                            end, end_pos = pt, (pinstr, pix)
                    if (instr.opcode == "parameter" and comp is entry
                            and (instr.parameter_number, v.index) not in io_params):
                        end = end_time
                    else:
                        end = max(end, self._last_use(v))
                    self.ranges[v.id] = LiveRange(start, end, end_pos)

    def _last_use(self, v: HloValue) -> int:
        end = -1
        time = self.time
        for user, _k, _ix in v.uses:
            if user.opcode == "call":
                continue
            if user.opcode == "while":
                body = user.attrs.get("body")
                if isinstance(body, Computation) and body.parameters and body.parameters[0]:
                    user = body.parameters[0]
            t = time.get(user)
            if t is not None and t > end:
                end = t
        return end

    def _normalize(self) -> None:
        by_buffer: dict[int, list[tuple[int, int, int]]] = {}
        buffer_of = self.alias.buffer_of
        for vid, r in self.ranges.items():
            by_buffer.setdefault(buffer_of[vid].id, []).append((r.start, r.end, vid))
        for items in by_buffer.values():
            if len(items) < 2:
                continue
            items.sort()
            rs = [self.ranges[vid] for _s, _e, vid in items]
            for a, b in zip(rs, rs[1:]):
                b.end = max(a.end, b.end)
                a.end = min(a.end, b.start)

    # -- queries ---------------------------------------------------------------------------
    def range_of(self, v: HloValue) -> LiveRange | None:
        return self.ranges.get(v.id)

    @property
    def total_order(self) -> bool:
        return True
