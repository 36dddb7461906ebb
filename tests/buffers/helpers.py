"""Small helpers for the buffer-analysis tests."""

from __future__ import annotations

from hlorun.buffers import AssignOptions, assign_buffers
from hlorun.text.parser import parse_module


def assign(text: str, **opts):
    m = parse_module(text, "test.hlo")
    return m, assign_buffers(m, AssignOptions(**opts))


def slice_of(asg, m, name: str, index: tuple = ()):
    instr = None
    for c in m.computations:
        instr = c.get_instruction(name) or instr
        if instr is not None and instr.name == name:
            break
    got = asg.slices_at(instr, index)
    assert len(got) == 1, f"{name}{index}: {got}"
    return got[0]


def ranges(asg, m) -> dict[str, tuple[int, int]]:
    out = {}
    for v in asg.dataflow.values:
        r = asg.live_range.ranges.get(v.id)
        if r is not None:
            out[v.label()] = (r.start, r.end)
    return out
