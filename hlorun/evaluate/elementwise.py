"""Elementwise opcodes: unary math, binary arithmetic, compare, select,
clamp, convert, bitcast-convert, reduce-precision.

Narrow floats (bf16, f16, fp8) are computed in f32 and rounded once to the
result type.  Integer edge cases follow XLA's elemental IR emitter:
``x / 0 == -1``, ``INT_MIN / -1 == INT_MIN``, ``x % 0 == x``,
``INT_MIN % -1 == 0``; shifts by at least the bit width give 0 (or the sign
for arithmetic right shifts); integer ``power`` with a negative exponent is
0 unless the base is 1 or -1.  Handlers use numpy broadcasting only, so the
same code evaluates scalar computations lifted over whole arrays (reducers,
comparators).
"""

from __future__ import annotations

import numpy as np

from ..ir.comparison import comparison_order
from ..ir.shape import bit_width, is_floating, is_signed_integral
from .dtypes import (contiguous, cast_result, convert, dtype_of, is_float_dtype,
                     storage_view, total_order_key, widen)
from .registry import EvaluationError, handler, unsupported

_ERRSTATE = dict(all="ignore")


def _et(instr) -> str:
    return instr.shape.element_type


def _erf(x: np.ndarray) -> np.ndarray:
    """erf to ~1e-15 (float64): Taylor series near 0, continued fraction
    for erfc beyond."""
    x64 = np.asarray(x, dtype=np.float64)
    ax = np.abs(x64)
    small = ax < 2.5
    # Taylor: erf(x) = 2/sqrt(pi) * sum (-1)^n x^(2n+1) / (n! (2n+1))
    xs = np.where(small, x64, 0.0)
    term = xs.copy()
    total = xs.copy()
    x2 = xs * xs
    for n in range(1, 60):
        term = term * (-x2) / n
        total = total + term / (2 * n + 1)
    taylor = total * (2.0 / np.sqrt(np.pi))
    # erfc(z) = exp(-z^2)/sqrt(pi) * 1/(z + 1/2/(z + 1/(z + 3/2/(z + ...)))) (z > 0)
    z = np.where(small, 3.0, ax)
    frac = z.copy()
    for k in range(60, 0, -1):
        frac = z + (k / 2.0) / frac
    erfc = np.exp(-z * z) / np.sqrt(np.pi) / frac
    large = np.sign(x64) * (1.0 - erfc)
    out = np.where(small, taylor, large)
    return np.where(np.isnan(x64), np.nan, out)


