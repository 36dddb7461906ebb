"""Real XLA:GPU dumps: the ``before_optimizations`` module, every
pass-by-pass intermediate module and the final ``gpu_after_optimizations``
module (fusions, Triton GEMM fusions, cuBLAS-LT calls, cuDNN convolutions,
non-default layouts, bitcasts) must evaluate to the same values on the same
inputs: XLA's passes preserve the numbers, so any difference is an
evaluator bug."""

from __future__ import annotations

import re

import pytest

from hlorun.evaluate import compare_values, evaluate, output_types, random_inputs, tolerance_types
from hlorun.text.parser import load_module

from ..conftest import SHARED

DUMPS = SHARED / "xla-dumps"
FOLDERS = ["cnn_fp16", "dot_general_gqa_cublaslt", "fp8_matmul_scaled", "gemm_bias_gelu_bf16",
           "permute_rows_donated"]
#: pass-by-pass sweeps that take more than a few seconds
SLOW_SWEEPS = {"cnn_fp16", "dot_general_gqa_cublaslt", "gemm_bias_gelu_bf16"}


def _folder(name: str):
    d = DUMPS / name
    if not d.exists():
        pytest.skip(f"{d} not available")
    return d


def _reference(d):
    before = load_module(next(d.glob("*before_optimizations.txt")))
    args = random_inputs(before, 0)
    return before, args, evaluate(before, args)


def _assert_agree(before, ref, module, args, label):
    got = evaluate(module, args)
    cmp = compare_values(ref, got, output_types(before), tolerance_types=tolerance_types(before))
    assert cmp.ok, f"{label}: " + "; ".join(leaf.describe() for leaf in cmp.leaves if not leaf.ok)


@pytest.mark.parametrize("name", FOLDERS)
def test_before_and_after_optimizations_agree(name):
    d = _folder(name)
    before, args, ref = _reference(d)
    after = load_module(next(d.glob("*gpu_after_optimizations.txt")))
    _assert_agree(before, ref, after, args, "gpu_after_optimizations")


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW_SWEEPS else [])
                                  for n in FOLDERS])
def test_every_pass_by_pass_dump_agrees_with_the_input(name):
    d = _folder(name)
    before, args, ref = _reference(d)
    steps = sorted(p for p in d.glob("*.txt") if re.search(r"\.\d{4}\.", p.name))
    assert len(steps) > 40
    for path in steps:
        _assert_agree(before, ref, load_module(path), args, path.name)


def _sweep_cases():
    root = DUMPS / "gemm_sweep"
    if not root.exists():
        return [pytest.param(None, marks=pytest.mark.skip(reason="gemm_sweep not available"))]
    out = []
    for d in sorted(p for p in root.iterdir() if p.is_dir()):
        m = re.search(r"_m(\d+)_n(\d+)_k(\d+)", d.name)
        flops = 2 * int(m.group(1)) * int(m.group(2)) * int(m.group(3))
        marks = [pytest.mark.slow] if flops > 3e8 else []
        if flops > 2e10:  # minutes on a laptop core: measured by bench/evaluate.py instead
            marks = [pytest.mark.skip(reason="too large for the test suite (bench/evaluate.py)")]
        out.append(pytest.param(d, id=d.name, marks=marks))
    return out


@pytest.mark.parametrize("d", _sweep_cases())
def test_gemm_sweep_triton_or_cublas_result_matches_the_dot(d):
    before, args, ref = _reference(d)
    after = load_module(next(d.glob("*gpu_after_optimizations.txt")))
    _assert_agree(before, ref, after, args, d.name)
