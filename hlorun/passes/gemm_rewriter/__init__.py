"""``cublas-gemm-rewriter``: XLA:GPU's GemmRewriter.

Rewrites every cuBLAS-supported ``dot`` into a BLAS library custom call:
``__cublas$lt$matmul`` (cuBLAS-LT on CUDA, hipBLASLt on ROCm),
``__cublas$gemm`` (legacy cuBLAS, ``cublaslt: false``) or
``__cublas$lt$matmul$f8`` (FP8 operands with their dequantization scales),
with a ``gemm_backend_config`` printed exactly as XLA prints it.  Users are
fused into the call where cuBLAS-LT can compute them: a scalar multiply
(alpha), a matrix add (beta=1, operand 2), a broadcast vector add (epilogue
BIAS), ReLU, approximate GELU (tanh form; GELU_AUX keeps the pre-activation
as a second output), SiLU (ROCm >= 7), and for FP8 the output scale, the
saturating clamp + convert to f8 and the abs-max reduction (damax_output).
Finally each call gets an s8 workspace as the last tuple element.

Like XLA's pipeline, the default runs the FP8-only rewriter and then the
non-FP8 one (``fp8: all``); ``fp8: only`` / ``fp8: none`` run just one.

Options: ``cublaslt`` (LT vs legacy target), ``bias`` (fuse adds;
XLA turns it off with --xla_gpu_async_dot), ``pin_output_layout`` (the
custom call's output gets the canonical descending layout, as a BLAS
library writes it: layout-agnostic users such as a reshape then read the
new layout, layout-sensitive ones get a copy back, and so does an
elementwise user laid out differently from the pinned call (it shares one
layout with its operands); scenario S0),
``size_threshold`` (xla_gpu_gemm_rewrite_size_threshold), ``platform`` /
``compute_capability`` / ``toolkit_version`` (override the Target; ROCm
selects hipBLASLt type tables, workspaces and FP8 rules), ``json_order``
(``sorted``: backend_config keys sorted, as in the XLA that wrote
shared/xla-dumps; ``proto``: proto field order, as XLA at the corpus commit
prints it in its tests).

Every pattern that does not match records a ``missed`` remark saying which
sub-pattern failed (``self.remarks``).

Postcondition: no cuBLAS-supported dot above the size threshold remains in
a fusible computation; every BLAS call returns (outputs..., s8[workspace]).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ...ir.module import Computation, Instruction, Module
from ...errors import UsageError
from ..base import Pass, Target
from .config import CUBLAS_GEMM, LT_TARGETS, Gpu, in_proto_field_order
from .rewriter import GemmRewriterVisitor, Options
from .workspace import add_workspaces

_FP8_MODES = ("all", "only", "none")
BLAS_TARGETS = LT_TARGETS + (CUBLAS_GEMM,)


def fusible_computations(module: Module) -> list[Computation]:
    """``GetFusibleComputations``: computations in post order, minus fusion
    bodies and computations called by anything but while/conditional."""
    excluded: set[Computation] = set()
    for comp in module.computations:
        for instr in comp.instructions:
            if not instr.attrs or instr.opcode in ("while", "conditional"):
                continue
            excluded.update(instr.called_computations())
    return [c for c in module.computation_post_order() if c not in excluded]


@dataclass(frozen=True)
class GemmRewriter(Pass):
    """Rewrite dots into cuBLAS/cuBLAS-LT/hipBLASLt custom calls with fused epilogues."""

    name = "cublas-gemm-rewriter"
    cublaslt: bool = True
    fp8: Literal["all", "only", "none"] = "all"
    bias: bool = True
    pin_output_layout: bool = False
    size_threshold: int = 100
    platform: Literal["", "cuda", "rocm"] = ""
    compute_capability: str | float = ""
    toolkit_version: str | float = ""
    json_order: Literal["sorted", "proto"] = "sorted"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.fp8 not in _FP8_MODES:
            raise UsageError(f"cublas-gemm-rewriter: fp8 must be one of {', '.join(_FP8_MODES)} (got {self.fp8!r})")
        if self.json_order not in ("sorted", "proto"):
            raise UsageError(f"cublas-gemm-rewriter: json_order must be sorted or proto (got {self.json_order!r})")
        if self.platform not in ("", "cuda", "rocm"):
            raise UsageError(f"cublas-gemm-rewriter: platform must be cuda or rocm (got {self.platform!r})")
        object.__setattr__(self, "_seen", set())
        object.__setattr__(self, "origin", {})  # GEMM custom call -> dot it came from

    def gpu(self) -> Gpu:
        target = self.target
        if self.platform or self.compute_capability != "":
            platform = self.platform or target.platform
            cc = str(self.compute_capability) if self.compute_capability != "" else (
                target.compute_capability if platform == target.platform else "")
            target = Target(platform, target.device, cc)
        return Gpu.from_target(target, str(self.toolkit_version))

    def note(self, instr: Instruction | str | None, message: str, kind: str, **data: Any) -> None:
        name = instr.name if isinstance(instr, Instruction) else instr
        key = (name, message, kind)
        if key in self._seen:  # type: ignore[attr-defined]
            return
        self._seen.add(key)  # type: ignore[attr-defined]
        derived = data.pop("derived_from", ())
        if isinstance(derived, str):
            derived = (derived,)
        if not derived and isinstance(instr, Instruction) and instr in self.origin:
            # a GEMM whose name changes as epilogues are fused: link the
            # remark to the dot it came from (lineage for --explain)
            derived = (self.origin[instr],)
        self.remark(instr, message, kind=kind, derived_from=derived, **data)

    def run(self, module: Module) -> bool:
        self._seen.clear()  # type: ignore[attr-defined]
        gpu = self.gpu()
        phases = {"all": (True, False), "only": (True,), "none": (False,)}[self.fp8]
        changed = False
        for fp8_only in phases:
            opts = Options(fp8_only=fp8_only, bias=self.bias, cublaslt=self.cublaslt,
                           pin_output_layout=self.pin_output_layout, size_threshold=self.size_threshold)
            for comp in fusible_computations(module):
                visitor = GemmRewriterVisitor(self, gpu, opts)
                changed |= visitor.run(comp)
                changed |= add_workspaces(visitor, comp)
        if changed and self.json_order == "proto":
            _reorder_configs(module)
        return changed


def _reorder_configs(module: Module) -> None:
    for comp in module.computations:
        for instr in comp.instructions:
            if instr.opcode == "custom-call" and instr.custom_call_target in BLAS_TARGETS:
                text = instr.attrs.get("backend_config")
                if text and text.startswith("{"):
                    instr.attrs["backend_config"] = in_proto_field_order(text)


__all__ = ["GemmRewriter", "fusible_computations"]
