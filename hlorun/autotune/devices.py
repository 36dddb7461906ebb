"""GPU device specifications for the GEMM autotuner.

Every figure carries the public document it comes from (URL and document
name) in a comment.  Where XLA ships its own ``DeviceDescription`` for a GPU
(``xla/backends/gpu/target_config/specs/*.txtpb``), the core count, shared
memory, registers, bandwidth and L2 agree with it; those files are cited
too.  Peak rates are *dense* (NVIDIA and AMD datasheets print sparse rates
with an asterisk: those are halved here and the halving is stated).

Sources, cited below by tag:

[H100-DS]  NVIDIA H100 Tensor Core GPU datasheet,
           https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet
[H100-WP]  NVIDIA H100 Tensor Core GPU Architecture whitepaper (GTC22),
           https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper
[H200-DS]  NVIDIA H200 Tensor Core GPU datasheet / product page,
           https://www.nvidia.com/en-us/data-center/h200/
[A100-DS]  NVIDIA A100 Tensor Core GPU datasheet,
           https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf
[A100-WP]  NVIDIA A100 Tensor Core GPU Architecture whitepaper,
           https://images.nvidia.com/aem-dam/en-zz/Solutions/data-center/nvidia-ampere-architecture-whitepaper.pdf
[CUDA-CC]  CUDA C++ Programming Guide, "Technical Specifications per Compute
           Capability" table,
           https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#features-and-technical-specifications-technical-specifications-per-compute-capability
[MI300X-DS] AMD Instinct MI300X accelerator data sheet,
           https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/data-sheets/amd-instinct-mi300x-data-sheet.pdf
[CDNA3-WP] AMD CDNA 3 architecture whitepaper,
           https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/white-papers/amd-cdna-3-white-paper.pdf
[MI355X-DS] AMD Instinct MI355X accelerator data sheet,
           https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/product-briefs/amd-instinct-mi355x-gpu-brochure.pdf
[CDNA4-WP] AMD CDNA 4 architecture whitepaper,
           https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/white-papers/amd-cdna-4-architecture-whitepaper.pdf
[PVC-ARK]  Intel Data Center GPU Max 1550 specifications (ark),
           https://www.intel.com/content/www/us/en/products/sku/232873/intel-data-center-gpu-max-1550/specifications.html
[PVC-OPT]  Intel oneAPI GPU Optimization Guide, "Intel Xe GPU Architecture"
           (Xe-HPC: Xe-core, vector/XMX engines, GRF, SLM),
           https://www.intel.com/content/www/us/en/docs/oneapi/optimization-guide-gpu/2024-2/intel-xe-gpu-architecture.html
[XLA-SPEC] XLA's device descriptions, openxla/xla
           xla/backends/gpu/target_config/specs/{h100_sxm,h200,a100_sxm_80,mi300,mi350,pvc}.txtpb
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from ..errors import UsageError

KiB = 1024
MiB = 1024 * 1024
TFLOPS = 1e12


@dataclass(frozen=True)
class DeviceSpec:
    """What the autotuner needs to know about one GPU."""

    name: str                      # the --device name (H100, MI300X, PVC, ...)
    long_name: str
    vendor: str                    # nvidia | amd | intel
    platform: str                  # cuda | rocm | sycl (hlorun Target.platform)
    arch: str                      # "9.0", "8.0", "gfx942", "gfx950", "pvc"
    core_count: int                # SMs / CUs / Xe-cores
    core_word: str                 # "SM", "CU", "Xe-core" (for messages)
    shared_memory_per_block: int   # opt-in maximum a kernel may request (bytes)
    shared_memory_per_core: int    # bytes per SM/CU/Xe-core
    registers_per_core: int        # 32-bit registers per SM/CU/Xe-core
    registers_per_block: int       # 32-bit registers one block may use
    max_registers_per_thread: int
    threads_per_warp: int          # warp / wavefront / sub-group (Triton's view)
    threads_per_block: int
    peak_flops: Mapping[str, float]  # dense FLOP/s per compute type: f32, tf32, bf16, f16, fp8
    hbm_bandwidth: float           # bytes/s
    l2_bytes: int
    clock_ghz: float               # boost clock used for per-tile latency terms
    blas_libraries: tuple[str, ...]   # backends hlorun may fission to
    fp8_blas: bool                 # FP8 GEMMs through the BLAS-Lt library
    fp8_types: tuple[str, ...]     # the FP8 element types the matrix units take
    tma: bool = False              # Hopper TMA (XLA adds is_tma_allowed variants)
    wgmma: bool = False            # warp-group MMA: Triton wants >= 4 warps
    #: The Triton backend loads epilogue operands as tensors of pointers
    #: (blocked layout), so the accumulator goes through shared memory to
    #: meet them (S4: Intel's XPU backend rewrote block-pointer loads).
    epilogue_via_shared_memory: bool = False
    triton_platform: str = ""      # which default-config list XLA uses
    notes: tuple[str, ...] = field(default_factory=tuple)

    def peak(self, compute_type: str) -> float:
        """Peak dense FLOP/s for a compute type, falling back to the next
        wider type the device has (fp8 -> bf16 -> tf32 -> f32)."""
        for t in {"fp8": ("fp8", "f16", "tf32", "f32"), "f16": ("f16", "tf32", "f32"),
                  "bf16": ("bf16", "f16", "tf32", "f32"), "tf32": ("tf32", "f32"),
                  "f32": ("f32",), "f64": ("f64", "f32")}.get(compute_type, (compute_type, "f32")):
            v = self.peak_flops.get(t)
            if v:
                return v
        return self.peak_flops["f32"]

    @property
    def is_rocm(self) -> bool:
        return self.platform == "rocm"


H100 = DeviceSpec(
    name="H100", long_name="NVIDIA H100 SXM5 80GB", vendor="nvidia", platform="cuda", arch="9.0",
    core_count=132,                          # [H100-DS] 132 SMs (SXM5); [XLA-SPEC] h100_sxm core_count
    core_word="SM",
    shared_memory_per_block=227 * KiB,       # [CUDA-CC] cc 9.0: 227 KB per block (opt-in) = 232448 B; [XLA-SPEC]
    shared_memory_per_core=228 * KiB,        # [CUDA-CC] cc 9.0: 228 KB per SM = 233472 B
    registers_per_core=65536,                # [CUDA-CC] 64K 32-bit registers per SM
    registers_per_block=65536,               # [CUDA-CC] 64K per block
    max_registers_per_thread=255,            # [CUDA-CC]
    threads_per_warp=32, threads_per_block=1024,   # [CUDA-CC]
    peak_flops={
        "f64": 33.5 * TFLOPS,                # [H100-DS] FP64 34 TF (vector)
        "f32": 66.9 * TFLOPS,                # [H100-DS] FP32 67 TF
        "tf32": 494.7 * TFLOPS,              # [H100-DS] TF32 Tensor Core 989 TF with sparsity -> /2
        "bf16": 989.4 * TFLOPS,              # [H100-DS] BF16 Tensor Core 1979 TF with sparsity -> /2
        "f16": 989.4 * TFLOPS,               # [H100-DS] FP16 Tensor Core 1979 TF with sparsity -> /2
        "fp8": 1978.9 * TFLOPS,              # [H100-DS] FP8 Tensor Core 3958 TF with sparsity -> /2
    },
    hbm_bandwidth=3.35e12,                   # [H100-DS] 3.35 TB/s HBM3; [XLA-SPEC] 3352320000000
    l2_bytes=50 * MiB,                       # [H100-WP] 50 MB L2; [XLA-SPEC] 52428800
    clock_ghz=1.98,                          # [XLA-SPEC] clock_rate_ghz 1.98
    blas_libraries=("cublas", "cublaslt"),
    fp8_blas=True,                           # cuBLASLt FP8 matmul on sm_89+ (cuBLAS docs, cublasLtMatmul FP8 table)
    fp8_types=("f8e4m3fn", "f8e5m2"),
    tma=True, wgmma=True, triton_platform="hopper",
)

H200 = DeviceSpec(
    name="H200", long_name="NVIDIA H200 SXM 141GB", vendor="nvidia", platform="cuda", arch="9.0",
    core_count=132,                          # [XLA-SPEC] h200 core_count 132 (same GH100 as H100 SXM5 [H100-WP])
    core_word="SM",
    shared_memory_per_block=227 * KiB,       # [CUDA-CC] cc 9.0; [XLA-SPEC] 232448 (the gemm_sweep log quotes "available: 232448")
    shared_memory_per_core=228 * KiB,        # [CUDA-CC]
    registers_per_core=65536, registers_per_block=65536, max_registers_per_thread=255,  # [CUDA-CC]
    threads_per_warp=32, threads_per_block=1024,
    peak_flops={
        "f64": 33.5 * TFLOPS,                # [H200-DS] FP64 34 TF
        "f32": 66.9 * TFLOPS,                # [H200-DS] FP32 67 TF
        "tf32": 494.7 * TFLOPS,              # [H200-DS] TF32 Tensor Core 989 TF with sparsity -> /2
        "bf16": 989.4 * TFLOPS,              # [H200-DS] BF16 1979 TF with sparsity -> /2
        "f16": 989.4 * TFLOPS,               # [H200-DS] FP16 1979 TF with sparsity -> /2
        "fp8": 1978.9 * TFLOPS,              # [H200-DS] FP8 3958 TF with sparsity -> /2
    },
    hbm_bandwidth=4.8e12,                    # [H200-DS] 4.8 TB/s HBM3e; [XLA-SPEC] 4800000000000
    l2_bytes=50 * MiB,                       # [XLA-SPEC] l2_cache_size 52428800
    clock_ghz=1.98,                          # [XLA-SPEC]
    blas_libraries=("cublas", "cublaslt"),
    fp8_blas=True, fp8_types=("f8e4m3fn", "f8e5m2"),
    tma=True, wgmma=True, triton_platform="hopper",
)

A100 = DeviceSpec(
    name="A100", long_name="NVIDIA A100 SXM4 80GB", vendor="nvidia", platform="cuda", arch="8.0",
    core_count=108,                          # [A100-WP] 108 SMs; [XLA-SPEC] a100_sxm_80
    core_word="SM",
    shared_memory_per_block=163 * KiB,       # [CUDA-CC] cc 8.0: 163 KB per block = 166912 B; [XLA-SPEC]
    shared_memory_per_core=164 * KiB,        # [CUDA-CC] cc 8.0: 164 KB per SM = 167936 B
    registers_per_core=65536, registers_per_block=65536, max_registers_per_thread=255,  # [CUDA-CC]
    threads_per_warp=32, threads_per_block=1024,
    peak_flops={
        "f64": 9.7 * TFLOPS,                 # [A100-DS] FP64 9.7 TF
        "f32": 19.5 * TFLOPS,                # [A100-DS] FP32 19.5 TF
        "tf32": 156.0 * TFLOPS,              # [A100-DS] TF32 156 TF (312 with sparsity)
        "bf16": 312.0 * TFLOPS,              # [A100-DS] BF16 312 TF (624 with sparsity)
        "f16": 312.0 * TFLOPS,               # [A100-DS] FP16 312 TF
    },
    hbm_bandwidth=2.039e12,                  # [A100-DS] 2,039 GB/s (80GB SXM); [XLA-SPEC] 2039040000000
    l2_bytes=40 * MiB,                       # [A100-WP] 40 MB L2; [XLA-SPEC] 41943040
    clock_ghz=1.41,                          # [A100-WP] 1410 MHz boost; [XLA-SPEC]
    blas_libraries=("cublas", "cublaslt"),
    fp8_blas=False, fp8_types=(),            # [A100-DS] no FP8 tensor-core format on Ampere
    triton_platform="ampere",
)

MI300X = DeviceSpec(
    name="MI300X", long_name="AMD Instinct MI300X", vendor="amd", platform="rocm", arch="gfx942",
    core_count=304,                          # [MI300X-DS] 304 CUs; [XLA-SPEC] mi300 core_count
    core_word="CU",
    shared_memory_per_block=64 * KiB,        # [CDNA3-WP] 64 KB LDS per CU; [XLA-SPEC] 65536
    shared_memory_per_core=64 * KiB,         # [CDNA3-WP] 64 KB LDS per CU; [XLA-SPEC] mi300 shared_memory_per_core
    registers_per_core=131072,               # [CDNA3-WP] 512 KB VGPR file per CU (4 SIMDs x 128 KB); [XLA-SPEC] 131072
    registers_per_block=131072,              # [XLA-SPEC] registers_per_block_limit
    max_registers_per_thread=512,            # [CDNA3-WP] 512 unified VGPRs (arch+acc) per wave lane
    threads_per_warp=64, threads_per_block=1024,   # [XLA-SPEC] wavefront 64
    peak_flops={
        "f64": 81.7 * TFLOPS,                # [MI300X-DS] FP64 vector 81.7 TF
        "f32": 163.4 * TFLOPS,               # [MI300X-DS] FP32 matrix 163.4 TF (vector 81.7)
        "tf32": 653.7 * TFLOPS,              # [MI300X-DS] TF32 matrix 653.7 TF (1307.4 with sparsity)
        "bf16": 1307.4 * TFLOPS,             # [MI300X-DS] BF16 1307.4 TF (2614.9 with sparsity)
        "f16": 1307.4 * TFLOPS,              # [MI300X-DS] FP16 1307.4 TF
        "fp8": 2614.9 * TFLOPS,              # [MI300X-DS] FP8 2614.9 TF (5229.8 with sparsity)
    },
    hbm_bandwidth=5.3e12,                    # [MI300X-DS] 5.3 TB/s HBM3
    l2_bytes=4 * MiB,                        # [CDNA3-WP] 4 MB L2 per XCD (8 XCDs; plus 256 MB Infinity Cache); [XLA-SPEC] 4194304
    clock_ghz=2.1,                           # [MI300X-DS] 2100 MHz peak engine clock
    blas_libraries=("rocblas", "hipblaslt"),
    fp8_blas=True,                           # hipBLASLt FP8 on gfx942 (FNUZ formats)
    fp8_types=("f8e4m3fnuz", "f8e5m2fnuz"),  # [CDNA3-WP] FP8 in the NANOO (fnuz) encoding
    triton_platform="mi300",
)

MI355X = DeviceSpec(
    name="MI355X", long_name="AMD Instinct MI355X (gfx950)", vendor="amd", platform="rocm", arch="gfx950",
    core_count=256,                          # [MI355X-DS] 256 CUs (8 XCDs x 32); [XLA-SPEC] mi350 core_count
    core_word="CU",
    shared_memory_per_block=160 * KiB,       # [CDNA4-WP] LDS grown to 160 KB per CU; [XLA-SPEC] 163840
    shared_memory_per_core=160 * KiB,        # [CDNA4-WP] 160 KB LDS per CU; [XLA-SPEC] mi350 shared_memory_per_core
    registers_per_core=131072, registers_per_block=131072,   # [XLA-SPEC] mi350: 131072
    max_registers_per_thread=512,            # [CDNA4-WP] 512 unified VGPRs per lane
    threads_per_warp=64, threads_per_block=1024,
    peak_flops={
        "f64": 78.6 * TFLOPS,                # [MI355X-DS] FP64 vector 78.6 TF
        "f32": 157.3 * TFLOPS,               # [MI355X-DS] FP32 157.3 TF
        # TF32: no TF32 matrix rate in [MI355X-DS] (CDNA 4 has no XF32 MFMA);
        # TF32-precision f32 dots run at the f32 rate via peak()'s fallback.
        "bf16": 2516.6 * TFLOPS,             # [MI355X-DS] BF16 2.5 PF dense (5.0 PF with sparsity)
        "f16": 2516.6 * TFLOPS,              # [MI355X-DS] FP16 2.5 PF dense
        "fp8": 5033.2 * TFLOPS,              # [MI355X-DS] FP8 5.0 PF dense (8192 FLOP/clk/CU x 256 CUs x 2.4 GHz)
    },
    hbm_bandwidth=8.0e12,                    # [MI355X-DS] 8 TB/s HBM3E
    l2_bytes=4 * MiB,                        # [CDNA4-WP] 4 MB L2 per XCD; [XLA-SPEC] mi350 data_caches level 2
    clock_ghz=2.4,                           # [MI355X-DS] 2400 MHz peak engine clock
    blas_libraries=("rocblas", "hipblaslt"),
    fp8_blas=True, fp8_types=("f8e4m3fn", "f8e5m2"),   # [CDNA4-WP] OCP FP8 formats on gfx950
    triton_platform="mi350",
)

PVC = DeviceSpec(
    name="PVC", long_name="Intel Data Center GPU Max 1550 (Ponte Vecchio)", vendor="intel",
    platform="sycl", arch="pvc",
    core_count=128,                          # [PVC-ARK] 128 Xe-cores (2 stacks x 64)
    core_word="Xe-core",
    shared_memory_per_block=128 * KiB,       # [PVC-OPT] SLM up to 128 KB per work-group; [XLA-SPEC] pvc 131072
    shared_memory_per_core=128 * KiB,        # [PVC-OPT] 128 KB SLM per Xe-core (carved from 512 KB L1/SLM)
    registers_per_core=131072,               # [PVC-OPT] 8 vector engines x 8 threads x 128 GRF x 64 B = 512 KB
    registers_per_block=131072,              # [PVC-OPT] a work-group runs on one Xe-core: its whole GRF
    max_registers_per_thread=128,            # [PVC-OPT] large-GRF mode: 256 x 64 B GRF per hardware thread = 16 KB,
                                             # shared by a 32-wide sub-group = 128 32-bit registers per work-item
    threads_per_warp=32, threads_per_block=1024,   # [XLA-SPEC] pvc threads_per_warp 32, threads_per_block_limit 1024
    peak_flops={
        "f64": 52.4 * TFLOPS,                # [PVC-ARK] FP64 52 TF (vector, full rate)
        "f32": 52.4 * TFLOPS,                # [PVC-ARK] FP32 52 TF
        "tf32": 419.4 * TFLOPS,              # [PVC-OPT] XMX TF32: half the FP16 rate (128 x 8 XMX x 256 flop/clk x 1.6 GHz)
        "bf16": 838.9 * TFLOPS,              # [PVC-ARK] BF16 XMX 839 TF
        "f16": 838.9 * TFLOPS,               # [PVC-ARK] FP16 XMX 839 TF
    },
    hbm_bandwidth=3.2768e12,                 # [PVC-ARK] 3.2768 TB/s HBM2e
    l2_bytes=408 * MiB,                      # [PVC-ARK] 408 MB L2 ("Rambo" cache)
    clock_ghz=1.6,                           # [PVC-ARK] 1600 MHz max
    blas_libraries=(),                       # XLA has no BLAS-Lt custom call for oneAPI: Triton only
    fp8_blas=False, fp8_types=(),            # [PVC-ARK] no FP8 XMX format
    epilogue_via_shared_memory=True,         # S4: intel-xpu-backend tensor-of-pointers epilogue loads
    triton_platform="xpu",
    notes=("BLAS fission is not available: XLA's BLAS custom calls target cuBLAS/hipBLAS only",),
)

DEVICES: dict[str, DeviceSpec] = {d.name: d for d in (H100, H200, A100, MI300X, MI355X, PVC)}
ALIASES = {"MI355": "MI355X", "GFX950": "MI355X", "GFX942": "MI300X", "MI300": "MI300X",
           "MAX1550": "PVC", "MAX-1550": "PVC", "PONTE-VECCHIO": "PVC", "H100-SXM": "H100"}


def get_device(name: str) -> DeviceSpec:
    """Look a device up by name (case-insensitive, a few aliases)."""
    key = name.strip().upper()
    key = ALIASES.get(key, key)
    for d in DEVICES.values():
        if d.name.upper() == key:
            return d
    import difflib
    near = difflib.get_close_matches(name.upper(), [d.upper() for d in DEVICES], n=2, cutoff=0.3)
    raise UsageError(f"unknown device '{name}'; known: {', '.join(DEVICES)}"
                     + (f" (did you mean {', '.join(near)}?)" if near else ""))


def device_for_target(target) -> DeviceSpec:
    """The DeviceSpec of a passes.base.Target."""
    return get_device(target.device)
