"""Constant literals: validated when parsed, decoded to numpy on demand.

A :class:`Literal` keeps the text between ``constant(`` and ``)`` verbatim
(so printing round-trips) and decodes it lazily into a numpy array of the
right dtype (ml_dtypes for bf16/fp8/int4), in logical row-major order.
Tuple literals decode to a tuple of arrays.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import Any

import numpy as np

from .attrs import split_top_level
from .shape import Shape, bit_width, is_complex, is_floating, is_integral

try:  # ml_dtypes is a runtime dependency; keep import errors readable.
    import ml_dtypes
except ImportError:  # pragma: no cover
    ml_dtypes = None  # type: ignore[assignment]


class LiteralError(ValueError):
    """Bad literal text; ``offset`` is relative to the literal's start."""

    def __init__(self, message: str, offset: int = 0):
        super().__init__(message)
        self.offset = offset


def _ml(name: str):
    return getattr(ml_dtypes, name) if ml_dtypes is not None and hasattr(ml_dtypes, name) else None


_DTYPES: dict[str, Any] = {
    "pred": np.bool_, "s8": np.int8, "s16": np.int16, "s32": np.int32, "s64": np.int64,
    "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
    "f16": np.float16, "f32": np.float32, "f64": np.float64,
    "c64": np.complex64, "c128": np.complex128,
    "bf16": _ml("bfloat16"), "f8e5m2": _ml("float8_e5m2"), "f8e4m3fn": _ml("float8_e4m3fn"),
    "f8e4m3": _ml("float8_e4m3"), "f8e4m3b11fnuz": _ml("float8_e4m3b11fnuz"),
    "f8e3m4": _ml("float8_e3m4"), "f8e5m2fnuz": _ml("float8_e5m2fnuz"),
    "f8e4m3fnuz": _ml("float8_e4m3fnuz"), "f8e8m0fnu": _ml("float8_e8m0fnu"),
    "f4e2m1fn": _ml("float4_e2m1fn"), "f6e2m3fn": _ml("float6_e2m3fn"),
    "f6e3m2fn": _ml("float6_e3m2fn"),
    "s4": _ml("int4"), "u4": _ml("uint4"), "s2": _ml("int2"), "u2": _ml("uint2"),
    "s1": np.int8, "u1": np.uint8,
}


def numpy_dtype(element_type: str):
    """The numpy dtype used to hold values of an HLO element type."""
    dt = _DTYPES.get(element_type)
    if dt is None:
        raise ValueError(f"no numpy dtype for element type {element_type}")
    return np.dtype(dt)


def _mantissa_bits(t: str) -> int:
    if t == "f16":
        return 10
    if t == "bf16":
        return 7
    if t == "f32":
        return 23
    if t == "f64":
        return 52
    m = re.fullmatch(r"f\d+e\d+m(\d+)\w*", t)
    return int(m.group(1)) if m else 0


def _round_to(v: float, t: str) -> float:
    """``static_cast<T>(v)`` back to double (inf/nan when it overflows)."""
    if t == "f64":
        return v
    dt = _DTYPES.get(t)
    if dt is None:
        return v
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(np.array(v, dtype=np.float64).astype(dt).astype(np.float64))


@lru_cache(maxsize=None)
def _finite_max(t: str) -> float:
    """The largest finite value of float type ``t`` (0.0 if unknown): a
    value no larger in magnitude stays finite when rounded to ``t``."""
    dt = _DTYPES.get(t)
    if t == "f64":
        return float(np.finfo(np.float64).max)
    if dt is None:
        return 0.0
    try:
        return float(ml_dtypes.finfo(dt).max)
    except (ValueError, TypeError, AttributeError):
        return 0.0


def _int_range(t: str) -> tuple[int, int]:
    bits = bit_width(t)
    if t.startswith("s"):
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


_TOKEN_RE = re.compile(
    r"\s*(?:(?P<c>/\*.*?\*/)|(?P<lb>\{)|(?P<rb>\})|(?P<comma>,)|(?P<lp>\()|(?P<rp>\))"
    r"|(?P<dots>\.\.\.)|(?P<bool>true|false)"
    r"|(?P<nan>-?nan(?:\(0x[0-9a-fA-F]+\))?)|(?P<inf>-?inf)"
    r"|(?P<num>-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?))", re.S)


