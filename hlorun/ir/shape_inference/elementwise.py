"""Shape inference for elementwise operations: unary, binary (incl.
compare), clamp, select, convert, bitcast-convert, stochastic-convert,
reduce-precision and map (XLA's ``ShapeInference::Infer{Unary,Binary,
Ternary,Convert,BitcastConvert,...}Shape``)."""

from __future__ import annotations

from typing import Sequence

from ..shape import Layout, Shape, intern, is_array_type
from .common import (COMPLEX_COMPONENT, InferenceError, change_type,
                     compatible_ignoring_element_type, compatible_ignoring_fp, dynamic_flags,
                     expect_array, higher_precision, human,
                     is_complex, is_float, is_integral, is_signed, is_unbounded,
                     is_unsigned_integral, make, same_type_ignoring_fp,
                     storage_bits, type_bits, upper)

_FLOAT_ONLY = frozenset({"floor", "cbrt", "ceil", "erf", "round-nearest-afz", "round-nearest-even"})
_FLOAT_OR_COMPLEX = frozenset({
    "asin", "asinh", "acos", "acosh", "atanh", "cosh", "cosine", "sinh", "sine",
    "exponential", "exponential-minus-one", "log", "log-plus-one", "logistic",
    "rsqrt", "sqrt", "tan", "tanh"})

UNARY = _FLOAT_ONLY | _FLOAT_OR_COMPLEX | {
    "real", "imag", "abs", "count-leading-zeros", "negate", "popcnt", "sign", "not",
    "is-finite", "copy", "domain"}


def infer_unary(opcode: str, s: Shape) -> Shape:
    """``InferUnaryOpShape``."""
    if opcode in ("copy", "domain"):
        return s
    expect_array(s, "operand of unary operation")
    t = s.element_type
    if opcode in _FLOAT_ONLY:
        if not is_float(t):
            raise InferenceError(f"Expected element type in shape to be floating for {opcode} "
                                 f"operation; got {upper(t)}.")
        return s
    if opcode in _FLOAT_OR_COMPLEX:
        if not (is_float(t) or is_complex(t)):
            raise InferenceError(f"Expected element type in shape to be floating or complex for "
                                 f"{opcode} operation; got {upper(t)}.")
        return s
    if opcode in ("real", "imag"):
        if is_complex(t):
            return change_type(s, COMPLEX_COMPONENT[t])
        if is_float(t):
            return s
        raise InferenceError(f"Expected element type in shape to be floating or complex for "
                             f"{opcode} operation; got {upper(t)}.")
    if opcode == "abs":
        if is_complex(t):
            return change_type(s, COMPLEX_COMPONENT[t])
        if is_signed(t):
            return s
        raise InferenceError(f"Expected element type in shape to be floating or complex for "
                             f"{opcode} operation; got {upper(t)}.")
    if opcode in ("count-leading-zeros", "popcnt"):
        if not is_integral(t):
            name = "Clz" if opcode == "count-leading-zeros" else "PopulationCount"
            raise InferenceError(f"Expected an integral element type in argument to {name} "
                                 f"operation; got {upper(t)}.")
        return s
    if opcode == "negate":
        if not (is_integral(t) or is_float(t) or is_complex(t)):
            raise InferenceError(f"Expected element type in shape to be integral, floating or "
                                 f"complex for {opcode} operation; got {upper(t)}.")
        return s
    if opcode == "sign":
        if not (is_signed(t) or is_complex(t)):
            raise InferenceError(f"Expected element type in shape to be signed or complex for "
                                 f"{opcode} operation; got {upper(t)}.")
        return s
    if opcode == "not":
        if t != "pred" and not is_integral(t):
            raise InferenceError("Expected pred or an integral element type in argument to Not "
                                 f"operation; got {upper(t)}.")
        return s
    if opcode == "is-finite":
        if not is_float(t):
            raise InferenceError("Expected element type in shape to be floating point for "
                                 f"IsFinite operation; got {upper(t)}.")
        return change_type(s, "pred")
    raise InferenceError(f'Unknown operation for unary shape inference: "{opcode}".')


_ARITHMETIC = frozenset({"subtract", "atan2", "power", "divide", "remainder", "shift-left",
                         "shift-right-arithmetic", "shift-right-logical"})
