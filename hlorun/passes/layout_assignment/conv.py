"""GpuLayoutAssignment's cuDNN convolution constraints
(AddBackendConstraintsToDnnConvCustomCall and HeuristicLayoutAssignment in
xla/backends/gpu/transforms/layout_assignment.cc; the layout translation of
StreamExecutorConvLayoutsToXlaLayouts).

A cuDNN convolution call gets one data layout for its input and output and
a filter layout, chosen per call:

* integer convolutions: NHWC (rank-5 s8 2D ones would be NCHW_VECT_C: not
  modelled, left unconstrained with a remark);
* FP8: NHWC;
* CUDA compute capability >= 9.0 (Hopper): NHWC, except f64 (cuDNN has no
  NHWC f64) and more than 2 spatial dimensions: NCHW;
* else f16/bf16 on Volta or newer with a rank-4 result: NHWC; otherwise
  NCHW (ROCm: NCHW, XLA's NHWC needs the TF_USE_ROCM_NHWC environment
  switch, off by default).

NHWC is batch, spatial dimensions, feature major to minor for data and
output-feature, spatial, input-feature for the filter; NCHW puts the
features right after the batch / output feature.  Which operand is the
"input", "filter" and "output" depends on the call: forward -- lhs, rhs,
result; backward input -- result, rhs, lhs; backward filter -- lhs,
result, rhs.  Operands 0 and 1 and result element 0 are constrained
(mandatory); a bias-activation call's side input (operand 3) gets the
output layout.
"""

from __future__ import annotations

from ...ir.attrs import parse_dim_labels
from ...ir.module import Instruction
from ...ir.shape import Layout, is_f8, is_integral
from ..conv_rewriter import conv_roles
from .propagation import Propagation

FORWARD = ("__cudnn$convForward", "__cudnn$convBiasActivationForward")
BACKWARD_INPUT = "__cudnn$convBackwardInput"
BACKWARD_FILTER = "__cudnn$convBackwardFilter"
DNN_CONVOLUTIONS = FORWARD + (BACKWARD_INPUT, BACKWARD_FILTER)

NCHW, NHWC = "NCHW", "NHWC"


def is_dnn_convolution(instr: Instruction) -> bool:
    return instr.opcode == "custom-call" and instr.custom_call_target in DNN_CONVOLUTIONS



def heuristic_layout(conv: Instruction, target) -> str | None:
    """``HeuristicLayoutAssignment``: NCHW or NHWC (None: NCHW_VECT_C)."""
    d = parse_dim_labels(conv.attrs["dim_labels"])
    lhs = conv.operands[0].shape
    t = lhs.element_type
    nsp = len(d.input_spatial)
    if is_integral(t):
        if t == "s8" and nsp == 2 and lhs.rank == 5:
            return None
        return NHWC
    if is_f8(t):
        return NHWC
    if target.is_cuda:
        cc = target.cc_version
        if cc >= (9, 0):
            if t == "f64" or nsp > 2:
                return NCHW
            return NHWC
        result = conv.shape.tuple_shapes[0] if conv.shape.is_tuple else conv.shape
        if t not in ("f16", "bf16") or cc < (7, 0) or result.rank != 4:
            return NCHW
        return NHWC
    return NCHW


def _major_to_minor(order: list[int]) -> Layout:
    return Layout(list(reversed(order)))


def conv_layouts(conv: Instruction, which: str) -> tuple[Layout, Layout, Layout]:
    """(input, filter, output) layouts of ``StreamExecutorConvLayoutsToXlaLayouts``."""
    d = parse_dim_labels(conv.attrs["dim_labels"])
    if which == NHWC:
        data_in = [d.input_batch] + list(d.input_spatial) + [d.input_feature]
        data_out = [d.output_batch] + list(d.output_spatial) + [d.output_feature]
        filt = [d.kernel_output_feature] + list(d.kernel_spatial) + [d.kernel_input_feature]
    else:
        data_in = [d.input_batch, d.input_feature] + list(d.input_spatial)
        data_out = [d.output_batch, d.output_feature] + list(d.output_spatial)
        filt = [d.kernel_output_feature, d.kernel_input_feature] + list(d.kernel_spatial)
    return _major_to_minor(data_in), _major_to_minor(filt), _major_to_minor(data_out)


def add_conv_constraints(prop: Propagation, conv: Instruction, target, remark=None) -> None:
    """``AddBackendConstraintsToDnnConvCustomCall``."""
    which = heuristic_layout(conv, target)
    if which is None:
        if remark is not None:
            remark(conv, "NCHW_VECT_C (rank-5 int8) convolution layouts are not modelled; "
                         "left unconstrained", "missed")
        return
    inp, filt, out = conv_layouts(conv, which)
    lhs, rhs, result = conv_roles(conv.custom_call_target, inp, filt, out)
    prop.set_operand_layout(lhs, conv, 0)
    prop.set_operand_layout(rhs, conv, 1)
    prop.set_element_layout(result, conv, 0)
    if conv.custom_call_target == FORWARD[1] and len(conv.operands) == 4:
        prop.set_operand_layout(out, conv, 3)
    if remark is not None:
        remark(conv, f"cuDNN convolution in {which}: lhs {lhs}, rhs {rhs}, result {result}")
