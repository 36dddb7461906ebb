"""Model Explorer node-data overlays from a compile run
(``hlorun compile --model-explorer-data DIR``), keyed like
:mod:`.convert`'s graphs (graph id = computation, node id = instruction):

* ``created_by.json``: the pass that created each instruction of the final
  module (``input`` for instructions the input already had);
* ``final_kernel.json``: the kernel each instruction runs in (a fused
  instruction: its fusion; an instruction of the input: the kernels lineage
  traced it into);
* ``autotuner_backend.json``: the backend the autotuner picked for each GEMM;
* ``buffer_bytes.json``: the bytes each instruction's output occupies
  (numeric, so Model Explorer colours nodes by a gradient).

String values are what Model Explorer shows as labels; it colours nodes by
distinct value."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

_PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
            "#ff9da7", "#9c755f", "#bab0ac"]


def _graph_of(module) -> dict[int, str]:
    """id(instruction) -> graph id (the control computation it is drawn in)."""
    from .convert import _controls
    out: dict[int, str] = {}
    for comp in _controls(module):
        stack = [comp]
        while stack:
            c = stack.pop()
            for instr in c._instructions:
                out[id(instr)] = comp.name
                if instr.opcode == "fusion" and instr.fused_computation is not None:
                    stack.append(instr.fused_computation)
    return out


def _overlay(name: str, values: dict[str, dict[str, Any]], numeric: bool = False) -> dict[str, Any]:
    """ModelNodeData JSON: {graph id: {name, results: {node id: {value}}, ...}}."""
    colours: dict[Any, str] = {}
    doc: dict[str, Any] = {}
    for graph, results in values.items():
        res = {}
        for node, v in results.items():
            item: dict[str, Any] = {"value": v}
            if not numeric:
                item["bgColor"] = colours.setdefault(v, _PALETTE[len(colours) % len(_PALETTE)])
            res[node] = item
        entry: dict[str, Any] = {"name": name, "results": res}
        if numeric:
            entry["gradient"] = [{"stop": 0, "bgColor": "#e8f0fe"}, {"stop": 1, "bgColor": "#d93025"}]
        doc[graph] = entry
    return doc


def overlays(result) -> dict[str, dict[str, Any]]:
    """file name -> ModelNodeData JSON for a :class:`~hlorun.result.CompileResult`."""
    module = result.module
    where = _graph_of(module)
    created: dict[str, dict[str, Any]] = {}
    kernel: dict[str, dict[str, Any]] = {}
    backend: dict[str, dict[str, Any]] = {}
    sizes: dict[str, dict[str, Any]] = {}

    # the pass whose diff first defines a name: its creator
    from ..report.html.data import instruction_index
    index = instruction_index({i: d for i, d in result.diffs.items() if d})
    paths = {p.index: p.path for p in result.passes}
    for comp in module.computations:
        for instr in comp._instructions:
            g = where.get(id(instr))
            if g is None or _is_layer(instr):
                continue
            hist = index.get(instr.name, [])
            made = next((paths.get(i, str(i)) for i, how in hist if how == "created"), "input")
            created.setdefault(g, {})[instr.name] = made
            sizes.setdefault(g, {})[instr.name] = _bytes(instr.shape)

    from ..analysis.kernels import kernel_list
    for k in kernel_list(module):
        instr = k.instruction
        g = where.get(id(instr))
        if g is None:
            continue
        for node in _nodes_of(instr):
            kernel.setdefault(g, {})[node] = k.name
    # the autotuner's decision reaches the final kernel through lineage (a
    # GEMM fissioned to a library call has a new name); by name otherwise
    decided: dict[int, str] = {}
    for e in result.kernels:
        if e.kernel.category != "gemm-fusion" and not _is_blas(e.kernel.category):
            continue
        for d in e.decisions:
            b = d.remark.data.get("backend") if d.remark.kind == "applied" else None
            if b:
                decided[id(e.kernel.instruction)] = b
    for rec in result.autotune:
        instr = _find(module, rec.instruction)
        if instr is not None and id(instr) not in decided:
            decided[id(instr)] = (rec.winner or {}).get("backend") or "?"
    for comp in module.computations:
        for instr in comp._instructions:
            b = decided.get(id(instr))
            if b is not None and id(instr) in where:
                for node in _nodes_of(instr):
                    backend.setdefault(where[id(instr)], {})[node] = b
    return {"created_by.json": _overlay("created by pass", created),
            "final_kernel.json": _overlay("final kernel", kernel),
            "autotuner_backend.json": _overlay("autotuner backend", backend),
            "buffer_bytes.json": _overlay("output bytes", sizes, numeric=True)}


def _is_blas(category: str) -> bool:
    return category.startswith("custom-call:") and any(
        lib in category.lower() for lib in ("cublas", "hipblas", "rocblas"))


def _is_layer(instr) -> bool:
    """A fusion is drawn as a layer (its body's nodes), not as a node."""
    return instr.opcode == "fusion" and instr.fused_computation is not None


def _nodes_of(instr) -> list[str]:
    """The graph node ids that stand for ``instr``: itself, or every
    instruction of its fused body (nested fusions included)."""
    if not _is_layer(instr):
        return [instr.name]
    out, stack = [], [instr.fused_computation]
    while stack:
        for i in stack.pop()._instructions:
            if _is_layer(i):
                stack.append(i.fused_computation)
            else:
                out.append(i.name)
    return out


def _find(module, name: str):
    for comp in module.computations:
        i = comp.get_instruction(name)
        if i is not None:
            return i
    return None


def _bytes(shape) -> int:
    try:
        return int(shape.byte_size())
    except (ValueError, TypeError, KeyError):  # opaque / token shapes
        return 0


def write_overlays(result, directory: str | os.PathLike) -> list[str]:
    """Write the overlays into ``directory`` (created); returns the paths."""
    from ..text.fileio import write_atomic
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    out = []
    for name, doc in overlays(result).items():
        p = d / name
        write_atomic(p, json.dumps(doc, separators=(",", ":")))
        out.append(str(p))
    return out


__all__ = ["overlays", "write_overlays"]