BINARY = frozenset({"add", "maximum", "minimum", "multiply", "mulhi", "complex", "and", "or",
                    "xor", "compare"}) | _ARITHMETIC


def _degenerate_broadcast(lhs: Shape, rhs: Shape) -> Shape:
    """``InferDegenerateDimensionBroadcastShape`` (equal ranks)."""
    dims, dyn = [], []
    ld, rd = dynamic_flags(lhs), dynamic_flags(rhs)
    for i, (a, b) in enumerate(zip(lhs.dimensions, rhs.dimensions)):
        if a == 1 or b == 1:
            dims.append(b if a == 1 else a)
            dyn.append(rd[i] if a == 1 else ld[i])
        elif a == b:
            dims.append(a)
            dyn.append(ld[i] or rd[i])
        elif is_unbounded(lhs, i) or is_unbounded(rhs, i):
            dims.append(b if is_unbounded(lhs, i) else a)
            dyn.append(rd[i] if is_unbounded(lhs, i) else ld[i])
        else:
            raise InferenceError(f"Binary op with incompatible shapes: {human(lhs)} and "
                                 f"{human(rhs)}.")
    return make(higher_precision(lhs.element_type, rhs.element_type), dims, dyn)


def _elementwise_binary(opcode: str, lhs: Shape, rhs: Shape) -> Shape:
    """``InferElementwiseBinaryOpShape`` with no broadcast dimensions (HLO)."""
    expect_array(lhs, "lhs of elementwise binary operation")
    expect_array(rhs, "rhs of elementwise binary operation")
    lt, rt = lhs.element_type, rhs.element_type
    if not same_type_ignoring_fp(lt, rt):
        raise InferenceError(f"Binary op {opcode} with different element types: {human(lhs)} "
                             f"and {human(rhs)}.")
    if opcode == "atan2" and not (is_float(lt) or is_complex(lt)):
        raise InferenceError(f"Expected input element type to be floating or complex for "
                             f"{opcode} operation; got {upper(lt)}.")
    unbounded = any(is_unbounded(s, i) for s in (lhs, rhs) for i in range(s.rank))
    if compatible_ignoring_fp(lhs, rhs) and not unbounded:
        result = change_type(lhs, higher_precision(lt, rt))
        if rhs.dynamic is not None:
            dyn = [a or b for a, b in zip(dynamic_flags(result), rhs.dynamic)]
            result = intern(Shape(result.element_type, result.dimensions, result.layout, dyn))
        return result
    if lhs.rank == rhs.rank:
        return _degenerate_broadcast(lhs, rhs)
    larger, smaller = (lhs, rhs) if lhs.rank > rhs.rank else (rhs, lhs)
    if not smaller.is_scalar:
        raise InferenceError(f"Shapes must be equal rank, but are {human(smaller)} and "
                             f"{human(larger)}")
    # A scalar broadcasts into every dimension of the larger operand.
    return change_type(larger, higher_precision(larger.element_type, smaller.element_type))


def infer_binary(opcode: str, lhs: Shape, rhs: Shape) -> Shape:
    """``InferBinaryOpShape`` (the HLO form: no broadcast dimensions)."""
    expect_array(lhs, f"lhs of binary operation {opcode}")
    expect_array(rhs, f"rhs of binary operation {opcode}")
    lt = lhs.element_type
    if opcode in _ARITHMETIC:
        if lt == "pred" or rhs.element_type == "pred":
            raise InferenceError("Expected element type in shape to be arithmetic type for "
                                 f"operation {opcode}; got PRED.")
        return _elementwise_binary(opcode, lhs, rhs)
    if opcode == "complex":
        if not is_float(lt):
            raise InferenceError("Expected element type in shape to be floating for complex "
                                 f"compose operation; got {upper(lt)}.")
        shape = _elementwise_binary(opcode, lhs, rhs)
        pair = (lt, rhs.element_type)
        if pair == ("f32", "f32"):
            return change_type(shape, "c64")
        if pair == ("f64", "f64"):
            return change_type(shape, "c128")
        raise InferenceError("Complex component type is not implemented.")
    if opcode in ("and", "or", "xor"):
        if lt != "pred" and not is_integral(lt):
            raise InferenceError("Expected pred or integral type in argument to and/or "
                                 f"operation; got {upper(lt)}.")
        return _elementwise_binary(opcode, lhs, rhs)
    if opcode == "compare":
        return change_type(_elementwise_binary(opcode, lhs, rhs), "pred")
    if opcode in BINARY:
        return _elementwise_binary(opcode, lhs, rhs)
    raise InferenceError(f"Binary op shape inference: {opcode} is not implemented.")


