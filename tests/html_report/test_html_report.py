"""The HTML report's data and page, on real compiles: the S0 incident (a
violation), a JAX training step (autotuner decisions, fusions) and a saved
JSON report."""

from __future__ import annotations

import base64
import gzip
import json
import re

import pytest
from click.testing import CliRunner

import hlorun
from hlorun.cli import cli
from hlorun.report.html import html_from_json, html_from_result
from hlorun.report.html.data import from_result, instruction_index
from hlorun.report.html.graph import MAX_NODES, kind_class, svg
from hlorun.report.html.render import ASSET_BUDGET, _asset

from ..conftest import TESTDATA

S0 = TESTDATA / "s0" / "jit_dot_general_consumer.hlo"
STEP = TESTDATA / "transformer" / "jax_4layer_train_step.hlo.gz"


@pytest.fixture(scope="module")
def s0_result():
    return hlorun.compile(S0, "gpu-rocm-41481", diffs="changed", force_backend="hipblaslt")


@pytest.fixture(scope="module")
def step_result():
    return hlorun.compile(STEP, diffs="changed")


def _blobs(html: str) -> dict[str, str]:
    out = {}
    for ident, data in re.findall(r'<script type="application/octet-stream" id="([^"]+)">([^<]*)</script>', html):
        out[ident] = gzip.decompress(base64.b64decode(data)).decode()
    return out


def _data(html: str) -> dict:
    """The page's data, with the lazily inflated parts put back."""
    m = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', html, re.S)
    data = json.loads(m.group(1).replace("<\\/", "</"))
    blobs = _blobs(html)
    for key, blob in (("kernels", "kernels"), ("autotune", "autotune"), ("origin_to_kernel", "o2k")):
        data[key] = json.loads(blobs["blob-" + blob])
    return data


def test_instruction_index_classifies_what_a_pass_did():
    diff = ["--- a", "+++ b", "@@ -1,3 +1,3 @@",
            "-  %reshape.5 = f16[2,4]{1,0} reshape(%dot.1)",
            "+  %reshape.5 = f16[2,4]{0,1} reshape(%dot.1)",
            "-  %old = f16[2] negate(%p)",
            "+  %copy.2 = f16[2,4]{1,0} copy(%reshape.5)"]
    idx = instruction_index({7: diff})
    assert idx["reshape.5"] == [[7, "changed"]]
    assert idx["old"] == [[7, "removed"]]
    assert idx["copy.2"] == [[7, "created"]]
    assert idx["dot.1"] == [[7, "read"]]


def test_s0_report_shows_the_violation_and_the_culprit_pass(s0_result):
    html = html_from_result(s0_result, input_name=str(S0))
    data = _data(html)
    assert data["summary"]["status"] == "violation" and data["summary"]["exit_code"] == 2
    v = data["violations"][0]
    assert v["rule"] == "reshape-is-bitcast" and v["after_pass"] == "autotuner/autotuner"
    # every changed pass has its diff as a lazily inflated blob, unchanged ones none
    blobs = _blobs(html)
    changed = [p for p in data["passes"] if p["changed"]]
    assert changed and all(p["has_diff"] for p in changed)
    assert {f"diff-{p['index']}" for p in changed} <= set(blobs)
    assert not any(f"diff-{p['index']}" in blobs for p in data["passes"] if not p["changed"])
    # the reshape the violation names can be followed through the pipeline
    index = json.loads(blobs["blob-index"])
    assert v["instruction"] in index
    # the hipBLASLt call the autotuner forced is coloured as hipBLASLt on ROCm
    k = [k for k in data["kernels"] if k["category"].startswith("custom-call:")]
    assert k and k[0]["class"] == "hipblaslt"
    assert data["autotune"] and data["autotune"][0]["winner"].startswith("hipblaslt")
    assert "</script>" not in json.dumps(data)  # embedded safely


def test_training_step_report_has_kernels_graph_and_autotuner(step_result):
    html = html_from_result(step_result)
    data = _data(html)
    kernels = data["kernels"]
    assert len(kernels) == len(step_result.kernels)
    names = {k["name"] for k in kernels}
    # operand edges point at kernels; a training step is connected
    assert all(o in names for k in kernels for o in k["operands"])
    assert sum(len(k["operands"]) for k in kernels) >= len(kernels) // 2
    classes = {k["class"] for k in kernels}
    assert {"triton-gemm", "loop", "input"} <= classes
    assert html.count('class="knode"') == len(kernels) <= MAX_NODES
    bodies = json.loads(_blobs(html)["blob-bodies"])
    gemm = next(k["name"] for k in kernels if k["class"] == "triton-gemm")
    assert " dot(" in bodies[gemm]
    assert len(data["autotune"]) == len(step_result.autotune) > 0
    assert all(r["winner"] for r in data["autotune"])
    # timeline: one row per pass, with times and instruction counts
    assert [p["index"] for p in data["passes"]] == [p.index for p in step_result.passes]


def test_big_graphs_are_summarized_into_groups():
    nodes = [{"name": f"fusion.{i}", "operands": [f"fusion.{i - 1}"] if i else [],
              "class": "loop", "shape": "f32[1]"} for i in range(MAX_NODES * 3)]
    drawing, summarized = svg(nodes)
    assert summarized and drawing.count('data-group="') <= 120
    assert drawing.count("<path") >= 100  # chained groups stay connected


