"""Shape inference: XLA's ``ShapeInference`` rules for HLO instructions.

``infer_shape(opcode, operands, attrs, result_type=None)`` returns the shape
an instruction must have, raises :class:`InferenceError` (a ``ValueError``,
with XLA's message) when its operands and attributes are inconsistent, and
returns ``None`` for opcodes without an inference rule here (custom-call,
fusion, parameter, constant, iota, reshape, bitcast, collectives: their
shapes are given, and the verifier checks them by other rules).
``result_type`` is the element type the instruction declares; XLA takes it
from the instruction for convert, bitcast-convert, stochastic-convert and as
the preferred element type of dot and convolution.

The parser uses it when an instruction omits its shape (only for the
opcodes in :data:`CAN_INFER`, as XLA's parser); the ``hlo-verifier`` checker
compares it with the declared shape.  The rules live in ``elementwise``,
``data``, ``compute``, ``gather_scatter`` and ``control``.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..shape import Shape
from .common import InferenceError, ints, program_shape
from .compute import (infer_batch_norm, infer_cholesky, infer_convolution, infer_dot, infer_fft,
                      infer_reduce, infer_reduce_window, infer_select_and_scatter,
                      infer_triangular_solve, window_output_shape)
from .control import (infer_all_gather, infer_all_reduce, infer_all_to_all,
                      infer_all_to_all_tuple, infer_call, infer_collective_permute,
                      infer_collective_permute_start, infer_conditional, infer_reduce_scatter,
                      infer_while)
from .data import (infer_broadcast_sizes, infer_concatenate, infer_dynamic_slice,
                   infer_dynamic_update_slice, infer_get_dimension_size, infer_get_tuple_element,
                   infer_pad, infer_reverse, infer_set_dimension_size, infer_slice, infer_sort,
                   infer_topk, infer_transpose, infer_tuple)
from .elementwise import (BINARY, UNARY, infer_binary, infer_bitcast_convert, infer_clamp,
                          infer_convert, infer_map, infer_reduce_precision, infer_select,
                          infer_stochastic_convert, infer_unary)
from .gather_scatter import infer_gather, infer_scatter

#: Opcodes whose shape XLA's parser infers when the text omits it
#: (``CanInferShape`` in hlo_parser.cc).
CAN_INFER = frozenset({
    "abs", "acos", "acosh", "asin", "asinh", "add", "add-dependency", "after-all", "atan2",
    "atanh", "batch-norm-grad", "batch-norm-inference", "batch-norm-training", "broadcast",
    "call", "ceil", "cholesky", "clamp", "count-leading-zeros", "compare", "complex",
    "concatenate", "conditional", "convolution", "copy", "cosine", "cosh", "opt-barrier",
    "divide", "domain", "dot", "erf", "exponential", "exponential-minus-one", "fft", "floor",
    "gather", "get-dimension-size", "set-dimension-size", "get-tuple-element", "imag",
    "is-finite", "log", "log-plus-one", "logistic", "and", "not", "or", "xor", "map",
    "maximum", "minimum", "multiply", "mulhi", "negate", "pad", "partition-id", "popcnt",
    "power", "ragged-dot", "real", "reduce", "remainder", "replica-id", "reverse",
    "round-nearest-afz", "round-nearest-even", "rsqrt", "scan", "scaled-dot", "scatter",
    "select", "shift-left", "shift-right-arithmetic", "shift-right-logical", "sign", "sine",
    "sinh", "sqrt", "cbrt", "reduce-window", "select-and-scatter", "sort", "subtract", "tan",
    "tanh", "transpose", "triangular-solve", "tuple", "while", "topk",
})


def _int(attrs: dict[str, Any], key: str, default: int | None = None) -> int:
    v = attrs.get(key)
    if v is None:
        if default is None:
            raise InferenceError(f"attribute {key} is missing")
        return default
    return int(v)


def _window(attrs: dict[str, Any]):
    """The ``window`` attribute; XLA's default is the empty window."""
    from ..attrs import parse_window
    text = attrs.get("window")
    return parse_window(text) if text is not None else ()


