"""The final kernels as a graph: nodes (fusions, library calls) with their
operand edges, and a layered SVG drawing of them.

Edges follow operands through instructions that launch nothing (bitcast,
get-tuple-element, tuple), so ``gte(fusion.3)`` feeding ``fusion.7`` is an
edge fusion.3 -> fusion.7.  Layout: each kernel's layer is one more than its
deepest operand kernel (longest path), nodes in a layer ordered by the mean
position of their operands (one barycentre sweep).  Past
:data:`MAX_NODES` kernels the drawing is summarized: consecutive kernels of
the schedule (which for a layered model follows the layers) are grouped,
each group drawn as one node with a bar of its kinds and edges between
groups; the full list stays in the page's kernel table.
"""

from __future__ import annotations

from collections import Counter
from html import escape
from typing import Any

MAX_NODES = 400
GROUPS = 120

#: kind class -> (label, colour)
CLASSES = {
    "loop": ("loop fusion", "#4e79a7"),
    "input": ("input (reduction) fusion", "#59a14f"),
    "triton-gemm": ("Triton GEMM", "#e15759"),
    "triton": ("generic Triton", "#f28e2b"),
    "cublas": ("cuBLAS / cuBLAS-LT", "#b07aa1"),
    "hipblaslt": ("hipBLASLt / rocBLAS", "#9c755f"),
    "cudnn": ("cuDNN", "#76b7b2"),
    "other": ("other", "#8c8c8c"),
}


def kind_class(category: str | None, kind: str | None, platform: str | None = None) -> str:
    """The colour class of a kernel; on ROCm XLA's ``__cublas$lt$matmul``
    target is served by hipBLASLt."""
    c, k = category or "", kind or ""
    if c == "gemm-fusion":
        return "triton-gemm"
    if k.startswith("kCustom:__triton"):
        return "triton"
    if c == "loop-fusion":
        return "loop"
    if c == "input-fusion":
        return "input"
    if c.startswith("custom-call:"):
        t = c.split(":", 1)[1].lower()
        if "cublas" in t:
            return "hipblaslt" if platform == "rocm" else "cublas"
        if "hipblas" in t or "rocblas" in t:
            return "hipblaslt"
        if "cudnn" in t or "miopen" in t:
            return "cudnn"
    return "other"


def kernel_nodes(result) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """([kernel node], {kernel name: body text}) of a compile result's final
    module.  Nodes carry operand kernel names, origins, forming passes and
    the explanation story (lineage)."""
    from ...analysis.kernels import category
    from ...text.printer import print_computation, print_instruction
    explained = result.kernels
    platform = result.target.platform
    by_instr = {id(e.kernel.instruction): e for e in explained}
    nodes: list[dict[str, Any]] = []
    bodies: dict[str, str] = {}
    feeds: dict[int, tuple[str, ...]] = {}   # id(instr) -> kernel names it forwards

    def sources(op) -> tuple[str, ...]:
        got = feeds.get(id(op))
        return got if got is not None else ()

    comps = {id(e.kernel.instruction.parent): e.kernel.instruction.parent for e in explained}
    for comp in comps.values():
        for instr in comp.post_order():
            e = by_instr.get(id(instr))
            if e is not None:
                ops: dict[str, None] = {}
                for op in instr.operands:
                    for s in sources(op):
                        ops.setdefault(s, None)
                feeds[id(instr)] = (instr.name,)
                k = e.kernel
                nodes.append({
                    "name": k.name, "category": k.category, "kind": k.kind,
                    "class": kind_class(k.category, k.kind, platform), "shape": k.shape, "hero": k.hero,
                    "computation": comp.name, "operands": list(ops),
                    "origins": [o.name for o in e.origins],
                    "formed_by": e.formed_by, "story": list(e.story),
                })
                body = instr.fused_computation if instr.opcode == "fusion" else None
                bodies[k.name] = print_instruction(instr) + (
                    "\n\n" + print_computation(body) if body is not None else "")
            elif category(instr) is None:
                merged: dict[str, None] = {}
                for op in instr.operands:
                    for s in sources(op):
                        merged.setdefault(s, None)
                        if len(merged) > 64:   # a huge tuple: keep the graph readable
                            break
                feeds[id(instr)] = tuple(merged)
            else:
                feeds[id(instr)] = ()
    return nodes, bodies


# ---------------------------------------------------------------------------
# Layout and drawing
# ---------------------------------------------------------------------------

_MIN_W, _MAX_W = 120, 330
_W, _H, _GAP_X, _GAP_Y = _MIN_W, 24, 14, 40
_LABEL = (_MAX_W - 12) // 7


def _layers(names: list[str], preds: dict[str, list[str]]) -> dict[str, int]:
    layer: dict[str, int] = {}
    for n in names:   # names are in a topological (post) order
        layer[n] = 1 + max((layer[p] for p in preds[n] if p in layer), default=-1)
    return layer


