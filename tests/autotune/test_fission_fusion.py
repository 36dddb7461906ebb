"""BLAS fission re-fuses the prologue (XLA's FissionBackend::ApplyConfig
runs PriorityFusion on the fissioned module before inlining it): a GEMM
fusion that goes to cuBLAS-LT leaves its LayerNorm scale/shift prologue as
one loop fusion, not one wrapped kernel per instruction."""

from __future__ import annotations

from click.testing import CliRunner

from hlorun.cli import cli

from ..conftest import TESTDATA

HLO = TESTDATA / "autotune" / "fission_prologue_f32.hlo"


def _entry_kernels(text: str) -> list[str]:
    entry = text[text.index("\nENTRY"):]
    out = []
    for line in entry.splitlines()[1:]:
        line = line.strip()
        if line == "}":
            break
        if " fusion(" in line or " custom-call(" in line:
            out.append(line)
    return out


def test_forced_cublaslt_leaves_one_prologue_fusion(tmp_path):
    out = tmp_path / "out.hlo"
    r = CliRunner().invoke(cli, ["compile", str(HLO), "--diff", "none", "--force-backend", "cublaslt",
                                 "-o", str(out)])
    assert r.exit_code == 0, r.output
    kernels = _entry_kernels(out.read_text())
    assert len(kernels) == 2, kernels
    loop = [k for k in kernels if "kind=kLoop" in k]
    assert len(loop) == 1 and "wrapped_" not in loop[0], kernels
    assert any('custom_call_target="__cublas$lt$matmul"' in k for k in kernels)
    # the fused prologue's computation is in the output module, uniquely named
    calls = loop[0].split("calls=%", 1)[1].split(",", 1)[0]
    assert out.read_text().count(f"%{calls} ") == 1


def test_cublaslt_fission_splits_tf32x3_dot(tmp_path):
    """XLA's FissionToCublas runs DotAlgorithmRewriter first: a
    TF32_TF32_F32_X3 GEMM fusion that goes to cuBLAS-LT becomes three
    ALG_DOT_TF32_TF32_F32 calls (XLA's cg_solve_tf32x3_f32 dump), never one
    call on an algorithm cuBLAS-LT cannot run."""
    out = tmp_path / "out.hlo"
    hlo = TESTDATA / "autotune" / "fission_tf32x3.hlo"
    r = CliRunner().invoke(cli, ["compile", str(hlo), "--diff", "none", "--force-backend", "cublaslt",
                                 "-o", str(out)])
    assert r.exit_code == 0, r.output
    kernels = _entry_kernels(out.read_text())
    calls = [k for k in kernels if 'custom_call_target="__cublas$lt$matmul"' in k]
    assert len(calls) == 3, kernels
    assert all('"algorithm":"ALG_DOT_TF32_TF32_F32"' in c for c in calls), calls
    # two accumulate into the previous result (beta=1, aliased), as in XLA's dump
    assert sum("output_to_operand_aliasing" in c for c in calls) == 2, calls
    # high parts of both operands, low parts of both, the NaN zeroing, the epilogue
    assert sum("kind=kLoop" in k for k in kernels) == 6, kernels