def _round_afz(x: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    return np.copysign(np.floor(np.abs(x64) + 0.5), x64).astype(x.dtype)


def _logistic(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


_FLOAT_UNARY = {
    "exponential": np.exp, "exponential-minus-one": np.expm1, "log": np.log,
    "log-plus-one": np.log1p, "sqrt": np.sqrt, "cbrt": np.cbrt, "tanh": np.tanh,
    "sine": np.sin, "cosine": np.cos, "tan": np.tan, "floor": np.floor, "ceil": np.ceil,
    "round-nearest-even": np.rint, "round-nearest-afz": _round_afz,
    "rsqrt": lambda x: 1.0 / np.sqrt(x), "logistic": _logistic,
    "acos": np.arccos, "acosh": np.arccosh, "asin": np.arcsin, "asinh": np.arcsinh,
    "atanh": np.arctanh, "sinh": np.sinh, "cosh": np.cosh,
    "erf": lambda x: _erf(x).astype(x.dtype),
}


@handler(*_FLOAT_UNARY)
def _float_unary(ev, instr, ops):
    x = ops[0]
    if not is_float_dtype(x.dtype) and x.dtype.kind != "c":
        raise EvaluationError(f"{instr.opcode} expects a floating-point operand, got {x.dtype}")
    with np.errstate(**_ERRSTATE):
        return cast_result(_FLOAT_UNARY[instr.opcode](widen(x)), _et(instr))


@handler("abs")
def _abs(ev, instr, ops):
    with np.errstate(**_ERRSTATE):
        return cast_result(np.abs(widen(ops[0])), _et(instr))


@handler("negate")
def _negate(ev, instr, ops):
    with np.errstate(**_ERRSTATE):
        return cast_result(np.negative(widen(ops[0])), _et(instr))


@handler("sign")
def _sign(ev, instr, ops):
    x = widen(ops[0])
    with np.errstate(**_ERRSTATE):
        if x.dtype.kind == "f":
            s = np.sign(x)
            return cast_result(np.where(x == 0, x, s), _et(instr))  # keeps -0
        return cast_result(np.sign(x), _et(instr))


@handler("not")
def _not(ev, instr, ops):
    x = ops[0]
    if x.dtype == np.bool_:
        return np.logical_not(x)
    return cast_result(np.invert(widen(x)), _et(instr))


@handler("is-finite")
def _is_finite(ev, instr, ops):
    return np.isfinite(widen(ops[0]))


@handler("real")
def _real(ev, instr, ops):
    return cast_result(np.real(ops[0]), _et(instr))


@handler("imag")
def _imag(ev, instr, ops):
    x = ops[0]
    if x.dtype.kind != "c":
        return np.zeros_like(x)
    return cast_result(np.imag(x), _et(instr))


@handler("popcnt")
def _popcnt(ev, instr, ops):
    u = storage_view(ops[0], _et(instr))
    if hasattr(np, "bitwise_count"):
        cnt = np.bitwise_count(u)
    else:  # pragma: no cover - numpy < 2
        cnt = np.zeros(u.shape, np.int64)
        v = u.astype(np.uint64)
        for _ in range(u.dtype.itemsize * 8):
            cnt += (v & 1).astype(np.int64)
            v = v >> np.uint64(1)
    bits = bit_width(_et(instr))
    if bits < u.dtype.itemsize * 8:  # s4/u4: only the low bits count
        v = u.astype(np.uint64) & np.uint64((1 << bits) - 1)
        cnt = np.bitwise_count(v) if hasattr(np, "bitwise_count") else cnt
    return cast_result(cnt.astype(np.int64), _et(instr))


@handler("count-leading-zeros")
def _clz(ev, instr, ops):
    et = _et(instr)
    bits = bit_width(et)
    v = storage_view(ops[0], et).astype(np.uint64) & np.uint64((1 << bits) - 1 if bits < 64 else 2**64 - 1)
    shift = 32
    # number of significant bits by binary search on the 64-bit value
    sig = np.zeros(v.shape, np.int64)
    cur = v.copy()
    while shift:
        hi = cur >> np.uint64(shift)
        has = hi != 0
        sig = np.where(has, sig + shift, sig)
        cur = np.where(has, hi, cur)
        shift //= 2
    sig = np.where(v != 0, sig + 1, 0)
    return cast_result(bits - sig, et)


# ---------------------------------------------------------------------------
# Binary
# ---------------------------------------------------------------------------


def _int_divide(a: np.ndarray, b: np.ndarray, signed: bool) -> np.ndarray:
    zero = b == 0
    safe_b = np.where(zero, np.ones_like(b), b)
    if signed:
        info = np.iinfo(a.dtype)
        overflow = (a == info.min) & (safe_b == -1)
        safe_b = np.where(overflow, np.ones_like(b), safe_b)
        q = np.floor_divide(a, safe_b)
        r = np.remainder(a, safe_b)
        q = np.where((r != 0) & ((a < 0) != (safe_b < 0)), q + 1, q)  # truncate
        q = np.where(overflow, a, q)
        return np.where(zero, np.array(-1).astype(a.dtype), q)
    q = np.floor_divide(a, safe_b)
    return np.where(zero, np.array(np.iinfo(a.dtype).max, dtype=a.dtype), q)


def _int_remainder(a: np.ndarray, b: np.ndarray, signed: bool) -> np.ndarray:
    zero = b == 0
    safe_b = np.where(zero, np.ones_like(b), b)
    if signed:
        info = np.iinfo(a.dtype)
        overflow = (a == info.min) & (safe_b == -1)
        safe_b = np.where(overflow, np.ones_like(b), safe_b)
        r = np.fmod(a, safe_b)
        r = np.where(overflow, np.zeros_like(r), r)
    else:
        r = np.remainder(a, safe_b)
    return np.where(zero, a, r)


def _int_power(a: np.ndarray, b: np.ndarray, signed: bool) -> np.ndarray:
    a, b = np.broadcast_arrays(a, b)
    result = np.ones_like(a)
    base = a.copy()
    e = b.astype(np.int64)
    neg = e < 0
    e = np.where(neg, 0, e)
    for _ in range(64):
        if not np.any(e):
            break
        odd = (e & 1) == 1
        result = np.where(odd, result * base, result)
        base = base * base
        e = e >> 1
    if signed:
        neg_result = np.where(a == 1, 1, np.where(a == -1, np.where((b & 1) == 1, -1, 1), 0))
        result = np.where(neg, neg_result.astype(a.dtype), result)
    return result


def _shift(op: str, a: np.ndarray, b: np.ndarray, et: str) -> np.ndarray:
    bits = bit_width(et)
    nbits = a.dtype.itemsize * 8
    ut = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[nbits]
    amount = b.astype(np.int64) if b.dtype.kind == "i" else b.astype(np.uint64).astype(np.int64)
    too_big = (amount < 0) | (amount >= bits)
    amt = np.where(too_big, 0, amount).astype(ut)
    au = contiguous(a).view(ut) if a.dtype.kind == "i" else a.astype(ut)
    au, amt = np.broadcast_arrays(au, amt)
    if op == "shift-left":
        r = (au << amt).view(a.dtype) if a.dtype.kind == "i" else (au << amt).astype(a.dtype)
        return np.where(too_big, np.zeros_like(r), r)
    if op == "shift-right-logical":
        if bits < nbits:  # s4 stored in int8: logical shift of the 4-bit pattern
            au = au & ut((1 << bits) - 1)
        r = au >> amt
        r = r.view(a.dtype) if a.dtype.kind == "i" else r.astype(a.dtype)
        return np.where(too_big, np.zeros_like(r), r)
    # arithmetic
    r = np.right_shift(a, amt.astype(a.dtype) if a.dtype.kind == "i" else amt)
    sign = np.where(a < 0, np.array(-1).astype(a.dtype), np.zeros_like(a)) \
        if a.dtype.kind == "i" else np.zeros_like(a)
    return np.where(too_big, sign, r)


_FLOAT_BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply,
    "divide": np.divide, "maximum": np.maximum, "minimum": np.minimum,
    "power": np.power, "atan2": np.arctan2, "remainder": np.fmod,
}
_INT_BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply,
    "maximum": np.maximum, "minimum": np.minimum,
    "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
}


