"""Dot precision algorithms (XLA's ``PrecisionConfig::Algorithm`` and
xla/service/algorithm_util.cc): the names XLA prints, the operand types
each algorithm takes, its accumulator, and whether a GPU runs it
(``IsSupportedDotAlgorithmOnGpu``).

Names are kept as XLA prints them in HLO text (``dot_bf16_bf16_f32_x3``);
:func:`enum_name` gives the proto name (``ALG_DOT_BF16_BF16_F32_X3``).
"""

from __future__ import annotations

from ..ir.module import Instruction
from ..ir.shape import is_f8

#: Every algorithm XLA prints (``algorithm=`` values), with the operand types
#: it takes (``GetAllowedOperandsTypeForAlgorithm``; "f8": any fp8 type) and
#: its accumulator (``GetDotAccumulatorType``).
ALGORITHMS: dict[str, tuple[tuple[str, ...], str]] = {
    "dot_any_f8_any_f8_f32": (("f8",), "f32"),
    "dot_any_f8_any_f8_f32_fast_accum": (("f8",), "f32"),
    "dot_f16_f16_f16": (("f16",), "f16"),
    "dot_f16_f16_f32": (("f16",), "f32"),
    "dot_bf16_bf16_bf16": (("bf16",), "bf16"),
    "dot_bf16_bf16_f32": (("bf16",), "f32"),
    # "This is not a typo": the split algorithms take f32 and split it.
    "dot_bf16_bf16_f32_x3": (("f32",), "f32"),
    "dot_bf16_bf16_f32_x6": (("f32",), "f32"),
    "dot_bf16_bf16_f32_x9": (("f32",), "f32"),
    "dot_bf16_bf16_fp8x3": (("bf16", "f32"), "f32"),
    "dot_bf16_bf16_fp8x4": (("bf16", "f32"), "f32"),
    "dot_tf32_tf32_f32": (("f32",), "f32"),
    "dot_tf32_tf32_f32_x3": (("f32",), "f32"),
    "dot_f32_f32_f32": (("f32",), "f32"),
    "dot_f64_f64_f64": (("f64",), "f64"),
}

_F8_OUTPUTS = frozenset({"bf16", "f16", "f32", "f8e4m3fn", "f8e5m2", "f8e4m3fnuz", "f8e5m2fnuz"})


def algorithm_of(dot: Instruction) -> str | None:
    """The dot's algorithm as printed (lower case), None when unset."""
    a = dot.attrs.get("algorithm")
    if not a:
        return None
    a = a.lower()
    return None if a in ("alg_unset", "unset") else a


def enum_name(algorithm: str | None) -> str:
    """``PrecisionConfig::Algorithm_Name``: ``ALG_DOT_BF16_BF16_F32``."""
    return "ALG_UNSET" if not algorithm else "ALG_" + algorithm.upper()


def _cuda_cc(target) -> tuple[int, int] | None:
    if getattr(target, "platform", "cuda") != "cuda":
        return None
    major, _, minor = str(getattr(target, "compute_capability", "") or "9.0").partition(".")
    try:
        return int(major), int(minor or 0)
    except ValueError:
        return None


def _gfx(target) -> str:
    if getattr(target, "platform", "") != "rocm":
        return ""
    return str(getattr(target, "compute_capability", "") or "").split(":")[0]


def _rocm_mi100_or_later(gfx: str) -> bool:
    """``gfx9_mi100_or_later``: gfx908 (MI100), gfx90a, gfx94x, gfx950."""
    return gfx in ("gfx908", "gfx90a", "gfx940", "gfx941", "gfx942", "gfx950")


def _rocm_bf16(gfx: str) -> bool:
    """``has_bf16_dtype_support``: MI100 and later, and RDNA (gfx10xx+)."""
    return _rocm_mi100_or_later(gfx) or gfx.startswith(("gfx10", "gfx11", "gfx12"))


