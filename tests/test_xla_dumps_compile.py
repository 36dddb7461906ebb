"""Real XLA:GPU programs through the default pipeline (issue 14).

Every dump folder of ``../shared/xla-dumps`` (gemm_sweep's 28 folders are
``slow``) and ``testdata/xla-dumps`` and ``testdata/xla-dumps-holdout`` (JAX 0.11.2
programs made by bench/xla_oracle_dumps.py; the held-out set was never used
to tune the passes):

* XLA's ``before_optimizations`` module compiles on ``gpu-cuda`` with exit 0,
  with the passes the dump's own XLA_FLAGS switch off (info.json) switched off;
* XLA's ``after_optimizations`` module either compiles cleanly or is refused
  by a pass with a PassError that names the instruction (XLA's
  LayoutAssignment refuses bitcasts) -- never an unexpected exception, a
  refusal without a location, or a checker violation.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import hlorun
from hlorun.pipeline.run import RunOptions, run_pipeline
from hlorun.pipeline.select import parse_xla_flags
from hlorun.pipeline.loader import load_pipeline

from .conftest import SHARED, TESTDATA


#: the largest program (a 12-layer transformer step, ~15 s per compile)
SLOW = {"transformer_12l_bf16"}


def _dump_dirs() -> list:
    out = []
    for root in (SHARED / "xla-dumps", TESTDATA / "xla-dumps", TESTDATA / "xla-dumps-holdout"):
        if not root.is_dir():
            continue
        for d in sorted(root.iterdir()):
            if d.name == "gemm_sweep":
                out += [pytest.param(s, id=f"gemm_sweep/{s.name}", marks=pytest.mark.slow)
                        for s in sorted(d.iterdir()) if s.is_dir()]
            elif d.is_dir() and any(d.glob("*.before_optimizations.txt*")):
                marks = [pytest.mark.slow] if d.name in SLOW else []
                out.append(pytest.param(d, id=d.name, marks=marks))
    return out


DUMPS = _dump_dirs()


def _one(d: Path, suffix: str) -> Path:
    got = sorted(p for p in d.iterdir() if p.name.removesuffix(".gz").endswith(suffix))
    assert got, f"{d}: no *{suffix}"
    return got[0]


def _run(path: Path, d: Path):
    info = d / "info.json"
    flags = json.loads(info.read_text()).get("xla_flags", "") if info.is_file() else ""
    disable = list(parse_xla_flags(flags)["disable"])
    module = hlorun.load_module(path)
    return run_pipeline(module, load_pipeline("gpu-cuda"), RunOptions(disable=disable))


def test_dump_folders_found():
    names = {p.values[0].name for p in DUMPS}
    assert {"transformer_scan_4l_bf16", "attention_dpa", "dot_algorithms", "cond_while"} <= names


@pytest.mark.parametrize("d", DUMPS)
def test_before_optimizations_compiles(d: Path):
    res = _run(_one(d, "before_optimizations.txt"), d)
    assert res.exit_code == 0, f"{d.name}: {res.failure or res.violations}"


@pytest.mark.parametrize("d", DUMPS)
def test_after_optimizations_compiles_or_is_refused_with_a_location(d: Path):
    res = _run(_one(d, "gpu_after_optimizations.txt"), d)
    assert not res.violations, f"{d.name}: {res.violations}"
    if res.exit_code == 0:
        return
    f = res.failure
    assert f is not None and f.exception == "PassError", f"{d.name}: {f and f.traceback}"
    assert f.instruction and f.computation, f"{d.name}: refusal without a location: {f.message}"
