"""conv-rewriter: XLA:GPU's ConvRewriter (xla/backends/gpu/transforms/
conv_rewriter.cc).

Every ``convolution`` cuDNN can run becomes

    cudnn-conv = (result, u8[0]) custom-call(lhs, rhs), window=..., dim_labels=...,
        custom_call_target="__cudnn$convForward", backend_config={"cudnn_conv_backend_config":
        {"activation_mode":"kNone","conv_result_scale":1,...},...}

and its users read ``get-tuple-element(cudnn-conv, 0)`` (the u8[0] element
is cuDNN's scratch space, sized later by the autotuner).  In XLA's order:

1. a backward-input convolution (``convolution(grad, reverse(filter))``,
   :func:`.conv_matching.match_backward_input`) becomes
   ``cudnn-conv-bw-input`` / ``__cudnn$convBackwardInput`` on the
   unreversed filter;
2. a backward-filter convolution (large "kernel" spatial sizes,
   :func:`.conv_matching.match_backward_filter`) becomes
   ``cudnn-conv-bw-filter`` / ``__cudnn$convBackwardFilter``, its
   ``feature_group_count`` the convolution's batch_group_count;
3. anything cuDNN can run forward (``CanImplementAsGpuForwardConv``: at
   most 3 spatial dimensions, no zero-element operand, window reversal
   all-or-none in 2D and none otherwise) becomes ``cudnn-conv`` /
   ``__cudnn$convForward``; a batch-grouped one is first rewritten to
   feature groups (reshape / transpose / reshape of the input).

Types: floating-point or integral, FP8 only f8e4m3fn/f8e5m2 on CUDA >=
sm_90.  Names, targets, attribute order and backend config are XLA's.

Postcondition: every convolution cuDNN can run is a custom call.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.attrs import format_window, parse_dim_labels, parse_window, quote
from ..ir.module import Instruction, Module
from ..ir.shape import Shape, is_f8, is_floating, is_integral
from .base import Pass
from .conv_matching import (batch_groups, batch_grouped_to_feature_grouped, format_conv_dims,
                            looks_like_forward, match_backward_filter, match_backward_input)
from .dfs_rewrite import add_instruction, nonfusion_computations, replace_instruction

CONV_FORWARD = "__cudnn$convForward"
CONV_BIAS_ACTIVATION = "__cudnn$convBiasActivationForward"
CONV_BACKWARD_INPUT = "__cudnn$convBackwardInput"
CONV_BACKWARD_FILTER = "__cudnn$convBackwardFilter"
#: every cuDNN convolution target (``IsCustomCallToDnnConvolution``)
CONV_TARGETS = (CONV_FORWARD, CONV_BIAS_ACTIVATION, CONV_BACKWARD_INPUT, CONV_BACKWARD_FILTER)
CONV_NAMES = {CONV_FORWARD: "cudnn-conv", CONV_BACKWARD_INPUT: "cudnn-conv-bw-input",
              CONV_BACKWARD_FILTER: "cudnn-conv-bw-filter",
              CONV_BIAS_ACTIVATION: "cudnn-conv-bias-activation"}


def conv_roles(target: str, lhs, rhs, result):
    """(input, filter, output) of a cuDNN convolution call from its (lhs,
    rhs, result) -- whatever is passed: shapes, layouts, dimension lists.
    A backward-input call computes the input from (output gradient,
    filter); a backward-filter call the filter from (input, output
    gradient).  The mapping is its own inverse: ``conv_roles(target, input,
    filter, output)`` gives (lhs, rhs, result)."""
    if target == CONV_BACKWARD_INPUT:
        return result, rhs, lhs
    if target == CONV_BACKWARD_FILTER:
        return lhs, result, rhs
    return lhs, rhs, result


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


@dataclass(frozen=True)
class ConvRewriter(Pass):
    """Convolutions become cuDNN forward / backward-input / backward-filter calls."""

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
        original = conv
        m = match_backward_input(conv)
        if m is not None:
            window, dims, rhs = m
            return self._emit(original, CONV_BACKWARD_INPUT, conv.operands[0], rhs, window, dims,
                              int(conv.attrs.get("feature_group_count", "1")),
                              "backward-input convolution (reversed filter)")
        m = match_backward_filter(conv)
        if m is not None:
            window, dims, lhs = m
            return self._emit(original, CONV_BACKWARD_FILTER, lhs, conv.operands[1], window, dims,
                              batch_groups(conv), "backward-filter convolution (kernel spatial "
                              "sizes exceed the output's)")
        why = forward_problem(conv)
        if why:
            self.remark(conv, f"cuDNN cannot run it as a forward convolution: {why}", "missed",
                        derived_from=[conv])
            return False
        if batch_groups(conv) > 1:
            conv = batch_grouped_to_feature_grouped(conv)
        dl = parse_dim_labels(conv.attrs["dim_labels"])
        window = list(parse_window(conv.attrs["window"])) if "window" in conv.attrs else []
        return self._emit(original, CONV_FORWARD, conv.operands[0], conv.operands[1], window, dl,
                          int(conv.attrs.get("feature_group_count", "1")), "forward convolution",
                          source=conv)

    def _emit(self, conv: Instruction, target: str, lhs: Instruction, rhs: Instruction, window,
              dims, groups: int, what: str, source: Instruction | None = None) -> bool:
        """``CreateGpuConv`` + replace ``conv`` by element 0 of the call."""
        source = source or conv
        comp = conv.parent
        attrs = {}
        if window:
            attrs["window"] = format_window(window)
        attrs["dim_labels"] = format_conv_dims(dims, conv.shape.rank)
        if groups != 1:
            attrs["feature_group_count"] = str(groups)
        attrs["custom_call_target"] = quote(target)
        for key in ("operand_precision", "metadata"):
            if key in conv.attrs:
                attrs[key] = conv.attrs[key]
        call = Instruction("custom-call", Shape.tuple([conv.shape, Shape.array("u8", [0])]),
                           [lhs, rhs], "", attrs)
        call.set_backend_config(default_conv_backend_config())
        add_instruction(comp, call, None)
        _set_unique_name(call, CONV_NAMES[target])
        gte = Instruction("get-tuple-element", conv.shape, [call], "", {"index": "0"})
        add_instruction(comp, gte)
        self.remark(call, f"convolution {conv.name} -> {target} ({call.name}): {what}",
                    derived_from=[conv], rule=CONV_NAMES[target])
        if source is not conv:  # the feature-grouped rewrite, now read by the call
            source.drop_all_operands()
            comp.remove_instruction(source)
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
