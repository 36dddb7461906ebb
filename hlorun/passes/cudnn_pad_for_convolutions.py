"""cudnn_pad_for_convolutions: XLA:GPU's CudnnPadForConvolutions
(xla/backends/gpu/transforms/cudnn_pad_for_convolutions.cc), its tensor-core
part (Volta and newer).

An f16 cuDNN convolution call (forward, backward input or backward filter;
not grouped; not a fused bias-activation call, which XLA leaves alone) gets
its feature dimensions padded with zeros so tensor cores can run it:

* 3 input features and 32 or 64 output features: the input features (and
  the filter's) to 4 (cuDNN has a special kernel);
* otherwise input and output features (and both filter feature
  dimensions) up to multiples of 8 -- unless that makes the lhs, the rhs or
  the result more than 1.35x larger in bytes.

Padding goes at the end of each dimension (``pad`` ops on the operands); a
padded result is sliced back to the original shape.  Users of the call's
elements read the new ones.

Not modelled (stated): the integer (s8) convolution padding to multiples of
4 / 32, which needs cuDNN's support table for vectorized integer
convolutions.

Postcondition: no f16 plain convolution call whose features could be padded
to tensor-core multiples within the size bound is left unpadded.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.attrs import parse_dim_labels
from ..ir.module import Instruction, Module
from ..ir.shape import Shape, byte_width
from .base import Pass
from .conv_padding_legalization import call_elements, make_pad, make_slice, rewire_elements
from .conv_rewriter import CONV_BIAS_ACTIVATION, CONV_TARGETS, conv_roles
from .dfs_rewrite import add_instruction, nonfusion_computations

#: padding may grow lhs, rhs and result by at most this factor (bytes)
MAX_BYTES_TOUCHED_BOUND = 1.35


def _round_up(n: int, m: int) -> int:
    return (n + m - 1) // m * m


def _bytes(dims, t: str) -> int:
    n = 1
    for d in dims:
        n *= d
    return n * byte_width(t)


def padded_shapes(conv: Instruction) -> tuple[list[int], list[int], list[int]] | None:
    """``TryResolvePaddedShapesForTensorCore``: the (lhs, rhs, result)
    dimensions after padding, or None."""
    result = conv.shape.tuple_shapes[0]
    if result.element_type != "f16":
        return None
    if int(conv.attrs.get("feature_group_count", "1")) > 1 \
            or int(conv.attrs.get("batch_group_count", "1")) > 1:
        return None
    if conv.custom_call_target == CONV_BIAS_ACTIVATION:
        return None
    d = parse_dim_labels(conv.attrs["dim_labels"])
    lhs, rhs, res = (list(conv.operands[0].shape.dimensions), list(conv.operands[1].shape.dimensions),
                     list(result.dimensions))
    inp, filt, out = conv_roles(conv.custom_call_target, lhs, rhs, res)
    if inp[d.input_feature] == 3 and out[d.output_feature] in (32, 64):
        inp[d.input_feature] = 4
        filt[d.kernel_input_feature] = 4
    else:
        inp[d.input_feature] = _round_up(inp[d.input_feature], 8)
        filt[d.kernel_input_feature] = _round_up(filt[d.kernel_input_feature], 8)
        filt[d.kernel_output_feature] = _round_up(filt[d.kernel_output_feature], 8)
        out[d.output_feature] = _round_up(out[d.output_feature], 8)
        for old, new in ((conv.operands[0].shape, lhs), (conv.operands[1].shape, rhs),
                         (result, res)):
            if _bytes(new, "f16") > _bytes(old.dimensions, "f16") * MAX_BYTES_TOUCHED_BOUND:
                return None
    if lhs == list(conv.operands[0].shape.dimensions) and rhs == list(conv.operands[1].shape.dimensions):
        return None
    return lhs, rhs, res


@dataclass(frozen=True)
class CudnnPadForConvolutions(Pass):
    """Pad f16 cuDNN convolution features to tensor-core multiples."""

    name = "cudnn_pad_for_convolutions"

    def run(self, module: Module) -> bool:
        if not self.target.is_cuda or self.target.cc_version < (7, 0):
            return False
        changed = False
        for comp in nonfusion_computations(module):
            for conv in [i for i in comp.instructions if i.opcode == "custom-call"
                         and i.custom_call_target in CONV_TARGETS]:
                got = padded_shapes(conv)
                if got is not None:
                    self._pad(conv, *got)
                    changed = True
        return changed

    def _pad(self, conv: Instruction, lhs, rhs, res) -> None:
        operands = []
        for op, dims in zip(conv.operands[:2], (lhs, rhs)):
            config = [(0, new - old, 0) for old, new in zip(op.shape.dimensions, dims)]
            operands.append(make_pad(op, config) if any(c[1] for c in config) else op)
        result = conv.shape.tuple_shapes[0]
        shape = Shape.tuple([Shape.array(result.element_type, res, result.layout),
                             conv.shape.tuple_shapes[1]])
        new = add_instruction(conv.parent, Instruction(
            "custom-call", shape, operands + list(conv.operands[2:]), conv.name, dict(conv.attrs)))
        self.remark(new, f"{conv.name}: f16 features padded for tensor cores "
                         f"(lhs {list(conv.operands[0].shape.dimensions)} -> {lhs}, result "
                         f"{list(result.dimensions)} -> {res})", derived_from=[conv])
        elements = call_elements(new)
        if res != list(result.dimensions):
            elements[0] = make_slice(elements[0], [0] * len(res), list(result.dimensions))
        rewire_elements(conv, elements)
