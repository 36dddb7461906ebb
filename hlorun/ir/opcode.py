"""HLO opcodes: XLA's spelling, operand arity and the families passes ask about."""

from __future__ import annotations

VARIADIC = -1

#: opcode -> number of operands (VARIADIC when any), as in xla/hlo/ir/hlo_opcode.h
OPCODES: dict[str, int] = {
    "abs": 1, "acos": 1, "acosh": 1, "add": 2, "add-dependency": 2,
    "after-all": VARIADIC, "all-gather": VARIADIC, "all-gather-done": 1,
    "all-gather-start": VARIADIC, "all-reduce": VARIADIC, "all-reduce-done": 1,
    "all-reduce-start": VARIADIC, "all-to-all": VARIADIC, "and": 2, "asin": 1,
    "asinh": 1, "async-done": 1, "async-start": VARIADIC, "async-update": VARIADIC,
    "atan2": 2, "atanh": 1, "batch-norm-grad": 5, "batch-norm-inference": 5,
    "batch-norm-training": 3, "bitcast": 1, "bitcast-convert": 1, "broadcast": 1,
    "call": VARIADIC, "cbrt": 1, "ceil": 1, "cholesky": 1, "clamp": 3,
    "count-leading-zeros": 1, "collective-broadcast": VARIADIC,
    "collective-permute": VARIADIC, "collective-permute-done": 1,
    "collective-permute-start": VARIADIC, "compare": 2, "complex": 2,
    "concatenate": VARIADIC, "conditional": VARIADIC, "constant": 0, "convert": 1,
    "convolution": 2, "copy": 1, "copy-done": 1, "copy-start": 1, "cosine": 1,
    "cosh": 1, "custom-call": VARIADIC, "divide": 2, "domain": 1, "dot": 2,
    "dynamic-reshape": VARIADIC, "dynamic-slice": VARIADIC,
    "dynamic-update-slice": VARIADIC, "erf": 1, "exponential": 1,
    "exponential-minus-one": 1, "fft": 1, "floor": 1, "fusion": VARIADIC,
    "gather": 2, "get-dimension-size": 1, "get-tuple-element": 1, "imag": 1,
    "infeed": 1, "iota": 0, "is-finite": 1, "log": 1, "log-plus-one": 1,
    "logistic": 1, "map": VARIADIC, "maximum": 2, "minimum": 2, "mulhi": 2,
    "multiply": 2, "negate": 1, "not": 1, "opt-barrier": 1, "or": 2, "outfeed": 2,
    "pad": 2, "parameter": 0, "partition-id": 0, "popcnt": 1, "power": 2,
    "ragged-all-to-all": 6, "ragged-dot": 3, "real": 1, "recv": 1, "recv-done": 1,
    "reduce": VARIADIC, "reduce-precision": 1, "reduce-scatter": VARIADIC,
    "reduce-window": VARIADIC, "remainder": 2, "replica-id": 0, "reshape": 1,
    "reverse": 1, "rng": VARIADIC, "rng-bit-generator": 1,
    "rng-get-and-update-state": 0, "round-nearest-afz": 1,
    "round-nearest-even": 1, "rsqrt": 1, "scaled-dot": 4, "scan": VARIADIC,
    "scatter": VARIADIC, "select": 3, "select-and-scatter": 3, "send": 2,
    "send-done": 1, "set-dimension-size": 2, "shift-left": 2,
    "shift-right-arithmetic": 2, "shift-right-logical": 2, "sign": 1, "sine": 1,
    "sinh": 1, "slice": 1, "sort": VARIADIC, "sqrt": 1, "stochastic-convert": 2,
    "subtract": 2, "tan": 1, "tanh": 1, "topk": 1, "transpose": 1,
    "triangular-solve": 2, "tuple": VARIADIC, "while": 1, "xor": 2,
}

#: Opcodes whose wrapped op may be written with async syntax sugar
#: (``custom-call-start`` / ``-update`` / ``-done``).
ASYNC_SUFFIXES = ("-start", "-update", "-done")

ELEMENTWISE_UNARY = frozenset({
    "abs", "acos", "acosh", "asin", "asinh", "atanh", "cbrt", "ceil",
    "count-leading-zeros", "convert", "bitcast-convert", "cosine", "cosh", "erf",
    "exponential", "exponential-minus-one", "floor", "imag", "is-finite", "log",
    "log-plus-one", "logistic", "negate", "not", "popcnt", "real",
    "reduce-precision", "round-nearest-afz", "round-nearest-even", "rsqrt",
    "sign", "sine", "sinh", "sqrt", "tan", "tanh", "copy",
})

ELEMENTWISE_BINARY = frozenset({
    "add", "atan2", "complex", "divide", "maximum", "minimum", "mulhi",
    "multiply", "power", "remainder", "subtract", "and", "or", "xor",
    "shift-left", "shift-right-arithmetic", "shift-right-logical", "compare",
    "stochastic-convert",
})

ELEMENTWISE_TERNARY = frozenset({"clamp", "select"})

ELEMENTWISE = ELEMENTWISE_UNARY | ELEMENTWISE_BINARY | ELEMENTWISE_TERNARY

#: Opcodes that reference computations through attributes.
CALLING = frozenset({
    "call", "map", "reduce", "reduce-window", "all-reduce", "all-reduce-start",
    "reduce-scatter", "scatter", "sort", "scan", "while", "conditional",
    "fusion", "custom-call", "select-and-scatter", "async-start",
    "async-update", "async-done",
})


def is_known_opcode(opcode: str) -> bool:
    return opcode in OPCODES


def split_async_sugar(opcode: str) -> tuple[str, str] | None:
    """``custom-call-start`` -> (``custom-call``, ``-start``), else None."""
    for suffix in ASYNC_SUFFIXES:
        if opcode.endswith(suffix):
            base = opcode[: -len(suffix)]
            if base in OPCODES and opcode not in OPCODES:
                return base, suffix
    return None


def is_elementwise(opcode: str) -> bool:
    return opcode in ELEMENTWISE
