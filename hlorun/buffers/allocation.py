"""Allocations and the finished assignment (XLA's ``BufferAllocation`` and
``BufferAssignment``): which values live in which allocation, at which
offset, and what kind of memory each allocation is."""

from __future__ import annotations

from ..ir.module import Instruction, Module
from .values import HloValue


class BufferAllocation:
    __slots__ = ("index", "size", "color", "is_thread_local", "is_tuple", "is_constant",
                 "param_number", "param_index", "param_aliased", "maybe_live_out",
                 "assigned", "heap_events")

    def __init__(self, index: int, size: int, color: int = 0):
        self.index = index
        self.size = size
        self.color = color
        self.is_thread_local = False
        self.is_tuple = False
        self.is_constant = False
        self.param_number: int | None = None
        self.param_index: tuple = ()
        self.param_aliased = False
        self.maybe_live_out = False
        #: value -> (offset, size), in insertion order
        self.assigned: dict[HloValue, tuple[int, int]] = {}
        self.heap_events: list = []

    def __repr__(self) -> str:
        return f"<allocation {self.index}: {self.size} B {self.kind}>"

    @property
    def is_entry_parameter(self) -> bool:
        return self.param_number is not None

    @property
    def is_readonly(self) -> bool:
        return (self.is_entry_parameter and not self.param_aliased) or self.is_constant

    @property
    def is_reusable(self) -> bool:
        return not self.is_thread_local and not self.is_tuple

    @property
    def is_temp(self) -> bool:
        """``IsPreallocatedTempBuffer``."""
        return not (self.is_entry_parameter or self.maybe_live_out or self.is_thread_local
                    or self.is_constant)

    @property
    def is_input_or_output(self) -> bool:
        return self.is_entry_parameter or self.maybe_live_out

    @property
    def kind(self) -> str:
        """One word for reports: parameter, output, constant, thread-local,
        temp (a donated parameter that is also the output is "parameter")."""
        if self.is_entry_parameter:
            return "parameter"
        if self.maybe_live_out:
            return "output"
        if self.is_constant:
            return "constant"
        if self.is_thread_local:
            return "thread-local"
        return "temp"

    def add(self, value: HloValue, offset: int, size: int) -> None:
        if value in self.assigned:
            raise ValueError(f"{value.short()} already in allocation {self.index}")
        if offset < 0 or offset + size > self.size:
            raise ValueError(f"{value.short()} at {offset}+{size} outside allocation "
                             f"{self.index} of {self.size} bytes")
        self.assigned[value] = (offset, size)

    def values_by_id(self) -> list[HloValue]:
        return sorted(self.assigned, key=lambda v: v.id)


class BufferAssignment:
    """The result: allocations plus the analyses they were computed from."""

    def __init__(self, module: Module, dataflow, alias, live_range, rules, options):
        self.module = module
        self.dataflow = dataflow
        self.alias = alias
        self.live_range = live_range
        self.rules = rules
        self.options = options
        self.allocations: list[BufferAllocation] = []
        self.allocation_of: dict[int, BufferAllocation] = {}  # value id -> allocation
        self.heap_result = None

    # -- queries ---------------------------------------------------------------------
    def has_allocation(self, value: HloValue) -> bool:
        return value.id in self.allocation_of

    def allocation(self, value: HloValue) -> BufferAllocation | None:
        return self.allocation_of.get(value.id)

    def slice_of(self, value: HloValue) -> tuple[BufferAllocation, int, int] | None:
        a = self.allocation_of.get(value.id)
        if a is None:
            return None
        off, size = a.assigned[value]
        return a, off, size

    def slices_at(self, instr: Instruction, index: tuple = ()) -> list[tuple[BufferAllocation, int, int]]:
        """Every (allocation, offset, size) a position may refer to."""
        out = []
        for v in self.dataflow.value_set(instr, index):
            s = self.slice_of(v)
            if s is not None and s not in out:
                out.append(s)
        return out

    def total_bytes(self) -> int:
        return sum(a.size for a in self.allocations)

    def bytes_by_kind(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for a in self.allocations:
            out[a.kind] = out.get(a.kind, 0) + a.size
        return out
