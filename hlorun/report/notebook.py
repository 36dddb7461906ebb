"""``CompileResult._repr_html_``: a compact HTML view for notebooks (status,
pass table, violations, failure, kernels, autotuning).  Plain HTML with
inline styles, every value escaped; no scripts."""

from __future__ import annotations

from html import escape
from typing import Any, Iterable, Sequence

_STATUS_COLOR = {"ok": "#1a7f37", "violation": "#cf222e", "pass-failure": "#cf222e",
                 "numerics-mismatch": "#bc4c00"}
_MAX_ROWS = 200


def _table(caption: str, header: Sequence[str], rows: Iterable[Sequence[Any]],
           limit: int = _MAX_ROWS) -> str:
    rows = list(rows)
    out = [f"<details{' open' if len(rows) <= 40 else ''}><summary>{escape(caption)} "
           f"({len(rows)})</summary>",
           "<table style='border-collapse:collapse;font-family:monospace;font-size:12px'>",
           "<tr>" + "".join(f"<th style='text-align:left;padding:2px 6px'>{escape(h)}</th>"
                            for h in header) + "</tr>"]
    for r in rows[:limit]:
        out.append("<tr>" + "".join(f"<td style='padding:1px 6px'>{escape(str(c))}</td>"
                                    for c in r) + "</tr>")
    if len(rows) > limit:
        out.append(f"<tr><td colspan='{len(header)}'>... {len(rows) - limit} more</td></tr>")
    out.append("</table></details>")
    return "\n".join(out)


def render(result) -> str:
    r = result
    color = _STATUS_COLOR.get(r.status, "#57606a")
    run = r.run
    parts = [
        "<div class='hlorun-result'>",
        f"<div><b style='color:{color}'>{escape(r.status.upper())}</b> "
        f"pipeline <code>{escape(r.pipeline)}</code> on <code>{escape(r.module.name)}</code>"
        f" ({escape(run.target.platform)} {escape(run.target.device)}): "
        f"{len(run.events)} passes, {sum(1 for e in run.events if e.changed)} changed, "
        f"{run.instructions_before} &rarr; {r.module.instruction_count} instructions, "
        f"{run.seconds:.2f} s</div>",
    ]
    for f in r.failures:
        parts.append(f"<pre style='color:#cf222e'>pass #{f.index} {escape(f.path)} failed "
                     f"({escape(f.exception)}): {escape(f.message)}</pre>")
    if r.violations:
        parts.append(_table("violations", ("rule", "after pass", "instruction", "message"),
                            ((v.rule, f"#{v.pass_index} {v.after_pass}", v.instruction or "-",
                              v.message) for v in r.violations)))
    parts.append(_table("passes", ("#", "pass", "changed", "instructions", "ms"),
                        ((p.index, p.path, "yes" if p.changed else "-",
                          f"{p.instructions_before} -> {p.instructions_after}",
                          f"{p.seconds * 1e3:.1f}") for p in r.passes)))
    kernels = r.kernels
    parts.append(_table("kernels", ("kernel", "category", "shape", "formed by"),
                        ((k.name, k.category, k.kernel.shape, ", ".join(k.formed_by) or "-")
                         for k in kernels)))
    if r.autotune:
        parts.append(_table("autotuning", ("GEMM", "winner", "runner-up", "margin", "rejected"),
                            ((a.instruction, (a.winner or {}).get("label", "NONE"),
                              (a.runner_up or {}).get("label", "-"),
                              "-" if a.margin is None else f"{a.margin:+.1%}", len(a.rejected))
                             for a in r.autotune)))
    for note in r.notes:
        parts.append(f"<div style='color:#bc4c00'>note: {escape(note)}</div>")
    parts.append("</div>")
    return "\n".join(parts)
