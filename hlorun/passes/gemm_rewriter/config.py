"""GemmBackendConfig as XLA prints it, and the target facts the rewriter
asks about (compute capability, toolkit version, workspace sizes).

XLA prints a ``GpuBackendConfig`` proto as JSON with every field present
(proto3 "always print primitive fields"), keys sorted, int64 values as
strings, whole doubles without a fraction (``"alpha_real":1``) and enums by
name.  ``gpu_backend_config_json`` reproduces that byte for byte (compare
``../shared/xla-dumps/dot_general_gqa_cublaslt/*after_cublas-gemm-rewriter*``).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from ...ir.attrs import parse_frontend_attributes
from ...ir.module import Instruction

KB = 1024
#: GemmConfig workspace sizes (xla/service/gpu/matmul_utils.h).
DEFAULT_WORKSPACE = 4 * KB * KB
HOPPER_WORKSPACE = 32 * KB * KB
GFX942_WORKSPACE = 76 * KB * KB
GFX950_WORKSPACE = 64 * KB * KB

CUBLAS_GEMM = "__cublas$gemm"
CUBLAS_LT_MATMUL = "__cublas$lt$matmul"
CUBLAS_LT_MATMUL_F8 = "__cublas$lt$matmul$f8"
CUBLAS_LT_GROUPED = "__cublas$lt$groupedMatmul"
LT_TARGETS = (CUBLAS_LT_MATMUL, CUBLAS_LT_MATMUL_F8)

EPILOGUES = ("DEFAULT", "BIAS", "RELU", "BIAS_RELU", "GELU", "GELU_AUX", "BIAS_GELU",
             "BIAS_GELU_AUX", "SILU", "BIAS_SILU")
AUX_EPILOGUES = ("GELU_AUX", "BIAS_GELU_AUX")
PRECISIONS = ("DEFAULT", "HIGH", "HIGHEST", "PACKED_NIBBLE")


# ---------------------------------------------------------------------------
# Target
# ---------------------------------------------------------------------------


def parse_version(text: str) -> tuple[int, int, int]:
    parts = [int(p) for p in re.findall(r"\d+", text or "")][:3]
    while len(parts) < 3:
        parts.append(0)
    return tuple(parts)  # type: ignore[return-value]


@dataclass(frozen=True)
class Gpu:
    """The slice of ``se::GpuComputeCapability`` + toolkit version the
    rewriter needs.  ``cuda``: (major, minor); ``gfx``: e.g. "gfx942"."""

    platform: str = "cuda"
    cuda: tuple[int, int] = (9, 0)
    gfx: str = ""
    toolkit: tuple[int, int, int] = (12, 8, 0)

    @staticmethod
    def from_target(target: Any, toolkit_version: str = "") -> "Gpu":
        platform = getattr(target, "platform", "cuda") or "cuda"
        cc = str(getattr(target, "compute_capability", "") or "")
        if platform == "rocm":
            gfx = cc.split(":")[0] if cc else "gfx942"
            tk = parse_version(toolkit_version) if toolkit_version else (6, 4, 0)
            return Gpu("rocm", (0, 0), gfx, tk)
        major, _, minor = cc.partition(".")
        try:
            cuda = (int(major), int(minor or 0))
        except ValueError:
            cuda = (9, 0)
        tk = parse_version(toolkit_version) if toolkit_version else (12, 8, 0)
        return Gpu(platform, cuda, "", tk)

    # -- CUDA ------------------------------------------------------------
    @property
    def is_cuda(self) -> bool:
        return self.platform == "cuda"

    @property
    def is_rocm(self) -> bool:
        return self.platform == "rocm"

    def cuda_at_least(self, major: int, minor: int = 0) -> bool:
        return self.is_cuda and self.cuda >= (major, minor)

    @property
    def is_blackwell(self) -> bool:
        return self.is_cuda and self.cuda[0] == 10

    # -- ROCm (RocmComputeCapability) ---------------------------------------
    @property
    def gfx9_mi200(self) -> bool:
        return self.gfx == "gfx90a"

    @property
    def has_hipblaslt(self) -> bool:
        return self.gfx in ("gfx942", "gfx950", "gfx90a", "gfx1200", "gfx1201", "gfx1100",
                            "gfx1101", "gfx1103", "gfx1150", "gfx1151", "gfx1250")

    @property
    def has_ocp_fp8_support(self) -> bool:
        return self.gfx in ("gfx950", "gfx1200", "gfx1201", "gfx1250")

    @property
    def has_nanoo_fp8_support(self) -> bool:
        return self.gfx == "gfx942"

    @property
    def has_fp8_support(self) -> bool:
        return self.has_ocp_fp8_support or self.has_nanoo_fp8_support

    def workspace_bytes(self) -> int:
        if self.is_cuda and self.cuda[0] >= 9:
            return HOPPER_WORKSPACE
        if self.is_rocm:
            if self.gfx == "gfx942":
                return GFX942_WORKSPACE
            if self.gfx == "gfx950":
                return GFX950_WORKSPACE
        return DEFAULT_WORKSPACE

    def describe(self) -> str:
        if self.is_rocm:
            return f"ROCm {self.gfx} (toolkit {'.'.join(map(str, self.toolkit))})"
        return f"CUDA sm_{self.cuda[0]}{self.cuda[1]} (toolkit {'.'.join(map(str, self.toolkit))})"


# ---------------------------------------------------------------------------
# Dot dimension numbers and precision
# ---------------------------------------------------------------------------


@dataclass
class DotDims:
    lhs_batch: list[int]
    lhs_contracting: list[int]
    rhs_batch: list[int]
    rhs_contracting: list[int]

    @staticmethod
    def of(dot: Instruction) -> "DotDims":
        return DotDims(list(dot.int_list("lhs_batch_dims")), list(dot.int_list("lhs_contracting_dims")),
                       list(dot.int_list("rhs_batch_dims")), list(dot.int_list("rhs_contracting_dims")))

    @staticmethod
    def from_json(d: dict) -> "DotDims":
        g = lambda k: [int(x) for x in d.get(k, [])]  # noqa: E731
        return DotDims(g("lhs_batch_dimensions"), g("lhs_contracting_dimensions"),
                       g("rhs_batch_dimensions"), g("rhs_contracting_dimensions"))

    def to_json(self) -> dict:
        s = lambda v: [str(x) for x in v]  # noqa: E731
        return {"lhs_batch_dimensions": s(self.lhs_batch),
                "lhs_contracting_dimensions": s(self.lhs_contracting),
                "rhs_batch_dimensions": s(self.rhs_batch),
                "rhs_contracting_dimensions": s(self.rhs_contracting)}

    def set_on(self, dot: Instruction) -> None:
        """Write as dot attributes in XLA's print order (empty lists omitted)."""
        for key in ("lhs_batch_dims", "lhs_contracting_dims", "rhs_batch_dims", "rhs_contracting_dims"):
            dot.attrs.pop(key, None)
        for key, vals in (("lhs_batch_dims", self.lhs_batch), ("lhs_contracting_dims", self.lhs_contracting),
                          ("rhs_batch_dims", self.rhs_batch), ("rhs_contracting_dims", self.rhs_contracting)):
            if vals:
                dot.set_int_list(key, vals)


