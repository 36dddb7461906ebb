"""Which (compute type, scale type, A, B, D) combinations cuBLAS-LT,
hipBLASLt and legacy cuBLAS accept: ``TypesAreSupportedByCublasLt``,
``TypesAreSupportedByLegacyCublas``, ``se::gpu::GetBlasComputationType`` and
``GetScaleType``, with the tables of the cuBLAS(LT) documentation as XLA
lists them.
"""

from __future__ import annotations

from .config import Gpu

# blas::DataType names for XLA primitive types (AsBlasDataType).
BLAS_DTYPE = {
    "f8e5m2": "F8E5M2", "f8e4m3fn": "F8E4M3FN", "f8e5m2fnuz": "F8E5M2FNUZ",
    "f8e4m3fnuz": "F8E4M3FNUZ", "s8": "Int8", "f16": "Half", "bf16": "BF16",
    "f32": "Float", "s32": "Int32", "f64": "Double", "c64": "ComplexFloat",
    "c128": "ComplexDouble",
}

_F8_UNSET = ("f8e5m2", "f8e4m3", "f8e4m3fn", "f8e5m2fnuz", "f8e4m3fnuz", "f8e3m4",
             "f4e2m1fn", "f8e8m0fnu", "f16", "bf16")

#: algorithm_util::GetBlasComputationType
_ALG_COMPUTE = {
    "ALG_DOT_F16_F16_F16": "F16", "ALG_DOT_BF16_BF16_F32": "BF16AsF32",
    "ALG_DOT_ANY_F8_ANY_F8_F32": "F32", "ALG_DOT_ANY_F8_ANY_F8_F32_FAST_ACCUM": "F32",
    "ALG_DOT_F16_F16_F32": "F32", "ALG_DOT_BF16_BF16_F32_X3": "F32",
    "ALG_DOT_BF16_BF16_F32_X6": "F32", "ALG_DOT_BF16_BF16_F32_X9": "F32",
    "ALG_DOT_F32_F32_F32": "F32", "ALG_DOT_TF32_TF32_F32_X3": "F32",
    "ALG_DOT_TF32_TF32_F32": "TF32AsF32", "ALG_DOT_F64_F64_F64": "F64",
}

#: algorithm_util::IsSupportedByCublasOrCublasLt
CUBLAS_ALGORITHMS = frozenset({
    "ALG_UNSET", "ALG_DOT_BF16_BF16_F32", "ALG_DOT_BF16_BF16_F32_X3",
    "ALG_DOT_BF16_BF16_F32_X6", "ALG_DOT_BF16_BF16_F32_X9", "ALG_DOT_F16_F16_F32",
    "ALG_DOT_F32_F32_F32", "ALG_DOT_F64_F64_F64", "ALG_DOT_TF32_TF32_F32",
    "ALG_DOT_TF32_TF32_F32_X3", "ALG_DOT_ANY_F8_ANY_F8_F32",
    "ALG_DOT_ANY_F8_ANY_F8_F32_FAST_ACCUM",
})

#: algorithm_util::IsSupportedByElementalIrEmitter
ELEMENTAL_ALGORITHMS = frozenset({"ALG_DOT_BF16_BF16_F32", "ALG_DOT_F32_F32_F32", "ALG_UNSET"})


def computation_type(gpu: Gpu, algorithm: str, lhs: str, output: str, precision: int) -> str | None:
    """``se::gpu::GetBlasComputationType`` (TF32 execution enabled, as by
    default); None where XLA returns an error."""
    if algorithm == "ALG_UNSET":
        if output in _F8_UNSET:
            return "F32"
        if output in ("f32", "c64"):
            if gpu.is_cuda and precision <= 1 and lhs == output:
                return "TF32AsF32"
            return "F32"
        if output in ("f64", "c128"):
            return "F64"
        if output == "s32":
            return "I32"
        return None
    return _ALG_COMPUTE.get(algorithm)


def scale_type(c_type: str, compute: str) -> str:
    return "Float" if compute == "F32" and c_type != "ComplexFloat" else c_type


def _t(rows: str) -> frozenset:
    out = set()
    for row in rows.strip().splitlines():
        out.add(tuple(row.split()))
    return frozenset(out)


_FP8_COMMON = """
F32 Float f8e4m3fn f8e4m3fn BF16
F32 Float f8e4m3fn f8e4m3fn F8E4M3FN
F32 Float f8e4m3fn f8e4m3fn Half
F32 Float f8e4m3fn f8e4m3fn Float
F32 Float f8e4m3fn f8e5m2 BF16
F32 Float f8e4m3fn f8e5m2 F8E4M3FN
F32 Float f8e4m3fn f8e5m2 F8E5M2
F32 Float f8e4m3fn f8e5m2 Half
F32 Float f8e4m3fn f8e5m2 Float
F32 Float f8e5m2 f8e4m3fn BF16
F32 Float f8e5m2 f8e4m3fn F8E4M3FN
F32 Float f8e5m2 f8e4m3fn F8E5M2
F32 Float f8e5m2 f8e4m3fn Half
F32 Float f8e5m2 f8e4m3fn Float
"""

CUBLAS_LT_TYPES = _t(_FP8_COMMON + """
F32 ComplexFloat c64 c64 ComplexFloat
F16AsF32 Float f32 f32 Float
F16AsF32 ComplexFloat c64 c64 ComplexFloat
BF16AsF32 Float f32 f32 Float
BF16AsF32 ComplexFloat c64 c64 ComplexFloat
TF32AsF32 Float f32 f32 Float
TF32AsF32 ComplexFloat c64 c64 ComplexFloat
F64 Double f64 f64 Double
F64 ComplexDouble c128 c128 ComplexDouble
F32 Float s8 s8 Float
""")

