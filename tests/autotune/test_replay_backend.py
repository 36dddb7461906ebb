"""Replaying XLA's autotune_results.textproto (``--autotune-results``): the
backend each autotuner decision reports is the backend the output module
carries (issue 14: the table said Triton while the module kept
``__cublas$lt$matmul``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from hlorun.cli import cli

from ..conftest import SHARED, TESTDATA, shared_path


def _compile(tmp_path: Path, hlo: Path, results: Path, *extra: str):
    out = tmp_path / "out.hlo"
    r = CliRunner().invoke(cli, ["compile", str(hlo), "--autotune-results", str(results), "-o", str(out),
                                 "--format", "json", *extra])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)["autotune"], out.read_text()


def _carried(module_text: str, name: str) -> str | None:
    """The backend the output module gives GEMM ``name``: "triton" when it is
    still a Triton fusion, else None (fissioned into a library call)."""
    m = re.search(rf"^\s*(?:ROOT )?%{re.escape(name)} = .* fusion\(.*\"kind\":\"(__triton[a-z_]*)\"",
                  module_text, re.M)
    return "triton" if m else None


def test_triton_entry_for_an_existing_cublas_call_is_not_claimed(tmp_path):
    """S3's old order: the FP8 GEMM rewriter takes the GEMM before GEMM
    fusion; XLA's table (new order) says TRITON.  The decision reports the
    cuBLASLt algorithm the module carries and says why XLA's choice could
    not be replayed."""
    d = shared_path("xla-dumps", "fp8_matmul_scaled")
    decisions, text = _compile(tmp_path, next(d.glob("*before_optimizations.txt")),
                               d / "autotune_results.textproto",
                               "--pipeline", str(TESTDATA / "s3" / "xla-old.yaml"))
    (dec,) = decisions
    assert dec["winner"]["backend"] == "cublaslt" and dec["source"] == "model"
    assert any("XLA chose TRITON" in n and "already a cuBLASLt call" in n for n in dec["notes"])
    assert 'custom_call_target="__cublas$lt$matmul$f8"' in text and "__triton_gemm" not in text


def _dumps():
    out = []
    for root in (SHARED / "xla-dumps", TESTDATA / "xla-dumps"):
        if root.is_dir():
            out += [pytest.param(d, id=d.name, marks=[pytest.mark.slow] if d.name == "transformer_12l_bf16" else [])
                    for d in sorted(root.iterdir())
                    if (d / "autotune_results.textproto").is_file()
                    and any(d.glob("*before_optimizations.txt*"))]
    return out


@pytest.mark.parametrize("d", _dumps())
def test_reported_backend_is_the_carried_backend(tmp_path, d):
    info = json.loads((d / "info.json").read_text()) if (d / "info.json").is_file() else {}
    flags = " ".join(f for f in info.get("xla_flags", "").split() if "dump" not in f)
    decisions, text = _compile(tmp_path, next(d.glob("*before_optimizations.txt*")),
                               d / "autotune_results.textproto", "--xla-flags", flags)
    for dec in decisions:
        carried = _carried(text, dec["instruction"])
        if dec["winner"]["backend"] == "triton":
            assert carried == "triton", (d.name, dec["instruction"])
        else:
            assert carried is None and "custom_call_target=\"__cublas" in text, (d.name, dec["instruction"])