def operand_precision(dot: Instruction) -> list[str]:
    text = dot.attrs.get("operand_precision")
    if not text:
        return ["DEFAULT", "DEFAULT"]
    return [p.strip().upper() for p in text.strip()[1:-1].split(",") if p.strip()]


def algorithm(dot: Instruction) -> str:
    text = dot.attrs.get("algorithm")
    if not text:
        return "ALG_UNSET"
    t = text.strip().upper()
    return t if t.startswith("ALG_") else "ALG_" + t


def max_precision(precisions: list[str]) -> int:
    return max([PRECISIONS.index(p) if p in PRECISIONS else 0 for p in precisions] or [0])


# ---------------------------------------------------------------------------
# GemmBackendConfig
# ---------------------------------------------------------------------------


def new_gemm_config(dot: Instruction, dims: DotDims, lhs_stride: int, rhs_stride: int) -> dict[str, Any]:
    """The GemmBackendConfig HandleDot builds (as a plain dict; printed by
    :func:`gpu_backend_config_json`)."""
    text = dot.attrs.get("frontend_attributes")
    fa = parse_frontend_attributes(text) if text else {}
    return {
        "alpha_real": 1.0, "alpha_imag": 0.0, "beta": 0.0,
        "dot_dimension_numbers": dims.to_json(),
        "precision_config": {"algorithm": algorithm(dot), "operand_precision": operand_precision(dot)},
        "epilogue": "DEFAULT",
        "lhs_stride": str(lhs_stride), "rhs_stride": str(rhs_stride),
        "grad_x": fa.get("grad_x") == "true", "grad_y": fa.get("grad_y") == "true",
        "damax_output": False, "autotune_workspace_size": "0", "scale_mode": 0,
    }


