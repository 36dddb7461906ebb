"""Which cuDNN convolution a ``convolution`` is: XLA:GPU ConvRewriter's
pattern matchers (xla/backends/gpu/transforms/conv_rewriter.cc), written
from their documented rules.

Autodiff writes the two gradients of a convolution as forward-looking
convolutions; cuDNN has a kernel for each, and XLA recognises them:

* :func:`match_backward_input` -- the gradient w.r.t. the activations is
  ``convolution(grad, reverse(filter))`` (kernel spatial dimensions
  reversed; or a 1x1 / constant filter with base dilation, or a conv1d
  ``reshape(reverse(filter))``) with stride 1 and no window dilation.  The
  cuDNN call reads ``filter`` itself (one reverse is subsumed), strides by
  the forward base dilation, pads ``kernel_size - 1 - padding_low`` low and
  the high padding closest to it that gives the same result; kernel input
  and output features swap, and the "input" of the dimension numbers is the
  result, the "output" the gradient operand.
* :func:`match_backward_filter` -- the gradient w.r.t. the filter is
  ``convolution(activations, grad)`` whose "kernel" spatial sizes exceed the
  output's (XLA's heuristic: a forward convolution has small kernels), no
  feature groups, stride 1, no base dilation, no reversal.  The window is
  the result's spatial size, strided by the forward window dilation, padded
  low as the activations; activations batch and feature swap, the result is
  the filter and the gradient operand the "output".

Both return ``(window, dim numbers, operand)`` or ``None``;
:func:`batch_grouped_to_feature_grouped` is XLA's rewrite of a
batch-grouped forward convolution.
"""

from __future__ import annotations

from ..ir.attrs import ConvDims, WindowDim, format_int_list, parse_dim_labels, parse_window
from ..ir.module import Instruction
from ..ir.shape import Shape, merely_inserts_or_deletes_unit_dims


def conv_window(conv: Instruction) -> list[WindowDim]:
    return [WindowDim(d.size, d.stride, d.padding_low, d.padding_high, d.window_dilation,
                      d.base_dilation, d.window_reversal)
            for d in (parse_window(conv.attrs["window"]) if "window" in conv.attrs else ())]


def format_conv_dims(d: ConvDims, rank: int) -> str:
    """``ConvolutionDimensionNumbersToString`` (``b01f_01io->b01f``)."""
    def one(first: int, second: int, spatial, letters: str) -> str:
        chars = ["?"] * rank
        chars[first], chars[second] = letters[0], letters[1]
        for i, dim in enumerate(spatial):
            chars[dim] = str(i)
        return "".join(chars)
    return (one(d.input_batch, d.input_feature, d.input_spatial, "bf") + "_"
            + one(d.kernel_input_feature, d.kernel_output_feature, d.kernel_spatial, "io") + "->"
            + one(d.output_batch, d.output_feature, d.output_spatial, "bf"))


def make_conv_dims(input_batch: int, input_feature: int, input_spatial, kernel_input_feature: int,
                   kernel_output_feature: int, kernel_spatial, output_batch: int,
                   output_feature: int, output_spatial) -> ConvDims:
    d = ConvDims()
    d.input_batch, d.input_feature, d.input_spatial = input_batch, input_feature, list(input_spatial)
    d.kernel_input_feature, d.kernel_output_feature = kernel_input_feature, kernel_output_feature
    d.kernel_spatial = list(kernel_spatial)
    d.output_batch, d.output_feature, d.output_spatial = output_batch, output_feature, list(output_spatial)
    d.text = ""
    return d


def feature_groups(conv: Instruction) -> int:
    return int(conv.attrs.get("feature_group_count", "1"))


def batch_groups(conv: Instruction) -> int:
    return int(conv.attrs.get("batch_group_count", "1"))


def looks_like_forward(conv: Instruction) -> bool:
    """``LooksLikeForwardConvolution``: batch and output-feature counts match
    (a backward-filter convolution swaps them) and no kernel spatial size
    exceeds the output's."""
    dl = parse_dim_labels(conv.attrs["dim_labels"])
    lhs, rhs, out = conv.operands[0].shape, conv.operands[1].shape, conv.shape
    if lhs.dimensions[dl.input_batch] != out.dimensions[dl.output_batch]:
        return False
    if rhs.dimensions[dl.kernel_output_feature] != out.dimensions[dl.output_feature]:
        return False
    return all(rhs.dimensions[k] <= out.dimensions[o]
               for k, o in zip(dl.kernel_spatial, dl.output_spatial))


def maybe_conv1d_as_conv2d(conv: Instruction) -> bool:
    """``MaybeConv1dToConv2d``: a 2D convolution whose filter is a reshape
    inserting one unit dimension, a kernel spatial one."""
    window = conv_window(conv)
    filt = conv.operands[1]
    if len(window) != 2 or filt.opcode != "reshape":
        return False
    got = merely_inserts_or_deletes_unit_dims(filt.operands[0].shape, filt.shape)
    if got is None or got[0] or len(got[1]) != 1:
        return False
    return got[1][0] in parse_dim_labels(conv.attrs["dim_labels"]).kernel_spatial


def _high_padding(low: int, min_high: int, stride: int) -> int:
    """cuDNN pads evenly: ``low`` if it lies in [min_high, min_high+stride-1],
    else the nearest end of that range."""
    max_high = min_high + stride - 1
    if min_high <= low <= max_high:
        return low
    return min_high if low < min_high else max_high


