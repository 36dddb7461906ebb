"""conv-padding-legalization: XLA:GPU's ConvPaddingLegalization
(xla/backends/gpu/transforms/conv_padding_legalization.cc) on cuDNN
convolution calls.

cuDNN pads evenly and knows neither negative padding nor base (lhs)
dilation, so a call that needs them is rewritten around explicit ops:

* forward (``__cudnn$convForward`` / ``...BiasActivationForward``) not in
  canonical form (symmetric, non-negative padding, no base dilation): the
  positive padding and the base dilation of an uneven or dilated window move
  into a ``pad`` of the input (edge and interior padding, zero), negative
  padding into a ``slice``; a window dilation (then) becomes interior
  padding of the filter (``pad``), the window size the padded filter's;
* backward filter with uneven, non-negative padding: the input is padded by
  the excess over ``min(low, high)``, which the call keeps on both sides;
* backward input with uneven, non-negative padding: the larger side is cut
  to the smaller one, the call computes a result larger by the difference,
  and a ``slice`` crops the extra boundary elements.

The stride-2 SAME convolutions of a CNN on even sizes (padding ``0_1``) are
the common case.  Users of the call's elements read the new ones.

Postcondition: every cuDNN convolution call has symmetric, non-negative
padding and no base dilation (backward calls with negative padding are left
alone, as XLA leaves them).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.attrs import format_padding, format_slice, format_window, parse_dim_labels
from ..ir.build import make_constant
from ..ir.module import Instruction, Module
from ..ir.shape import Shape
from .base import Pass
from .conv_matching import conv_window
from .conv_rewriter import CONV_BACKWARD_FILTER, CONV_BACKWARD_INPUT, CONV_TARGETS
from .dfs_rewrite import add_instruction, make, nonfusion_computations


def symmetric(window) -> bool:
    return all(w.padding_low == w.padding_high for w in window)


def negative(window) -> bool:
    return any(w.padding_low < 0 or w.padding_high < 0 for w in window)


def make_pad(operand: Instruction, config) -> Instruction:
    zero = make_constant(operand.parent, operand.shape.element_type, 0)
    dims = [d + lo + hi + max(d - 1, 0) * it for d, (lo, hi, it) in zip(operand.shape.dimensions, config)]
    return make("pad", Shape.array(operand.shape.element_type, dims), [operand, zero],
                {"padding": format_padding(config)}, metadata_from=operand)


def make_slice(operand: Instruction, starts, limits) -> Instruction:
    dims = [hi - lo for lo, hi in zip(starts, limits)]
    return make("slice", Shape.array(operand.shape.element_type, dims), [operand],
                {"slice": format_slice([(lo, hi, 1) for lo, hi in zip(starts, limits)])})

def rewire_elements(conv: Instruction, elements: list[Instruction]) -> None:
    """Users of ``conv``'s tuple elements read ``elements``; ``conv`` goes."""
    comp = conv.parent
    for user in list(conv.users):
        if user.opcode == "get-tuple-element":
            user.replace_all_uses_with(elements[user.tuple_index])
            comp.remove_instruction(user)
    if conv.users or comp.root is conv:
        tup = add_instruction(comp, Instruction("tuple", conv.shape, elements, "", {}))
        conv.replace_all_uses_with(tup)
    comp.remove_instruction(conv)


def call_elements(call: Instruction) -> list[Instruction]:
    """get-tuple-element of every element of ``call``."""
    comp = call.parent
    return [add_instruction(comp, Instruction("get-tuple-element", s, [call], "",
                                              {"index": str(i)}))
            for i, s in enumerate(call.shape.tuple_shapes)]