@handler("add", "subtract", "multiply", "divide", "maximum", "minimum", "power",
         "atan2", "remainder", "and", "or", "xor", "shift-left",
         "shift-right-arithmetic", "shift-right-logical")
def _binary(ev, instr, ops):
    a, b = ops
    op = instr.opcode
    et = _et(instr)
    if a.dtype == np.bool_:
        if op in ("and", "multiply", "minimum"):
            return np.logical_and(a, b)
        if op in ("or", "add", "maximum"):
            return np.logical_or(a, b)
        if op in ("xor", "subtract"):
            return np.logical_xor(a, b)
        raise unsupported(f"{op} on pred")
    with np.errstate(**_ERRSTATE):
        if is_float_dtype(a.dtype) or a.dtype.kind == "c":
            fn = _FLOAT_BINARY.get(op)
            if fn is None:
                raise EvaluationError(f"{op} is not defined for floating-point operands")
            return cast_result(fn(widen(a), widen(b)), et)
        wa, wb = widen(a), widen(b)
        signed = is_signed_integral(et)
        if op in _INT_BINARY:
            return cast_result(_INT_BINARY[op](wa, wb), et)
        if op == "divide":
            return cast_result(_int_divide(wa, wb, signed), et)
        if op == "remainder":
            return cast_result(_int_remainder(wa, wb, signed), et)
        if op == "power":
            return cast_result(_int_power(wa, wb, signed), et)
        if op.startswith("shift"):
            return cast_result(_shift(op, wa, wb, et), et)
    raise unsupported(f"{op} on {et}")


@handler("complex")
def _complex(ev, instr, ops):
    return cast_result(ops[0].astype(np.float64) + 1j * ops[1].astype(np.float64), _et(instr))