def match_backward_filter(conv: Instruction):
    """``MatchBackwardFilter``: (window, dims, lhs) or None."""
    if feature_groups(conv) > 1:
        return None
    if looks_like_forward(conv):
        return None
    d = parse_dim_labels(conv.attrs["dim_labels"])
    window = conv_window(conv)
    for w in window:
        if w.stride != 1 or w.base_dilation != 1 or w.padding_low < 0 or w.window_reversal:
            return None
    rhs, out = conv.operands[1].shape, conv.shape
    small = sum(1 for k, o in zip(d.kernel_spatial, d.output_spatial)
                if rhs.dimensions[k] <= out.dimensions[o])
    dilated = any(w.window_dilation != 1 for w in window)
    if (not d.kernel_spatial or small > 1 or (small == 1 and not maybe_conv1d_as_conv2d(conv))) \
            and not dilated:
        return None
    new_window = []
    lhs = conv.operands[0].shape
    for i, w in enumerate(window):
        size = out.dimensions[d.output_spatial[i]]
        nw = WindowDim(size=size, stride=w.window_dilation, padding_low=w.padding_low)
        padded = size + (w.size - 1) * nw.stride
        min_high = padded - lhs.dimensions[d.input_spatial[i]] - nw.padding_low
        nw.padding_high = _high_padding(nw.padding_low, min_high, nw.stride)
        if nw.padding_high < 0:
            return None
        new_window.append(nw)
    dims = make_conv_dims(d.input_feature, d.input_batch, d.input_spatial,
                          d.output_batch, d.output_feature, d.output_spatial,
                          d.kernel_input_feature, d.kernel_output_feature, d.kernel_spatial)
    return new_window, dims, conv.operands[0]


def match_backward_input(conv: Instruction):
    """``MatchBackwardInput``: (window, dims, rhs) or None.  ``rhs`` may be a
    new instruction (double reverse of a constant, conv1d reshape); it is
    only created on a match."""
    if feature_groups(conv) > 1:
        return None
    d = parse_dim_labels(conv.attrs["dim_labels"])
    window = conv_window(conv)
    filt = conv.operands[1]
    reversed_filter = filt.opcode == "reverse" and sorted(filt.dimensions) == sorted(d.kernel_spatial)
    reversed_conv1d = maybe_conv1d_as_conv2d(conv) and filt.operands[0].opcode == "reverse"
    one_by_one = all(w.size == 1 for w in window)
    base_dilated = any(w.base_dilation != 1 for w in window)
    if not reversed_filter and not reversed_conv1d \
            and not (base_dilated and (filt.opcode == "constant" or one_by_one)):
        return None
    if any(w.stride != 1 or w.window_dilation != 1 or w.window_reversal for w in window):
        return None
    new_window = []
    for i, w in enumerate(window):
        nw = WindowDim(size=w.size, stride=w.base_dilation, window_dilation=w.window_dilation)
        nw.padding_low = w.size - 1 - w.padding_low
        if nw.padding_low < 0:
            return None
        unpadded = conv.shape.dimensions[d.output_spatial[i]]
        out_size = conv.operands[0].shape.dimensions[d.input_spatial[i]]
        padded = w.size + nw.stride * (out_size - 1)
        nw.padding_high = _high_padding(nw.padding_low, padded - unpadded - nw.padding_low, nw.stride)
        if nw.padding_high < 0:
            return None
        new_window.append(nw)
    dims = make_conv_dims(d.output_batch, d.output_feature, d.output_spatial,
                          d.kernel_output_feature, d.kernel_input_feature, d.kernel_spatial,
                          d.input_batch, d.input_feature, d.input_spatial)
    from .dfs_rewrite import make
    if filt.opcode != "reverse" and filt.opcode == "constant":
        attrs = {"dimensions": format_int_list(d.kernel_spatial)}
        filt = make("reverse", filt.shape, [make("reverse", filt.shape, [filt], attrs)], attrs)
        conv.set_operand(1, filt)
    if filt.opcode == "reverse":
        rhs = filt.operands[0]
    elif reversed_conv1d:
        rhs = make("reshape", filt.shape, [filt.operands[0].operands[0]])
    else:
        rhs = filt
    return new_window, dims, rhs


def batch_grouped_to_feature_grouped(conv: Instruction) -> Instruction:
    """``ConvertBatchGroupedToFeatureGroupedConvolution``: batch ``N`` split
    into ``[G, N/G]``, ``G`` moved before the features and merged into them;
    the convolution then has ``G`` feature groups."""
    from .dfs_rewrite import make
    d = parse_dim_labels(conv.attrs["dim_labels"])
    groups = batch_groups(conv)
    lhs, rhs = conv.operands
    b, f = d.input_batch, d.input_feature
    t = lhs.shape.element_type
    dims = list(lhs.shape.dimensions)
    dims[b] //= groups
    dims.insert(b, groups)
    lhs = make("reshape", Shape.array(t, dims), [lhs])
    perm = list(range(len(dims)))
    del perm[b]
    perm.insert(f, b)
    tdims = [dims[p] for p in perm]
    lhs = make("transpose", Shape.array(t, tdims), [lhs], {"dimensions": format_int_list(perm)})
    merged = list(tdims)
    del merged[f]
    merged[f] = conv.operands[0].shape.dimensions[f] * groups
    lhs = make("reshape", Shape.array(t, merged), [lhs])
    attrs = dict(conv.attrs)
    attrs.pop("batch_group_count", None)
    attrs["feature_group_count"] = str(groups)
    return make("convolution", conv.shape, [lhs, rhs], attrs)
