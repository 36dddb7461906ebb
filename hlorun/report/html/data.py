"""What the HTML report shows, gathered from a :class:`~hlorun.result.CompileResult`
(or from a saved ``hlorun compile --format json`` report).

The report is data plus a fixed viewer (``assets/report.js``): this module
builds the data, :mod:`.render` embeds it.  Small things (summary, passes,
violations, autotune decisions, kernels) go into one JSON document; big
things (per-pass diffs, kernel bodies, the instruction index) are separate
gzip'd blobs the viewer inflates only when asked (``DecompressionStream``,
built into browsers), so a 50k-instruction compile stays a few MB and opens
fast.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any, Iterable

#: diff lines that (re)define an instruction: ``-  %name = ...`` / ``+ ROOT name = ...``
_DEF = re.compile(r"^([-+ ])\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=")
#: names an instruction line reads or defines
_NAME = re.compile(r"%([\w.\-]+)")

#: autotune candidates kept per GEMM in the page (the rest are counted)
MAX_CANDIDATES = 12


def _version() -> str:
    try:
        from importlib.metadata import version
        return version("hlorun")
    except Exception:  # not installed (a checkout on sys.path)
        return "unknown"


def instruction_index(diffs: dict[int, list[str]]) -> dict[str, list[list]]:
    """name -> [[pass index, how]] over every diff: how is ``changed``
    (removed and re-added), ``created``, ``removed`` or ``read`` (only an
    operand of a changed line).  One pass over the diff lines."""
    index: dict[str, list[list]] = {}
    for idx in sorted(diffs):
        minus: set[str] = set()
        plus: set[str] = set()
        reads: set[str] = set()
        for line in diffs[idx]:
            if not line or line[0] not in "-+" or line.startswith(("---", "+++")):
                continue
            m = _DEF.match(line)
            if m:
                (minus if m.group(1) == "-" else plus).add(m.group(2))
            reads.update(_NAME.findall(line))
        for name in minus | plus | reads:
            how = ("changed" if name in minus and name in plus else "removed" if name in minus
                   else "created" if name in plus else "read")
            index.setdefault(name, []).append([idx, how])
    return index


def _autotune_rows(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for r in records:
        w = r.get("winner") or {}
        ru = r.get("runner_up") or {}
        cands = sorted(r.get("candidates") or [], key=lambda c: c.get("ns") or float("inf"))
        rows.append({
            "instruction": r.get("instruction"), "shape": r.get("shape"), "types": r.get("types"),
            "device": r.get("device"), "source": r.get("source"),
            "winner": w.get("label"), "winner_backend": w.get("backend"),
            "winner_us": (w.get("ns") or 0) / 1e3 if w else None,
            "runner_up": ru.get("label"),
            "runner_up_us": (ru.get("ns") or 0) / 1e3 if ru else None,
            "margin": r.get("margin"), "flip_rate": r.get("flip_rate"),
            "considered": r.get("considered", len(cands)), "feasible": r.get("feasible"),
            "rejected": r.get("rejected") or [],
            "candidates": [{"label": c.get("label"), "backend": c.get("backend"),
                            "us": None if c.get("ns") is None else c["ns"] / 1e3,
                            "feasible": c.get("feasible", True)} for c in cands[:MAX_CANDIDATES]],
            "notes": r.get("notes") or [],
        })
    return rows


def _passes(events: list[dict[str, Any]], remarks: dict[int, list[str]],
            diffs: dict[int, list[str]]) -> list[dict[str, Any]]:
    out = []
    for e in events:
        i = e["index"]
        out.append({"index": i, "name": e["name"], "path": e.get("path", e["name"]),
                    "pipeline": e.get("pipeline"), "changed": bool(e.get("changed")),
                    "seconds": e.get("seconds") or 0.0,
                    "before": e.get("instructions_before"), "after": e.get("instructions_after"),
                    "remarks": remarks.get(i, [])[:50], "n_remarks": len(remarks.get(i, [])),
                    "diff_lines": len(diffs.get(i, ())),
                    "has_diff": i in diffs and bool(diffs[i])})
    return out


def _remarks_by_pass(remarks: Iterable[tuple[int, str]]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = defaultdict(list)
    for i, text in remarks:
        out[i].append(text)
    return out


def from_result(result, *, input_name: str | None = None,
                exit_code: int | None = None) -> dict[str, Any]:
    """The report data of a finished compile.  Diffs are included when the
    compile kept them (``diffs="changed"``); kernels carry their operand
    edges, bodies, origins and explanation (lineage, when it was on)."""
    from .graph import kernel_nodes
    doc = result.to_json(input=input_name)
    events = doc["passes"]
    remarks = _remarks_by_pass((r["index"], _remark_text(r)) for r in doc.get("remarks", []))
    diffs = {i: d for i, d in result.diffs.items() if d}
    data = _common(doc, events, remarks, diffs, exit_code)
    data["kernels"], data["bodies"] = kernel_nodes(result)
    data["origin_to_kernel"] = _origin_map(data["kernels"])
    if result.buffers is not None:
        data["buffers"] = _buffers(result.buffers, result.spec)
    return data


def from_json(doc: dict[str, Any]) -> dict[str, Any]:
    """The report data of a saved JSON report (``hlorun compile --format json``).
    Renders what the report holds: kernels and diffs only if it has them."""
    if not isinstance(doc, dict) or not str(doc.get("schema", "")).startswith("hlorun.compile/"):
        from ...errors import UsageError
        raise UsageError("not an hlorun compile report (expected \"schema\": \"hlorun.compile/1\")")
    events = doc.get("passes") or []
    remarks = _remarks_by_pass((r.get("index", -1), _remark_text(r)) for r in doc.get("remarks", []))
    diffs: dict[int, list[str]] = {}
    for d in doc.get("diffs") or []:   # compile --format json --json-include diffs
        m = re.search(r"#(\d+)\b", str(d.get("pass", "")))
        if m and d.get("lines"):
            diffs[int(m.group(1))] = list(d["lines"])
    data = _common(doc, events, remarks, diffs, None)
    kernels = []
    for k in doc.get("kernels") or []:
        kernels.append({"name": k["name"], "category": k.get("category"), "kind": k.get("kind"),
                        "shape": k.get("shape"), "hero": k.get("hero"), "operands": [],
                        "origins": [o["name"] for o in k.get("origins", [])],
                        "formed_by": sorted({d["path"] for d in k.get("decisions", [])
                                             if d.get("kind") == "applied"}),
                        "story": k.get("story") or []})
    data["kernels"], data["bodies"] = kernels, {}
    data["origin_to_kernel"] = _origin_map(kernels)
    return data


def _remark_text(r: dict[str, Any]) -> str:
    where = r.get("instruction")
    return (f"[{r.get('kind', 'note')}] " + (f"{where}: " if where else "") + str(r.get("message", "")))


def _origin_map(kernels: list[dict[str, Any]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for k in kernels:
        for o in k.get("origins", ()):
            out[o].append(k["name"])
    return dict(out)


def _common(doc, events, remarks, diffs, exit_code) -> dict[str, Any]:
    summ = doc.get("summary", {})
    target = doc.get("target", {})
    return {
        "summary": {
            "input": doc.get("input"), "module": doc.get("module"),
            "pipeline": (doc.get("pipeline") or {}).get("name"),
            "platform": target.get("platform"), "device": target.get("device"),
            "version": _version(), "status": doc.get("status"),
            "exit_code": doc.get("exit_code") if exit_code is None else exit_code,
            "seconds": (summ.get("seconds") or {}).get("total"),
            "instructions_before": summ.get("instructions_before"),
            "instructions_after": summ.get("instructions_after"),
            "passes_run": summ.get("passes_run", len(events)),
            "passes_changed": summ.get("passes_changed"),
            "notes": doc.get("notes") or [],
        },
        "violations": doc.get("violations") or [],
        "failure": doc.get("failure"),
        "passes": _passes(events, remarks, diffs),
        "autotune": _autotune_rows(doc.get("autotune") or []),
        "diffs": diffs,
        "index": instruction_index(diffs),
    }


def _buffers(asg, spec=None) -> dict[str, Any]:
    """The live-range chart and the aliasing hazards (the ``buffer-aliasing``
    checker with the pipeline's declared custom-call targets)."""
    from ...buffers import timeline
    from ...buffers.checker import BufferAliasingChecker
    try:
        checker = BufferAliasingChecker.from_pipeline(spec, {})
        hazards = [{"rule": d.rule, "instruction": d.instruction, "message": d.message}
                   for d in checker.check(asg.module)]
    except Exception as e:  # the chart still helps when the checker cannot run
        hazards = [{"rule": "buffer-aliasing", "instruction": None,
                    "message": f"checker could not run: {e}"}]
    return {"svg": timeline.svg(asg), "summary": timeline.summary(asg), "hazards": hazards}


__all__ = ["from_json", "from_result", "instruction_index"]