def _place(names: list[str], preds: dict[str, list[str]]) -> dict[str, tuple[int, int]]:
    layer = _layers(names, preds)
    rows: dict[int, list[str]] = {}
    for n in names:
        rows.setdefault(layer[n], []).append(n)
    pos: dict[str, tuple[int, int]] = {}
    for li in sorted(rows):
        row = rows[li]
        if li > 0:
            def key(n: str, row_index={n: i for i, n in enumerate(row)}) -> float:
                xs = [pos[p][0] for p in preds[n] if p in pos]
                return sum(xs) / len(xs) if xs else float(row_index[n])
            row.sort(key=key)
        for i, n in enumerate(row):
            pos[n] = (i, li)
    return pos


def _group(nodes: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    size = -(-len(nodes) // GROUPS)
    member: dict[str, str] = {}
    groups = []
    for g in range(0, len(nodes), size):
        chunk = nodes[g:g + size]
        gid = f"group {g // size + 1}"
        for n in chunk:
            member[n["name"]] = gid
        groups.append({"name": gid, "members": [n["name"] for n in chunk],
                       "classes": Counter(n["class"] for n in chunk), "operands": []})
    for grp in groups:
        grp["operands"] = {}
    index = {g["name"]: g for g in groups}
    for n in nodes:
        mine = member[n["name"]]
        for op in n["operands"]:
            other = member.get(op)
            if other is not None and other != mine:
                index[mine]["operands"].setdefault(other, None)
    for g in groups:
        g["operands"] = list(g["operands"])
    return groups, member


def svg(nodes: list[dict[str, Any]]) -> tuple[str, bool]:
    """(the SVG, whether it is summarized).  Each node is a ``<g>`` with
    ``data-kernel`` (or ``data-group``) for the viewer's click handler."""
    summarized = len(nodes) > MAX_NODES
    if summarized:
        items, _ = _group(nodes)
    else:
        items = nodes
    nw = min(_MAX_W, max(_MIN_W, 7 * max((len(n["name"]) for n in items), default=0) + 12))
    names = [n["name"] for n in items]
    preds = {n["name"]: [o for o in n["operands"]] for n in items}
    pos = _place(names, preds)
    width = max((x for x, _ in pos.values()), default=0) + 1
    height = max((y for _, y in pos.values()), default=0) + 1
    W = width * (nw + _GAP_X) + _GAP_X
    H = height * (_H + _GAP_Y) + _GAP_Y

    def xy(n: str) -> tuple[float, float]:
        x, y = pos[n]
        return _GAP_X + x * (nw + _GAP_X), _GAP_Y / 2 + y * (_H + _GAP_Y)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="kgraph" width="{W}" height="{H}" '
           f'viewBox="0 0 {W} {H}" font-family="monospace" font-size="11">']
    edges = []
    for n in items:
        x2, y2 = xy(n["name"])
        for op in preds[n["name"]]:
            if op not in pos:
                continue
            x1, y1 = xy(op)
            edges.append(f'<path d="M{x1 + nw / 2:.0f},{y1 + _H:.0f} C{x1 + nw / 2:.0f},{y1 + _H + 20:.0f} '
                         f'{x2 + nw / 2:.0f},{y2 - 20:.0f} {x2 + nw / 2:.0f},{y2:.0f}"/>')
    out.append('<g class="edges" fill="none" stroke="#999" stroke-width="0.8">' + "".join(edges) + "</g>")
    for n in items:
        x, y = xy(n["name"])
        if summarized:
            total = sum(n["classes"].values())
            bar, off = [], 0.0
            for cls, cnt in n["classes"].most_common():
                w = nw * cnt / total
                bar.append(f'<rect x="{x + off:.1f}" y="{y}" width="{w:.1f}" height="{_H}" '
                           f'fill="{CLASSES[cls][1]}"/>')
                off += w
            tip = ", ".join(f"{c} {CLASSES[k][0]}" for k, c in n["classes"].most_common())
            out.append(f'<g class="knode" data-group="{escape(n["name"])}"><title>{escape(n["name"])}: '
                       f'{len(n["members"])} kernels ({escape(tip)})</title>{"".join(bar)}'
                       f'<text x="{x + 4}" y="{y + 16}" fill="white">{escape(n["name"])} '
                       f'({len(n["members"])})</text></g>')
        else:
            label = n["name"] if len(n["name"]) <= _LABEL else n["name"][:_LABEL - 1] + "…"
            out.append(f'<g class="knode" data-kernel="{escape(n["name"])}"><title>{escape(n["name"])} '
                       f'{escape(n["shape"] or "")} ({escape(CLASSES[n["class"]][0])})</title>'
                       f'<rect x="{x}" y="{y}" width="{nw}" height="{_H}" rx="4" '
                       f'fill="{CLASSES[n["class"]][1]}"/>'
                       f'<text x="{x + 5}" y="{y + 16}" fill="white">{escape(label)}</text></g>')
    out.append("</svg>")
    return "".join(out), summarized


def groups_of(nodes: list[dict[str, Any]]) -> dict[str, list[str]]:
    """group name -> member kernel names (summarized drawings only)."""
    if len(nodes) <= MAX_NODES:
        return {}
    groups, _ = _group(nodes)
    return {g["name"]: g["members"] for g in groups}


__all__ = ["CLASSES", "MAX_NODES", "groups_of", "kind_class", "kernel_nodes", "svg"]