def _tokens(text: str):
    pos = 0
    n = len(text)
    match = _TOKEN_RE.match
    while pos < n:
        m = match(text, pos)
        if not m or m.end() == pos:
            if not text[pos:].strip():
                return
            raise LiteralError(f"unexpected '{text[pos:pos + 10].strip()}' in literal", pos)
        pos = m.end()
        kind = m.lastgroup
        if kind == "c":
            continue
        yield kind, m.group(kind), m.start(kind)


def _token_list(text: str, shape: Shape) -> list:
    """The literal's tokens, stopping (with the tokens so far) once there are
    more scalars than the shape holds: the nesting check then reports the
    extra element without tokenizing a huge rest."""
    limit = 1
    for d in shape.dimensions:
        limit *= d
    limit = 2 * limit + 8  # complex (re, im) pairs count two
    out = []
    scalars = 0
    for tok in _tokens(text):
        out.append(tok)
        if tok[0] in ("num", "bool", "nan", "inf"):
            scalars += 1
            if scalars > limit:
                break
    return out


_SCALAR_RE = re.compile(r"\s*(-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|true|false|-?inf|-?nan)\s*\Z")


def _check_scalar(kind: str, tok: str, t: str, offset: int) -> Any:
    """Validate one element and return its Python value."""
    if kind == "bool":
        return tok == "true"
    if t == "pred":
        if kind != "num" or not re.fullmatch(r"-?\d+", tok):
            raise LiteralError(f"expects integer for primitive type: PRED", offset)
        return int(tok) != 0
    if is_integral(t):
        if kind != "num" or not re.fullmatch(r"-?\d+", tok):
            raise LiteralError(f"expects integer for primitive type: {t.upper()}", offset)
        v = int(tok)
        if not (-(1 << 63) <= v < (1 << 63) or (t == "u64" and 0 <= v < (1 << 64))):
            raise LiteralError(f"expects integer for primitive type: {t.upper()}", offset)
        lo, hi = _int_range(t)
        if t.startswith("u"):
            # XLA casts the parsed int64 to uint64 before comparing.
            if (v & ((1 << 64) - 1)) > hi:
                raise LiteralError(f"value {v} is out of range for literal's primitive type "
                                   f"{t.upper()} namely [0, {hi}].", offset)
            return v & hi if v < 0 else v
        if not lo <= v <= hi:
            raise LiteralError(f"value {v} is out of range for literal's primitive type "
                               f"{t.upper()} namely [{lo}, {hi}].", offset)
        return v
    if is_floating(t) or is_complex(t):
        base = {"c64": "f32", "c128": "f64"}.get(t, t)
        if kind == "nan":
            neg = tok.startswith("-")
            m = re.search(r"0x([0-9a-fA-F]+)", tok)
            if m:
                payload = int(m.group(1), 16)
                mb = _mantissa_bits(base)
                no_payload = base.endswith("fn") or base.endswith("fnuz") or base.endswith("fnu")
                if payload <= 0 or no_payload or payload >= (1 << mb):
                    raise LiteralError(
                        f"tries to set NaN payload 0x{payload:x} to a literal with "
                        f"type {t.upper()} that does not support it", offset)
            return -math.nan if neg else math.nan
        if kind == "inf":
            return -math.inf if tok.startswith("-") else math.inf
        if kind != "num":
            raise LiteralError(f"expect floating point value for primitive type: {t.upper()}", offset)
        v = float(tok)
        if math.isinf(v):
            raise LiteralError(f"value {tok} is out of range for literal's primitive type {t.upper()}", offset)
        if -_finite_max(base) <= v <= _finite_max(base):
            return v  # rounds to a finite value of the type
        conv = _round_to(v, base)
        if not math.isfinite(conv):
            raise LiteralError(f"value {tok} is out of range for literal's primitive type {t.upper()}", offset)
        return v
    raise LiteralError(f"unsupported primitive type {t.upper()}", offset)


_DROP_FLOAT_CHARS = str.maketrans("", "", "0123456789.-+eE \t\r\n")
_DROP_INT_CHARS = str.maketrans("", "", "0123456789- \t\r\n")
_BRACES_TO_SPACE = str.maketrans("{}", "  ")


def _expected_skeleton(dims: tuple) -> str:
    """A dense literal of ``dims`` with the numbers taken out: ``{,,}`` ..."""
    inner = None
    for d in reversed(dims):
        inner = "{" + (","*(d - 1) if inner is None else ",".join([inner] * d)) + "}" \
            if d else "{}"
    return inner or ""


