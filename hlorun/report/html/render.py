"""Assemble the self-contained HTML report: the viewer's CSS and JS
(package data, under :data:`ASSET_BUDGET` bytes), the report data as JSON,
and the big parts as base64 gzip blobs the viewer inflates on demand."""

from __future__ import annotations

import base64
import gzip
import json
from html import escape
from importlib import resources
from typing import Any

from .graph import CLASSES, groups_of, svg

#: the vendored viewer (report.js + report.css) must stay under this size
ASSET_BUDGET = 40_000


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath("assets", name).read_text(encoding="utf-8")


def _blob(ident: str, text: str) -> str:
    data = base64.b64encode(gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0))
    return f'<script type="application/octet-stream" id="{ident}">{data.decode("ascii")}</script>\n'


def _script_json(obj: Any) -> str:
    # "</" would end the <script> element early
    return json.dumps(obj, separators=(",", ":")).replace("</", "<\\/")


def render(data: dict[str, Any]) -> str:
    """The report page for :func:`hlorun.report.html.data.from_result` data."""
    diffs: dict[int, list[str]] = data.pop("diffs", {})
    index = data.pop("index", {})
    bodies = data.pop("bodies", {})
    kernels = data.get("kernels", [])
    graph_svg, summarized = svg(kernels) if kernels else ("", False)
    data["groups"] = groups_of(kernels)
    buffers = data.pop("buffers", None)
    # heavy, per-item detail is inflated by the viewer when a tab or a click needs it
    autotune = data.pop("autotune", [])
    origin_to_kernel = data.pop("origin_to_kernel", {})
    data["kernels"] = None
    data["n_kernels"], data["n_autotune"] = len(kernels), len(autotune)
    s = data["summary"]
    legend = "".join(f'<span><i style="background:{c}"></i>{escape(label)}</span>'
                     for label, c in CLASSES.values())
    out = [
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
        f"<title>hlorun: {escape(str(s.get('module')))} ({escape(str(s.get('status')))})</title>",
        f"<style>{_asset('report.css')}</style></head><body>",
        '<header id="summary"></header><div id="problems"></div>',
        '<nav><button data-tab="timeline" class="on">Passes</button><button data-tab="kernels">Kernels</button>'
        '<button data-tab="autotune">Autotuner</button><button data-tab="buffers">Buffers</button>'
        '<button data-tab="follow">Follow an instruction</button></nav>',
        '<section id="timeline" class="tab on"><p class="muted small">Click a pass to see its diff; '
        'click an instruction name in a diff to follow it through the pipeline. '
        'Pipelines fold on click.</p><table id="timeline-table"><thead><tr><th>#</th><th>pass</th>'
        '<th>changed</th><th>instructions</th><th>ms</th><th>time</th><th></th></tr></thead>'
        '<tbody></tbody></table><p><label><input type="radio" name="mode" value="unified" checked> unified</label> '
        '<label><input type="radio" name="mode" value="sbs"> side by side</label></p>'
        '<div id="diff"><p class="muted">Select a pass.</p></div></section>',
        '<section id="kernels" class="tab">',
        f'<p>{len(kernels)} kernels' + (f"; the drawing groups consecutive kernels of the schedule "
                                        f"({len(data['groups'])} groups), click a group to list it" if summarized else "")
        + f'.</p><p class="legend">{legend}</p>',
        f'<div class="scroll" id="kgraph">{graph_svg or "<p class=muted>no kernels</p>"}</div>',
        '<div id="kpanel"><p class="muted">Click a kernel.</p></div>',
        '<details><summary>all kernels</summary><table id="ktable"><thead><tr><th>kernel</th><th>kind</th>'
        '<th>shape</th><th>formed by</th></tr></thead><tbody></tbody></table></details></section>',
        '<section id="autotune" class="tab">'
        + (f'<p>{len(autotune)} GEMMs decided. Click a column to sort, a row for its rejected '
           'configurations and candidates.</p><div class="scroll"><table id="attable"><thead></thead><tbody>'
           '</tbody></table></div><div id="atpanel"></div>' if autotune
           else '<p class="muted">No autotuner decisions in this compile.</p>'
                '<table id="attable"><thead></thead><tbody></tbody></table>')
        + "</section>",
        '<section id="buffers" class="tab">' + _buffers_html(buffers) + "</section>",
        '<section id="follow" class="tab"><p><input id="follow-name" placeholder="instruction name" size="40"> '
        '<button id="follow-go">follow</button></p><div id="fpanel"></div></section>',
        f'<script type="application/json" id="report-data">{_script_json(data)}</script>\n',
    ]
    for i, lines in diffs.items():
        out.append(_blob(f"diff-{i}", "\n".join(lines)))
    out.append(_blob("blob-index", json.dumps(index, separators=(",", ":"))))
    for ident, obj in (("bodies", bodies), ("kernels", kernels), ("autotune", autotune),
                       ("o2k", origin_to_kernel)):
        out.append(_blob("blob-" + ident, json.dumps(obj, separators=(",", ":"))))
    out.append(f"<script>{_asset('report.js')}</script></body></html>\n")
    return "".join(out)


def _buffers_html(buffers: dict[str, Any] | None) -> str:
    if buffers is None:
        return '<p class="muted">Buffer assignment was not run (compile with --buffers).</p>'
    summ = buffers["summary"]
    hz = buffers["hazards"]
    parts = [f"<p>{summ['allocations']} allocations, {summ['total_bytes']:,} bytes; peak "
             f"{summ['peak']['bytes']:,} bytes at {escape(str(summ['peak']['instruction']))}.</p>"]
    if hz:
        parts.append("".join(f'<div class="problem"><b>[{escape(h["rule"])}]</b> '
                             f'{escape(h.get("instruction") or "")}: {escape(h["message"])}</div>'
                             for h in hz))
    else:
        parts.append('<p class="st-ok">No aliasing hazards.</p>')
    parts.append(f'<div class="scroll">{buffers["svg"]}</div>')
    return "".join(parts)


__all__ = ["ASSET_BUDGET", "render"]
