"""Flops per output element of the non-elementwise ops the cost model
prices (``GpuHloCostAnalysis`` / ``HloCostAnalysis`` handlers): reduce,
reduce-window and concatenate.  Elementwise ops are priced per element by
:mod:`.op_profiles`."""

from __future__ import annotations

import math

from ...ir.module import Instruction
from .op_profiles import DEFAULT_FLOPS_PER_ELEMENT, computation_flops


def _window_elements(rw: Instruction) -> int:
    from ...ir.attrs import parse_window
    n = 1
    for w in parse_window(rw.attrs.get("window", "{}")):
        n *= w.size
    return n



#: ``GpuHloCostAnalysis::HandleConcatenate``: a concatenate is a compare
#: and branch per element; when a warp can straddle two operands (a
#: concatenation along a non-major dimension whose first operand's size
#: there is not a multiple of 32) both branches run, which XLA prices high
#: enough that such a concatenate is not duplicated into compute-bound users
CONCAT_FLOPS, CONCAT_DIVERGENT_FLOPS = 6, 400


def reduce_flops_per_output(reduce: Instruction) -> float:
    """``HloCostAnalysis::HandleReduce``: the reducer's flops per reduced
    element (input elements less output elements), per output element."""
    n_in = math.prod(reduce.operands[0].shape.dimensions)
    shape = reduce.shape.tuple_shapes[0] if reduce.shape.is_tuple else reduce.shape
    n_out = max(1, math.prod(shape.dimensions))
    comp = reduce.to_apply
    per = computation_flops(comp) if comp is not None else DEFAULT_FLOPS_PER_ELEMENT
    return (n_in - n_out) * per / n_out


def reduce_window_flops_per_output(rw: Instruction) -> float:
    """``HloCostAnalysis::HandleReduceWindow``: the reducer's flops times
    ``(window elements - 1) x outputs``, per output element; a window along
    one dimension padded symmetrically by the output size - 1 on each side
    (a whole-dimension window) counts ``outputs / window + window - 1``."""
    from ...ir.attrs import parse_window
    dims = parse_window(rw.attrs.get("window", "{}"))
    shape = rw.shape.tuple_shapes[0] if rw.shape.is_tuple else rw.shape
    n_out = max(1, math.prod(shape.dimensions))
    window = math.prod(d.size for d in dims) if dims else 1
    count = (window - 1) * n_out
    if sum(1 for d in dims if d.size != 1) == 1 and \
            sum(1 for d in dims if d.padding_low or d.padding_high) == 1:
        for i, d in enumerate(dims):
            if d.size != 1 and d.padding_low and d.padding_high and \
                    d.padding_low == d.padding_high and d.size == 2 * d.padding_low + 1:
                if d.padding_low == shape.dimensions[i] - 1:
                    window = shape.dimensions[i]
                    count = n_out // window + window - 1
                break
    comp = rw.to_apply
    per = computation_flops(comp) if comp is not None else DEFAULT_FLOPS_PER_ELEMENT
    return count * per / n_out


def concatenate_flops(concat: Instruction) -> int:
    """Flops per output element of ``concat``."""
    dim = concat.dimensions[0]
    if dim > 0 and concat.operands[0].shape.dimensions[dim] % 32:
        return CONCAT_DIVERGENT_FLOPS
    return CONCAT_FLOPS


__all__ = ["CONCAT_DIVERGENT_FLOPS", "CONCAT_FLOPS", "concatenate_flops",
           "reduce_flops_per_output", "reduce_window_flops_per_output"]