def _parse_dense_fast(text: str, shape: Shape, want_values: bool):
    """The common case in one vectorized sweep: a fully written array of
    plain numbers (no comments, nan/inf, bools or ``...``).  Returns None
    when the text is not that or a value needs the exact checks, so the
    token-by-token parser reports the error."""
    t = shape.element_type
    dims = shape.dimensions
    if not dims or t == "pred" or is_complex(t) or not (is_floating(t) or is_integral(t)):
        return None
    count = math.prod(dims)
    if count == 0 or len(text) < 2 * count:  # too short to hold them all
        return None
    integral = is_integral(t)
    skeleton = text.translate(_DROP_INT_CHARS if integral else _DROP_FLOAT_CHARS)
    if skeleton != _expected_skeleton(dims):
        return None
    if text.count("+") != text.count("e+") + text.count("E+"):
        return None  # a leading '+' is not a number in HLO text
    parts = text.translate(_BRACES_TO_SPACE).split(",")
    if len(parts) != count:
        return None
    try:
        values = list(map(int if integral else float, parts))
    except ValueError:  # '1-2', '1e', '' ...: the exact parser says where
        return None
    if integral:
        lo, hi = _int_range(t)
        if t.startswith("u") or min(values) < lo or max(values) > hi:
            return None
    else:
        fmax = _finite_max({"c64": "f32", "c128": "f64"}.get(t, t))
        arr = np.array(values, dtype=np.float64)
        if not fmax or not np.all(np.abs(arr) <= fmax):  # nan compares False too
            return None
    return values if want_values else []


def _parse_dense(text: str, shape: Shape, want_values: bool) -> list | None:
    """Check nesting against the shape (XLA's messages) and collect values."""
    if len(text) > 4096:
        fast = _parse_dense_fast(text, shape, want_values)
        if fast is not None:
            return fast if want_values else None
    dims = shape.dimensions
    rank = len(dims)
    t = shape.element_type
    values: list = [] if want_values else None  # type: ignore[assignment]
    nest = 0
    seen = [0] * rank
    toks = _token_list(text, shape)
    i = 0
    n = len(toks)
    if rank == 0:
        # A scalar: one value (complex: a pair in parentheses).
        if is_complex(t):
            if n >= 5 and toks[0][0] == "lp" and toks[2][0] == "comma" and toks[4][0] == "rp":
                re_v = _check_scalar(toks[1][0], toks[1][1], t, toks[1][2])
                im_v = _check_scalar(toks[3][0], toks[3][1], t, toks[3][2])
                if n != 5:
                    raise LiteralError("unexpected token after scalar literal", toks[5][2])
                return [complex(re_v, im_v)] if want_values else None
            raise LiteralError("expects a complex literal '(re, im)'", 0)
        # XLA also accepts a scalar wrapped in braces.
        core = [x for x in toks if x[0] not in ("lb", "rb")]
        if len(core) != 1:
            raise LiteralError("expects a scalar literal", toks[0][2] if toks else 0)
        v = _check_scalar(core[0][0], core[0][1], t, core[0][2])
        return [v] if want_values else None
    if n == 1 and toks[0][0] in ("num", "bool", "nan", "inf"):
        # A bare scalar for an array shape: XLA's parser ignores the nesting
        # error here and stores the value as the first element (the others
        # stay zero).  Mirror that verdict and that value.
        v = _check_scalar(toks[0][0], toks[0][1], t, toks[0][2])
        if want_values:
            count = 1
            for d in dims:
                count *= d
            values = [v] + [0] * (count - 1) if count else []
        return values
    while i < n:
        kind, tok, off = toks[i]
        if kind == "lb":
            nest += 1
            if nest > rank:
                raise LiteralError(f"expects nested array in rank {rank}, but sees larger", off)
            if nest > 1:
                seen[nest - 2] += 1
                if seen[nest - 2] > dims[nest - 2]:
                    idx = ",".join(str(s - 1) for s in seen[:nest - 2])
                    raise LiteralError(
                        f"expects {dims[nest - 2]} elements in the [{idx}]th element, but sees more", off)
            i += 1
        elif kind == "rb":
            if nest == 0:
                raise LiteralError("unexpected '}' token", off)
            nest -= 1
            if seen[nest] != dims[nest]:
                idx = ",".join(str(s - 1) for s in seen[:nest])
                raise LiteralError(
                    f"expects {dims[nest]} elements in the [{idx}]th element, but sees {seen[nest]}", off)
            seen[nest] = 0
            i += 1
        elif kind == "comma":
            i += 1
        elif kind == "dots":
            if nest != 1:
                raise LiteralError(f"expects `...` at nest level 1, but sees it at nest level {nest}", off)
            seen[0] = dims[0]
            if want_values:
                return None  # elided constant: no values
            i += 1
        elif kind in ("num", "bool", "nan", "inf", "lp"):
            if nest != rank:
                raise LiteralError(f"expects nested array in rank {rank}, but sees {nest}", off)
            seen[rank - 1] += 1
            if seen[rank - 1] > dims[rank - 1]:
                raise LiteralError(
                    f"expects {dims[rank - 1]} elements on the minor-most dimension, but sees more", off)
            if kind == "lp":
                if not is_complex(t):
                    raise LiteralError("unexpected '(' in literal. Parens are only valid for complex literals", off)
                if i + 4 >= n or toks[i + 2][0] != "comma" or toks[i + 4][0] != "rp":
                    raise LiteralError("expects a complex literal '(re, im)'", off)
                re_v = _check_scalar(toks[i + 1][0], toks[i + 1][1], t, toks[i + 1][2])
                im_v = _check_scalar(toks[i + 3][0], toks[i + 3][1], t, toks[i + 3][2])
                if want_values:
                    values.append(complex(re_v, im_v))
                i += 5
            else:
                v = _check_scalar(kind, tok, t, off)
                if want_values:
                    values.append(v)
                i += 1
        else:
            raise LiteralError(f"unexpected token '{tok}' in literal", off)
    if nest != 0:
        raise LiteralError("expects '}' at the end of the literal", len(text))
    return values


