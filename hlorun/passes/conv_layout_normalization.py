"""Layout normalization of cuDNN convolution calls (XLA:GPU's
NormalizeLayoutForGpuCustomCalls, xla/service/gpu/conv_layout_normalization.cc),
the custom-call hook of :mod:`.layout_normalization`.

A convolution call whose operands or result have non-descending layouts
(NHWC data, OHWI filters chosen by layout assignment) becomes the same call
on the operands' descending-layout forms, with a descending-layout tuple
result; every dimension number is renumbered to the physical order of its
shape (``dim_labels=bf01_oi01->bf01`` on ``{1,3,2,0}`` layouts becomes
``b01f_o01i->b01f``).  Which shape holds the input, filter and output
dimensions depends on the call (forward: lhs, rhs, result; backward input:
result, rhs, lhs; backward filter: lhs, result, rhs).  Users of the old
call's elements read bitcasts of the new call's elements.  Window, feature
groups, precision, metadata and backend config are kept; the name is the
old one, uniquified (XLA's SetAndUniquifyInstrName).
"""

from __future__ import annotations

from ..ir.attrs import parse_dim_labels
from ..ir.module import Instruction
from ..ir.shape import Shape, make_shape_with_descending_layout_and_same_physical_layout as normalize
from .conv_matching import format_conv_dims, make_conv_dims
from .conv_rewriter import CONV_TARGETS, conv_roles


def is_dnn_convolution(instr: Instruction) -> bool:
    return instr.opcode == "custom-call" and instr.custom_call_target in CONV_TARGETS


def _physical(dim: int, shape: Shape) -> int:
    """Where logical dimension ``dim`` sits in the descending-layout form."""
    return shape.rank - 1 - list(shape.minor_to_major).index(dim)


def normalized_dim_labels(hlo: Instruction) -> str:
    d = parse_dim_labels(hlo.attrs["dim_labels"])
    lhs, rhs = hlo.operands[0].shape, hlo.operands[1].shape
    out = hlo.shape.tuple_shapes[0] if hlo.shape.is_tuple else hlo.shape
    target = hlo.custom_call_target
    inp, filt, res = conv_roles(target, lhs, rhs, out)
    new = make_conv_dims(
        _physical(d.input_batch, inp), _physical(d.input_feature, inp),
        [_physical(x, inp) for x in d.input_spatial],
        _physical(d.kernel_input_feature, filt), _physical(d.kernel_output_feature, filt),
        [_physical(x, filt) for x in d.kernel_spatial],
        _physical(d.output_batch, res), _physical(d.output_feature, res),
        [_physical(x, res) for x in d.output_spatial])
    return format_conv_dims(new, out.rank)


def normalize_conv(visitor, hlo: Instruction) -> bool:
    """Rewrite ``hlo`` on descending layouts; False if nothing changes."""
    shape = hlo.shape
    new_shape = Shape.tuple(normalize(s) for s in shape.tuple_shapes) if shape.is_tuple \
        else normalize(shape)
    labels = normalized_dim_labels(hlo)
    operands = []
    for op in hlo.operands:
        target = normalize(op.shape)
        if op.shape == target:
            operands.append(op)
        elif op.opcode == "bitcast" and op.operands[0].shape == target:
            operands.append(op.operands[0])
        else:
            operands.append(visitor.new("bitcast", target, [op]))
    if new_shape == shape and labels == hlo.attrs["dim_labels"] \
            and all(a is b for a, b in zip(operands, hlo.operands)):
        return False
    attrs = dict(hlo.attrs)
    attrs["dim_labels"] = labels
    comp = hlo.parent
    conv = Instruction("custom-call", new_shape, operands, "", attrs)
    comp.add_instruction(conv, comp.module.unique_name(hlo.name))
    visitor.set_visited(conv)
    if not shape.is_tuple:
        visitor.replace(hlo, visitor.maybe_bitcast(conv, shape), "cuDNN convolution on descending "
                        f"layouts (dim_labels={labels})")
        return True
    elements = {}
    for user in list(hlo.users):
        if user.opcode != "get-tuple-element":
            continue
        i = user.tuple_index
        if i not in elements:
            gte = visitor.new("get-tuple-element", new_shape.tuple_shapes[i], [conv],
                              {"index": str(i)})
            elements[i] = visitor.maybe_bitcast(gte, shape.tuple_shapes[i])
            visitor.set_visited(elements[i])
        user.replace_all_uses_with(elements[i])
        comp.remove_instruction(user)
    if hlo.users or hlo is comp.root:  # the tuple itself is used: rebuild it
        parts = []
        for i, s in enumerate(shape.tuple_shapes):
            if i not in elements:
                gte = visitor.new("get-tuple-element", new_shape.tuple_shapes[i], [conv],
                                  {"index": str(i)})
                elements[i] = visitor.maybe_bitcast(gte, s)
            parts.append(elements[i])
        tup = visitor.new("tuple", shape, parts)
        visitor.replace(hlo, tup, f"cuDNN convolution on descending layouts (dim_labels={labels})")
        return True
    visitor.owner.remark(conv, f"{hlo.name} on descending layouts (dim_labels={labels})",
                         derived_from=[hlo])
    comp.remove_instruction(hlo)
    visitor.mark_changed()
    return True