def _conv_dims(attrs: dict[str, Any]):
    from ..attrs import parse_dim_labels
    return parse_dim_labels(attrs["dim_labels"])


def _computation(attrs: dict[str, Any], key: str):
    comp = attrs.get(key)
    if comp is None or isinstance(comp, str):
        raise InferenceError(f"attribute {key} is missing")
    return comp


def infer_shape(opcode: str, operands: Sequence[Any], attrs: dict[str, Any],
                result_type: str | None = None) -> Shape | None:
    """The shape ``opcode`` applied to ``operands`` (Instructions) with
    ``attrs`` must have, or None when there is no rule for it."""
    s = [o.shape for o in operands]
    if opcode in UNARY:
        return infer_unary(opcode, s[0])
    if opcode in BINARY:
        return infer_binary(opcode, s[0], s[1])
    rule = _RULES.get(opcode)
    return rule(s, attrs, result_type) if rule is not None else None


def _dot(s, a, t):
    return infer_dot(s[0], s[1], ints(a, "lhs_contracting_dims", ()),
                     ints(a, "rhs_contracting_dims", ()), ints(a, "lhs_batch_dims", ()),
                     ints(a, "rhs_batch_dims", ()), t)


def _convolution(s, a, t):
    if a.get("sparsity_config") or s[1].is_tuple:
        return None
    return infer_convolution(s[0], s[1], _int(a, "feature_group_count", 1),
                             _int(a, "batch_group_count", 1), _window(a), _conv_dims(a), t)


def _reduce(s, a, t):
    params, result = program_shape(_computation(a, "to_apply"))
    return infer_reduce(s, ints(a, "dimensions"), params, result)


def _reduce_window(s, a, t):
    n = len(s) // 2
    params, result = program_shape(_computation(a, "to_apply"))
    return infer_reduce_window(s[:n], s[n:], _window(a), params, result)


def _select_and_scatter(s, a, t):
    return infer_select_and_scatter(s[0], program_shape(_computation(a, "select")),
                                    _window(a), s[1], s[2],
                                    program_shape(_computation(a, "scatter")))


def _map(s, a, t):
    params, result = program_shape(_computation(a, "to_apply"))
    dims = ints(a, "dimensions", tuple(range(max((x.rank for x in s), default=0))))
    return infer_map(s, params, result, dims)


def _scatter(s, a, t):
    params, result = program_shape(_computation(a, "to_apply"))
    return infer_scatter(s, params, result, a)


def _call(s, a, t):
    params, result = program_shape(_computation(a, "to_apply"))
    return infer_call(s, params, result)


def _while(s, a, t):
    return infer_while(program_shape(_computation(a, "condition")),
                       program_shape(_computation(a, "body")), s[0])


def _conditional(s, a, t):
    branches = a.get("branch_computations")
    if branches is None:
        branches = [_computation(a, "true_computation"), _computation(a, "false_computation")]
    return infer_conditional(s[0], [program_shape(c) for c in branches], s[1:])


def _slice(s, a, t):
    from ..attrs import parse_slice
    return infer_slice(s[0], parse_slice(a["slice"]))


def _pad(s, a, t):
    from ..attrs import parse_padding
    return infer_pad(s[0], s[1], parse_padding(a["padding"]))


def _broadcast(s, a, t):
    return infer_broadcast_sizes(s[0], ints(a, "dimensions", ()))


def _triangular_solve(s, a, t):
    return infer_triangular_solve(s[0], s[1], a.get("left_side", "false") == "true")


def _copy_start(s, a, t):
    from .common import make
    return Shape.tuple([s[0], s[0], make("u32", [])])


def _copy_done(s, a, t):
    return infer_get_tuple_element(s[0], 0)