def _number(v: float) -> Any:
    """proto3 JSON for a double: whole values without a fraction."""
    f = float(v)
    if math.isfinite(f) and f == int(f) and abs(f) < 2**53:
        return int(f)
    return f


def gpu_backend_config_json(gemm: dict[str, Any], existing: dict[str, Any] | None = None) -> str:
    """The ``backend_config={...}`` text of a GEMM custom call."""
    g = dict(gemm)
    for key in ("alpha_real", "alpha_imag", "beta"):
        g[key] = _number(g[key])
    outer = {
        "operation_queue_id": "0", "force_earliest_schedule": False,
        "reification_cost": [], "device_type": "DEVICE_TYPE_INVALID",
    }
    if existing:
        for key in ("operation_queue_id", "force_earliest_schedule", "reification_cost", "device_type"):
            if key in existing:
                outer[key] = existing[key]
    outer["gemm_backend_config"] = g
    return json.dumps(outer, separators=(",", ":"), sort_keys=True)


def read_gemm_config(instr: Instruction) -> dict[str, Any]:
    """The gemm_backend_config of a GEMM custom call (defaults filled in)."""
    cfg = instr.backend_config
    g = dict(cfg.get("gemm_backend_config", {})) if isinstance(cfg, dict) else {}
    g.setdefault("alpha_real", 0)
    g.setdefault("alpha_imag", 0)
    g.setdefault("beta", 0)
    g.setdefault("epilogue", "DEFAULT")
    g.setdefault("damax_output", False)
    g.setdefault("dot_dimension_numbers", {})
    g.setdefault("precision_config", {"algorithm": "ALG_UNSET", "operand_precision": []})
    return g


def write_gemm_config(instr: Instruction, gemm: dict[str, Any]) -> None:
    cfg = instr.backend_config
    instr.attrs["backend_config"] = gpu_backend_config_json(gemm, cfg if isinstance(cfg, dict) else None)


# ---------------------------------------------------------------------------
# Proto field order (XLA at the corpus commit prints JSON in field-number
# order; the XLA that produced shared/xla-dumps sorts keys)
# ---------------------------------------------------------------------------

_FIELD_ORDER: dict[str, tuple[str, ...]] = {
    "": ("operation_queue_id", "cudnn_conv_backend_config", "gemm_backend_config",
         "force_earliest_schedule", "reification_cost", "device_type", "grouped_gemm_backend_config"),
    "gemm_backend_config": ("selected_algorithm", "alpha_real", "beta", "dot_dimension_numbers",
                            "alpha_imag", "precision_config", "epilogue", "lhs_stride", "rhs_stride",
                            "grad_x", "grad_y", "damax_output", "autotune_workspace_size", "scale_mode"),
    "dot_dimension_numbers": ("lhs_contracting_dimensions", "rhs_contracting_dimensions",
                              "lhs_batch_dimensions", "rhs_batch_dimensions"),
    "precision_config": ("operand_precision", "algorithm"),
}


def _proto_order(value: Any, key: str = "") -> Any:
    if not isinstance(value, dict):
        return value
    order = _FIELD_ORDER.get(key, ())
    keys = [k for k in order if k in value] + sorted(k for k in value if k not in order)
    return {k: _proto_order(value[k], k) for k in keys}


def in_proto_field_order(text: str) -> str:
    """The same backend config JSON with keys in proto field order."""
    return json.dumps(_proto_order(json.loads(text)), separators=(",", ":"))
