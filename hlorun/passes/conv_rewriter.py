"""conv-rewriter: XLA:GPU's ConvRewriter (xla/backends/gpu/transforms/
conv_rewriter.cc), simplified to forward convolutions.

Every ``convolution`` that cuDNN can run as a forward convolution
(``CanImplementAsGpuForwardConv``: at most 3 spatial dimensions, no
zero-element operand, window reversal all-or-none in 2D and none
otherwise; floating-point or integral types, FP8 only f8e4m3fn/f8e5m2 on
CUDA >= sm_90) becomes

    cudnn-conv = (result, u8[0]) custom-call(lhs, rhs), window=..., dim_labels=...,
        custom_call_target="__cudnn$convForward", backend_config={"cudnn_conv_backend_config":
        {"activation_mode":"kNone","conv_result_scale":1,...},...}

and its users read ``get-tuple-element(cudnn-conv, 0)`` (the u8[0] element
is cuDNN's scratch space, sized later by the autotuner).  The name, target,
attribute order and backend config are XLA's.

Simplification (stated): XLA first tries to recognise backward-input and
backward-filter convolutions (``MatchBackwardInput`` / ``MatchBackwardFilter``,
producing ``__cudnn$convBackwardInput`` / ``...Filter``); hlorun does not, so
such a convolution is emitted as a forward convolution (same result, another
cuDNN kernel).  A ``missed`` remark flags convolutions that do not look like
forward ones (batch or feature counts swapped), and batch-grouped
convolutions are left alone.

Postcondition: every convolution cuDNN can run forward is a custom call.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.attrs import parse_dim_labels, parse_window, quote
from ..ir.module import Instruction, Module
from ..ir.shape import Shape, is_f8, is_floating, is_integral
from .base import Pass
from .dfs_rewrite import add_instruction, nonfusion_computations, replace_instruction

CONV_FORWARD = "__cudnn$convForward"
CONV_BIAS_ACTIVATION = "__cudnn$convBiasActivationForward"


def default_conv_backend_config(activation: str = "kNone", side_input_scale: float = 0,
                                conv_result_scale: float = 1) -> dict:
    """``GpuBackendConfig`` with ``CudnnConvBackendConfig`` defaults, as XLA
    prints them."""
    return {"cudnn_conv_backend_config": {"activation_mode": activation,
                                          "conv_result_scale": conv_result_scale,
                                          "leakyrelu_alpha": 0,
                                          "side_input_scale": side_input_scale},
            "device_type": "DEVICE_TYPE_INVALID", "force_earliest_schedule": False,
            "operation_queue_id": "0", "reification_cost": []}


def _type_problem(shape: Shape, target) -> str | None:
    t = shape.element_type
    if not is_floating(t) and not is_integral(t):
        return f"convolutions must have floating-point or integral types, got {t}"
    if is_f8(t):
        if t not in ("f8e4m3fn", "f8e5m2"):
            return f"FP8 type {t} is not supported in convolutions"
        if not target.is_cuda:
            return "FP8 convolutions are only supported on CUDA GPUs"
        major = int(target.compute_capability.split(".")[0] or 0)
        if major < 9:
            return "FP8 convolutions need compute capability 9.0"
    return None


def forward_problem(conv: Instruction) -> str | None:
    """Why cuDNN cannot run ``conv`` forward (``CanImplementAsGpuForwardConv``)."""
    dl = parse_dim_labels(conv.attrs["dim_labels"])
    nsp = len(dl.input_spatial)
    if nsp > 3:
        return f"{nsp} spatial dimensions (cuDNN supports at most 3)"
    if any(0 in o.shape.dimensions for o in conv.operands):
        return "a zero-element operand"
    window = parse_window(conv.attrs["window"]) if "window" in conv.attrs else ()
    reversed_ = [bool(w.window_reversal) for w in window]
    if nsp == 2 and any(reversed_) and not all(reversed_):
        return "window reversed in some but not all spatial dimensions"
    if nsp != 2 and any(reversed_):
        return "window reversal"
    return None


def looks_like_forward(conv: Instruction) -> bool:
    """``LooksLikeForwardConvolution``."""
    dl = parse_dim_labels(conv.attrs["dim_labels"])
    lhs, rhs, out = conv.operands[0].shape, conv.operands[1].shape, conv.shape
    if lhs.dimensions[dl.input_batch] != out.dimensions[dl.output_batch]:
        return False
    if rhs.dimensions[dl.kernel_output_feature] != out.dimensions[dl.output_feature]:
        return False
    return all(rhs.dimensions[k] <= out.dimensions[o]
               for k, o in zip(dl.kernel_spatial, dl.output_spatial))


@dataclass(frozen=True)
class ConvRewriter(Pass):
    """Convolutions become cuDNN forward-convolution custom calls."""

    name = "conv-rewriter"

    def run(self, module: Module) -> bool:
        changed = False
        for comp in nonfusion_computations(module):
            for conv in [i for i in comp.instructions if i.opcode == "convolution"]:
                changed |= self._rewrite(conv)
        return changed

    def _rewrite(self, conv: Instruction) -> bool:
        for s in (conv.shape, conv.operands[0].shape, conv.operands[1].shape):
            why = _type_problem(s, self.target)
            if why:
                self.remark(conv, f"not rewritten to a cuDNN call: {why}", "missed", derived_from=[conv])
                return False
        if int(conv.attrs.get("batch_group_count", "1")) > 1:
            self.remark(conv, "batch-grouped convolution left alone (not modelled)", "missed",
                        derived_from=[conv])
            return False
        why = forward_problem(conv)
        if why:
            self.remark(conv, f"cuDNN cannot run it as a forward convolution: {why}", "missed",
                        derived_from=[conv])
            return False
        if not looks_like_forward(conv):
            self.remark(conv, "batch or output-feature counts do not match a forward convolution "
                              "(possibly a backward pass); XLA would try the backward-input/filter "
                              "patterns, hlorun emits a forward convolution", "analysis",
                        derived_from=[conv])
        comp = conv.parent
        attrs = {}
        for key in ("window", "dim_labels", "feature_group_count"):
            if key in conv.attrs:
                attrs[key] = conv.attrs[key]
        attrs["custom_call_target"] = quote(CONV_FORWARD)
        for key in ("operand_precision", "metadata"):
            if key in conv.attrs:
                attrs[key] = conv.attrs[key]
        call = Instruction("custom-call", Shape.tuple([conv.shape, Shape.array("u8", [0])]),
                           list(conv.operands), "", attrs)
        call.set_backend_config(default_conv_backend_config())
        add_instruction(comp, call, None)
        _set_unique_name(call, "cudnn-conv")
        gte = Instruction("get-tuple-element", conv.shape, [call], "", {"index": "0"})
        add_instruction(comp, gte)
        self.remark(call, f"convolution {conv.name} -> {CONV_FORWARD} ({call.name})",
                    derived_from=[conv], rule="forward-conv")
        replace_instruction(conv, gte)
        return True


def _set_unique_name(instr: Instruction, base: str) -> None:
    """``SetAndUniquifyInstrName``."""
    comp = instr.parent
    new = comp.module.unique_name(base)
    if comp._names is not None:
        comp._names.pop(instr.name, None)
        comp._names[new] = instr
    instr.name = new
