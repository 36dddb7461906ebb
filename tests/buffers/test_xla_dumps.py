"""Our buffer assignment against XLA's own dumps (../shared/xla-dumps/*/
``*-buffer-assignment.txt``, ``-values``, ``-live-range``,
``-memory-usage-report``), produced by XLA:GPU on an H200 for the module in
``*gpu_after_optimizations.txt``.

What cannot match from text alone, and is normalised here:
* names of compact get-tuple-elements (``%x#0`` in the text; XLA's real
  name, e.g. ``get-tuple-element.8.0``, is not printed) and where such a GTE
  sits in a value's position list;
* value ids and the order of thread-local allocations of reducer
  computations: they follow the order in which the compiler *created* the
  computations, which the text does not record (entry values, every
  allocation size, offset and kind do match).
"""

from __future__ import annotations

import re

import pytest

from hlorun.buffers import assign_buffers, dump
from hlorun.text.parser import load_module
from tests.conftest import shared_path

CASES = ["permute_rows_donated", "gemm_bias_gelu_bf16", "fp8_matmul_scaled",
         "dot_general_gqa_cublaslt", "cnn_fp16"]


def _base(case: str) -> str:
    d = shared_path("xla-dumps", case)
    return str(next(d.glob("*gpu_after_optimizations.txt")))[:-4]


@pytest.fixture(scope="module", params=CASES)
def case(request):
    base = _base(request.param)
    m = load_module(base + ".txt")
    return base, m, assign_buffers(m)


def _gte(text: str) -> str:
    return re.sub(r"get-tuple-element\.[0-9.]+|[\w.\-]+_\d+(?=[\s{:,]|$)", "GTE", text)


def _split_thread_local(text: str) -> tuple[str, list[str]]:
    """Thread-local allocations, reduced to (size, name) lines, and the rest."""
    out, tl = [], []
    blocks = re.split(r"(?m)^(?=allocation \d+:)", text)
    for b in blocks:
        if "thread-local" in b.split("\n", 1)[0]:
            names = re.findall(r"value: <\d+ (\S+) @0> \(size=(\d+)", b)
            tl.extend(f"{n} {s}" for n, s in names)
            out.append(re.sub(r"allocation \d+", "allocation N", b.split("\n", 1)[0]) + "\n")
        else:
            out.append(b)
    return "".join(out), sorted(tl)


def test_buffer_assignment_matches_xla(case):
    base, _m, asg = case
    want = open(base + "-buffer-assignment.txt").read()
    got = dump.assignment_text(asg)
    if "thread-local" not in want:
        assert got == want
        return
    w_rest, w_tl = _split_thread_local(want)
    g_rest, g_tl = _split_thread_local(got)
    assert g_rest == w_rest
    assert g_tl == w_tl


def test_memory_usage_report_matches_xla(case):
    base, _m, asg = case
    assert dump.memory_usage_text(asg) == open(base + "-memory-usage-report.txt").read()


def test_live_range_matches_xla(case):
    base, _m, asg = case
    assert _gte(dump.live_range_text(asg)) == _gte(open(base + "-live-range.txt").read())


def _values(text: str) -> dict[str, str]:
    """value name -> its block without ids, instruction text and GTE order."""
    text = _gte(re.sub(r" from instruction: .*", "", text))
    blocks = re.split(r"(?m)^(?=<\d+ )", text.split("Used values:\n", 1)[1])
    out = {}
    for b in blocks:
        if not b.strip():
            continue
        head, rest = b.split("\n", 1)
        name = re.sub(r"^<\d+ ", "<", head)
        pos, uses = rest.split(" uses:\n")
        out[name] = "".join(sorted(pos.splitlines(True))) + uses
    return out


def test_values_match_xla(case):
    base, _m, asg = case
    want_text = open(base + "-buffer-assignment-values.txt").read()
    got_text = dump.values_text(asg)
    assert got_text.split("Used values:")[0] == want_text.split("Used values:")[0]
    assert _values(got_text) == _values(want_text)


def test_entry_value_ids_match_xla(case):
    """Values of the entry computation carry XLA's ids (``<id name{index} @0>``)."""
    base, m, asg = case
    entry = {i.name for i in m.entry.instructions}
    by_id = {v.id: v for v in asg.dataflow.values}
    want = re.findall(r"value: (<(\d+) ([^{ >]+)\S* @0>)", open(base + "-buffer-assignment.txt").read())
    checked = 0
    for short, vid, name in want:
        if name in entry:
            assert by_id[int(vid)].short() == short
            checked += 1
    assert checked >= 3


def test_permute_rows_donated_shares_parameter_and_output():
    """S1's real dump: the donated parameter x.1 and the output copy.1 live
    in one allocation in XLA's assignment and in ours."""
    base = _base("permute_rows_donated")
    m = load_module(base + ".txt")
    asg = assign_buffers(m)
    x = m.entry.get_instruction("x.1")
    out = m.entry.get_instruction("copy.1")
    (ax, ox, _), = asg.slices_at(x)
    (ao, oo, _), = asg.slices_at(out)
    assert ax is ao and ox == oo == 0
    assert ax.is_entry_parameter and ax.param_aliased and ax.maybe_live_out
    assert "allocation 0: size 65536, page 0, parameter 0" in open(base + "-buffer-assignment.txt").read()
