"""The Model Explorer adapter's conversion (no Model Explorer needed) on real
XLA modules, and the node-data overlays of a compile."""

from __future__ import annotations

import glob
import json

import pytest

import hlorun
from hlorun.text.parser import load_module
from hlorun.model_explorer.convert import convert
from hlorun.model_explorer.node_data import overlays

from ..conftest import TESTDATA, shared_path

DUMPS = TESTDATA / "xla-dumps"


def _check_graphs(graphs: dict, module) -> None:
    ids = {g["id"] for g in graphs["graphs"]}
    assert module.entry.name == graphs["graphs"][0]["id"]
    for g in graphs["graphs"]:
        nodes = {n["id"] for n in g["nodes"]}
        assert len(nodes) == len(g["nodes"]), "node ids are unique in a graph"
        for n in g["nodes"]:
            assert all(e["sourceNodeId"] in nodes for e in n["incomingEdges"]), n["id"]
            assert all(s in ids for s in n.get("subgraphIds", []))
            assert n["outputsMetadata"] and n["outputsMetadata"][0]["attrs"][0]["key"] == "tensor_shape"


@pytest.mark.parametrize("pattern", ["cnn_fp16/*after_optimizations.txt",
                                     "fp8_matmul_scaled/*after_optimizations.txt"])
def test_fusions_become_collapsible_layers(pattern):
    path = sorted(glob.glob(str(shared_path("xla-dumps") / pattern)))[0]
    module = load_module(path)
    graphs = convert(module)
    _check_graphs(graphs, module)
    entry = graphs["graphs"][0]
    fusions = [i for i in module.entry._instructions if i.opcode == "fusion"]
    assert fusions
    layers = entry["groupNodeAttributes"]
    for f in fusions:
        layer = next(k for k in layers if k == f.name or k.endswith("/" + f.name))
        assert layers[layer]["opcode"] == "fusion"
        # the fused body's instructions live inside the fusion's layer
        body = f.fused_computation
        inside = [n for n in entry["nodes"] if n["namespace"] == layer]
        assert len(inside) == body.instruction_count
        # the fusion's users read the body's root
    names = {n["id"] for n in entry["nodes"]}
    assert not any(f.name in names for f in fusions), "a fusion is a layer, not a node"


def test_while_bodies_are_subgraphs_and_op_names_are_layers():
    path = next((DUMPS / "cond_while").glob("*before_optimizations.txt"))
    module = load_module(path)
    graphs = convert(module)
    _check_graphs(graphs, module)
    whiles = [n for n in graphs["graphs"][0]["nodes"] if n["label"] == "while"]
    assert whiles and len(whiles[0]["subgraphIds"]) == 2  # body and condition
    scoped = [n for g in graphs["graphs"] for n in g["nodes"] if n["namespace"]]
    assert scoped and all(n["namespace"].startswith("jit(") for n in scoped)


def test_training_step_converts_quickly_and_completely():
    module = load_module(TESTDATA / "transformer" / "jax_4layer_train_step.hlo.gz")
    graphs = convert(module)
    _check_graphs(graphs, module)
    assert sum(len(g["nodes"]) for g in graphs["graphs"]) >= module.entry.instruction_count


def test_node_data_overlays_key_the_final_graph():
    r = hlorun.compile(TESTDATA / "s0" / "jit_dot_general_consumer.hlo", "gpu-cuda", diffs="changed")
    files = overlays(r)
    assert set(files) == {"created_by.json", "final_kernel.json", "autotuner_backend.json",
                          "buffer_bytes.json"}
    graphs = convert(r.module)
    entry = graphs["graphs"][0]
    node_ids = {n["id"] for n in entry["nodes"]}
    kernel = files["final_kernel.json"][entry["id"]]["results"]
    assert set(kernel) <= node_ids and kernel
    gemm = [d.instruction for d in r.autotune]
    backend = files["autotuner_backend.json"][entry["id"]]["results"]
    assert gemm and backend and set(backend) <= node_ids
    assert all(v["value"] for v in backend.values())
    created = files["created_by.json"][entry["id"]]["results"]
    assert {v["value"] for v in created.values()} - {"input"}, "some instructions come from passes"
    assert any(v["value"] > 0 for v in files["buffer_bytes.json"][entry["id"]]["results"].values())
    json.dumps(files)


def test_adapter_wraps_model_explorer_dataclasses():
    pytest.importorskip("model_explorer")
    from hlorun.model_explorer.main import HloAdapter
    out = HloAdapter().convert(str(TESTDATA / "s0" / "jit_dot_general_consumer.hlo"), {})
    g = out["graphs"][0]
    assert g.id == "main.1" and {n.label for n in g.nodes} == {"parameter", "dot", "transpose"}
