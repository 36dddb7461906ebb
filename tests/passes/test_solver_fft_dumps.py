"""cuSOLVER / cuBLAS trsm / cuFFT programs of held-out set 7, compiled from
XLA's own before_optimizations on gpu-cuda and checked against XLA's
after_optimizations (H200, JAX 0.11.2):

* gp_cholesky_f32 (a GP marginal likelihood through ``jnp.linalg.cholesky``
  and ``cho_solve``): every ``triangular-solve`` becomes a
  ``__cublas$triangularSolve`` call with XLA's shapes (column-major
  result, ``s8[0]`` temp buffer: unbatched trsm) and backend config
  (TriangularSolveRewriter after GpuLayoutAssignment's Fortran-layout
  rule); the sums over the column-major 512x512 arrays read them through a
  bitcast (ReductionLayoutNormalizer), so they split as XLA's do and the
  kernel count is XLA's.
* fno_spectral_f32 (a Fourier neural operator layer: rfft, a complex
  per-mode GEMM, irfft): the ffts read and write the default layout
  (GpuLayoutAssignment's kFft rule), so the transposes around them are
  kernels, as in XLA; the stacked spectral weights are made complex once
  (SliceSinker) and the GEMMs read their layer's slice in place
  (DynamicSliceFusionRewriter).
* int4_weight_dequant_bf16: s4 weights dequantized K-minor (layout
  assignment's packed-operand rule), in transpose kernels of their own.
"""

from __future__ import annotations

import sys
from collections import Counter
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HOLDOUT = ROOT / "testdata" / "xla-dumps-holdout"
sys.path.insert(0, str(ROOT / "bench"))


@lru_cache(maxsize=None)
def _compiled(name: str):
    import kernel_lists
    return kernel_lists.compare_row(HOLDOUT / name)


def _row(name: str):
    if not (HOLDOUT / name).is_dir():
        pytest.skip(f"{name} not present")
    row = _compiled(name)
    assert not row.failure, row.failure
    return row


def test_gp_cholesky_solves_are_cublas_trsm_calls_as_in_xla():
    row = _row("gp_cholesky_f32")
    ours = [k for k in row.ours if k.kind == "__cublas$triangularSolve"]
    theirs = [k for k in row.theirs if k.kind == "__cublas$triangularSolve"]
    assert len(ours) == len(theirs) == 6
    assert not [k for k in row.ours if k.opcode == "triangular-solve"]

    def calls(ks):
        return sorted((str(k.instruction.shape), k.instruction.attrs["backend_config"]) for k in ks)
    assert calls(ours) == calls(theirs)
    # every operand is read column-major (Fortran layout), as cuBLAS trsm wants
    for k in ours:
        for op in k.instruction.operands:
            assert op.shape.minor_to_major == (0, 1), (k.name, op.shape)


def test_gp_cholesky_kernel_count_is_xlas():
    row = _row("gp_cholesky_f32")
    assert len(row.ours) == len(row.theirs) == 32
    assert row.matched >= 31
    # the column-major 512x512 sums are not split three ways (f32[512,16]
    # partial sums): each goes 512x512 -> 512 -> scalar, as in XLA
    shapes = Counter(str(k.instruction.shape) for k in row.ours)
    assert not any("[512,16]" in s for s in shapes), shapes


def test_fno_ffts_use_the_default_layout():
    row = _row("fno_spectral_f32")
    ffts = [k for k in row.ours if k.opcode == "fft"]
    assert len(ffts) == len([k for k in row.theirs if k.opcode == "fft"]) == 8
    for k in ffts:
        i = k.instruction
        assert i.shape.minor_to_major == (2, 1, 0), (k.name, i.shape)
        assert i.operands[0].shape.minor_to_major == (2, 1, 0), (k.name, i.operands[0].shape)
    # the transposes into and out of the ffts are kernels of their own
    ours = Counter(k.kind for k in row.ours)
    assert ours["kInput"] >= 12
    assert row.matched >= 49


def test_fno_sliced_weight_gemms_are_dynamic_slice_fusions_as_in_xla():
    """SliceSinker makes one complex(wr, wi) for both layers; the four
    complex GEMMs reading a layer's slice of it become __custom_fusion
    dynamic slice fusions (the slice is an address offset); the two GEMMs
    of the weight gradient and the f32 projection stay cuBLAS calls."""
    row = _row("fno_spectral_f32")
    ours, theirs = Counter(k.kind for k in row.ours), Counter(k.kind for k in row.theirs)
    for kind in ("kCustom:__custom_fusion", "__cublas$lt$matmul"):
        assert ours[kind] == theirs[kind], kind
    assert ours["kCustom:__custom_fusion"] == 4
    complexes = [k for k in row.ours if k.opcode == "fusion" and any(
        i.opcode == "complex" and i.shape.dimensions == (2, 32, 32, 32)
        for i in k.instruction.fused_computation.instructions)]
    assert len(complexes) == 1
    for k in row.ours:
        if k.kind == "kCustom:__custom_fusion":
            body = k.instruction.fused_computation
            assert body.root.opcode == "custom-call"
            assert [i.opcode for i in body.instructions].count("slice") == 1
            assert k.instruction.operands[0] is complexes[0].instruction


def test_int4_dequantization_is_a_weight_transpose_as_in_xla():
    """int4_weight_dequant_bf16: both s4 weights are dequantized (convert,
    group-scale multiply) into K-minor bf16 weights by transpose kernels
    (block-level emitter), outside the GEMMs, as XLA does; the GEMMs read
    plain bf16 operands."""
    row = _row("int4_weight_dequant_bf16")
    assert len(row.ours) == len(row.theirs) == 6
    ours = Counter(k.kind for k in row.ours)
    assert ours["kCustom:__triton"] == 3  # two dequant transposes + the split-K epilogue
    for k in row.ours:
        if k.name.startswith("input_transpose_fusion"):
            ops = {i.opcode for i in k.instruction.fused_computation.instructions}
            assert {"convert", "multiply", "transpose"} <= ops, (k.name, ops)
    # the GEMMs (whichever backend the autotuner picks) see no s4 operand
    gemms = [k for k in row.ours if k.kind in ("__cublas$lt$matmul",
                                               "kCustom:__triton_nested_gemm_fusion")]
    assert len(gemms) == 2
    for k in gemms:
        assert all(op.shape.element_type != "s4" for op in k.instruction.operands)
    assert row.matched >= 5
