"""Summaries and pictures of an assignment: memory by allocation kind, the
live-memory curve and its peak, the values worth drawing, a JSON document,
and an SVG timeline (``hlorun buffers --plot``).  No rich here: the CLI
hands these to :mod:`hlorun.report`."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Any

from .allocation import BufferAllocation, BufferAssignment
from .dump import human_bytes
from .values import HloValue, index_str

KINDS = ("parameter", "output", "constant", "thread-local", "temp")
KIND_COLORS = {"parameter": "#4e79a7", "output": "#59a14f", "constant": "#9c755f",
               "thread-local": "#bab0ac", "temp": "#f28e2b"}

JSON_SCHEMA = "hlorun.buffers/1"


@dataclass
class Row:
    value: HloValue
    allocation: BufferAllocation
    offset: int
    size: int
    start: int
    end: int

    @property
    def label(self) -> str:
        return self.value.label()


def rows(asg: BufferAssignment) -> list[Row]:
    """One row per assigned value that has a live range (entry schedule)."""
    out = []
    ranges = asg.live_range.ranges
    for a in asg.allocations:
        for v, (off, size) in a.assigned.items():
            r = ranges.get(v.id)
            if r is not None:
                out.append(Row(v, a, off, size, r.start, r.end))
    return out


def memory_curve(asg: BufferAssignment) -> tuple[list[int], dict[str, list[int]]]:
    """Live bytes at every time step, total and per allocation kind.  A
    value counts from its start to its end (inclusive); values sharing a
    slice (aliases, reuse) are counted once per slice and time."""
    end = asg.live_range.end_time
    n = end + 2
    per_kind = {k: [0] * n for k in KINDS}
    seen: dict[tuple, list[tuple[int, int]]] = {}
    for r in rows(asg):
        key = (r.allocation.index, r.offset, r.size)
        seen.setdefault(key, []).append((r.start, r.end))
    alloc_kind = {a.index: a.kind for a in asg.allocations}
    for (ai, _off, size), spans in seen.items():
        spans.sort()
        merged: list[list[int]] = []
        for s, e in spans:
            if merged and s <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([s, e])
        diff = per_kind[alloc_kind[ai]]
        for s, e in merged:
            diff[s] += size
            diff[min(e + 1, n - 1)] -= size
    total = [0] * n
    for k in KINDS:
        acc = 0
        d = per_kind[k]
        for t in range(n):
            acc += d[t]
            d[t] = acc
            total[t] += acc
    return total[:end + 1], {k: v[:end + 1] for k, v in per_kind.items()}


def summary(asg: BufferAssignment) -> dict[str, Any]:
    total, per_kind = memory_curve(asg)
    peak_t = max(range(len(total)), key=total.__getitem__) if total else 0
    flat = asg.live_range.flat
    at = flat[peak_t].name if 0 <= peak_t < len(flat) else None
    by_kind = {k: 0 for k in KINDS}
    counts = {k: 0 for k in KINDS}
    for a in asg.allocations:
        by_kind[a.kind] += a.size
        counts[a.kind] += 1
    return {
        "total_bytes": asg.total_bytes(),
        "allocations": len(asg.allocations),
        "bytes_by_kind": by_kind,
        "allocations_by_kind": counts,
        "values": sum(len(a.assigned) for a in asg.allocations),
        "schedule_length": asg.live_range.end_time,
        "peak": {"time": peak_t, "instruction": at,
                 "bytes": total[peak_t] if total else 0,
                 "bytes_by_kind": {k: per_kind[k][peak_t] if total else 0 for k in KINDS}},
    }


def top_rows(asg: BufferAssignment, n: int = 20) -> list[Row]:
    """The ``n`` largest values, earliest first (what the chart shows)."""
    rs = sorted(rows(asg), key=lambda r: (-r.size, r.start, r.value.id))[:n]
    return sorted(rs, key=lambda r: (r.start, -r.size, r.value.id))


def to_json(asg: BufferAssignment, diagnostics: list | None = None,
            source: str | None = None) -> dict[str, Any]:
    ranges = asg.live_range.ranges
    allocs = []
    for a in asg.allocations:
        vals = []
        for v in a.values_by_id():
            off, size = a.assigned[v]
            r = ranges.get(v.id)
            vals.append({"id": v.id, "instruction": v.instruction.name,
                         "computation": v.instruction.parent.name if v.instruction.parent else None,
                         "index": list(v.index), "shape": str(v.shape), "offset": off, "size": size,
                         "start": r.start if r else None, "end": r.end if r else None})
        d: dict[str, Any] = {"index": a.index, "size": a.size, "kind": a.kind, "color": a.color,
                             "maybe_live_out": a.maybe_live_out, "values": vals}
        if a.is_entry_parameter:
            d["parameter"] = a.param_number
            d["parameter_index"] = list(a.param_index)
            d["parameter_aliased"] = a.param_aliased
        allocs.append(d)
    doc = {"schema": JSON_SCHEMA, "input": source, "module": asg.module.name,
           "platform": asg.options.platform, "summary": summary(asg), "allocations": allocs,
           "schedule": [i.name for i in asg.live_range.flat]}
    if diagnostics is not None:
        doc["diagnostics"] = [d.to_json() for d in diagnostics]
    return doc


# -- SVG ---------------------------------------------------------------------------------
def svg(asg: BufferAssignment, max_rects: int = 20000) -> str:
    """A self-contained SVG: live memory over time (stacked by allocation
    kind) above a map of every allocation's bytes over time (one band per
    allocation, each value a rectangle at its offset; hover for details)."""
    W, left, right = 1100, 70, 20
    end = max(asg.live_range.end_time, 1)
    plot_w = W - left - right

    def x(t: float) -> float:
        return left + plot_w * t / end

    total, per_kind = memory_curve(asg)
    peak = max(total) if total else 0
    curve_h = 160
    parts: list[str] = []
    y0 = 40
    parts.append(f'<text x="{left}" y="24" font-size="15" font-weight="bold">'
                 f'{escape(asg.module.name)}: {human_bytes(asg.total_bytes())} in '
                 f'{len(asg.allocations)} allocations, peak live {human_bytes(peak)}</text>')
    # stacked curve
    base = [0] * len(total)
    for k in KINDS:
        ys = per_kind[k]
        if not any(ys):
            continue
        top = [b + v for b, v in zip(base, ys)]
        pts = []
        for t, v in enumerate(top):
            yy = y0 + curve_h - (curve_h * v / peak if peak else 0)
            pts.append(f"{x(t):.1f},{yy:.1f} {x(t + 1):.1f},{yy:.1f}")
        back = []
        for t in range(len(base) - 1, -1, -1):
            yy = y0 + curve_h - (curve_h * base[t] / peak if peak else 0)
            back.append(f"{x(t + 1):.1f},{yy:.1f} {x(t):.1f},{yy:.1f}")
        parts.append(f'<polygon points="{" ".join(pts + back)}" fill="{KIND_COLORS[k]}" '
                     f'fill-opacity="0.8"><title>{k}</title></polygon>')
        base = top
    parts.append(f'<line x1="{left}" y1="{y0 + curve_h}" x2="{W - right}" y2="{y0 + curve_h}" stroke="#333"/>')
    parts.append(f'<text x="{left - 6}" y="{y0 + 10}" font-size="11" text-anchor="end">{human_bytes(peak)}</text>')
    parts.append(f'<text x="{left - 6}" y="{y0 + curve_h}" font-size="11" text-anchor="end">0</text>')
    lx = left
    for k in KINDS:
        if any(per_kind[k]):
            parts.append(f'<rect x="{lx}" y="{y0 + curve_h + 8}" width="10" height="10" fill="{KIND_COLORS[k]}"/>'
                         f'<text x="{lx + 14}" y="{y0 + curve_h + 17}" font-size="11">{k}</text>')
            lx += 110
    # allocation bands
    y = y0 + curve_h + 40
    allocs = [a for a in asg.allocations if a.assigned]
    biggest = max((a.size for a in allocs), default=1) or 1
    by_alloc: dict[int, list[Row]] = {}
    for r in rows(asg):
        by_alloc.setdefault(r.allocation.index, []).append(r)
    budget = max_rects
    for a in sorted(allocs, key=lambda a: (-a.size, a.index)):
        rs = by_alloc.get(a.index, [])
        if not rs or budget <= 0:
            continue
        h = max(14.0, min(260.0, 260.0 * a.size / biggest))
        parts.append(f'<text x="{left - 6}" y="{y + 11}" font-size="10" text-anchor="end">#{a.index}</text>')
        parts.append(f'<rect x="{left}" y="{y:.1f}" width="{plot_w}" height="{h:.1f}" fill="#f4f4f4" '
                     f'stroke="#ccc"><title>allocation {a.index}: {a.kind}, {human_bytes(a.size)}'
                     f'</title></rect>')
        scale = h / a.size if a.size else 0
        for r in sorted(rs, key=lambda r: -r.size)[:budget]:
            budget -= 1
            ry = y + r.offset * scale
            rh = max(1.0, r.size * scale)
            rx = x(r.start)
            rw = max(1.0, x(r.end + 1) - rx)
            tip = (f"{r.value.short()} {r.value.shape}: {human_bytes(r.size)} at offset {r.offset}, "
                   f"live {r.start}-{r.end}")
            parts.append(f'<rect x="{rx:.1f}" y="{ry:.1f}" width="{rw:.1f}" height="{rh:.1f}" '
                         f'fill="{KIND_COLORS[a.kind]}" fill-opacity="0.75" stroke="#222" '
                         f'stroke-width="0.3"><title>{escape(tip)}</title></rect>')
        y += h + 6
    H = int(y + 30)
    parts.append(f'<text x="{left}" y="{H - 10}" font-size="11">time (schedule position, 0-{end})</text>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
            f'viewBox="0 0 {W} {H}" font-family="sans-serif">\n'
            f'<rect width="{W}" height="{H}" fill="white"/>\n' + "\n".join(parts) + "\n</svg>\n")


def chart_rows(asg: BufferAssignment, n: int) -> list[tuple[str, str, str, int, int, str]]:
    """(label, size, where, start, end, kind) for :func:`hlorun.report.timeline`."""
    out = []
    for r in top_rows(asg, n):
        out.append((r.label, human_bytes(r.size), f"#{r.allocation.index}+{r.offset}",
                    r.start, r.end, r.allocation.kind))
    return out


def index_label(v: HloValue) -> str:
    return f"{v.instruction.name}{index_str(v.index)}"