def _partition_id(s, a, t):
    from .common import make
    return make("u32", [])


def _from_type(fn):
    return lambda s, a, t: None if t is None else fn(s, t)


_RULES = {
    "clamp": lambda s, a, t: infer_clamp(s[0], s[1], s[2]),
    "select": lambda s, a, t: infer_select(s[0], s[1], s[2]),
    "convert": _from_type(lambda s, t: infer_convert(s[0], t)),
    "bitcast-convert": _from_type(lambda s, t: infer_bitcast_convert(s[0], t)),
    "stochastic-convert": _from_type(lambda s, t: infer_stochastic_convert(s[0], s[1], t)),
    "reduce-precision": lambda s, a, t: infer_reduce_precision(
        s[0], _int(a, "exponent_bits"), _int(a, "mantissa_bits")),
    "map": _map,
    "concatenate": lambda s, a, t: infer_concatenate(s, ints(a, "dimensions")[0]),
    "pad": _pad,
    "slice": _slice,
    "dynamic-slice": lambda s, a, t: infer_dynamic_slice(s[0], s[1:],
                                                         ints(a, "dynamic_slice_sizes")),
    "dynamic-update-slice": lambda s, a, t: infer_dynamic_update_slice(s[0], s[1], s[2:]),
    "transpose": lambda s, a, t: infer_transpose(s[0], ints(a, "dimensions")),
    "reverse": lambda s, a, t: infer_reverse(s[0], ints(a, "dimensions")),
    "broadcast": _broadcast,
    "tuple": lambda s, a, t: infer_tuple(s),
    "get-tuple-element": lambda s, a, t: infer_get_tuple_element(s[0], _int(a, "index")),
    "sort": lambda s, a, t: infer_sort(s),
    "topk": lambda s, a, t: infer_topk(s[0], _int(a, "k")),
    "get-dimension-size": lambda s, a, t: infer_get_dimension_size(s[0],
                                                                   ints(a, "dimensions")[0]),
    "set-dimension-size": lambda s, a, t: infer_set_dimension_size(s[0], s[1],
                                                                   ints(a, "dimensions")[0]),
    "dot": _dot,
    "scaled-dot": _dot,
    "convolution": _convolution,
    "reduce": _reduce,
    "reduce-window": _reduce_window,
    "select-and-scatter": _select_and_scatter,
    "fft": lambda s, a, t: infer_fft(s[0], a["fft_type"], ints(a, "fft_length")),
    "triangular-solve": _triangular_solve,
    "cholesky": lambda s, a, t: infer_cholesky(s[0]),
    "batch-norm-training": lambda s, a, t: infer_batch_norm("training", s,
                                                            _int(a, "feature_index")),
    "batch-norm-inference": lambda s, a, t: infer_batch_norm("inference", s,
                                                             _int(a, "feature_index")),
    "batch-norm-grad": lambda s, a, t: infer_batch_norm("grad", s, _int(a, "feature_index")),
    "gather": lambda s, a, t: infer_gather(s[0], s[1], a),
    "scatter": _scatter,
    "call": _call,
    "while": _while,
    "conditional": _conditional,
    "after-all": lambda s, a, t: Shape.token(),
    "add-dependency": lambda s, a, t: s[0],
    "opt-barrier": lambda s, a, t: s[0],
    "partition-id": _partition_id,
    "replica-id": _partition_id,
    "copy-start": _copy_start,
    "copy-done": _copy_done,
}

__all__ = [
    "CAN_INFER", "InferenceError", "infer_shape", "program_shape", "window_output_shape",
    "infer_all_gather", "infer_all_reduce", "infer_all_to_all", "infer_all_to_all_tuple",
    "infer_collective_permute", "infer_collective_permute_start", "infer_reduce_scatter",
    "infer_dot", "infer_convert", "infer_bitcast_convert", "infer_stochastic_convert",
    "infer_call", "infer_while", "infer_conditional",
]
