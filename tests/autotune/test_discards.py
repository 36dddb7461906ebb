"""Triton configs XLA compiles but discards (register spills, wrong results),
measured from its H200 autotune logs (hlorun/autotune/data/discards_H200.json)."""

from __future__ import annotations

import importlib.util

from hlorun.autotune import discards
from hlorun.autotune.devices import get_device
from hlorun.autotune.problem import GemmProblem
from hlorun.autotune.triton import SearchSpace, TritonConfig, check

from ..conftest import REPO


def _problem(t: str, m: int = 1024, n: int = 1024, k: int = 1024, precision: str = "DEFAULT",
             out: str | None = None) -> GemmProblem:
    width = {"f32": 4, "bf16": 2, "f16": 2, "s8": 1}[t]
    return GemmProblem("g", 1, m, n, k, t, t, out or t, out or t, (m * k + k * n) * width, m * n * 4,
                       precision=precision)


def test_listed_rule():
    assert discards.listed({"spill": 37})
    assert discards.listed({"wrong": 57, "ran": 4})            # 93%
    assert not discards.listed({"spill": 9})                   # too few compiles
    assert not discards.listed({"spill": 68, "ran": 108})      # bf16 64x64x16/s1/w2: spills on some shapes only


def test_f32_config_xla_always_discards_is_rejected_on_h200_only():
    """f32 at HIGHEST (FMA units), 128x64x32/s3/w2: XLA discarded it for
    register spilling in all 37 compiles of the x13_/x14_ runs; hlorun's
    register estimate lets it through."""
    cfg = TritonConfig(128, 64, 32, 1, 3, 2)
    p = _problem("f32", precision="HIGHEST")
    why = check(cfg, p, get_device("H200"))
    assert len(why) == 1 and why[0].startswith("XLA discarded this f32 config in 37 of 37 compiles on H200")
    assert "spill 37" in why[0]
    # no logs for the H100 (the same sm_90 target, not measured): no verdict
    assert check(cfg, p, get_device("H100")) == []
    # at DEFAULT precision the dot is tf32, a class where XLA runs it
    assert check(cfg, _problem("f32"), get_device("H200")) == []


def test_int8_block_k_16_configs_are_rejected():
    """XLA's Triton int8 GEMMs with block_k 16 came out doubled (WRONG_RESULTS)."""
    p = _problem("s8", out="s32")
    why = check(TritonConfig(16, 8, 16, 1, 1, 2), p, get_device("H200"))
    assert why and "wrong 57" in why[0]
    assert check(TritonConfig(64, 32, 64, 1, 1, 4), p, get_device("H200")) == []


def test_a_config_xla_times_stays_feasible():
    p = _problem("bf16")
    assert check(TritonConfig(128, 128, 64, 1, 3, 4, 1, True), p, get_device("H200")) == []


def test_search_space_loses_only_listed_configs():
    """On an f32 HIGHEST GEMM the rejected configs are exactly the listed ones
    the other checks let through."""
    p = _problem("f32", 2048, 2048, 2048, precision="HIGHEST")
    dev = get_device("H200")
    rejected = {c.label for c in SearchSpace(p, dev).configs() if any("XLA discarded" in w for w in check(c, p, dev))}
    assert rejected and rejected <= set(discards._load("H200", str(discards.DATA_DIR))["configs"]["f32"])


def test_generator_classifies_xla_failures():
    spec = importlib.util.spec_from_file_location("disc", REPO / "bench" / "autotune_discards.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.outcome(None) == "ran"
    assert mod.outcome("COMPILATION_FAILED: RESOURCE_EXHAUSTED: Discarding compilation due to register "
                       "spilling.") == "spill"
    assert mod.outcome("WRONG_RESULTS: Output disagrees with winning cluster") == "wrong"
    assert mod.outcome("COMPILATION_FAILED: RESOURCE_EXHAUSTED: Shared memory size limit exceeded") == "other"
