"""The GPU the cost model (:mod:`.model`) prices kernels for: data-sheet
numbers of the target device (``DeviceDescription``) and the constants of
XLA's GpuPerformanceModel."""

from __future__ import annotations

from dataclasses import dataclass

from ..base import Target

LAUNCH_US = 1.0
MEMORY_COMPUTE_PARALLELISM = 0.95
L2_SPEEDUP, L1_SPEEDUP = 2.5, 8.0
TRANSACTION_BYTES = 64
TRANSACTIONS_PER_CLOCK = 32


@dataclass(frozen=True)
class Device:
    name: str
    bandwidth: float      # bytes / s
    clock_ghz: float
    cores: int
    l2_bytes: int
    l1_bytes_per_core: int = 256 * 1024
    fpus_per_core: int = 128


#: Data-sheet values (the same numbers XLA's DeviceDescription reports).
DEVICES = {
    "H200": Device("H200", 4.814304e12, 1.98, 132, 62914560),
    # H100 SXM ("NVIDIA H100 80GB HBM3", the held-out dumps' device): XLA's
    # h100_sxm spec and the device itself report a 1.98 GHz clock
    "H100": Device("H100", 3.35232e12, 1.98, 132, 52428800),
    "A100": Device("A100", 2.039e12, 1.41, 108, 41943040, 192 * 1024),
    "B200": Device("B200", 8.0e12, 1.965, 148, 132120576),
    "MI300X": Device("MI300X", 5.3e12, 2.1, 304, 4194304, 32 * 1024, 128),
}


def device_of(target: Target) -> Device:
    for key, dev in DEVICES.items():
        if target.device.upper().startswith(key):
            return dev
    return DEVICES["H100"]



__all__ = ["DEVICES", "Device", "L1_SPEEDUP", "L2_SPEEDUP", "LAUNCH_US",
           "MEMORY_COMPUTE_PARALLELISM", "TRANSACTIONS_PER_CLOCK", "TRANSACTION_BYTES",
           "device_of"]
