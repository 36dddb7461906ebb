"""reshape-is-bitcast: the precondition of layout normalization, as a checker.

XLA's LayoutNormalization handles a reshape by ``TF_RET_CHECK(ShapeUtil::
ReshapeIsBitcast(s, operand->shape()))`` (layout_normalization.cc): a
reshape whose operand and result layouts do not describe the same bytes
crashes the compiler.  The reshape-decomposer establishes it; anything that
changes a layout after that (a GEMM rewriter pinning its output to the
canonical layout, scenario S0) can break it.  This checker reports each
such reshape with the message XLA would print, plus the operand and result
layouts, so the pipeline can name the pass after which it first appeared.

The pipeline runs it after every pass that changed the module (to name
that pass); ``check_changes`` re-examines only what the
:class:`~hlorun.ir.changes.ModuleTracker` reports changed.
"""

from __future__ import annotations

from typing import Callable

from ..ir.changes import ROW_ATTRS, ROW_OPCODE, Changes, ModuleTracker
from ..ir.module import Computation, Instruction, Module
from ..ir.shape import reshape_is_bitcast
from ..errors import Diagnostic
from ..verifier.checkers import Checker


def _fused_callee(opcode: str, attrs: dict) -> Computation | None:
    """``Instruction.fused_computation`` of a fusion, from a row's values."""
    if opcode != "fusion":
        return None
    v = attrs.get("calls")
    if isinstance(v, Computation):
        return v
    if isinstance(v, list) and len(v) == 1:
        return v[0]
    return None


#: (id(result shape), id(operand shape)) -> (verdict, the two shapes); the
#: shapes are interned and immutable, and kept alive here with their ids
_VERDICTS: dict[tuple[int, int], tuple] = {}


def _bad(instr: Instruction) -> bool:
    s0 = instr.operands[0].shape
    s = instr.shape
    got = _VERDICTS.get((id(s), id(s0)))
    if got is not None:
        return got[0]
    bad = s.is_array and s0.is_array and not reshape_is_bitcast(s, s0)
    if len(_VERDICTS) > 100_000:
        _VERDICTS.clear()
    _VERDICTS[(id(s), id(s0))] = (bad, s, s0)
    return bad


class _State:
    """The incremental check's view: how many fusion instructions call each
    computation, the module's reshapes, and the offending ones outside
    fused computations."""

    def __init__(self, module: Module, gen: int) -> None:
        self.module = module
        self.gen = gen
        self.fusers: dict[Computation, int] = {}
        self.reshapes: set[Instruction] = set()
        self.bad: set[Instruction] = set()
        reshapes = []
        for comp in module.computations:
            for instr in comp._instructions:
                op = instr.opcode
                if op == "fusion":
                    c = instr.fused_computation
                    if c is not None:
                        self.fusers[c] = self.fusers.get(c, 0) + 1
                elif op == "reshape" and instr.operands:
                    reshapes.append((comp, instr))
                    self.reshapes.add(instr)
        #: operand -> the reshapes that read it (each reshape's first operand
        #: when it was last seen)
        self.readers: dict[Instruction, set[Instruction]] = {}
        self.operand_of: dict[Instruction, Instruction] = {}
        for comp, instr in reshapes:
            self._index(instr)
            if comp not in self.fusers and _bad(instr):
                self.bad.add(instr)

    def _index(self, r: Instruction) -> None:
        op = r.operands[0]
        self.operand_of[r] = op
        s = self.readers.get(op)
        if s is None:
            s = self.readers[op] = set()
        s.add(r)

    def _unindex(self, r: Instruction) -> None:
        op = self.operand_of.pop(r, None)
        if op is not None:
            s = self.readers[op]
            s.discard(r)
            if not s:
                del self.readers[op]

    #: the findings for ``report_bad`` (kept while nothing they print or
    #: their order depends on changes)
    report: list[Diagnostic] | None = None
    report_bad: set[Instruction] = set()

    def _count(self, c: Computation | None, d: int, flipped: set) -> None:
        if c is None:
            return
        n = self.fusers.get(c, 0)
        if (n > 0) != (n + d > 0):
            flipped.add(c)
        if n + d:
            self.fusers[c] = n + d
        else:
            self.fusers.pop(c, None)

    def update(self, ch: Changes, tracker: ModuleTracker) -> None:
        """A reshape's verdict reads its shape, its operand's shape and
        whether its computation is fused: recheck the reshapes that changed,
        whose operand changed, or whose computation's fusion callers came
        or went."""
        flipped: set[Computation] = set()
        old_rows = ch.old_rows
        reshapes = self.reshapes
        for i in ch.removed:
            reshapes.discard(i)
            self.bad.discard(i)
            self._unindex(i)
            r = old_rows.get(i)
            if r is not None and r[ROW_OPCODE] == "fusion":
                self._count(_fused_callee("fusion", r[ROW_ATTRS]), -1, flipped)
        changed = ch.instructions
        # The reshapes to recheck: changed ones, readers of a changed
        # instruction (a reshape's operand list is part of its own row, so
        # an unchanged reshape reads the operand it was indexed with), and
        # those of computations whose fusion callers came or went.  (Every
        # changed instruction leaves ``bad``; rechecked reshapes come back.)
        recheck: set[Instruction] = set()
        readers = self.readers
        bad = self.bad
        bad.difference_update(changed)
        for r in filter(None, map(old_rows.get, changed)):
            if r[ROW_OPCODE] == "fusion":
                self._count(_fused_callee("fusion", r[ROW_ATTRS]), -1, flipped)
        for i in changed:
            op = i.opcode
            if op == "fusion":
                self._count(_fused_callee(op, i.attrs), +1, flipped)
            elif op == "reshape" and i.operands:
                reshapes.add(i)
                self._unindex(i)
                self._index(i)
                recheck.add(i)
                continue
            if i in reshapes:
                reshapes.discard(i)
                self._unindex(i)
        for s in filter(None, map(readers.get, changed)):
            recheck.update(s)
        for c in flipped:
            if c.module is self.module:
                recheck.update(i for i in c._instructions if i in reshapes)
        container = tracker.container
        for i in recheck:
            comp = container(i)
            if comp is not None and comp not in self.fusers and _bad(i):
                self.bad.add(i)
            else:
                self.bad.discard(i)