HIPBLAS_LT_TYPES = _t(_FP8_COMMON + """
F32 Float f8e4m3fnuz f8e4m3fnuz BF16
F32 Float f8e4m3fnuz f8e4m3fnuz F8E4M3FNUZ
F32 Float f8e4m3fnuz f8e4m3fnuz Half
F32 Float f8e4m3fnuz f8e4m3fnuz Float
F32 Float f8e4m3fnuz f8e5m2fnuz BF16
F32 Float f8e4m3fnuz f8e5m2fnuz F8E4M3FNUZ
F32 Float f8e4m3fnuz f8e5m2fnuz F8E5M2FNUZ
F32 Float f8e4m3fnuz f8e5m2fnuz Half
F32 Float f8e4m3fnuz f8e5m2fnuz Float
F32 Float f8e5m2fnuz f8e4m3fnuz BF16
F32 Float f8e5m2fnuz f8e4m3fnuz F8E4M3FNUZ
F32 Float f8e5m2fnuz f8e4m3fnuz F8E5M2FNUZ
F32 Float f8e5m2fnuz f8e4m3fnuz Half
F32 Float f8e5m2fnuz f8e4m3fnuz Float
F64 Double f64 f64 Double
F32 ComplexFloat c64 c64 ComplexFloat
F64 ComplexDouble c128 c128 ComplexDouble
TF32AsF32 Float f32 f32 Float
""")

CORE_TYPES = _t("""
F16 Half f16 f16 Half
I32 Int32 s8 s8 Int32
I32 Float s8 s8 Int8
F32 Float bf16 bf16 BF16
F32 Float f16 f16 Half
F32 Float f32 f32 Float
""")

EXTENDED_TYPES = _t("""
F32 Float bf16 bf16 Float
F32 Float f16 f16 Float
""")

LEGACY_TYPES = _t("""
F16 Half f16 f16 Half
I32 Int32 s8 s8 Int32
F32 Float bf16 bf16 BF16
F32 Float f16 f16 Half
F32 Float s8 s8 Float
F32 Float bf16 bf16 Float
F32 Float f16 f16 Float
F32 Float f32 f32 Float
F32 ComplexFloat c64 c64 ComplexFloat
F16AsF32 Float f32 f32 Float
F16AsF32 ComplexFloat c64 c64 ComplexFloat
BF16AsF32 Float f32 f32 Float
BF16AsF32 ComplexFloat c64 c64 ComplexFloat
TF32AsF32 Float f32 f32 Float
TF32AsF32 ComplexFloat c64 c64 ComplexFloat
F64 Double f64 f64 Double
F64 ComplexDouble c128 c128 ComplexDouble
""")

_LT_OUTPUTS = ("f8e5m2fnuz", "f8e4m3fnuz", "f8e5m2", "f8e4m3fn", "s8", "f16", "bf16", "f32",
               "s32", "f64", "c64", "c128")
_LEGACY_OUTPUTS = ("s8", "f16", "bf16", "f32", "s32", "f64", "c64", "c128")


def lt_types_reason(gpu: Gpu, a: str, b: str, out_type: str, dot_out: str,
                    algorithm: str, precisions: list[str]) -> str | None:
    """None when cuBLAS-LT (hipBLASLt on ROCm) supports the combination,
    else why not (``TypesAreSupportedByCublasLt``)."""
    from .config import max_precision
    if gpu.is_cuda and "s8" in (a, b) and not gpu.cuda_at_least(6, 1):
        return f"s8 GEMMs need compute capability >= 6.1 (got {gpu.cuda[0]}.{gpu.cuda[1]})"
    if out_type not in _LT_OUTPUTS:
        return f"output type {out_type} is not supported by BLAS-LT"
    if algorithm not in CUBLAS_ALGORITHMS:
        return f"algorithm {algorithm} is not supported by cuBLAS/cuBLAS-LT"
    compute = computation_type(gpu, algorithm, a, dot_out, max_precision(precisions))
    if compute is None:
        return f"no BLAS computation type for output {dot_out} with {algorithm}"
    c_type = BLAS_DTYPE[out_type]
    key = (compute, scale_type(c_type, compute), a, b, c_type)
    if gpu.is_cuda and key in CUBLAS_LT_TYPES:
        return None
    if gpu.is_rocm and key in HIPBLAS_LT_TYPES:
        return None
    if key in CORE_TYPES:
        return None
    if (gpu.is_cuda or not gpu.gfx9_mi200) and key in EXTENDED_TYPES:
        return None
    lib = "hipBLASLt" if gpu.is_rocm else "cuBLAS-LT"
    return (f"{lib} has no kernel for A={a}, B={b}, D={out_type} "
            f"(compute type {compute}, scale type {key[1]})")


def legacy_types_supported(gpu: Gpu, a: str, b: str, out_type: str, algorithm: str) -> bool:
    """``TypesAreSupportedByLegacyCublas`` (default compute precision)."""
    if out_type not in _LEGACY_OUTPUTS:
        return False
    compute = computation_type(gpu, algorithm, a, out_type, 0)
    if compute is None:
        return False
    c_type = BLAS_DTYPE[out_type]
    return (compute, scale_type(c_type, compute), a, b, c_type) in LEGACY_TYPES
