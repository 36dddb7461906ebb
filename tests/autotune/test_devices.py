"""Device specs: complete, cited, consistent with XLA's own descriptions."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hlorun.autotune import devices as D
from hlorun.errors import UsageError

NAMES = ["H100", "H200", "A100", "MI300X", "MI355X", "PVC"]


def test_all_devices_present():
    assert sorted(D.DEVICES) == sorted(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_fields_complete(name):
    d = D.get_device(name)
    assert d.core_count > 0 and d.shared_memory_per_block > 0 and d.shared_memory_per_core >= d.shared_memory_per_block
    assert d.registers_per_core > 0 and d.registers_per_block > 0 and d.max_registers_per_thread > 0
    assert d.hbm_bandwidth > 1e12 and d.l2_bytes >= 4 * 2**20
    for t in ("f32", "f16", "bf16"):
        assert d.peak_flops[t] > 1e13, (name, t)
    # tf32 is given wherever the matrix units have it; fp8 where the device has FP8
    assert ("fp8" in d.peak_flops) == bool(d.fp8_types)
    assert d.fp8_blas <= bool(d.fp8_types)
    assert d.peak("tf32") > 0 and d.peak("fp8") > 0   # falls back where absent


def test_xla_spec_agreement():
    """Figures that XLA's target_config specs also give."""
    h = D.H100
    assert (h.core_count, h.shared_memory_per_block, h.shared_memory_per_core) == (132, 232448, 233472)
    assert D.H200.hbm_bandwidth == 4.8e12 and D.H200.shared_memory_per_block == 232448
    assert (D.A100.core_count, D.A100.shared_memory_per_block) == (108, 166912)
    assert (D.MI300X.core_count, D.MI300X.shared_memory_per_block, D.MI300X.registers_per_block) == (304, 65536, 131072)
    assert (D.MI355X.core_count, D.MI355X.shared_memory_per_block) == (256, 163840)
    assert D.PVC.shared_memory_per_block == 131072


def test_libraries():
    assert D.H100.blas_libraries == ("cublas", "cublaslt") and D.H100.fp8_blas
    assert D.MI300X.blas_libraries == ("rocblas", "hipblaslt") and D.MI300X.fp8_types == ("f8e4m3fnuz", "f8e5m2fnuz")
    assert not D.A100.fp8_blas and not D.PVC.blas_libraries


def test_every_figure_is_cited():
    """Each numeric line of a DeviceSpec carries a [SOURCE] tag in a comment
    (or sits in a block whose comment cites one)."""
    text = Path(D.__file__).read_text()
    tags = set(re.findall(r"^\[([A-Z0-9-]+)\]", text, re.M))
    assert {"H100-DS", "H200-DS", "A100-DS", "MI300X-DS", "MI355X-DS", "PVC-ARK", "CUDA-CC", "XLA-SPEC"} <= tags
    body = text.split("DEVICES: dict")[0].split("class DeviceSpec")[1]
    body = body.split("\nH100 = DeviceSpec(")[1]
    for line in body.splitlines():
        if re.search(r"=\s*[0-9.]+\s*\*?\s*(TFLOPS|KiB|MiB|e12)?,", line) and "threads_per" not in line:
            assert re.search(r"#.*\[[A-Z0-9-]+\]", line), f"uncited figure: {line.strip()}"


def test_lookup():
    assert D.get_device("mi355").name == "MI355X"
    assert D.get_device("gfx950").name == "MI355X"
    assert D.get_device("h100").name == "H100"
    with pytest.raises(UsageError, match="unknown device 'B300'"):
        D.get_device("B300")
