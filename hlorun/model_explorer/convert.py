"""HLO module -> Model Explorer graphs (plain JSON-shaped dicts, so this
module needs no Model Explorer install; :mod:`hlorun.model_explorer` wraps
them into its dataclasses).

* One graph per *control* computation: the entry, and every computation a
  ``while`` (body, condition), ``conditional`` (branches), ``call`` or async
  start runs.  The instruction calling it links there (``subgraphIds``).
* Fused computations are drawn inside their fusion as a nested, collapsible
  layer named after the fusion instruction (the fusion's attributes are the
  layer's ``groupNodeAttributes``); the fusion's operands feed the body's
  parameters and the fusion's users read the body's root.
* Outside fusions, nodes are nested by JAX's ``op_name`` scopes
  (``jit(step)/jvp(mlp)/dot_general`` -> layers ``jit(step)`` > ``jvp(mlp)``),
  so a model's modules show as layers.
* Each output has ``tensor_shape`` metadata (shape with layout): Model
  Explorer prints it on edges.

Node ids are instruction names (unique in an HLO module), graph ids are
computation names: :mod:`.node_data` keys its overlays the same way.
"""

from __future__ import annotations

from typing import Any

#: reducers and other scalar appliers are shown as an attribute, not a graph
_CONTROL_OPS = {"while", "conditional", "call", "async-start", "custom-call"}


def _kv(key: str, value: Any) -> dict[str, Any]:
    return {"key": key, "value": str(value)}


def _attrs(instr) -> list[dict[str, Any]]:
    from ..text.printer import print_instruction
    out = [_kv("opcode", instr.opcode), _kv("shape", instr.shape)]
    line = print_instruction(instr)
    # the attributes as printed after the operand list (dimensions=, to_apply=, ...)
    depth, cut = 0, None
    start = line.find(instr.opcode + "(")
    for i in range(max(start, 0), len(line)):
        c = line[i]
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                cut = i + 1
                break
    rest = line[cut:].lstrip(", ") if cut else ""
    if rest:
        out.append(_kv("attributes", rest))
    if instr.op_name:
        out.append(_kv("op_name", instr.op_name))
    return out


def _scope(instr) -> str:
    """The layer path from JAX's op_name (without the op itself)."""
    name = instr.op_name
    if not name or "/" not in name:
        return ""
    return name.rsplit("/", 1)[0]


def _controls(module) -> list:
    """Computations shown as graphs: the entry first, then every computation
    a control-flow instruction runs, in the module's order."""
    seen: dict[str, Any] = {}
    order = [c for c in module.computations]
    entry = module.entry
    if entry is not None:
        seen[entry.name] = entry
    for comp in order:
        for instr in comp._instructions:
            if instr.opcode in _CONTROL_OPS:
                for c in instr.called_computations():
                    if instr.opcode == "custom-call" and c.root is not None and not c.root.shape.is_tuple \
                            and c.instruction_count <= 3:
                        continue
                    seen.setdefault(c.name, c)
    return list(seen.values())


def convert(module) -> dict[str, Any]:
    """``{"graphs": [graph dict, ...]}`` for Model Explorer."""
    controls = _controls(module)
    graph_ids = {c.name for c in controls}
    return {"graphs": [_graph(c, graph_ids) for c in controls]}


def _graph(comp, graph_ids: set[str]) -> dict[str, Any]:
    nodes: list[dict[str, Any]] = []
    group_attrs: dict[str, dict[str, str]] = {}
    # what a reader of an instruction is connected to: itself, or the root
    # node of the fused body it stands for
    source: dict[int, str] = {}

    def emit(c, namespace_of, param_sources: list[str] | None) -> None:
        for instr in c.post_order():
            if instr.opcode == "fusion" and instr.fused_computation is not None:
                ns = namespace_of(instr)
                layer = f"{ns}/{instr.name}" if ns else instr.name
                group_attrs[layer] = {a["key"]: a["value"] for a in _attrs(instr)}
                body = instr.fused_computation
                emit(body, lambda _i, layer=layer: layer,
                     [source[id(o)] for o in instr.operands])
                source[id(instr)] = source[id(body.root)]
                continue
            if instr.opcode == "parameter" and param_sources is not None:
                n = instr.parameter_number
                if n is not None and n < len(param_sources):
                    # a fused parameter is a pass-through of the fusion's operand
                    node = _node(instr, namespace_of(instr), [param_sources[n]], graph_ids)
                    nodes.append(node)
                    source[id(instr)] = node["id"]
                    continue
            node = _node(instr, namespace_of(instr), [source[id(o)] for o in instr.operands
                                                      if id(o) in source], graph_ids)
            nodes.append(node)
            source[id(instr)] = node["id"]

    emit(comp, _scope, None)
    graph: dict[str, Any] = {"id": comp.name, "nodes": nodes}
    if group_attrs:
        graph["groupNodeAttributes"] = {k: v for k, v in group_attrs.items()}
    return graph


def _node(instr, namespace: str, inputs: list[str], graph_ids: set[str]) -> dict[str, Any]:
    shapes = instr.shape.tuple_shapes if instr.shape.is_tuple else [instr.shape]
    node = {
        "id": instr.name,
        "label": instr.opcode if instr.opcode != "custom-call" else str(instr.custom_call_target),
        "namespace": namespace,
        "attrs": [_kv("name", instr.name)] + _attrs(instr),
        "incomingEdges": [{"sourceNodeId": s, "sourceNodeOutputId": "0",
                           "targetNodeInputId": str(i)} for i, s in enumerate(inputs)],
        "outputsMetadata": [{"id": str(i), "attrs": [_kv("tensor_shape", s)]}
                            for i, s in enumerate(shapes)],
    }
    subs = [c.name for c in instr.called_computations() if c.name in graph_ids]
    if subs:
        node["subgraphIds"] = subs
    return node


__all__ = ["convert"]
