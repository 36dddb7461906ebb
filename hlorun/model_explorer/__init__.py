"""Model Explorer adapter for HLO text (``pip install 'hlorun[explorer]'``)::

    model-explorer model.hlo --extensions=hlorun.model_explorer
    hlorun compile model.hlo -o final.hlo --model-explorer-data overlays/
    model-explorer final.hlo --extensions=hlorun.model_explorer \\
        --node_data_paths=overlays/final_kernel.json,overlays/created_by.json

The conversion itself is :func:`hlorun.model_explorer.convert.convert`
(no Model Explorer needed).  Model Explorer loads ``hlorun.model_explorer.main``
(its convention for extension modules), which defines :class:`HloAdapter`.
"""

from __future__ import annotations

from typing import Any

def to_graphs(graphs: dict[str, Any]) -> dict[str, Any]:
    """Plain graph dicts -> Model Explorer's graph_builder dataclasses."""
    from model_explorer import graph_builder as gb

    def kv(d):
        return gb.KeyValue(key=d["key"], value=d["value"])

    out = []
    for g in graphs["graphs"]:
        nodes = [gb.GraphNode(
            id=n["id"], label=n["label"], namespace=n["namespace"],
            subgraphIds=list(n.get("subgraphIds", [])),
            attrs=[kv(a) for a in n["attrs"]],
            incomingEdges=[gb.IncomingEdge(sourceNodeId=e["sourceNodeId"],
                                           sourceNodeOutputId=e["sourceNodeOutputId"],
                                           targetNodeInputId=e["targetNodeInputId"])
                           for e in n["incomingEdges"]],
            outputsMetadata=[gb.MetadataItem(id=m["id"], attrs=[kv(a) for a in m["attrs"]])
                             for m in n["outputsMetadata"]]) for n in g["nodes"]]
        out.append(gb.Graph(id=g["id"], nodes=nodes,
                            groupNodeAttributes=g.get("groupNodeAttributes")))
    return {"graphs": out}


__all__ = ["to_graphs"]