def supported_on_gpu(algorithm: str, target, lhs: str, rhs: str, out: str) -> bool:
    """``algorithm_util::IsSupportedDotAlgorithmOnGpu`` for ``target``
    (a :class:`~hlorun.passes.Target`) and the operand/output storage types."""
    cc = _cuda_cc(target)
    gfx = _gfx(target)
    sycl = getattr(target, "platform", "") == "sycl"
    ge_ampere = cc is not None and cc >= (8, 0)
    ge_ada = cc is not None and cc >= (8, 9)
    mi100 = _rocm_mi100_or_later(gfx)
    rocm_bf16 = _rocm_bf16(gfx)
    nanoo = gfx == "gfx942"
    if algorithm in ("dot_any_f8_any_f8_f32", "dot_any_f8_any_f8_f32_fast_accum"):
        if not (ge_ada or mi100) or out not in _F8_OUTPUTS:
            return False
        if (lhs, rhs) in (("f8e5m2", "f8e4m3fn"), ("f8e4m3fn", "f8e5m2"), ("f8e4m3fn", "f8e4m3fn")):
            return True
        return nanoo and (lhs, rhs) in (("f8e5m2fnuz", "f8e4m3fnuz"), ("f8e4m3fnuz", "f8e5m2fnuz"),
                                        ("f8e4m3fnuz", "f8e4m3fnuz"))
    if algorithm in ("dot_bf16_bf16_fp8x3", "dot_bf16_bf16_fp8x4"):
        return ge_ada and lhs in ("bf16", "f32") and rhs in ("bf16", "f32") and out in ("bf16", "f32")
    if algorithm == "dot_f16_f16_f32":
        return lhs == rhs == "f16" and out in ("f16", "f32")
    if algorithm == "dot_bf16_bf16_f32":
        if not (ge_ampere or rocm_bf16 or sycl) or lhs != rhs:
            return False
        return out in ("bf16", "f32") if lhs == "bf16" else (lhs == "f32" and out == "f32")
    if algorithm in ("dot_bf16_bf16_f32_x3", "dot_bf16_bf16_f32_x6", "dot_bf16_bf16_f32_x9"):
        return (ge_ampere or rocm_bf16 or sycl) and lhs == rhs == "f32" and out == "f32"
    if algorithm in ("dot_tf32_tf32_f32", "dot_tf32_tf32_f32_x3"):
        return (ge_ampere or mi100 or sycl) and lhs == rhs == "f32" and out == "f32"
    if algorithm == "dot_f32_f32_f32":
        return lhs == rhs == "f32" and out == "f32"
    if algorithm == "dot_f64_f64_f64":
        return lhs == rhs == "f64" and out == "f64"
    return False  # dot_f16_f16_f16, dot_bf16_bf16_bf16 and unknown ones: no GPU runs them


def allowed_operand_types(algorithm: str) -> tuple[str, ...]:
    """``GetAllowedOperandsTypeForAlgorithm`` ("f8": any fp8 type)."""
    return ALGORITHMS[algorithm][0]


def operand_type_allowed(algorithm: str, t: str) -> bool:
    allowed = allowed_operand_types(algorithm)
    return t in allowed or ("f8" in allowed and is_f8(t))


def accumulator_type(algorithm: str) -> str:
    """``GetDotAccumulatorType``."""
    return ALGORITHMS[algorithm][1]


#: ``IsSupportedDotAlgorithm`` (xla/backends/gpu/codegen/triton/support.cc):
#: what Triton's dot emitter implements.  ANY_F8 and BF16_BF16_BF16 are not
#: (XLA hands those GEMMs to cuBLAS-LT: the fp8 dots of the dot_algorithms dump).
TRITON_ALGORITHMS = frozenset({
    "dot_f16_f16_f16", "dot_f32_f32_f32", "dot_f64_f64_f64", "dot_f16_f16_f32",
    "dot_bf16_bf16_f32", "dot_bf16_bf16_f32_x3", "dot_bf16_bf16_f32_x6", "dot_bf16_bf16_f32_x9",
    "dot_tf32_tf32_f32", "dot_tf32_tf32_f32_x3",
})


def triton_algorithm_reason(algorithm: str, lhs: str, rhs: str, out: str, target) -> str | None:
    """Why Triton cannot emit a dot with ``algorithm`` (None: it can):
    ``IsSupportedDotAlgorithm`` and
    ``AreDotAlgorithmInputAndOutputConversionsSupported`` (conversions
    between floating-point types are taken as supported)."""
    name = enum_name(algorithm)
    if algorithm not in TRITON_ALGORITHMS:
        return f"Unsupported dot algorithm: {name}"
    allowed = allowed_operand_types(algorithm)
    if algorithm == "dot_f64_f64_f64" and min(_bits(lhs), _bits(rhs)) < 32:
        cc = _cuda_cc(target)
        if cc is None or cc < (10, 0):
            return f"Unsupported BF16 on GPUs before Blackwell for dot algorithm {name}"
    if len(allowed) != 1:
        if lhs == rhs and lhs in allowed:
            return None
        return f"Unsupported operand types for dot algorithm {name}"
    return None


def _bits(t: str) -> int:
    from ..ir.shape import bit_width
    return bit_width(t)
