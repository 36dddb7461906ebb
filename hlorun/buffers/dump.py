"""The text XLA dumps for a buffer assignment, byte for byte:
``*-buffer-assignment.txt`` (``BufferAssignment::ToString``),
``*-buffer-assignment-values.txt`` (``ValuesToString``),
``*-live-range.txt`` (``HloLiveRange::ToString`` with the stack-trace
breakdown of the peak) and ``*-memory-usage-report.txt``
(``MemoryUsageReport``)."""

from __future__ import annotations

import re

from ..ir.shape import Shape
from .allocation import BufferAllocation, BufferAssignment
from .values import HloValue, index_str


def human_bytes(n: int) -> str:
    """tsl's ``HumanReadableNumBytes``."""
    neg = "-" if n < 0 else ""
    n = abs(n)
    if n < 1024:
        return f"{neg}{n}B"
    units = "KMGTPE"
    u = 0
    while n >= 1024 * 1024:
        n //= 1024
        u += 1
    fmt = "%s%.1f%siB" if units[u] == "K" else "%s%.2f%siB"
    return fmt % (neg, n / 1024.0, units[u])


def human_shape(shape: Shape, layout: bool = True) -> str:
    """``ShapeUtil::HumanString[WithLayout]`` (tuples without index comments)."""
    if shape.is_tuple:
        return "(" + ", ".join(human_shape(s, layout) for s in shape.tuple_shapes) + ")"
    return shape.to_string(layout)


def _entry_param_instr(a: BufferAllocation):
    for v in a.assigned:
        i = v.instruction
        if i.opcode == "parameter" and i.parent is not None and i.parent.is_entry:
            return i
    return None


def _output_instr(a: BufferAllocation):
    for v in a.assigned:
        for instr, ix in v.positions:
            comp = instr.parent
            if not ix and comp is not None and comp.is_entry and comp.root is instr:
                return instr
    return None


def allocation_header(a: BufferAllocation) -> str:
    out = f"allocation {a.index}: size {a.size}, page 0"
    if a.color:
        out += f", color {a.color}"
    if a.is_entry_parameter:
        p = _entry_param_instr(a)
        shape = "<unknown shape>"
        if p is not None:
            sub = p.shape.subshape(a.param_index) if a.param_index else p.shape
            shape = human_shape(sub, False)
        out += f", parameter {a.param_number}, shape |{shape}| at ShapeIndex {index_str(a.param_index)}"
    o = _output_instr(a)
    if o is not None:
        out += f", output shape is |{human_shape(o.shape, False)}|"
    if a.is_constant:
        out += ", constant"
    if a.is_thread_local:
        out += ", thread-local"
    if a.maybe_live_out:
        out += ", maybe-live-out"
    if a.is_temp:
        out += ", preallocated-temp"
    return out + ":\n"


def assignment_text(asg: BufferAssignment) -> str:
    parts = ["BufferAssignment:\n"]
    for a in asg.allocations:
        parts.append(allocation_header(a))
        for v in a.values_by_id():
            off, size = a.assigned[v]
            parts.append(f" value: {v.short()} (size={size},offset={off}): {human_shape(v.shape)}\n")
    return "".join(parts)


def value_text(v: HloValue) -> str:
    from ..text.printer import print_instruction
    lines = [v.short(), " positions:"]
    for instr, ix in v.positions:
        lines.append(f"  {instr.name}" + (f" {index_str(ix)}" if instr.shape.is_tuple else ""))
    lines.append(" uses:")
    if not v.uses:
        lines.append("  (none)")
    for user, k, ix in v.uses:
        tup = user.operands[k].shape.is_tuple
        lines.append(f"  {user.name}, operand {k}" + (f" {index_str(ix)}" if tup else ""))
    lines.append(f" from instruction: {print_instruction(v.instruction)}")
    return "\n".join(lines) + "\n"


def values_text(asg: BufferAssignment) -> str:
    total = asg.total_bytes()
    used = sorted((v for a in asg.allocations for v in a.assigned), key=lambda v: v.id)
    return (f"\nTotal bytes used: {total} ({human_bytes(total)})\n\nUsed values:\n"
            + "".join(value_text(v) for v in used))