@dataclass(frozen=True)
class ConvPaddingLegalization(Pass):
    """Move padding cuDNN cannot take into explicit pad / slice ops."""

    name = "conv-padding-legalization"

    def run(self, module: Module) -> bool:
        changed = False
        for comp in nonfusion_computations(module):
            for conv in [i for i in comp.instructions if i.opcode == "custom-call"
                         and i.custom_call_target in CONV_TARGETS]:
                target = conv.custom_call_target
                if target == CONV_BACKWARD_FILTER:
                    changed |= self._backward_filter(conv)
                elif target == CONV_BACKWARD_INPUT:
                    changed |= self._backward_input(conv)
                else:
                    changed |= self._forward(conv)
        return changed

    # -- helpers ---------------------------------------------------------------------
    def _replace_call(self, conv: Instruction, operands, window, shape: Shape | None = None,
                      what: str = "") -> Instruction:
        attrs = dict(conv.attrs)
        attrs["window"] = format_window(window)
        new = add_instruction(conv.parent, Instruction(
            "custom-call", shape or conv.shape, list(operands), conv.name, attrs))
        self.remark(new, f"{conv.name}: {what}", derived_from=[conv])
        return new

    # -- the three kinds ----------------------------------------------------------------
    def _forward(self, conv: Instruction) -> bool:
        window = conv_window(conv)
        dilated_base = any(w.base_dilation != 1 for w in window)
        if symmetric(window) and not negative(window) and not dilated_base:
            return False
        d = parse_dim_labels(conv.attrs["dim_labels"])
        inp, kernel = conv.operands[0], conv.operands[1]
        if not symmetric(window) or dilated_base:
            config = [(0, 0, 0)] * inp.shape.rank
            for i, w in enumerate(window):
                lo, hi = max(w.padding_low, 0), max(w.padding_high, 0)
                config[d.input_spatial[i]] = (lo, hi, w.base_dilation - 1)
                w.padding_low = w.padding_low if w.padding_low < 0 else 0
                w.padding_high = w.padding_high if w.padding_high < 0 else 0
                w.base_dilation = 1
            inp = make_pad(inp, config)
        if negative(window):
            starts = [0] * inp.shape.rank
            limits = list(inp.shape.dimensions)
            for i, w in enumerate(window):
                if w.padding_low < 0:
                    starts[d.input_spatial[i]] -= w.padding_low
                    w.padding_low = 0
                if w.padding_high < 0:
                    limits[d.input_spatial[i]] += w.padding_high
                    w.padding_high = 0
            inp = make_slice(inp, starts, limits)
        if any(w.window_dilation != 1 for w in window):
            config = [(0, 0, 0)] * kernel.shape.rank
            for i, w in enumerate(window):
                config[d.kernel_spatial[i]] = (0, 0, w.window_dilation - 1)
            kernel = make_pad(kernel, config)
        for i, w in enumerate(window):
            w.size = kernel.shape.dimensions[d.kernel_spatial[i]]
            w.window_dilation = 1
        new = self._replace_call(conv, [inp, kernel] + list(conv.operands[2:]), window,
                                 what="padding cuDNN cannot take moved into pad/slice of its "
                                      "operands")
        conv.replace_all_uses_with(new)
        conv.parent.remove_instruction(conv)
        return True

    def _backward_filter(self, conv: Instruction) -> bool:
        window = conv_window(conv)
        if symmetric(window) or negative(window):
            return False
        d = parse_dim_labels(conv.attrs["dim_labels"])
        inp = conv.operands[0]
        config = [(0, 0, 0)] * inp.shape.rank
        for i, w in enumerate(window):
            keep = min(w.padding_low, w.padding_high)
            config[d.input_spatial[i]] = (w.padding_low - keep, w.padding_high - keep, 0)
            w.padding_low = w.padding_high = keep
        padded = make_pad(inp, config)
        new = self._replace_call(conv, [padded, conv.operands[1]], window,
                                 what="uneven padding of the activations moved into a pad")
        conv.replace_all_uses_with(new)
        conv.parent.remove_instruction(conv)
        return True

    def _backward_input(self, conv: Instruction) -> bool:
        window = conv_window(conv)
        if symmetric(window) or negative(window):
            return False
        d = parse_dim_labels(conv.attrs["dim_labels"])
        result = conv.shape.tuple_shapes[0]
        dims = list(result.dimensions)
        starts, limits = [0] * result.rank, list(result.dimensions)
        for i, w in enumerate(window):
            lo, hi = w.padding_low, w.padding_high
            dim = d.input_spatial[i]
            dims[dim] += abs(lo - hi)
            if lo > hi:
                w.padding_low = hi
                starts[dim] += lo - hi
            elif lo < hi:
                w.padding_high = lo
            limits[dim] = starts[dim] + result.dimensions[dim]
        shape = Shape.tuple([Shape.array(result.element_type, dims, result.layout),
                             conv.shape.tuple_shapes[1]])
        new = self._replace_call(conv, list(conv.operands), window, shape,
                                 what="uneven padding evened out; a slice crops the larger result")
        out, scratch = call_elements(new)
        rewire_elements(conv, [make_slice(out, starts, limits), scratch])
        return True
