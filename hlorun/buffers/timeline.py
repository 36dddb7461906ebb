"""Summaries and pictures of an assignment: memory by allocation kind, the
live-memory curve and its peak, the values worth drawing, a JSON document,
and an SVG timeline (``hlorun buffers --plot``).  No rich here: the CLI
hands these to :mod:`hlorun.report.console`."""

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


# -- pictures ------------------------------------------------------------------------------
# A scene is a list of primitives drawn in order:
#   ("rect", x, y, w, h, fill, opacity, tooltip)
#   ("text", x, y, size, text, anchor)            (SVG only)
#   ("line", x1, y1, x2, y2, color)
def scene(asg: BufferAssignment, max_rects: int = 20000,
          max_bands: int = 12) -> tuple[int, int, list]:
    """Live memory over time (stacked by allocation kind) above a map of
    every allocation's bytes over time: one band per allocation, each value
    a rectangle at its offset during its live range."""
    W, left, right = 1100, 70, 20
    end = max(asg.live_range.end_time, 1)
    plot_w = W - left - right

    def x(t: float) -> float:
        return left + plot_w * t / end

    total, per_kind = memory_curve(asg)
    peak = max(total) if total else 0
    curve_h = 160
    out: list = []
    y0 = 40
    out.append(("text", left, 24, 15, f"{asg.module.name}: {human_bytes(asg.total_bytes())} in "
                f"{len(asg.allocations)} allocations, peak live {human_bytes(peak)}", "start"))
    # the stacked curve, one rectangle per run of equal values and kind;
    # temporaries at the bottom, where their shape is visible
    cols = min(len(total), 2000) or 1
    base = [0.0] * cols
    for k in ("temp", "output", "thread-local", "constant", "parameter"):
        ys = per_kind[k]
        if not any(ys):
            continue
        vals = []
        for c in range(cols):
            lo = len(ys) * c // cols
            hi = max(lo + 1, len(ys) * (c + 1) // cols)
            vals.append(max(ys[lo:hi]))
        c = 0
        while c < cols:
            v, b0 = vals[c], base[c]
            d = c
            while d + 1 < cols and vals[d + 1] == v and base[d + 1] == b0:
                d += 1
            if v and peak:
                top = y0 + curve_h - curve_h * (b0 + v) / peak
                h = curve_h * v / peak
                out.append(("rect", x(end * c / cols), top, x(end * (d + 1) / cols) - x(end * c / cols),
                            h, KIND_COLORS[k], 0.85, f"{k}: {human_bytes(v)}"))
            c = d + 1
        base = [b + v for b, v in zip(base, vals)]
    out.append(("line", left, y0 + curve_h, W - right, y0 + curve_h, "#333333"))
    out.append(("text", left - 6, y0 + 10, 11, human_bytes(peak), "end"))
    out.append(("text", left - 6, y0 + curve_h, 11, "0", "end"))
    lx = left
    for k in KINDS:
        if any(per_kind[k]):
            out.append(("rect", lx, y0 + curve_h + 8, 10, 10, KIND_COLORS[k], 1.0, k))
            out.append(("text", lx + 14, y0 + curve_h + 17, 11, k, "start"))
            lx += 110
    y = y0 + curve_h + 40
    by_alloc: dict[int, list[Row]] = {}
    for r in rows(asg):
        by_alloc.setdefault(r.allocation.index, []).append(r)
    allocs = [a for a in asg.allocations if by_alloc.get(a.index)]
    # temporaries get a tall band (offsets matter there); the largest other
    # allocations a thin one each
    temps = [a for a in allocs if a.is_temp]
    others = sorted((a for a in allocs if not a.is_temp), key=lambda a: (-a.size, a.index))
    shown = temps + others[:max_bands]
    budget = max_rects
    for a in shown:
        rs = by_alloc[a.index]
        h = 300.0 if a.is_temp else 14.0
        out.append(("text", left - 6, y + 11, 10, f"#{a.index}", "end"))
        out.append(("rect", left, y, plot_w, h, "#f4f4f4", 1.0,
                    f"allocation {a.index}: {a.kind}, {human_bytes(a.size)}"))
        scale = h / a.size if a.size else 0
        for r in sorted(rs, key=lambda r: -r.size)[:max(0, budget)]:
            budget -= 1
            rx = x(r.start)
            rw = max(1.0, x(min(r.end + 1, end)) - rx)
            out.append(("rect", rx, y + r.offset * scale, rw, max(1.0, r.size * scale),
                        KIND_COLORS[a.kind], 0.75,
                        f"{r.value.short()} {r.value.shape}: {human_bytes(r.size)} at offset "
                        f"{r.offset}, live {r.start}-{r.end}"))
        y += h + 6
    if len(others) > max_bands:
        rest = others[max_bands:]
        out.append(("text", left, y + 12, 11, f"{len(rest)} smaller allocations not shown "
                    f"({human_bytes(sum(a.size for a in rest))})", "start"))
        y += 20
    H = int(y + 30)
    out.append(("text", left, H - 10, 11, f"time (schedule position, 0-{end})", "start"))
    return W, H, out


def svg(asg: BufferAssignment, max_rects: int = 20000) -> str:
    """The scene as a self-contained SVG (hover a rectangle for details)."""
    W, H, prims = scene(asg, max_rects)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
             f'viewBox="0 0 {W} {H}" font-family="sans-serif">',
             f'<rect width="{W}" height="{H}" fill="white"/>']
    for p in prims:
        if p[0] == "rect":
            _, x, y, w, h, fill, op, tip = p
            stroke = ' stroke="#222" stroke-width="0.3"' if op < 0.8 else ""
            parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" '
                         f'fill="{fill}" fill-opacity="{op}"{stroke}><title>{escape(tip)}</title></rect>')
        elif p[0] == "text":
            _, x, y, size, text, anchor = p
            parts.append(f'<text x="{x}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}">'
                         f'{escape(text)}</text>')
        elif p[0] == "line":
            _, x1, y1, x2, y2, color = p
            parts.append(f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="{color}"/>')
    parts.append("</svg>\n")
    return "\n".join(parts)


def png(asg: BufferAssignment, max_rects: int = 20000) -> bytes:
    """The scene rasterised to PNG with numpy and zlib (no text)."""
    import struct
    import zlib

    import numpy as np
    W, H, prims = scene(asg, max_rects)
    img = np.full((H, W, 3), 255.0)
    for p in prims:
        if p[0] == "rect":
            _, x, y, w, h, fill, op, _tip = p
            x0, y0 = max(0, int(x)), max(0, int(y))
            x1, y1 = min(W, max(x0 + 1, int(-(-(x + w) // 1)))), min(H, max(y0 + 1, int(-(-(y + h) // 1))))
            rgb = np.array([int(fill[i:i + 2], 16) for i in (1, 3, 5)], dtype=float)
            img[y0:y1, x0:x1] = img[y0:y1, x0:x1] * (1 - op) + rgb * op
        elif p[0] == "line":
            _, x1, y1, x2, y2, color = p
            rgb = np.array([int(color[i:i + 2], 16) for i in (1, 3, 5)], dtype=float)
            yy = min(H - 1, int(y1))
            img[yy, int(x1):int(x2)] = rgb
    raw = np.clip(img, 0, 255).astype(np.uint8)
    rows_ = b"".join(b"\x00" + raw[r].tobytes() for r in range(H))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", W, H, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows_, 6)) + chunk(b"IEND", b""))


def chart_rows(asg: BufferAssignment, n: int) -> list[tuple[str, str, str, int, int, str]]:
    """(label, size, where, start, end, kind) for :func:`hlorun.report.console.timeline`."""
    out = []
    for r in top_rows(asg, n):
        out.append((r.label, human_bytes(r.size), f"#{r.allocation.index}+{r.offset}",
                    r.start, r.end, r.allocation.kind))
    return out


def index_label(v: HloValue) -> str:
    return f"{v.instruction.name}{index_str(v.index)}"