# -- live range ----------------------------------------------------------------------------
def _bytes(shape: Shape) -> int:
    return shape.byte_size(8)


def peak_moment(asg: BufferAssignment) -> int:
    ranges = asg.live_range.ranges
    events = []
    for v in asg.dataflow.values:
        r = ranges.get(v.id)
        if r is not None:
            size = _bytes(v.instruction.shape)
            events.append((r.start, 0, v.id, size))
            events.append((r.end + 1, 1, v.id, size))
    events.sort()
    usage = peak = 0
    peak_time = 0
    for t, is_end, _vid, size in events:
        usage += -size if is_end else size
        if peak < usage:
            peak, peak_time = usage, t
    return peak_time


def live_range_text(asg: BufferAssignment) -> str:
    lr = asg.live_range
    out = [f"HloLiveRange (max {lr.end_time}):\n", "  InstructionSequence:\n"]
    out.extend(f"    {i}:{instr.name}\n" for i, instr in enumerate(lr.flat))
    out.append("  BufferLiveRange:\n")
    ranges = lr.ranges
    for v in asg.dataflow.values:
        r = ranges.get(v.id)
        if r is not None:
            out.append(f"    {v.label()}:{r.start}-{r.end}\n")
    peak = peak_moment(asg)
    out.append(f"  Live ranges at {peak} (peak):\n")
    live = []
    for v in asg.dataflow.values:
        r = ranges.get(v.id)
        if r is not None and r.start <= peak <= r.end:
            live.append((_bytes(v.shape), v))
    live.sort(key=lambda bv: (-bv[0], bv[1].instruction.name, bv[1].index))
    total = 0
    for b, v in live:
        total += b
        out.append(f"    {v.label()}: {b} bytes (cumulative: {total} bytes)\n")
    if lr.flat:
        out.append(stack_trace_breakdown(asg, live))
    return "".join(out)


_VAR = re.compile(r"[a-zA-Z_]\w*")
_KEY = re.compile(r"\['([^']+)'\]")
_ATTR = re.compile(r"\.(\w+)")


def split_params(text: str) -> list[str]:
    """``SplitParamsString``: ``params['layer']['w'].T`` -> parts."""
    m = _VAR.match(text)
    if not m:
        return [text]
    out = [m.group(0)]
    pos = m.end()
    has_keys = False
    while True:
        k = _KEY.match(text, pos)
        if k:
            has_keys = True
            out.extend(k.group(1).split("/"))
            pos = k.end()
            continue
        a = _ATTR.match(text, pos)
        if a:
            out.append(a.group(1))
            pos = a.end()
            continue
        break
    if pos != len(text) or not has_keys:
        return [text]
    return out


def _spaced(n: int) -> str:
    s = str(n)
    neg = s.startswith("-")
    if neg:
        s = s[1:]
    groups = []
    while len(s) > 3:
        groups.insert(0, s[-3:])
        s = s[:-3]
    groups.insert(0, s)
    return ("-" if neg else "") + " ".join(groups)


