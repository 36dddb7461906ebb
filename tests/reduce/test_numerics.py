"""``numerics`` and ``output-differs-from``: conditions judged by the numpy
evaluator.  The compile that changes numbers is the S0 fix done wrong:
a reshape-decomposer whose copy (before the bitcast) swaps the two most
minor dimensions of the layout, registered under the real pass's name for
the test."""

from __future__ import annotations

import pytest

from hlorun.text.fileio import read_text
from hlorun.text.parser import parse_module
from hlorun.passes import REGISTRY
from hlorun.cli.compile_options import compile_config
from hlorun.reduce import ReduceOptions, Reducer, parse_condition
from hlorun.errors import UsageError

from ..broken_passes import SwappedReshapeDecomposer  # noqa: F401 (registered by name below)
from ..conftest import TESTDATA, shared_path

ATTENTION = TESTDATA / "reduce" / "s0_attention_block.hlo"
DUMP = ("xla-dumps", "dot_general_gqa_cublaslt")


@pytest.fixture
def broken_decomposer(monkeypatch):
    monkeypatch.setitem(REGISTRY, "reshape-decomposer",
                        "tests.reduce.test_numerics:SwappedReshapeDecomposer")


def prepared(condition, path, *flags):
    cfg = compile_config([str(path), *map(str, flags)])
    cond = parse_condition(condition)
    cond.prepare(cfg)
    return cond


def judge(condition, path, *flags):
    cond = prepared(condition, path, *flags)
    text = read_text(path)
    return cond.test(parse_module(text, str(path)), text)


def test_numerics_condition_sees_the_broken_fix_only(broken_decomposer):
    v = judge("numerics", ATTENTION, "--pipeline", "gpu-rocm")
    assert v.interesting and "mismatches" in v.detail
    assert v.result.status == "ok"  # no checker notices: only the numbers do


def test_numerics_condition_is_quiet_for_the_real_pass():
    v = judge("numerics", ATTENTION, "--pipeline", "gpu-rocm")
    assert not v.interesting and v.detail == "outputs match"


def test_numerics_reduction_keeps_the_dot_whose_layout_copy_is_wrong(broken_decomposer):
    cond = prepared("numerics", ATTENTION, "--pipeline", "gpu-rocm")
    res = Reducer(read_text(ATTENTION), str(ATTENTION), cond, ReduceOptions()).run()
    assert res.end_instructions <= 4 and not res.flaky
    assert "lhs_batch_dims={0,1}" in res.text  # the grouped-query dot_general
    assert "outputs differ before/after the compile" in res.final_detail


def test_output_differs_from_xlas_own_optimized_module(broken_decomposer):
    before = shared_path(*DUMP, "module_1988.jit__lambda.before_optimizations.txt")
    xla = shared_path(*DUMP, "module_1988.jit__lambda.sm_9.0a_gpu_after_optimizations.txt")
    v = judge(f"output-differs-from:{xla}", before)
    assert v.interesting and "outputs differ from" in v.detail
    cond = prepared(f"output-differs-from:{xla}", before)
    res = Reducer(read_text(before), str(before), cond, ReduceOptions()).run()
    # only strategies that keep the values may run: the signature and the
    # computation stay, names and metadata go
    assert res.end_instructions == res.start_instructions and res.end_bytes < res.start_bytes
    assert "metadata=" not in res.text and not res.flaky
    assert set(res.strategies) <= {"inline", "metadata", "rename"}


def test_output_differs_from_agrees_with_xla_when_the_pass_is_right():
    before = shared_path(*DUMP, "module_1988.jit__lambda.before_optimizations.txt")
    xla = shared_path(*DUMP, "module_1988.jit__lambda.sm_9.0a_gpu_after_optimizations.txt")
    v = judge(f"output-differs-from:{xla}", before)
    assert not v.interesting and v.detail.startswith("outputs match")
    other = judge(f"output-differs-from:{ATTENTION}", before)
    assert not other.interesting and "entry signature" in other.detail


def test_output_differs_from_needs_a_file():
    with pytest.raises(UsageError, match="needs a file"):
        parse_condition("output-differs-from:")
