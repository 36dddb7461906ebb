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
