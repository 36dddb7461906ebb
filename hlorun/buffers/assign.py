"""Buffer assignment: XLA's ``BufferAssigner`` as XLA:GPU runs it
(constants get allocations, 256-byte alignment, sequential whole-module heap
simulation, biggest-first order).

1. Special buffers get their own allocation: constants, entry parameters
   (a donated parameter's allocation may later take other buffers),
   tuple-shaped buffers, and -- in thread-local computations (reducers,
   sort comparators) -- every buffer.
2. Other buffers, biggest first (live-out first on a tie, then post order):
   reuse an operand's allocation when live ranges allow (a dying operand
   may hand its buffer to its user when ``CanShareOperandBufferWithUser``),
   else a registered allocation (outputs, donated parameters), else they
   are temporaries and wait for the heap simulator.
3. The heap simulator packs all temporaries (per memory color) into one
   allocation, reusing dead buffers (see heap.py).
4. Allocations holding entry-root buffers are marked maybe-live-out, and
   temporary allocations are combined into one (after XLA's
   ``std::partition``, which moves non-temporaries to the front and
   reorders both runs).

Postcondition: every value of every non-fusion computation reachable from
the entry has exactly one (allocation, offset, size); values of one buffer
share offset and allocation.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..ir.module import Computation, Instruction, Module
from .alias import AliasAnalysis, HloBuffer, resolve_buffer_donors
from .alias_rules import AliasRules
from .allocation import BufferAllocation, BufferAssignment
from .callgraph import CallGraph
from .heap import HeapSimulation
from .liverange import HloLiveRange, LiveRange
from .occupancy import Occupancy
from .values import Dataflow, HloValue

_THREAD_LOCAL_CALLERS = frozenset({
    "custom-call", "all-reduce", "reduce-scatter", "all-reduce-start", "map", "reduce",
    "reduce-window", "scan", "scatter", "select-and-scatter", "sort", "fusion", "topk",
})


@dataclass(frozen=True)
class AssignOptions:
    """``platform``: alias rules ("cuda", "rocm", "sycl", "cpu");
    ``alignment``: heap alignment (XLA:GPU 256); ``allocate_constants``:
    constants get allocations (GPU: yes); ``custom_call_targets``: the
    custom-call policy table (see alias_rules); ``pointer_size``: bytes per
    tuple element; ``colorer``: "gpu" (XLA:GPU's colorer: every buffer
    color 0) or "memory-space" (XLA's DefaultColorer: the layout's ``S(n)``
    of each value's defining position)."""

    platform: str = "cuda"
    colorer: str = "gpu"
    alignment: int = 256
    allocate_constants: bool = True
    pointer_size: int = 8
    custom_call_targets: Mapping[str, Any] = field(default_factory=dict)

    def rules(self) -> AliasRules:
        return AliasRules(self.platform, self.custom_call_targets)


def buffer_size(value: HloValue, pointer_size: int = 8) -> int:
    """XLA:GPU's shape size: ``ByteSizeOf`` plus 4 bytes per dimension of a
    dynamic array (its dimension sizes)."""
    s = value.shape
    n = s.byte_size(pointer_size)
    if s.is_array and s.is_dynamic:
        n += 4 * s.rank
    return n


class BufferAssigner:
    def __init__(self, options: AssignOptions | None = None):
        self.options = options or AssignOptions()

    def run(self, module: Module) -> BufferAssignment:
        if module.entry is None:
            raise ValueError("module has no entry computation")
        opts = self.options
        rules = opts.rules()
        cg = CallGraph(module)
        dataflow = Dataflow(module, cg)
        if opts.colorer == "memory-space":
            for v in dataflow.values:
                lay = v.shape.layout
                v.color = lay.memory_space if (lay is not None and v.shape.is_array) else 0
        elif opts.colorer != "gpu":
            raise ValueError(f"unknown colorer {opts.colorer!r} (gpu, memory-space)")
        psize = opts.pointer_size
        io_alias = resolve_buffer_donors(module, lambda s: s.byte_size(psize))
        alias = AliasAnalysis(dataflow, rules, io_alias)
        live = HloLiveRange(module, alias)
        asg = BufferAssignment(module, dataflow, alias, live, rules, opts)
        self.asg = asg
        self.cg = cg
        self._sizes: dict[int, int] = {}
        self._bsizes: dict[int, int] = {}
        self._registered: list[BufferAllocation] = []
        self._reg_bit: dict[int, int] = {}  # allocation id() -> registration index
        self._occ = Occupancy(live.end_time)
        #: allocation id() -> (sorted starts, [(range, value)], position instructions):
        #: values in one allocation never overlap by more than a touching end,
        #: so sorted by start their ends are sorted too.
        self._index: dict[int, tuple[list, list, set]] = {}
        self._io_params = {(p, pi) for _o, p, pi, _k in alias.io_alias}
        global_comps, local_comps = self._gather(module, cg)
        delayed: dict[Computation, list[HloValue]] = {c: [] for c in global_comps}
        self._assign_computations(global_comps, False, delayed)
        self._heap(delayed)
        self._assign_computations([c for c in local_comps if not _is_fusion_comp(c, cg)], True, None)
        for b in alias.live_out_buffers():
            a = asg.allocation_of.get(b.values[0].id)
            if a is not None:
                a.maybe_live_out = True
        self._combine_temps()
        return asg

    # -- sizes ---------------------------------------------------------------------------
    def value_size(self, v: HloValue) -> int:
        n = self._sizes.get(v.id)
        if n is None:
            n = buffer_size(v, self.options.pointer_size)
            self._sizes[v.id] = n
        return n

    def buffer_size(self, b: HloBuffer) -> int:
        n = self._bsizes.get(b.id)
        if n is None:
            n = max(self.value_size(v) for v in b.values)
            self._bsizes[b.id] = n
        return n

    def _register(self, a: BufferAllocation) -> None:
        bit = len(self._registered)
        self._registered.append(a)
        self._reg_bit[id(a)] = bit
        ranges = self.asg.live_range.ranges
        for v in a.assigned:
            r = ranges.get(v.id)
            if r is not None:
                self._occ.mark(bit, r.start, r.end)

    # -- computations by allocation type ------------------------------------------------
    def _gather(self, module: Module, cg: CallGraph) -> tuple[list[Computation], list[Computation]]:
        glob: set[Computation] = set()
        local: set[Computation] = set()
        work: list[tuple[Computation, bool]] = [(module.entry, False)]
        while work:
            comp, tl = work.pop(0)
            target = local if tl else glob
            if comp in target:
                continue
            target.add(comp)
            for instr in comp._instructions:
                if not instr.attrs:
                    continue
                for sub in instr.called_computations():
                    if instr.opcode in ("call", "conditional", "while", "async-start",
                                        "async-update", "async-done"):
                        work.append((sub, tl))
                    else:
                        work.append((sub, True))
        order = self.asg.dataflow.computation_order
        return [c for c in order if c in glob], [c for c in order if c in local and c not in glob]

    # -- allocation creation ----------------------------------------------------------------
    def _new_allocation(self, size: int, color: int = 0) -> BufferAllocation:
        a = BufferAllocation(len(self.asg.allocations), size, color)
        self.asg.allocations.append(a)
        return a

    def _add_buffer(self, a: BufferAllocation, b: HloBuffer, offset: int, size: int) -> None:
        bit = self._reg_bit.get(id(a))
        ranges = self.asg.live_range.ranges
        idx = self._index.get(id(a))
        if idx is None:
            idx = self._index[id(a)] = ([], [], set())
        starts, items, positions = idx
        for v in b.values:
            a.add(v, offset, size)
            self.asg.allocation_of[v.id] = a
            positions.update(p[0] for p in v.positions)
            r = ranges.get(v.id)
            if r is not None:
                k = bisect_right(starts, r.start)
                starts.insert(k, r.start)
                items.insert(k, (r, v))
                if bit is not None:
                    self._occ.mark(bit, r.start, r.end)
        if b.live_out:
            a.maybe_live_out = True

    def _new_for_buffer(self, b: HloBuffer, size: int) -> BufferAllocation:
        a = self._new_allocation(size, b.values[0].color)
        self._add_buffer(a, b, 0, size)
        return a

    # -- global / thread-local assignment ---------------------------------------------------
    def _positions(self, comps: list[Computation]) -> dict[Instruction, int]:
        wanted = set(comps)
        order = [c for c in self.cg.visit_order() if c in wanted]
        pos: dict[Instruction, int] = {}
        n = 0
        for comp in reversed(order):
            for instr in self.asg.dataflow.post_order(comp):
                if instr not in pos:
                    pos[instr] = n
                n += 1
        return pos

    def _assign_computations(self, comps: list[Computation], thread_local: bool,
                             delayed: dict | None) -> None:
        if not comps:
            return
        asg = self.asg
        wanted = set(comps)
        buffers = [b for b in asg.alias.buffers if b.values[0].instruction.parent in wanted]
        pos = self._positions(comps)
        big = len(pos) + 1

        def key(b: HloBuffer):
            p = min(pos.get(v.instruction, big) for v in b.values)
            return (-self.buffer_size(b), 0 if b.live_out else 1, p, b.id)

        buffers.sort(key=key)
        for b in buffers:
            if asg.allocation_of.get(b.values[0].id) is not None:
                continue
            if self._special(b, thread_local):
                continue
            self._single(b, delayed)

    def _special(self, b: HloBuffer, thread_local: bool) -> bool:
        size = self.buffer_size(b)
        module = self.asg.module
        io_params = self._io_params
        for v in b.values:
            instr = v.instruction
            if instr.opcode == "constant":
                if self.options.allocate_constants:
                    self._new_for_buffer(b, size).is_constant = True
                return True
            if instr.opcode == "parameter" and instr.parent is module.entry:
                a = self._new_for_buffer(b, size)
                a.param_number = instr.parameter_number
                a.param_index = v.index
                a.param_aliased = (instr.parameter_number, v.index) in io_params
                if a.param_aliased:
                    self._register(a)
                return True
        if thread_local:
            self._new_for_buffer(b, size).is_thread_local = True
            return True
        for v in b.values:
            if v.shape.is_tuple:
                self._new_for_buffer(b, size).is_tuple = True
                return True
        return False

    def _single(self, b: HloBuffer, delayed: dict | None) -> None:
        asg = self.asg
        df = asg.dataflow
        for v in b.values:
            if v.index or v.shape.is_tuple:
                continue
            for operand in v.instruction.operands:
                seen: list[BufferAllocation] = []
                for ov in df.value_set(operand, ()):
                    a = asg.allocation_of.get(ov.id)
                    if a is not None and a not in seen:
                        seen.append(a)
                for a in sorted(seen, key=lambda x: x.index):
                    if self._maybe_assign(a, b):
                        return
        if self._registered:
            ranges = self.asg.live_range.ranges
            busy = 0
            for v in b.values:
                r = ranges.get(v.id)
                if r is not None:
                    busy |= self._occ.query(r.start, r.end)
            cand = ((1 << len(self._registered)) - 1) & ~busy
            size = self.buffer_size(b)
            reg = self._registered
            while cand:
                i = cand.bit_length() - 1
                cand ^= 1 << i
                a = reg[i]
                if a.size >= size and self._maybe_assign(a, b):
                    return
        if delayed is not None and not b.live_out:
            ok = all(v.instruction.parent in delayed for v in b.values)
            if ok:
                for v in b.values:
                    delayed[v.instruction.parent].append(v)
                return
        a = self._new_for_buffer(b, self.buffer_size(b))
        self._register(a)

    def _maybe_assign(self, a: BufferAllocation, b: HloBuffer) -> bool:
        """``MaybeAssignBuffer``: XLA compares the buffer with every value in
        the allocation; only values whose ranges meet the buffer's can
        interfere, and those are found by bisection."""
        size = self.buffer_size(b)
        if b.values[0].color != a.color or size > a.size or a.is_readonly or not a.is_reusable:
            return False
        if b.live_out and a.size != size:
            return False
        ranges = self.asg.live_range.ranges
        starts, items, positions = self._index.get(id(a), ([], [], set()))
        for nv in b.values:
            r1 = ranges.get(nv.id)
            if r1 is not None and items:
                k = bisect_right(starts, r1.end) - 1
                while k >= 0:
                    r2, assigned = items[k]
                    if r2.end < r1.start:
                        break
                    if not (r1.start > r2.end or r2.start > r1.end) and \
                            self._interferes(nv, r1, assigned, r2):
                        return False
                    k -= 1
            if nv.instruction.opcode == "copy" and any(o in positions for o in nv.instruction.operands):
                return False
        self._add_buffer(a, b, 0, size)
        return True

    def _interferes(self, v1: HloValue, r1: LiveRange, v2: HloValue, r2: LiveRange) -> bool:
        if r1.start > r2.end or r2.start > r1.end:
            return False
        if r1.end == r2.start:
            return not self._can_share_as_operand(v2, v1, r1)
        if r2.end == r1.start:
            return not self._can_share_as_operand(v1, v2, r2)
        return True

    def _can_share_as_operand(self, user: HloValue, operand: HloValue, orange: LiveRange) -> bool:
        end_instr, end_index = orange.end_position
        ui = user.instruction
        return (ui.opcode != "copy" and end_instr in ui.operands
                and self.asg.rules.can_share(self.asg.dataflow, end_instr, end_index, ui, user.index))

    # -- heap simulation --------------------------------------------------------------------
    def _heap(self, delayed: dict[Computation, list[HloValue]]) -> None:
        asg = self.asg
        values = [v for vs in delayed.values() for v in vs]
        by_color: dict[int, list[HloValue]] = {}
        for v in values:
            by_color.setdefault(v.color, []).append(v)
        df = asg.dataflow
        rules = asg.rules
        buffer_of = asg.alias.buffer
        live = asg.live_range.ranges

        def operand_values(v: HloValue):
            instr = v.instruction
            for operand in instr.operands:
                for ov in df.value_set(operand, ()):
                    if ov.instruction in instr.operands:
                        yield ov

        def can_share(ov: HloValue, v: HloValue) -> bool:
            return rules.can_share(df, ov.instruction, ov.index, v.instruction, v.index)

        for color in sorted(by_color):
            vals = [v for v in by_color[color] if v.id in live]
            sim = HeapSimulation(vals, live, buffer_of, self.value_size, can_share,
                                 self.options.alignment)
            result = sim.run(operand_values)
            a = self._new_allocation(result.heap_size, color)
            for v, (off, size) in sorted(result.chunks.items(), key=lambda kv: kv[0].id):
                a.add(v, off, size)
                asg.allocation_of[v.id] = a
            a.heap_events = result.events
            asg.heap_result = result

    # -- temp combination -------------------------------------------------------------------
    def _combine_temps(self) -> None:
        asg = self.asg
        allocs = asg.allocations
        split = _partition(allocs, lambda a: not a.is_temp)
        head, temps = allocs[:split], allocs[split:]
        combined: list[BufferAllocation] = []
        by_color: dict[int, BufferAllocation] = {}
        align = self.options.alignment
        for t in temps:
            c = by_color.get(t.color)
            if c is None:
                by_color[t.color] = t
                combined.append(t)
                continue
            base = (c.size + align - 1) // align * align
            c.size = base + t.size
            for v, (off, size) in t.assigned.items():
                c.assigned[v] = (base + off, size)
            c.heap_events = c.heap_events + t.heap_events
        asg.allocations = head + combined
        asg.allocation_of = {}
        for i, a in enumerate(asg.allocations):
            a.index = i
            for v in a.assigned:
                asg.allocation_of[v.id] = a


def _partition(items: list, pred) -> int:
    """``std::partition`` for bidirectional iterators (libstdc++/libc++):
    swaps from both ends, so neither run keeps its order.  In place; returns
    the split point."""
    first, last = 0, len(items)
    while True:
        while True:
            if first == last:
                return first
            if pred(items[first]):
                first += 1
            else:
                break
        last -= 1
        while True:
            if first == last:
                return first
            if not pred(items[last]):
                last -= 1
            else:
                break
        items[first], items[last] = items[last], items[first]
        first += 1


def _is_fusion_comp(comp: Computation, cg: CallGraph) -> bool:
    callers = cg.callers.get(comp, ())
    return bool(callers) and all(c.opcode == "fusion" for c in callers)


def assign_buffers(module: Module, options: AssignOptions | None = None) -> BufferAssignment:
    """Run buffer assignment on ``module`` (not modified)."""
    return BufferAssigner(options).run(module)