def _split_tuple_literal(text: str) -> list[str] | None:
    """Top-level elements of ``( a, b, ... )``; None if not a tuple."""
    body = text.strip()
    if not (body.startswith("(") and body.endswith(")")):
        return None
    return split_top_level(body[1:-1])


@lru_cache(maxsize=65536)
def _validate_small(text: str, shape: Shape) -> None:
    validate_literal(text, shape, _cache=False)


def validate_literal(text: str, shape: Shape, _cache: bool = True) -> None:
    """Raise :class:`LiteralError` if ``text`` is not a literal of ``shape``."""
    if _cache and len(text) < 64:
        return _validate_small(text, shape)
    if shape.is_tuple:
        parts = _split_tuple_literal(text)
        if parts is None:
            raise LiteralError("expects '(' at the start of a tuple literal", 0)
        elems = [p for p in parts if p.strip()]
        if len(elems) != len(shape.tuple_shapes):
            raise LiteralError(
                f"expects {len(shape.tuple_shapes)} elements in the tuple literal, saw {len(elems)}", 0)
        for p, s in zip(elems, shape.tuple_shapes):
            validate_literal(p, s)
        return
    if not shape.is_array:
        if text.strip() not in ("", "{}", "()"):
            raise LiteralError(f"unexpected literal for {shape}", 0)
        return
    if _SCALAR_RE.match(text) and shape.rank == 0:
        kind_tok = text.strip()
        kind = ("bool" if kind_tok in ("true", "false") else "nan" if "nan" in kind_tok
                else "inf" if "inf" in kind_tok else "num")
        _check_scalar(kind, kind_tok, shape.element_type, 0)
        return
    _parse_dense(text, shape, want_values=False)


def decode_literal(text: str, shape: Shape) -> Any:
    """Decode literal text to a numpy array (row-major logical order), or a
    tuple of them for tuple shapes.  Elided constants (``{...}``) decode to
    zeros."""
    if shape.is_tuple:
        parts = [p for p in (_split_tuple_literal(text) or []) if p.strip()]
        return tuple(decode_literal(p, s) for p, s in zip(parts, shape.tuple_shapes))
    if not shape.is_array:
        return np.zeros((), dtype=np.float32)
    dt = numpy_dtype(shape.element_type)
    values = _parse_dense(text, shape, want_values=True)
    dims = shape.dimensions
    if values is None:
        return np.zeros(dims, dtype=dt)
    count = math.prod(dims)
    if len(values) != count:
        if len(values) == 1 and count != 1 and shape.rank == 0:
            pass
        raise LiteralError(f"literal has {len(values)} elements, shape {shape} needs {count}")
    if dt.kind in "fc" or shape.element_type in ("bf16",) or dt.name.startswith("float"):
        arr = np.array(values, dtype=np.float64 if dt.kind != "c" else np.complex128).astype(dt)
    else:
        arr = np.array(values, dtype=np.int64 if shape.element_type != "pred" else np.bool_).astype(dt)
    return arr.reshape(dims)


