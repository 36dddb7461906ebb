"""What the verifier's rule modules share: the error a rule raises,
XLA's ``ShapeVerifier::ShapesSame`` and ``ShapeVerifier::CheckShape``
(the declared shape against the inferred one)."""

from __future__ import annotations

from typing import Any

from ..ir.shape import Layout, Shape
from ..ir.shape_inference.common import compatible, compatible_ignoring_fp, is_float


class VerifyError(Exception):
    """A verifier rule failed (the message follows XLA's wording)."""


def shapes_same(a: Shape, b: Shape, opts: Any, minor_to_major_only: bool = False) -> bool:
    """``ShapeVerifier::ShapesSame``: compatible, or equal including layouts
    when the verifier is layout-sensitive."""
    if not opts.layout_sensitive:
        return compatible(a, b)
    return equal_with_layout(a, b, minor_to_major_only)


def equal_with_layout(a: Shape, b: Shape, minor_to_major_only: bool = False,
                      ignore_tiles_and_memory_space: bool = False,
                      ignore_memory_space: bool = False) -> bool:
    """``Shape::Equal`` (optionally ``MinorToMajorOnlyInLayout``, or
    ignoring tiles and/or memory spaces)."""
    if a.is_tuple or b.is_tuple:
        return (a.is_tuple and b.is_tuple and len(a.tuple_shapes) == len(b.tuple_shapes)
                and all(equal_with_layout(x, y, minor_to_major_only,
                                          ignore_tiles_and_memory_space, ignore_memory_space)
                        for x, y in zip(a.tuple_shapes, b.tuple_shapes)))
    if not compatible(a, b) or a.dynamic != b.dynamic:
        return False
    if a.layout is None or b.layout is None or not a.is_array:
        return True
    if minor_to_major_only:
        return a.layout.minor_to_major == b.layout.minor_to_major
    return layouts_equal(a.layout, b.layout, ignore_tiles=ignore_tiles_and_memory_space,
                         ignore_memory_space=ignore_tiles_and_memory_space or ignore_memory_space)


def layouts_equal(a: Layout, b: Layout, ignore_tiles: bool = False,
                  ignore_memory_space: bool = False, ignore_element_size: bool = False) -> bool:
    """``Layout::Equal`` with its Ignore... options."""
    if a == b:
        return True
    return (a.minor_to_major == b.minor_to_major
            and (ignore_tiles or a.tiles == b.tiles)
            and (ignore_memory_space or a.memory_space == b.memory_space)
            and (ignore_element_size or a.element_size_in_bits == b.element_size_in_bits)
            and a.tail_padding_alignment == b.tail_padding_alignment
            and a.index_type == b.index_type and a.pointer_type == b.pointer_type
            and a.split_configs == b.split_configs
            and str(a.physical_shape) == str(b.physical_shape)
            and a.dynamic_metadata_prefix_bytes == b.dynamic_metadata_prefix_bytes)


#: Opcodes whose result is checked exactly (no f32<->bf16 leeway, layouts
#: compared when layout-sensitive): they reinterpret or move data.
_EXACT = frozenset({
    "bitcast", "call", "conditional", "constant", "copy-done", "copy-start", "custom-call",
    "get-tuple-element", "infeed", "outfeed", "opt-barrier", "parameter", "recv", "recv-done",
    "send", "send-done", "tuple", "while"})

#: Opcodes exempt from the mixed-precision check (data pass-through, tuples).
_MIXED_OK = frozenset({
    "call", "conditional", "constant", "convolution", "dot", "ragged-dot", "scaled-dot",
    "all-reduce", "all-reduce-start", "all-reduce-done", "all-gather", "all-gather-start",
    "all-gather-done", "async-done", "async-update", "async-start", "collective-permute",
    "collective-permute-start", "collective-permute-done", "copy-done", "copy-start",
    "custom-call", "domain", "fusion", "get-tuple-element", "opt-barrier", "infeed", "outfeed",
    "parameter", "recv", "recv-done", "reduce-precision", "reduce-window", "send", "send-done",
    "sort", "tuple", "while"})


def _fp_types(shape: Shape, out: set[str]) -> None:
    for _, leaf in shape.leaves():
        if leaf.is_array and is_float(leaf.element_type):
            out.add(leaf.element_type)


def check_result(instr: Instruction, inferred: Shape, opts: Any,
                 minor_to_major_only: bool = False, in_fusion: bool = False) -> None:
    """``ShapeVerifier::CheckShape``: the declared shape against the inferred."""
    op = instr.opcode
    if not opts.allow_mixed_precision and op not in _MIXED_OK:
        types: set[str] = set()
        for o in instr.operands:
            _fp_types(o.shape, types)
        if len(types) > 1:
            raise VerifyError("Seen floating point types of different precisions in "
                              f"{op}, but mixed precision is disallowed.")
    declared = instr.shape
    if op in _EXACT:
        ok = shapes_same(declared, inferred, opts, minor_to_major_only)
    elif op == "dynamic-update-slice":
        ok = shapes_same(declared, inferred, opts, minor_to_major_only)
        if not ok and opts.layout_sensitive and in_fusion:
            # Memory spaces and tiles need not propagate into fusions.
            ok = equal_with_layout(declared, inferred, minor_to_major_only,
                                   ignore_tiles_and_memory_space=True)
    elif op == "copy" and opts.layout_sensitive and _host_copy(declared, inferred):
        ok = _host_copy_ok(declared, inferred)
    elif opts.allow_mixed_precision:
        ok = compatible_ignoring_fp(declared, inferred)
    else:
        ok = compatible(declared, inferred)
    if not ok:
        layout = opts.layout_sensitive
        raise VerifyError(f"Expected instruction to have shape equal to "
                          f"{inferred.to_string(layout)}, actual shape is "
                          f"{declared.to_string(layout)}")


HOST_MEMORY_SPACE = 5  # Layout::kHostMemorySpace


def _host_copy(declared: Shape, inferred: Shape) -> bool:
    """A copy between host and device memory (layouts assigned)."""
    if not declared.is_array or declared.layout is None or inferred.layout is None:
        return False
    a, b = declared.layout.memory_space, inferred.layout.memory_space
    return a != b and HOST_MEMORY_SPACE in (a, b)


def _host_copy_ok(declared: Shape, inferred: Shape) -> bool:
    """Host offloading copies may not change the type; host<->device copies
    may not transpose either (a host->host copy before memory-space
    propagation may)."""
    if declared.layout.memory_space == HOST_MEMORY_SPACE:
        return declared.element_type == inferred.element_type
    return equal_with_layout(declared, inferred, ignore_tiles_and_memory_space=False,
                             ignore_memory_space=True)

