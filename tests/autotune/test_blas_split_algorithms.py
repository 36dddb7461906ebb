"""The BLAS candidate of a GEMM fusion whose dot runs BF16_BF16_F32_X3/X6/X9
is what XLA's FissionToCublas measures (xla/backends/gpu/autotuner/
fission.cc: DotAlgorithmRewriter, then the GEMM rewriter): 3 / 6 / 9 cuBLAS
calls on the bf16 parts of the f32 operands.  On bf16x6_algo_mlp_f32 (held-out
set 8) XLA's 18 GEMMs are all Triton nested GEMM fusions; costing the cuBLAS
candidate as one f32 GEMM made 5 of them cuBLAS-LT calls."""

from __future__ import annotations

from pathlib import Path

from hlorun.autotune.candidates import blas_candidates, blas_runs
from hlorun.autotune.devices import get_device
from hlorun.autotune.problem import GemmProblem


def _problem(algorithm: str, t: str = "f32") -> GemmProblem:
    # one of bf16x6_algo_mlp_f32's weight-gradient GEMMs: [2x512x2048x256] f32
    b, m, n, k = 2, 512, 2048, 256
    return GemmProblem(name="gemm_fusion_dot.20", batch=b, m=m, n=n, k=k, lhs_type=t, rhs_type=t,
                       dot_type="f32", out_type="f32", input_bytes=b * (m * k + k * n) * 4,
                       output_bytes=b * m * n * 4, algorithm=algorithm)


def test_split_algorithms_run_several_bf16_gemms():
    for alg, calls in (("ALG_DOT_BF16_BF16_F32_X3", 3), ("ALG_DOT_BF16_BF16_F32_X6", 6),
                       ("ALG_DOT_BF16_BF16_F32_X9", 9)):
        n, p = blas_runs(_problem(alg))
        assert n == calls
        assert (p.lhs_type, p.rhs_type, p.algorithm) == ("bf16", "bf16", "ALG_UNSET")
    for alg in ("ALG_UNSET", "ALG_DOT_BF16_BF16_F32", "ALG_DOT_TF32_TF32_F32_X3"):
        n, p = blas_runs(_problem(alg))
        assert n == 1 and p.algorithm == alg


def test_x6_blas_candidate_costs_six_bf16_gemms():
    d = get_device("H100")
    x6 = [c for c in blas_candidates("cublaslt", _problem("ALG_DOT_BF16_BF16_F32_X6"), d)
          if c.feasible]
    one = [c for c in blas_candidates("cublaslt", blas_runs(_problem("ALG_DOT_BF16_BF16_F32_X6"))[1], d)
           if c.feasible]
    assert x6 and len(x6) == len(one)
    for a, b in zip(x6, one):
        assert abs(a.estimate.ns - 6 * b.estimate.ns) < 1e-6 * a.estimate.ns
        assert any("6 bf16 GEMMs" in n for n in a.notes)


def test_bf16x6_mlp_has_no_blas_calls():
    import gzip

    import hlorun
    from hlorun.analysis.kernels import kernel_list
    from hlorun.text.parser import parse_module
    d = Path(__file__).resolve().parents[2] / "testdata/xla-dumps-holdout/bf16x6_algo_mlp_f32"
    (path,) = d.glob("*before_optimizations.txt*")
    text = gzip.open(path, "rt").read() if path.suffix == ".gz" else path.read_text()
    res = hlorun.compile(parse_module(text))
    assert not res.failures
    kinds = [k.kind for k in kernel_list(res.module)]
    assert not [k for k in kinds if "cublas" in k]
    assert kinds.count("kCustom:__triton_nested_gemm_fusion") == 18