def _report_stale(st: _State, ch: Changes) -> bool:
    """Can ``ch`` change the findings' text or order for the same offending
    reshapes (their names, shapes, operands, computations, or the order of
    the non-fusion computations)?"""
    if ch.calls or ch.order or ch.computations or ch.removed_computations or ch.header:
        return True
    changed = ch.instructions
    return any(i in changed or i.operands[0] in changed for i in st.bad)


class ReshapeIsBitcast(Checker):
    """Every reshape (outside fusions) must be a bitcast."""

    name = "reshape-is-bitcast"

    def check(self, module: Module) -> list[Diagnostic]:
        try:
            bad = _State(module, 0).bad
            return self._report(module, bad) if bad else []
        except Exception as e:  # a checker never raises
            return [Diagnostic(rule=self.name, message=f"checker crashed: {e!r}",
                               filename=module.filename)]

    def check_changes(self, module: Module, tracker: ModuleTracker) -> list[Diagnostic]:
        """``check``'s findings, re-examining only the reshapes that changed
        or read a changed instruction, and every reshape of a computation
        that became or stopped being a fusion body."""
        key = ("reshape-is-bitcast",)
        try:
            st = tracker.cache.pop(key, None)  # half-updated state must not survive
            if tracker.module is not module:
                return self.check(module)
            if st is None or st.module is not module:
                st = _State(module, tracker.gen)
            elif st.gen != tracker.gen:
                ch = tracker.changes_since(st.gen)
                if ch.full:
                    st = _State(module, tracker.gen)
                else:
                    st.update(ch, tracker)
                    st.gen = tracker.gen
                    if st.report is not None and _report_stale(st, ch):
                        st.report = None
            if st.bad and (st.report is None or st.report_bad != st.bad):
                # (a report walks the non-fusion computations in order)
                st.report, st.report_bad = self._report(module, st.bad, tracker.container), \
                    set(st.bad)
            tracker.cache[key] = st
            return list(st.report) if st.bad else []
        except Exception:
            return self.check(module)

    def _report(self, module: Module, bad: set[Instruction],
                container: Callable[[Instruction], Computation | None] | None = None
                ) -> list[Diagnostic]:
        """Findings in ``MakeNonfusionComputations`` order.  ``container``
        (the tracker's, whose state found ``bad``): when every offending
        reshape sits in one computation (a non-fusion one, or it would not
        offend), only that computation is walked."""
        from .dfs_rewrite import nonfusion_computations
        out: list[Diagnostic] = []
        comps = None
        if container is not None:
            held = {container(i) for i in bad}
            if len(held) == 1:
                (c,) = held
                if c is not None and c.module is module:
                    comps = [c]
        for comp in comps if comps is not None else nonfusion_computations(module):
            for instr in comp._instructions:
                if instr not in bad:
                    continue
                operand = instr.operands[0]
                s, s0 = instr.shape, operand.shape
                out.append(self.diag(
                    module, instr,
                    f"RET_CHECK failure (xla/service/layout_normalization.cc:429) "
                    f"ShapeUtil::ReshapeIsBitcast(s, operand->shape()): reshape "
                    f"%{instr.name} from %{operand.name} {s0} to {s} is not a bitcast "
                    f"(operand layout {s0.layout}, result layout {s.layout})",
                    notes=["run reshape-decomposer before layout_normalization "
                           "(it turns the reshape into copy + bitcast)"]))
        return out