def test_kind_classes():
    assert kind_class("gemm-fusion", "kCustom:__triton_nested_gemm_fusion") == "triton-gemm"
    assert kind_class("loop-fusion", "kCustom:__triton") == "triton"
    assert kind_class("custom-call:__cublas$lt$matmul", "__cublas$lt$matmul") == "cublas"
    assert kind_class("custom-call:__cublas$lt$matmul", "__cublas$lt$matmul", "rocm") == "hipblaslt"
    assert kind_class("custom-call:__cudnn$convForward", "__cudnn$convForward") == "cudnn"


def test_vendored_viewer_stays_small():
    assert len(_asset("report.js")) + len(_asset("report.css")) < ASSET_BUDGET


def test_report_command_renders_a_saved_json_report(tmp_path, s0_result):
    report = tmp_path / "r.json"
    report.write_text(json.dumps(s0_result.to_json(input=str(S0))))
    out = tmp_path / "r.html"
    res = CliRunner().invoke(cli, ["report", str(report), "-o", str(out)])
    assert res.exit_code == 0, res.output
    data = _data(out.read_text())
    assert data["violations"][0]["rule"] == "reshape-is-bitcast"
    assert [p["path"] for p in data["passes"]] == [p.path for p in s0_result.passes]


def test_report_command_rejects_bad_input(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    res = CliRunner().invoke(cli, ["report", str(bad), "-o", str(tmp_path / "o.html")])
    assert res.exit_code == 1 and "bad.json:1:2: not JSON" in res.output
    other = tmp_path / "other.json"
    other.write_text('{"schema": "something/1"}')
    res = CliRunner().invoke(cli, ["report", str(other), "-o", str(tmp_path / "o.html")])
    assert res.exit_code == 1 and "not an hlorun compile report" in res.output
    assert not (tmp_path / "o.html").exists()
    res = CliRunner().invoke(cli, ["report", str(other), "-o", str(other)])
    assert res.exit_code == 1 and "refusing to overwrite" in res.output


def test_from_json_and_from_result_agree_on_the_common_parts(s0_result):
    a = from_result(s0_result)
    b = json.loads(json.dumps(s0_result.to_json()))
    html = html_from_json(b)
    d = _data(html)
    assert d["violations"] == json.loads(json.dumps(a["violations"]))
    assert len(d["autotune"]) == len(a["autotune"])


def test_compile_html_and_model_explorer_data_from_the_cli(tmp_path):
    """``compile --html`` keeps every changed pass's diff for the page even
    with ``--diff none`` on the terminal; ``--model-explorer-data`` writes the
    four overlays keyed by the final module's nodes."""
    out, page, me = tmp_path / "out.hlo", tmp_path / "r.html", tmp_path / "me"
    res = CliRunner().invoke(cli, ["compile", str(S0), "-p", "gpu-rocm-41481", "--force-backend",
                                   "hipblaslt", "--diff", "none", "--no-table", "-o", str(out),
                                   "--html", str(page), "--model-explorer-data", str(me)])
    assert res.exit_code == 2, res.output
    assert "@@" not in res.output  # no diff on the terminal
    data = _data(page.read_text())
    assert data["violations"][0]["rule"] == "reshape-is-bitcast"
    assert any(p["has_diff"] for p in data["passes"])
    backend = json.loads((me / "autotuner_backend.json").read_text())
    (graph, overlay), = backend.items()
    assert {v["value"] for v in overlay["results"].values()} == {"hipblaslt"}
    assert sorted(p.name for p in me.iterdir()) == ["autotuner_backend.json", "buffer_bytes.json",
                                                    "created_by.json", "final_kernel.json"]
    res = CliRunner().invoke(cli, ["compile", str(S0), "--html", str(S0)])
    assert res.exit_code == 1 and "refusing to overwrite" in res.output


def test_report_from_cli_json_with_diffs(tmp_path):
    """``compile --format json --json-include diffs`` then ``hlorun report``:
    the page has the diffs of the changed passes."""
    res = CliRunner().invoke(cli, ["compile", str(S0), "-p", "gpu-rocm-41481", "--force-backend",
                                   "hipblaslt", "--format", "json", "--json-include", "diffs",
                                   "-o", str(tmp_path / "out.hlo")])
    assert res.exit_code == 2
    doc = json.loads(res.stdout)
    (tmp_path / "r.json").write_text(json.dumps(doc))
    res = CliRunner().invoke(cli, ["report", str(tmp_path / "r.json"), "-o", str(tmp_path / "r.html")])
    assert res.exit_code == 0, res.output
    html = (tmp_path / "r.html").read_text()
    data = _data(html)
    changed = [p["index"] for p in data["passes"] if p["changed"]]
    with_diff = [p["index"] for p in data["passes"] if p["has_diff"]]
    assert with_diff and set(with_diff) <= set(changed)
    assert "reshape" in _blobs(html)[f"diff-{with_diff[-1]}"]


@pytest.mark.parametrize("name, hazards", [("sort_chunks_by_map_bwd.hlo", 2),
                                           ("sort_chunks_by_map_bwd_fixed.hlo", 0)])
def test_buffers_section_charts_live_ranges_and_marks_aliasing_hazards(name, hazards):
    """S1: the permutation kernel's output shares its input's buffer -- the
    page's buffer section says so (and says nothing for the fixed module)."""
    r = hlorun.compile(TESTDATA / "s1" / name, str(TESTDATA / "s1" / "pipeline.yaml"), buffers=True)
    html = html_from_result(r)
    section = html.split('<section id="buffers"', 1)[1].split("</section>", 1)[0]
    assert "<svg" in section and "allocations" in section
    assert section.count("[buffer-aliasing]") == hazards
    if hazards:
        assert "inp_grad" in section and "without a declared alias" in section
    else:
        assert "No aliasing hazards" in section