def infer_clamp(lo: Shape, x: Shape, hi: Shape) -> Shape:
    """``InferClampShape``: min and max are scalars or shaped like the operand."""
    expect_array(lo, "clamp min")
    expect_array(x, "clamp operand")
    expect_array(hi, "clamp max")
    if not (same_type_ignoring_fp(lo.element_type, x.element_type)
            and same_type_ignoring_fp(hi.element_type, x.element_type)
            and same_type_ignoring_fp(lo.element_type, hi.element_type)):
        raise InferenceError(f"Clamp with incompatible element types: {human(lo)}, {human(x)}, "
                             f"{human(hi)}.")
    if ((not lo.is_scalar and not compatible_ignoring_fp(lo, x))
            or (not hi.is_scalar and not compatible_ignoring_fp(hi, x))
            or (not lo.is_scalar and not hi.is_scalar and not compatible_ignoring_fp(lo, hi))):
        raise InferenceError(f"Clamp with incompatible shapes: {human(lo)}, {human(x)}, "
                             f"{human(hi)}.")
    return x


def infer_select(pred: Shape, on_true: Shape, on_false: Shape) -> Shape:
    """``InferSelectShape``: a scalar or same-shaped PRED selector."""
    expect_array(pred, "select pred")
    expect_array(on_true, "select on-true")
    expect_array(on_false, "select on-false")
    if not compatible_ignoring_fp(on_true, on_false):
        raise InferenceError(f"Operands to select must be the same shape; got {human(on_true)} "
                             f"and {human(on_false)}.")
    if pred.element_type != "pred":
        raise InferenceError(f"Select's pred operand must have PRED element type; got "
                             f"{human(pred)}.")
    if not pred.is_scalar and (not compatible_ignoring_element_type(pred, on_true)
                               or not compatible_ignoring_element_type(pred, on_false)):
        raise InferenceError("Operands to select and predicate must be the same shape; got "
                             f"{human(on_true)} and {human(on_false)} and {human(pred)}.")
    base = on_true if pred.is_scalar else pred
    et = higher_precision(on_true.element_type, on_false.element_type)
    layout = base.layout
    if layout is not None and on_true.layout is not None \
            and layout.element_size_in_bits != on_true.layout.element_size_in_bits:
        # The result keeps the selected values' element size (s4 E(4)).
        layout = Layout(layout.minor_to_major, layout.tiles, layout.tail_padding_alignment,
                        layout.index_type, layout.pointer_type,
                        on_true.layout.element_size_in_bits, layout.memory_space,
                        layout.split_configs, layout.physical_shape,
                        layout.dynamic_metadata_prefix_bytes)
    return intern(Shape(et, base.dimensions, layout, base.dynamic))


def infer_convert(s: Shape, new_type: str) -> Shape:
    """``InferConvertShape``."""
    if not s.is_array or not is_array_type(new_type):
        raise InferenceError(f"Convert does not allow non-arrays, so cannot convert from "
                             f"{human(s)} to {upper(new_type)}.")
    return change_type(s, new_type)


def infer_bitcast_convert(s: Shape, new_type: str) -> Shape:
    """``InferBitcastConvertShape``: a wider source gains a minor dimension of
    the width ratio, a narrower one loses its minor dimension (= the ratio)."""
    old = s.element_type
    if is_array_type(old) and is_array_type(new_type) and is_complex(old) != is_complex(new_type):
        raise InferenceError(f"Conversion between complex and real type {human(s)} => "
                             f"{upper(new_type)}.")
    if not s.is_array or not is_array_type(new_type):
        raise InferenceError("Cannot convert from or to tuple type; requested conversion: "
                             f"{human(s)} => {upper(new_type)}.")
    a, b = storage_bits(old), storage_bits(new_type)
    if max(a, b) % min(a, b):
        raise InferenceError(f"Cannot bitcast types with undivisible bit-widths: {upper(old)} "
                             f"=> {upper(new_type)}.")
    ratio = max(a, b) // min(a, b)
    dims, dyn = list(s.dimensions), dynamic_flags(s)
    if a > b:
        dims.append(ratio)
        dyn.append(False)
    elif a < b:
        if not dims or dims[-1] != ratio:
            raise InferenceError(f"Last dimension of input shape={dims[-1] if dims else 0} is "
                                 f"not equal to ratio of bit-widths={ratio} for bitcast-convert "
                                 f"from {human(s)} to {upper(new_type)}")
        dims.pop()
        dyn.pop()
    return make(new_type, dims, dyn) if a != b else change_type(s, new_type)


