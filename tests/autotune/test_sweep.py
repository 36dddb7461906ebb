"""The Triton search space, feasibility and cost model against the real
H200 autotuner in shared/xla-dumps/gemm_sweep."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from hlorun.autotune.calibrate import evaluate, pick_best, spearman
from hlorun.autotune.devices import H200
from hlorun.autotune.sweep import load_sweep
from hlorun.autotune.triton import SearchSpace, TritonConfig, check, resources

from ..conftest import shared_path


@pytest.fixture(scope="module")
def cases():
    return load_sweep(shared_path("xla-dumps/gemm_sweep"))


def test_sweep_loads(cases):
    # 28 programs; the two 1xNxK ones became reductions, not GEMMs
    assert len(cases) == 26
    assert {c.xla_backend for c in cases} == {"triton", "cublaslt"}


def test_search_space_reproduces_xla_candidate_lists(cases):
    """Our port of XLA's search space + default-config restriction yields
    exactly the Triton configs XLA profiled (or failed to compile)."""
    exact = 0
    for c in cases:
        ours = set(SearchSpace(c.problem, H200).configs())
        xla = {replace(p.config.triton, split_k=1) for p in c.profiles.profiles if p.config.triton}
        exact += ours == xla
    assert exact == len(cases)


def test_feasibility_matches_xla_compilation(cases):
    agree = total = figures = figures_ok = 0
    for c in cases:
        for p in c.profiles.profiles:
            if p.config.triton is None:
                continue
            why = check(p.config.triton, c.problem, H200)
            total += 1
            agree += bool(why) == (p.failure is not None)
            if p.failure and "requested" in p.failure:
                figures += 1
                want = int(re.search(r"requested (\d+)", p.failure).group(1))
                got = re.search(r"needs (\d+) B shared memory", " ".join(why))
                figures_ok += bool(got) and int(got.group(1)) == want
    assert total == 421
    assert agree >= 413          # the 8 misses: f16 64x64x16/s1/w2, a compiler spill we do not model
    assert (figures, figures_ok) == (13, 13)


def test_resources_breakdown():
    from hlorun.autotune.problem import GemmProblem
    p = GemmProblem("g", 1, 1024, 1024, 1024, "f16", "f16", "f16", "f16", 4 << 20, 2 << 20)
    r = resources(TritonConfig(128, 256, 128, 1, 3, 8, 1, True), p, H200)
    assert r.smem == 294936 and "3 TMA barriers" in r.smem_detail


def test_cost_model_agrees_with_xla(cases):
    s = evaluate(cases)
    agree, n = s.agreement
    # the H200 model was fitted on hlorun/autotune/data; these 26 programs
    # (another session, another machine) are unseen by the fit.  Measured
    # 22/26: since the refit on 1119 mostly small/mid GEMMs, the large f16
    # Triton kernels (1024^3, 2048^3, 8192x1024x256) are overestimated and
    # the model picks cuBLASLt there (25/26 with the fit on the 174 GEMMs of
    # the first runs); a size-balanced refit fixed those but ranked worse in
    # cross-validation, so it was not kept (notes/issue-20.md)
    assert n == 26 and agree >= 22
    assert s.median_rho >= 0.75
    assert s.median_best_err <= 0.2
    # XLA's own rule on XLA's measurements gives XLA's choice (sanity of the rule)
    assert all(c.measured_pick == c.xla_backend for c in s.cases)


def test_pick_best_scratch_window():
    items = [("triton", 13696, 0), ("cublaslt", 12544, 33554432)]   # f16 8192x1024x256
    assert pick_best(items, lambda x: x[1], lambda x: x[2])[0] == "triton"
    items = [("triton", 182336, 0), ("cublaslt", 178240, 33554432)]  # f16 4096^3
    assert pick_best(items, lambda x: x[1], lambda x: x[2])[0] == "cublaslt"


def test_spearman():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