def stack_trace_breakdown(asg: BufferAssignment, sized: list[tuple[int, HloValue]]) -> str:
    callers = asg.dataflow.call_graph.callers
    total = sum(b for b, _v in sized)
    root: dict = {"name": "", "node": 0, "children": {}}

    def traces(instr, path, out):
        op_name = instr.metadata.get("op_name") or instr.name
        parts = split_params(op_name)
        added = 0
        for p in reversed(parts):
            path.append(p)
            added += 1
        comp = instr.parent
        path.append(comp.name)
        added += 1
        sites = callers.get(comp, [])
        if not sites:
            out.append(list(reversed(path)))
        else:
            for site in sorted(sites, key=lambda s: s.id):
                traces(site, path, out)
        del path[len(path) - added:]

    for b, v in sized:
        all_traces: list[list[str]] = []
        traces(v.instruction, [], all_traces)
        if not all_traces:
            continue
        base, rem = divmod(b, len(all_traces))
        for t in all_traces:
            share = base + (1 if rem > 0 else 0)
            rem -= 1 if rem > 0 else 0
            if v.index:
                t[-1] += "{" + ",".join(str(i) for i in v.index) + "}"
            node = root
            for part in t:
                node = node["children"].setdefault(part, {"name": part, "node": 0, "children": {}})
            node["node"] += share

    def totals(node) -> int:
        node["total"] = node["node"] + sum(totals(c) for c in node["children"].values())
        return node["total"]

    totals(root)
    out = [f"  Stack trace breakdown for peak usage: {_spaced(total)} bytes\n"]
    remaining = [total]

    def emit(node, prefix: str, is_last: bool) -> None:
        if node["name"]:
            connector = "  " if prefix == "  " else ("└── " if is_last else "├── ")
            pct = 100.0 * node["total"] / total if total > 0 else 0.0
            remaining[0] -= node["node"]
            out.append(f"{prefix}{connector}{node['name']} ({pct:.1f}%, total: {_spaced(node['total'])} "
                       f"bytes, current: {_spaced(node['node'])} bytes, remaining: "
                       f"{_spaced(remaining[0])} bytes)\n")
        kids = [c for c in node["children"].values() if c["total"] != 0]
        kids.sort(key=lambda c: (-c["total"], c["name"]))
        for i, c in enumerate(kids):
            child_prefix = prefix + ("" if not node["name"] else ("    " if is_last else "│   "))
            emit(c, child_prefix, i == len(kids) - 1)

    emit(root, "  ", True)
    return "".join(out)


# -- memory usage report -------------------------------------------------------------------
def allocation_usage(a: BufferAllocation, prefix: str = "  ", percentile: float = 0.05,
                     more_than_k: int = 50) -> str:
    groups: dict[int, list] = {}
    for v in a.values_by_id():
        off, size = a.assigned[v]
        g = groups.setdefault(off, [[], 0])
        g[0].append(v)
        g[1] = max(g[1], size)
    infos = [(size, off, vals) for off, (vals, size) in groups.items()]
    total = sum(i[0] for i in infos)
    infos.sort(key=lambda i: (-i[0], i[2][-1].id))
    out = [f"{prefix}cumulative_size;       size;       offset; used_by_n_values; shapes_list\n",
           f"{prefix}------------------------------------------------------------\n"]
    cum = 0
    for n, (size, off, vals) in enumerate(infos, 1):
        cum += size
        pct = 100.0 * cum / total if total else float("nan")
        line = "%s%9s(%3.0f%%); %10s; %12d; %16d; " % (prefix, human_bytes(cum), pct,
                                                       human_bytes(size), off, len(vals))
        counts: dict[str, int] = {}
        for v in vals:
            s = human_shape(v.shape, False)
            counts[s] = counts.get(s, 0) + 1
        shapes = sorted((c, s) for s, c in counts.items())
        line += ", ".join(s if c == 1 else f"{c}×{s}" for c, s in shapes)
        out.append(line + "\n")
        if n > more_than_k and total - cum < total * percentile:
            out.append(f"{prefix}The rest {len(infos) - n} values are less than "
                       f"{int(percentile * 100)}% of the total size and not shown.\n")
            break
    return "".join(out)


_SPACE_NAMES = {0: "default", 1: "vmem", 2: "smem", 3: "hbm", 4: "host", 5: "cmem"}


def memory_usage_text(asg: BufferAssignment, percentile: float = 0.05, more_than_k: int = 50) -> str:
    by_color: dict[int, list[BufferAllocation]] = {}
    for a in asg.allocations:
        by_color.setdefault(a.color, []).append(a)
    out = []
    for color in sorted(by_color):
        allocs = sorted(by_color[color], key=lambda a: (-a.size, a.index))
        total = sum(a.size for a in allocs)
        out.append(f"Memory Space: {_SPACE_NAMES.get(color, f'color_{color}')} (color={color})\n")
        out.append(f"Total bytes: {total} ({human_bytes(total)})\n")
        cum = 0
        for n, a in enumerate(allocs, 1):
            cum += a.size
            out.append(allocation_usage(a, "  ", percentile, more_than_k) + "\n")
            if n > more_than_k and total - cum < total * percentile:
                break
        out.append("\n")
    return "".join(out)