def infer_stochastic_convert(s: Shape, random: Shape, new_type: str) -> Shape:
    """``InferStochasticConvertShape``."""
    expect_array(s, "lhs of stochastic convert operation")
    expect_array(random, "rhs of stochastic convert operation")
    if not is_unsigned_integral(random.element_type):
        raise InferenceError("Random numbers for stochastic convert must be unsigned integers, "
                             f"but got: {random}")
    if not is_float(s.element_type):
        raise InferenceError("Stochastic convert supports only floating point operand "
                             f"conversion, but got: {random}")
    ob, rb = type_bits(s.element_type), type_bits(random.element_type)
    if ob != rb:
        raise InferenceError("The random number is required to have same bits as the operand. "
                             f"But got random bits: {rb}, operand bits: {ob}")
    if s.dimensions != random.dimensions or s.dynamic != random.dynamic:
        raise InferenceError("Stochastic convert operand shape does not match random tensor "
                             f"shape: {s} vs {random}.")
    return change_type(s, new_type)


def infer_reduce_precision(s: Shape, exponent_bits: int, mantissa_bits: int) -> Shape:
    """``InferReducePrecisionShape``."""
    if not s.is_array or not is_float(s.element_type):
        raise InferenceError("Expected element type in shape to be floating point for "
                             f"ReducePrecision operation; got {upper(s.element_type)}.")
    if exponent_bits < 1:
        raise InferenceError(f"Expected exponent_bits >= 1; got {exponent_bits}.")
    if mantissa_bits < 0:
        raise InferenceError(f"Expected non-negative mantissa_bits; got {mantissa_bits}.")
    return s


def infer_map(args: Sequence[Shape], params: Sequence[Shape], result: Shape,
              dimensions: Sequence[int]) -> Shape:
    """``InferMapShape``: a scalar computation applied to every element."""
    if not args:
        raise InferenceError("Map expects at least one argument.")
    arg = args[0]
    for s in args[1:]:
        expect_array(s, "operand of map")
        if compatible_ignoring_element_type(s, arg):
            continue
        if same_type_ignoring_fp(s.element_type, arg.element_type):
            if s.is_scalar:
                continue
            if arg.is_scalar:
                arg = s
                continue
        raise InferenceError("Map operation requires all operands to have the same shape; got: "
                             + ", ".join(human(a) for a in args) + ".")
    if len(dimensions) != arg.rank:
        raise InferenceError("Map applied to a subset of dimensions currently not supported: "
                             f"arg_dimension_size: {arg.rank}, requested_map_dimensions_size: "
                             f"{len(dimensions)}.")
    if any(d != i for i, d in enumerate(dimensions)):
        raise InferenceError("Map requires monotonically increasing dimension numbers; got: "
                             + ", ".join(map(str, dimensions)) + ".")
    if len(args) != len(params):
        raise InferenceError(f"Map applied function arity must match number of arguments; got: "
                             f"arity: {len(params)}, arguments: {len(args)}.")
    if not result.is_scalar:
        raise InferenceError(f"Mapped computation's result has to be a scalar; got: "
                             f"{human(result)}.")
    for i, p in enumerate(params):
        if not p.is_scalar:
            raise InferenceError(f"Mapped computation's parameter has to be a scalar; got "
                                 f"parameter {i} shape: {human(p)}.")
        if not same_type_ignoring_fp(p.element_type, args[i].element_type):
            raise InferenceError(f"Mapped computation's parameter type has to match argument "
                                 f"element type; got parameter {i} shape: {human(p)}, argument "
                                 f"shape: {human(arg)}.")
    return make(result.element_type, arg.dimensions, dynamic_flags(arg))


__all__ = ["UNARY", "BINARY", "infer_unary", "infer_binary", "infer_clamp", "infer_select",
           "infer_convert", "infer_bitcast_convert", "infer_stochastic_convert",
           "infer_reduce_precision", "infer_map"]
