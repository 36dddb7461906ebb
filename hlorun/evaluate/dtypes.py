"""Element types as numpy sees them, and XLA's conversion rules.

Values are numpy arrays of ``numpy_dtype(element_type)`` (ml_dtypes for
bf16, the fp8 family and s4/u4).  Arithmetic on narrow floats is done in f32
and rounded once to the result type, as XLA:GPU does after float
normalization (bf16/f16/f8 ops are upcast to f32 and the result converted).

Conversions follow XLA (``Literal::Convert`` / the elemental IR emitter):

* float -> integer: NaN -> 0, values beyond the range saturate to the
  type's min/max, the rest truncate toward zero;
* integer -> integer: two's complement truncation (wrap), sign- or
  zero-extended according to the *source* type;
* anything -> pred: ``x != 0``;
* float -> float: round to nearest even (ml_dtypes' ``static_cast``); types
  without infinity (f8e4m3fn) turn overflow into NaN, f8e5m2 into inf.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..ir.literal import numpy_dtype
from ..ir.shape import bit_width, is_complex, is_floating, is_integral, is_signed_integral

try:
    import ml_dtypes
except ImportError:  # pragma: no cover - a runtime dependency
    ml_dtypes = None  # type: ignore[assignment]

F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)

#: types whose sub-byte width numpy stores one element per byte
_SUB_BYTE_INT = {"s1", "s2", "s4", "u1", "u2", "u4"}


def dtype_of(element_type: str) -> np.dtype:
    return numpy_dtype(element_type)


_ML_FLOAT_NAMES = {
    "bfloat16", "float8_e5m2", "float8_e4m3fn", "float8_e4m3", "float8_e4m3b11fnuz",
    "float8_e3m4", "float8_e5m2fnuz", "float8_e4m3fnuz", "float8_e8m0fnu",
    "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn",
}
_ML_INT_NAMES = {"int4", "uint4", "int2", "uint2"}


def is_narrow_float(dt: np.dtype) -> bool:
    """bf16, f16 and the f8/f6/f4 families: computed in f32."""
    return dt == np.float16 or dt.name in _ML_FLOAT_NAMES


def is_float_dtype(dt: np.dtype) -> bool:
    return dt.kind == "f" or dt.name in _ML_FLOAT_NAMES


def is_int_dtype(dt: np.dtype) -> bool:
    return dt.kind in "iu" or dt.name in _ML_INT_NAMES


def compute_dtype(dt: np.dtype) -> np.dtype:
    """The dtype arithmetic on ``dt`` is carried out in."""
    if dt.name in _ML_FLOAT_NAMES or dt == np.float16:
        return F32
    if dt.name in _ML_INT_NAMES:
        return np.dtype(np.int8) if dt.name.startswith("int") else np.dtype(np.uint8)
    return dt


def widen(x: np.ndarray) -> np.ndarray:
    """``x`` in its compute dtype (f32 for narrow floats)."""
    cd = compute_dtype(x.dtype)
    return x if x.dtype == cd else x.astype(cd)


def int_range(element_type: str) -> tuple[int, int]:
    bits = bit_width(element_type)
    if is_signed_integral(element_type):
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


def _wrap_int(x: np.ndarray, element_type: str) -> np.ndarray:
    """Two's complement truncation of an integer array to ``element_type``."""
    dt = dtype_of(element_type)
    bits = bit_width(element_type)
    if element_type in _SUB_BYTE_INT or dt.name in _ML_INT_NAMES:
        v = x.astype(np.int64) & ((1 << bits) - 1)
        if is_signed_integral(element_type):
            v = np.where(v >= (1 << (bits - 1)), v - (1 << bits), v)
        return v.astype(dt)
    return x.astype(dt)  # numpy's integer casts wrap (two's complement)