_CMP = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal,
        "GT": np.greater, "GE": np.greater_equal}


@handler("compare")
def _compare(ev, instr, ops):
    a, b = ops
    direction = instr.attrs.get("direction")
    fn = _CMP.get(direction)
    if fn is None:
        raise EvaluationError(f"compare has unknown direction {direction}")
    ctype = instr.attrs.get("type")
    src_t = instr.operands[0].shape.element_type
    order = comparison_order(instr)
    if order == "WEAK" and is_floating(src_t):
        raise EvaluationError("compare with order=WEAK on floating point is not modelled by the evaluator")
    if order == "TOTAL" and is_floating(src_t):
        return fn(total_order_key(a, src_t), total_order_key(b, src_t))
    with np.errstate(**_ERRSTATE):
        if ctype == "UNSIGNED" and a.dtype.kind == "i":
            return fn(storage_view(a, src_t), storage_view(b, src_t))
        if ctype == "SIGNED" and a.dtype.kind == "u":
            st = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}[a.dtype.itemsize]
            return fn(contiguous(a).view(st), contiguous(b).view(st))
        return fn(widen(a), widen(b))


@handler("select")
def _select(ev, instr, ops):
    p, t, f = ops
    if isinstance(t, tuple):
        return t if bool(p) else f
    return np.where(p, t, f)


@handler("clamp")
def _clamp(ev, instr, ops):
    lo, x, hi = ops
    with np.errstate(**_ERRSTATE):
        return cast_result(np.minimum(np.maximum(widen(x), widen(lo)), widen(hi)), _et(instr))


@handler("convert")
def _convert(ev, instr, ops):
    return convert(ops[0], instr.operands[0].shape.element_type, _et(instr))


@handler("bitcast-convert")
def _bitcast_convert(ev, instr, ops):
    x = ops[0]
    src_t = instr.operands[0].shape.element_type
    dst_t = _et(instr)
    if bit_width(src_t) < 8 or bit_width(dst_t) < 8:
        raise unsupported(f"bitcast-convert between {src_t} and {dst_t} (sub-byte types)")
    dst = dtype_of(dst_t)
    src = dtype_of(src_t)
    raw = contiguous(x)
    if src.itemsize == dst.itemsize:
        return raw.view(dst)
    if src.itemsize > dst.itemsize:  # a new minor dimension
        return raw.reshape(raw.shape + (1,)).view(dst)
    # the minor dimension is absorbed
    return contiguous(raw).view(dst).reshape(raw.shape[:-1])


@handler("reduce-precision")
def _reduce_precision(ev, instr, ops):
    x = ops[0]
    ebits = instr.int_attr("exponent_bits")
    mbits = instr.int_attr("mantissa_bits")
    wide = widen(x)
    if wide.dtype == np.float64:
        ut, nexp, nmant = np.uint64, 11, 52
    else:
        wide = wide.astype(np.float32)
        ut, nexp, nmant = np.uint32, 8, 23
    bits = contiguous(wide).view(ut).copy()
    one = ut(1)
    if mbits < nmant:
        shift = ut(nmant - mbits)
        last_mant = one << shift
        base_round = (last_mant >> one) - one
        x_last = (bits >> shift) & one
        rounding = base_round + x_last
        bits = (bits + rounding) & ~(last_mant - one)
    if ebits < nexp:
        sign_mask = one << ut(nexp + nmant)
        exp_mask = ((one << ut(nexp)) - one) << ut(nmant)
        bias = (1 << (nexp - 1)) - 1
        reduced_bias = (1 << (ebits - 1)) - 1
        max_exp = ut((bias + reduced_bias) << nmant)
        min_exp = ut((bias - reduced_bias) << nmant)
        exp = bits & exp_mask
        overflow = exp > max_exp
        underflow = exp <= min_exp
        signed_zero = bits & sign_mask
        signed_inf = signed_zero | exp_mask
        bits = np.where(overflow, signed_inf, np.where(underflow, signed_zero, bits))
    out = bits.view(wide.dtype)
    out = np.where(np.isnan(wide), wide, out)  # NaN stays NaN
    return cast_result(out, _et(instr))

