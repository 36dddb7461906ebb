"""S3 numerically: the FP8 scaled matmul compiled by the two pipeline
versions (one ``__cublas$lt$matmul$f8`` call vs a GEMM fusion + dequantize
fusions) must agree within fp8 tolerance under ``hlorun compare``; the
same call with a wrong scale operand (a broken FP8 rewrite: the A scale
where the D scale belongs) must not."""

from __future__ import annotations

import json
import re

import numpy as np

from click.testing import CliRunner

from hlorun.cli import cli

from ..conftest import TESTDATA

S3 = TESTDATA / "s3"


def _compile(tmp_path, version: str):
    out = tmp_path / f"{version}.hlo"
    r = CliRunner().invoke(cli, ["compile", str(S3 / "fp8_matmul_scaled.hlo"), "-p",
                                 str(S3 / f"xla-{version}.yaml"), "--diff", "none", "-o", str(out)])
    assert r.exit_code == 0, r.output
    return out


def _compare(a, b, *extra):
    r = CliRunner().invoke(cli, ["compare", str(a), str(b), "--format", "json", *extra])
    return r.exit_code, json.loads(r.stdout)


def _scales(tmp_path, sa: float, sb: float, sd: float) -> list[str]:
    """--input flags for the three f32 scales (parameters 2, 3, 4)."""
    flags = []
    for number, value in ((2, sa), (3, sb), (4, sd)):
        f = tmp_path / f"scale{number}.npy"
        np.save(f, np.float32(value))
        flags += ["--input", f"{number}={f}"]
    return flags


def test_old_and_new_pipelines_agree_and_a_broken_fp8_rewrite_does_not(tmp_path):
    old, new = _compile(tmp_path, "old"), _compile(tmp_path, "new")
    old_text, new_text = old.read_text(), new.read_text()
    assert '"__cublas$lt$matmul$f8"' in old_text and '"__cublas$lt$matmul$f8"' not in new_text
    assert '"kind":"__triton_gemm"' in new_text
    realistic = _scales(tmp_path, 0.5, 2.0, 0.125)   # per-tensor scales, as a quantizer makes
    for seed in ("0", "1"):
        assert _compare(old, new, "--seed", seed)[0] == 0
        code, doc = _compare(old, new, "--seed", seed, *realistic)
        assert code == 0, doc
    # the broken rewrite: the same call reading the A scale where the D scale belongs
    call = re.search(r'custom-call\((%[\w.-]+), (%[\w.-]+), (%[\w.-]+), (%[\w.-]+), (%[\w.-]+)\), '
                     r'custom_call_target="__cublas\$lt\$matmul\$f8"', old_text)
    assert call, "no FP8 call with five operands"
    a, b, sa, sb, sd = call.groups()
    broken = tmp_path / "broken.hlo"
    broken.write_text(old_text.replace(call.group(0), call.group(0).replace(
        f"{a}, {b}, {sa}, {sb}, {sd}", f"{a}, {b}, {sa}, {sb}, {sa}")))
    code, doc = _compare(broken, new, *realistic)
    assert code == 2 and doc["ok"] is False, doc