def convert(x: np.ndarray, src_type: str, dst_type: str) -> np.ndarray:
    """XLA ``convert`` from ``src_type`` to ``dst_type``."""
    dst = dtype_of(dst_type)
    if src_type == dst_type:
        return x
    if dst_type == "pred":
        if is_complex(src_type):
            return x != 0
        return widen(x) != 0
    src_is_float = is_floating(src_type)
    if is_integral(dst_type):
        if is_complex(src_type):
            x = np.real(x)
            src_is_float = True
        if src_is_float:
            lo, hi = int_range(dst_type)
            w = widen(x).astype(F64)
            with np.errstate(invalid="ignore"):
                out = np.where(np.isnan(w), 0.0, np.clip(np.trunc(w), lo, hi))
            # f64 cannot hold every s64/u64 bound exactly: clip again as ints.
            if bit_width(dst_type) == 64:
                big = out >= float(hi)
                small = out <= float(lo)
                res = out.astype(np.int64 if is_signed_integral(dst_type) else np.uint64)
                res = np.where(big, np.array(hi).astype(res.dtype), res)
                res = np.where(small, np.array(lo).astype(res.dtype), res)
                return res.astype(dst)
            return _wrap_int(out.astype(np.int64), dst_type)
        # integer or pred source
        src = compute_dtype(x.dtype)
        xi = x.astype(src) if x.dtype != src else x
        if x.dtype == np.bool_:
            xi = x.astype(np.uint8)
        return _wrap_int(xi, dst_type)
    if is_floating(dst_type):
        if is_complex(src_type):
            x = np.real(x)
        if x.dtype == np.bool_:
            x = x.astype(np.uint8)
        if x.dtype.name in _ML_INT_NAMES:
            x = x.astype(np.int64)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if x.dtype.name in _ML_FLOAT_NAMES and dst.name in _ML_FLOAT_NAMES:
                # between two narrow types: through f32, exact for the source
                return x.astype(F32).astype(dst)
            if x.dtype.kind in "iu" and dst.name in _ML_FLOAT_NAMES:
                # integer -> narrow float: exact in f64, then one rounding
                return x.astype(F64).astype(dst)
            return x.astype(dst)
    if is_complex(dst_type):
        if x.dtype.name in _ML_FLOAT_NAMES or x.dtype.name in _ML_INT_NAMES or x.dtype == np.bool_:
            x = x.astype(F32 if dst == np.complex64 else F64)
        return x.astype(dst)
    raise ValueError(f"cannot convert {src_type} to {dst_type}")


def cast_result(x: np.ndarray, element_type: str) -> np.ndarray:
    """Round a computed (f32/f64/int) array to ``element_type`` (no XLA
    saturation: for the result of an arithmetic op)."""
    dt = dtype_of(element_type)
    if x.dtype == dt:
        return x
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if dt.name in _ML_INT_NAMES or element_type in _SUB_BYTE_INT:
            return _wrap_int(np.asarray(x), element_type)
        return np.asarray(x).astype(dt)


def contiguous(x) -> np.ndarray:
    """A C-contiguous array with the same shape (unlike
    ``np.ascontiguousarray``, a 0-d array stays 0-d)."""
    a = np.asarray(x)
    return a if a.flags.c_contiguous else a.copy(order="C")


def storage_view(x: np.ndarray, element_type: str) -> np.ndarray:
    """The raw bits of ``x`` as an unsigned integer array (for
    bitcast-convert and total-order compares)."""
    dt = dtype_of(element_type)
    size = dt.itemsize
    ut = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64, 16: None}[size]
    if ut is None:
        raise ValueError(f"no raw view for {element_type}")
    a = contiguous(x.astype(dt, copy=False))
    return a.view(ut)


def total_order_key(x: np.ndarray, element_type: str) -> np.ndarray:
    """Signed integer keys whose order is IEEE total order of ``x``
    (-NaN < -inf < ... < -0 < +0 < ... < inf < NaN)."""
    bits = storage_view(x, element_type)
    nbits = bits.dtype.itemsize * 8
    st = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}[nbits]
    s = bits.view(st).astype(np.int64)
    mask = (1 << (nbits - 1)) - 1
    # negative: flip magnitude bits so that larger magnitudes sort lower
    return np.where(s < 0, s ^ mask, s)