# ---------------------------------------------------------------------------
# Formatting
# ---------------------------------------------------------------------------


def format_scalar(v: Any, element_type: str) -> str:
    """One element the way XLA prints it (RoundTripFpToString for floats)."""
    if element_type == "pred":
        return "true" if bool(v) else "false"
    if is_integral(element_type):
        return str(int(v))
    if is_complex(element_type):
        base = "f32" if element_type == "c64" else "f64"
        return f"({format_scalar(complex(v).real, base)}, {format_scalar(complex(v).imag, base)})"
    f = float(v)
    if math.isnan(f):
        return "-nan" if math.copysign(1.0, f) < 0 else "nan"
    if math.isinf(f):
        return "-inf" if f < 0 else "inf"
    if element_type == "f64":
        for digits in (15, 17):
            s = "%.*g" % (digits, f)
            if float(s) == f:
                return s
        return repr(f)
    # f32 and narrower: XLA prints through float.
    f32 = float(np.float32(f))
    for digits in (6, 9):
        s = "%.*g" % (digits, f32)
        if float(np.float32(float(s))) == f32:
            return s
    return "%.9g" % f32


def format_array(arr: np.ndarray, element_type: str) -> str:
    """XLA's literal text for an array value (``{ {1, 2}, {3, 4} }``)."""
    arr = np.asarray(arr)
    if arr.ndim == 0:
        return format_scalar(arr.item() if arr.dtype.kind in "biufc" else float(arr), element_type)

    def rec(a: np.ndarray, depth: int) -> str:
        if a.ndim == 1:
            items = ", ".join(format_scalar(x if a.dtype.kind in "biufc" else float(x), element_type)
                              for x in a.tolist() if True) if a.dtype.kind in "biufc" else \
                ", ".join(format_scalar(float(x), element_type) for x in a)
            return "{" + items + "}"
        inner = ", ".join(rec(sub, depth + 1) for sub in a)
        return "{ " + inner + " }"
    return rec(arr, 0)


class Literal:
    """A constant's value: verbatim text plus a lazily decoded numpy value."""

    __slots__ = ("text", "shape", "_value", "_all_equal")

    def __init__(self, text: str, shape: Shape, value: Any = None):
        self.text = text
        self.shape = shape
        self._value = value
        #: is_scalar_value's answers (algsimp asks about the same few
        #: constants for every add and multiply it visits)
        self._all_equal: dict[float, bool] | None = None

    @staticmethod
    def from_array(arr: Any, shape: Shape) -> "Literal":
        if shape.is_tuple:
            text = "(" + ", ".join(Literal.from_array(a, s).text
                                   for a, s in zip(arr, shape.tuple_shapes)) + ")"
            return Literal(text, shape, tuple(arr))
        value = np.asarray(arr).astype(numpy_dtype(shape.element_type)).reshape(shape.dimensions)
        return Literal(format_array(value, shape.element_type), shape, value)

    @property
    def value(self) -> Any:
        if self._value is None:
            self._value = decode_literal(self.text, self.shape)
        return self._value

    def __repr__(self) -> str:
        t = self.text if len(self.text) < 40 else self.text[:37] + "..."
        return f"Literal({t}: {self.shape})"

    def is_scalar_value(self, x: float) -> bool:
        """True if every element equals ``x`` (e.g. a zero or one constant)."""
        memo = self._all_equal
        if memo is None:
            memo = self._all_equal = {}
        got = memo.get(x)
        if got is None:
            got = memo[x] = self._is_scalar_value(x)
        return got

    def _is_scalar_value(self, x: float) -> bool:
        try:
            v = self.value
        except (LiteralError, ValueError):
            return False
        if isinstance(v, tuple):
            return False
        a = np.asarray(v)
        if a.size == 0:
            return False
        if a.dtype.kind == "c":  # a complex value equals x only with no imaginary part
            return bool(np.all(a == x))
        return bool(np.all(a.astype(np.float64) == x))
