"""Typed access to instruction attributes, and the attribute schema.

Attribute values are stored as the exact text that follows ``key=``.  This
module parses them on demand (cached by text) and formats new values the way
XLA prints them.  ``SCHEMA`` says which attributes each opcode accepts, of
which type, and which are required -- the parser validates every attribute
against it, as XLA's parser does, so a misspelt attribute or a malformed
window is a located error rather than a silent pass-through.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any, Callable, Sequence

from .shape import Shape, ShapeSyntaxError, parse_array_shape

# ---------------------------------------------------------------------------
# Strings
# ---------------------------------------------------------------------------

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "'": "'", "\\": "\\",
            "a": "\a", "b": "\b", "f": "\f", "v": "\v", "?": "?"}


def unquote(text: str) -> str:
    """Decode an XLA (C-escaped) string literal, quotes included."""
    if len(text) < 2 or text[0] != '"' or text[-1] != '"':
        return text
    body = text[1:-1]
    if "\\" not in body:
        return body
    out = []
    i = 0
    n = len(body)
    while i < n:
        c = body[i]
        if c != "\\" or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        e = body[i + 1]
        if e in _ESCAPES:
            out.append(_ESCAPES[e])
            i += 2
        elif e == "x":
            m = re.match(r"[0-9a-fA-F]{1,2}", body[i + 2:])
            hexd = m.group(0) if m else ""
            out.append(chr(int(hexd, 16)) if hexd else "x")
            i += 2 + len(hexd)
        elif e in "01234567":
            m = re.match(r"[0-7]{1,3}", body[i + 1:])
            assert m is not None
            out.append(chr(int(m.group(0), 8)))
            i += 1 + len(m.group(0))
        else:
            out.append(e)
            i += 2
    return "".join(out)


def quote(value: str) -> str:
    """C-escape a string the way absl::CEscape does, with quotes."""
    out = []
    for ch in value:
        o = ord(ch)
        if ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ch == '"':
            out.append('\\"')
        elif ch == "'":
            out.append("\\'")
        elif ch == "\\":
            out.append("\\\\")
        elif o < 0x20 or o == 0x7F:
            out.append("\\%03o" % o)
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


# ---------------------------------------------------------------------------
# Lists
# ---------------------------------------------------------------------------


@lru_cache(maxsize=65536)
def parse_int_list(text: str) -> tuple[int, ...]:
    """``{0,1, 2}`` -> (0, 1, 2)."""
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise ValueError(f"expects '{{' int list '}}', saw '{text}'")
    body = body[1:-1].strip()
    if not body:
        return ()
    return tuple(int(x) for x in body.split(","))


def format_int_list(values: Sequence[int]) -> str:
    return "{" + ",".join(str(int(v)) for v in values) + "}"


@lru_cache(maxsize=4096)
def parse_int_list_list(text: str) -> tuple[tuple[int, ...], ...]:
    """``{{0,1},{2,3}}`` -> ((0, 1), (2, 3))."""
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise ValueError(f"expects a braced list of int lists, saw '{text}'")
    inner = body[1:-1].strip()
    if not inner:
        return ()
    groups = re.findall(r"\{([^{}]*)\}", inner)
    rest = re.sub(r"\{[^{}]*\}", "", inner).replace(",", "").strip()
    if rest:
        raise ValueError(f"unexpected '{rest}' in int list list")
    return tuple(tuple(int(x) for x in g.split(",") if x.strip()) for g in groups)


# ---------------------------------------------------------------------------
# Slices, windows, padding, convolution dimension labels
# ---------------------------------------------------------------------------

_SLICE_RE = re.compile(r"\[\s*(-?\d+)\s*:\s*(-?\d+)\s*(?::\s*(-?\d+)\s*)?\]")


@lru_cache(maxsize=16384)
def parse_slice(text: str) -> tuple[tuple[int, int, int], ...]:
    """``{[0:2], [1:5:2]}`` -> ((0, 2, 1), (1, 5, 2))."""
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise ValueError(f"expects '{{' slice ranges '}}', saw '{text}'")
    body = body[1:-1]
    out = []
    pos = 0
    for m in _SLICE_RE.finditer(body):
        if body[pos:m.start()].strip(" ,"):
            raise ValueError(f"malformed slice range near '{body[pos:m.start()].strip()}'")
        out.append((int(m.group(1)), int(m.group(2)), int(m.group(3) or 1)))
        pos = m.end()
    if body[pos:].strip(" ,"):
        raise ValueError(f"malformed slice range near '{body[pos:].strip()}'")
    return tuple(out)


def format_slice(ranges: Sequence[tuple[int, int, int]]) -> str:
    parts = []
    for start, limit, stride in ranges:
        parts.append(f"[{start}:{limit}:{stride}]" if stride != 1 else f"[{start}:{limit}]")
    return "{" + ", ".join(parts) + "}"


class WindowDim:
    __slots__ = ("size", "stride", "padding_low", "padding_high",
                 "window_dilation", "base_dilation", "window_reversal")

    def __init__(self, size=1, stride=1, padding_low=0, padding_high=0,
                 window_dilation=1, base_dilation=1, window_reversal=False):
        self.size = size
        self.stride = stride
        self.padding_low = padding_low
        self.padding_high = padding_high
        self.window_dilation = window_dilation
        self.base_dilation = base_dilation
        self.window_reversal = window_reversal

    def __repr__(self) -> str:
        return (f"WindowDim(size={self.size}, stride={self.stride}, pad=({self.padding_low},"
                f"{self.padding_high}), lhs_dilate={self.base_dilation}, "
                f"rhs_dilate={self.window_dilation}, reversal={self.window_reversal})")


def _dxd(value: str, key: str) -> list[int]:
    if not re.fullmatch(r"-?\d+(x-?\d+)*", value):
        raise ValueError(f"expects a DxD pattern for {key}, saw '{value}'")
    return [int(v) for v in value.split("x")]


@lru_cache(maxsize=4096)
def parse_window(text: str) -> tuple[WindowDim, ...]:
    """``{size=3x3 stride=2x2 pad=0_1x0_1 lhs_dilate=1x1 rhs_dilate=1x1 rhs_reversal=0x0}``."""
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise ValueError(f"expects '{{' window '}}', saw '{text}'")
    fields: dict[str, list] = {}
    for item in body[1:-1].split():
        key, eq, value = item.partition("=")
        if not eq:
            raise ValueError(f"expects key=value in window, saw '{item}'")
        if key in fields:
            raise ValueError(f"duplicate window attribute {key}")
        if key == "size":
            fields[key] = _dxd(value, key)
        elif key in ("stride", "lhs_dilate", "rhs_dilate", "rhs_reversal"):
            fields[key] = _dxd(value, key)
        elif key == "pad":
            pads = []
            for p in value.split("x"):
                m = re.fullmatch(r"(-?\d+)_(-?\d+)", p)
                if not m:
                    raise ValueError(f"expects padding_low and padding_high separated by '_', saw '{p}'")
                pads.append((int(m.group(1)), int(m.group(2))))
            fields[key] = pads
        else:
            raise ValueError(f"unexpected attribute name: {key}")
    rank = len(fields.get("size", []))
    if "size" not in fields and fields:
        raise ValueError("sub-attribute 'size' is required")
    dims = []
    for key, vals in fields.items():
        if len(vals) != rank:
            raise ValueError(f"expects {key} to have {rank} dimensions, saw {len(vals)}")
    for i in range(rank):
        d = WindowDim(size=fields["size"][i])
        if "stride" in fields:
            d.stride = fields["stride"][i]
        if "pad" in fields:
            d.padding_low, d.padding_high = fields["pad"][i]
        if "lhs_dilate" in fields:
            d.base_dilation = fields["lhs_dilate"][i]
        if "rhs_dilate" in fields:
            d.window_dilation = fields["rhs_dilate"][i]
        if "rhs_reversal" in fields:
            d.window_reversal = bool(fields["rhs_reversal"][i])
        dims.append(d)
    return tuple(dims)


def format_window(dims: Sequence[WindowDim]) -> str:
    """XLA's ``window_util::ToString``: fields that differ from the default."""
    if not dims:
        return "{}"
    parts = ["size=" + "x".join(str(d.size) for d in dims)]
    if any(d.stride != 1 for d in dims):
        parts.append("stride=" + "x".join(str(d.stride) for d in dims))
    if any(d.padding_low or d.padding_high for d in dims):
        parts.append("pad=" + "x".join(f"{d.padding_low}_{d.padding_high}" for d in dims))
    if any(d.base_dilation != 1 for d in dims):
        parts.append("lhs_dilate=" + "x".join(str(d.base_dilation) for d in dims))
    if any(d.window_dilation != 1 for d in dims):
        parts.append("rhs_dilate=" + "x".join(str(d.window_dilation) for d in dims))
    if any(d.window_reversal for d in dims):
        parts.append("rhs_reversal=" + "x".join(str(int(d.window_reversal)) for d in dims))
    return "{" + " ".join(parts) + "}"


@lru_cache(maxsize=4096)
def parse_padding(text: str) -> tuple[tuple[int, int, int], ...]:
    """``0_1x2_3_1`` -> ((0, 1, 0), (2, 3, 1)) as (low, high, interior)."""
    out = []
    for p in text.strip().split("x"):
        m = re.fullmatch(r"(-?\d+)_(-?\d+)(?:_(\d+))?", p)
        if not m:
            raise ValueError(f"expects padding_low and padding_high separated by '_', saw '{p}'")
        out.append((int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)))
    return tuple(out)


def format_padding(config: Sequence[tuple[int, int, int]]) -> str:
    return "x".join(f"{lo}_{hi}_{it}" if it else f"{lo}_{hi}" for lo, hi, it in config)


class ConvDims:
    """Convolution dimension numbers from ``dim_labels=b01f_01io->b01f``."""

    __slots__ = ("input_batch", "input_feature", "input_spatial",
                 "kernel_input_feature", "kernel_output_feature", "kernel_spatial",
                 "output_batch", "output_feature", "output_spatial", "text")

    def __repr__(self) -> str:
        return f"ConvDims({self.text})"


@lru_cache(maxsize=1024)
def parse_dim_labels(text: str) -> ConvDims:
    m = re.fullmatch(r"([0-9bf?]{2,})_([0-9io?]{2,})->([0-9bf?]{2,})", text.strip())
    if not m:
        raise ValueError(f"expects dim labels pattern, e.g., 'bf0_0io->0bf', saw '{text}'")
    lhs, rhs, out = m.groups()
    if not (len(lhs) == len(rhs) == len(out)):
        raise ValueError("convolution lhs, rhs, and output must have the same rank")
    rank = len(lhs)

    def spatial(labels: str, what: str) -> list[int]:
        pos = {}
        for i, c in enumerate(labels):
            if c.isdigit():
                d = int(c)
                if d in pos:
                    raise ValueError(f"expects unique {what} labels")
                pos[d] = i
        if sorted(pos) != list(range(len(pos))):
            raise ValueError(f"expects [0-{len(pos) - 1}bf?] in {what} dimension numbers")
        return [pos[i] for i in range(len(pos))]

    for labels, letters, what in ((lhs, "bf", "lhs"), (rhs, "io", "rhs"), (out, "bf", "output")):
        for ch in letters:
            if labels.count(ch) != 1:
                raise ValueError(f"expects unique {what} '{ch}' label")
    d = ConvDims()
    d.text = text.strip()
    d.input_batch = lhs.index("b")
    d.input_feature = lhs.index("f")
    d.input_spatial = spatial(lhs, "lhs")
    d.kernel_input_feature = rhs.index("i")
    d.kernel_output_feature = rhs.index("o")
    d.kernel_spatial = spatial(rhs, "rhs")
    d.output_batch = out.index("b")
    d.output_feature = out.index("f")
    d.output_spatial = spatial(out, "output")
    if not (len(d.input_spatial) == len(d.kernel_spatial) == len(d.output_spatial)):
        raise ValueError("input, kernel, and output must have same number of spatial dimensions")
    del rank
    return d


# ---------------------------------------------------------------------------
# Metadata, backend config, frontend attributes
# ---------------------------------------------------------------------------

#: one ``key=value`` of a metadata block; XLA also accepts commas between them
#: (``op_name="a/b", source_file="x.py", source_line=3``)
_META_RE = re.compile(r'[\s,]*([A-Za-z_][\w]*)=("(?:[^"\\]|\\.)*"|\{[^{}]*\}|[^\s{},]+)')


@lru_cache(maxsize=65536)
def _parse_metadata_cached(text: str) -> tuple:
    body = text.strip()
    if body.startswith("{") and body.endswith("}"):
        body = body[1:-1]
    out = []
    pos = 0
    while pos < len(body):
        if not body[pos:].strip(" \t\r\n,"):
            break
        m = _META_RE.match(body, pos)
        if not m:
            raise ValueError(f"malformed metadata near '{body[pos:pos + 20].strip()}'")
        key, val = m.group(1), m.group(2)
        if val.startswith('"'):
            v: Any = unquote(val)
        else:
            try:
                v = int(val)
            except ValueError:
                v = val
        out.append((key, v))
        pos = m.end()
    return tuple(out)


def parse_metadata(text: str) -> dict[str, Any]:
    """``{op_type="Dot" op_name="jit(f)/dot" source_line=3}`` -> dict."""
    return dict(_parse_metadata_cached(text))


def format_metadata(meta: dict[str, Any]) -> str:
    parts = []
    for k, v in meta.items():
        if isinstance(v, str):
            braced = v.startswith("{") and v.endswith("}")  # profile_type={1}
            parts.append(f"{k}={v if braced else quote(v)}")
        elif isinstance(v, bool):
            parts.append(f"{k}={'true' if v else 'false'}")
        else:
            parts.append(f"{k}={v}")
    return "{" + " ".join(parts) + "}"


@lru_cache(maxsize=8192)
def _parse_backend_config_cached(text: str) -> str:
    raw = unquote(text) if text.startswith('"') else text
    return raw


def parse_backend_config(text: str) -> Any:
    """The backend config as JSON (a fresh dict each call), or the raw
    string when it is not JSON."""
    raw = _parse_backend_config_cached(text)
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def format_backend_config(config: Any) -> str:
    """JSON the way XLA prints backend configs: no spaces, keys sorted."""
    if isinstance(config, str):
        return config if lexes_as_json_dict(config) else quote(config)
    return json.dumps(config, separators=(",", ":"), sort_keys=True)


def lexes_as_json_dict(text: str) -> bool:
    t = text.strip()
    if not (t.startswith("{") and t.endswith("}")):
        return False
    try:
        return isinstance(json.loads(t), dict)
    except ValueError:
        return False


def parse_frontend_attributes(text: str) -> dict[str, str]:
    body = text.strip()[1:-1]
    out = {}
    for m in re.finditer(r'\s*([^\s=,]+)=("(?:[^"\\]|\\.)*"|[^\s,}]+)\s*,?', body):
        v = m.group(2)
        out[m.group(1)] = unquote(v) if v.startswith('"') else v
    return out


def format_frontend_attributes(attrs: dict[str, str]) -> str:
    return "{" + ",".join(f"{k}={quote(v)}" for k, v in sorted(attrs.items())) + "}"


# ---------------------------------------------------------------------------
# Computation layout, aliasing
# ---------------------------------------------------------------------------


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside (), {}, [] and strings."""
    parts = []
    depth = 0
    cur = []
    in_str = False
    esc = False
    for ch in text:
        if in_str:
            cur.append(ch)
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip() or parts:
        parts.append("".join(cur))
    return parts


def parse_shape_text(text: str) -> Shape:
    """Parse a full shape (array, tuple with /*index*/ comments, buffer).
    One left-to-right scan with an explicit stack: linear in the text and
    no recursion, however deep the tuples nest."""
    from .shape import intern
    t = re.sub(r"/\*.*?\*/", "", text) if "/*" in text else text
    n = len(t)
    # stack of (kind, elements): kind "(" a tuple, "b(" a buffer
    stack: list[tuple[str, list]] = [("top", [])]
    i = 0
    expect_item = True
    while True:
        while i < n and t[i] in " \t\r\n":
            i += 1
        if i >= n:
            break
        ch = t[i]
        if ch == "(" or t.startswith("b(", i):
            if not expect_item:
                raise ValueError(f"expects ',' or ')' in shape at offset {i}")
            kind = "(" if ch == "(" else "b("
            stack.append((kind, []))
            i += len(kind)
            continue
        if ch == ")":
            if len(stack) == 1:
                raise ValueError(f"unbalanced ')' in shape at offset {i}")
            kind, elems = stack.pop()
            if kind == "b(":
                if len(elems) != 1:
                    raise ValueError("a buffer shape wraps one array shape")
                done = intern(Shape("buffer", buffer_of=elems[0]))
            else:
                if expect_item and elems:
                    raise ValueError(f"expects a shape before ')' at offset {i}")
                done = Shape.tuple(elems)
            stack[-1][1].append(done)
            expect_item = False
            i += 1
            continue
        if ch == ",":
            if expect_item or len(stack) == 1:
                raise ValueError(f"unexpected ',' in shape at offset {i}")
            expect_item = True
            i += 1
            continue
        if not expect_item:
            raise ValueError(f"expects ',' or ')' in shape at offset {i}")
        j = i
        depth = 0
        while j < n:
            c = t[j]
            if c in "[{":
                depth += 1
            elif c in "]}":
                depth -= 1
            elif depth <= 0 and c in ",)":
                break
            elif depth <= 0 and c == "(" and j > i and t[j - 1] not in "TP":
                break
            j += 1
        stack[-1][1].append(parse_array_shape(t[i:j].strip()))
        expect_item = False
        i = j
    if len(stack) != 1:
        raise ValueError("unbalanced '(' in shape")
    top = stack[0][1]
    if len(top) != 1:
        raise ValueError("expects one shape" if top else "expects a shape")
    return top[0]


@lru_cache(maxsize=256)
def parse_computation_layout(text: str) -> tuple[list[Shape], Shape]:
    """``{(f32[2]{0}, s32[])->f32[2]{0}}`` -> ([params], result)."""
    body = text.strip()
    if body.startswith("{") and body.endswith("}"):
        body = body[1:-1].strip()
    if not body.startswith("("):
        raise ValueError("expects '(' at the start of the computation layout")
    depth = 0
    end = -1
    for i, ch in enumerate(body):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                end = i
                break
    if end < 0:
        raise ValueError("unbalanced parentheses in computation layout")
    params_text = re.sub(r"/\*.*?\*/", "", body[1:end]).strip()
    rest = body[end + 1:].strip()
    if not rest.startswith("->"):
        raise ValueError("expects '->' in computation layout")
    params = [parse_shape_text(p) for p in split_top_level(params_text)] if params_text else []
    return params, parse_shape_text(rest[2:])


def format_computation_layout(params: Sequence[Shape], result: Shape) -> str:
    return "{(" + ", ".join(str(p) for p in params) + ")->" + str(result) + "}"


def _shape_index(text: str) -> tuple[int, ...]:
    t = text.strip()
    if not t.startswith("{"):
        raise ValueError("Expects '{' at the start of ShapeIndex")
    if not t.endswith("}"):
        raise ValueError("Expects '}' at the end of ShapeIndex")
    inner = t[1:-1].strip()
    if not inner:
        return ()
    out = []
    for x in inner.split(","):
        x = x.strip()
        if not re.fullmatch(r"-?\d+", x):
            raise ValueError("expects integer")
        out.append(int(x))
    return tuple(out)


def format_shape_index(index: Sequence[int]) -> str:
    return "{" + ",".join(str(i) for i in index) + "}"


@lru_cache(maxsize=256)
def parse_input_output_alias(text: str) -> tuple:
    """``{ {0}: (0, {}, may-alias), {1}: (1, {}) }`` ->
    ((output_index, param, param_index, kind), ...)."""
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise ValueError("expects '{' at the start of aliasing description")
    out = []
    for entry in split_top_level(body[1:-1]):
        entry = entry.strip()
        if not entry:
            continue
        if ":" not in entry:
            if entry.startswith("{") and not entry.rstrip().endswith("}"):
                raise ValueError("Expects '}' at the end of ShapeIndex")
            raise ValueError("Expects '{' at the start of ShapeIndex")
        out_idx_text, _, rest = entry.partition(":")
        out_idx = _shape_index(out_idx_text)
        rest = rest.strip()
        if rest.count(":"):
            raise ValueError("Expects '}' at the end of aliasing description")
        if not (rest.startswith("(") and rest.endswith(")")):
            raise ValueError("Expects '(' after ':'")
        fields = split_top_level(rest[1:-1])
        if len(fields) < 2:
            raise ValueError("expects parameter number and shape index")
        pnum = fields[0].strip()
        if not re.fullmatch(r"-?\d+", pnum):
            raise ValueError("expects integer")
        pidx = _shape_index(fields[1])
        kind = fields[2].strip() if len(fields) > 2 else "may-alias"
        if kind not in ("may-alias", "must-alias"):
            raise ValueError(f"Unexpected aliasing kind; expected SYSTEM_DEFINED or USER_DEFINED, saw {kind}")
        out.append((out_idx, int(pnum), pidx, kind))
    return tuple(out)


def format_input_output_alias(entries: Sequence[tuple]) -> str:
    parts = [f"{format_shape_index(o)}: ({p}, {format_shape_index(pi)}, {k})"
             for o, p, pi, k in entries]
    return "{ " + ", ".join(parts) + " }"


@lru_cache(maxsize=256)
def parse_buffer_donor(text: str) -> tuple:
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise ValueError("expects '{' at the start of buffer donor description")
    out = []
    for entry in split_top_level(body[1:-1]):
        entry = entry.strip()
        if not entry:
            continue
        if not (entry.startswith("(") and entry.endswith(")")):
            raise ValueError("expects '(' in buffer donor entry")
        fields = split_top_level(entry[1:-1])
        pnum = fields[0].strip()
        if not re.fullmatch(r"-?\d+", pnum):
            raise ValueError("expects integer")
        out.append((int(pnum), _shape_index(fields[1]) if len(fields) > 1 else ()))
    return tuple(out)


def format_buffer_donor(entries: Sequence[tuple]) -> str:
    return "{ " + ", ".join(f"({p}, {format_shape_index(i)})" for p, i in entries) + " }"


@lru_cache(maxsize=1024)
def parse_output_to_operand_aliasing(text: str) -> tuple:
    """``{{0}: (1, {}), {1}: (2, {0})}`` -> ((out_index, operand, operand_index), ...)."""
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise ValueError("expects '{' at the start of instruction aliasing description")
    out = []
    for entry in split_top_level(body[1:-1]):
        entry = entry.strip()
        if not entry:
            continue
        out_idx_text, colon, rest = entry.partition(":")
        if not colon:
            raise ValueError("expects ':' in instruction aliasing description")
        rest = rest.strip()
        if not (rest.startswith("(") and rest.endswith(")")):
            raise ValueError("expects '(' after ':'")
        fields = split_top_level(rest[1:-1])
        operand = fields[0].strip() if fields else ""
        if not re.fullmatch(r"-?\d+", operand):  # XLA's lexer takes negative ints
            raise ValueError("expects integer")
        out.append((_shape_index(out_idx_text), int(operand),
                    _shape_index(fields[1]) if len(fields) > 1 else ()))
    return tuple(out)


def format_output_to_operand_aliasing(entries: Sequence[tuple]) -> str:
    return "{" + ", ".join(f"{format_shape_index(o)}: ({n}, {format_shape_index(i)})"
                           for o, n, i in entries) + "}"


# ---------------------------------------------------------------------------
# Validation schema
# ---------------------------------------------------------------------------

_INT_RE = re.compile(r"-?\d+\Z")
_FLOAT_RE = re.compile(r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\Z|-?inf\Z|nan\Z")
_NAME_RE = re.compile(r"%?[A-Za-z_][\w.\-]*\Z")


def _v_int(v: str) -> None:
    if not _INT_RE.match(v):
        raise ValueError(f"expects integer, saw '{v}'")


def _v_bool(v: str) -> None:
    if v not in ("true", "false"):
        raise ValueError(f"expects boolean, saw '{v}'")


def _v_float(v: str) -> None:
    if not _FLOAT_RE.match(v):
        raise ValueError(f"expects floating point value, saw '{v}'")


def _v_string(v: str) -> None:
    if not (v.startswith('"') and v.endswith('"') and len(v) >= 2):
        raise ValueError(f"expects string, saw '{v}'")


def _v_string_or_json(v: str) -> None:
    if v.startswith('"'):
        return _v_string(v)
    if not v.startswith("{"):
        raise ValueError(f"expects string or JSON dict, saw '{v}'")


def _v_braced(v: str) -> None:
    if not (v.startswith("{") and v.endswith("}")):
        raise ValueError(f"expects '{{...}}', saw '{v}'")


def _v_int_list(v: str) -> None:
    try:
        parse_int_list(v)
    except ValueError:
        raise ValueError(f"expects a braced list of integers, saw '{v}'") from None


def _v_int_list_list(v: str) -> None:
    parse_int_list_list(v)


def _v_bool_list_or_bool(v: str) -> None:
    if v in ("true", "false"):
        return
    if not re.fullmatch(r"\{\s*(?:(?:true|false)\s*(?:,\s*(?:true|false)\s*)*)?\}", v):
        raise ValueError(f"expects a boolean or a braced list of booleans, saw '{v}'")


#: ``PrecisionConfig::Algorithm`` values other than ALG_UNSET, as printed.
DOT_ALGORITHMS = (
    "dot_any_f8_any_f8_f32", "dot_any_f8_any_f8_f32_fast_accum", "dot_f16_f16_f16",
    "dot_f16_f16_f32", "dot_bf16_bf16_bf16", "dot_bf16_bf16_f32", "dot_bf16_bf16_f32_x3",
    "dot_bf16_bf16_f32_x6", "dot_bf16_bf16_f32_x9", "dot_bf16_bf16_fp8x3", "dot_bf16_bf16_fp8x4",
    "dot_tf32_tf32_f32", "dot_tf32_tf32_f32_x3", "dot_f32_f32_f32", "dot_f64_f64_f64",
)


def _enum(*names: str) -> Callable[[str], None]:
    allowed = frozenset(names)

    def check(v: str) -> None:
        if v not in allowed:
            raise ValueError(f"expects one of {', '.join(sorted(allowed))}, saw '{v}'")
    return check


def _v_precision_list(v: str) -> None:
    if not re.fullmatch(r"\{\s*(?:[A-Za-z_]+\s*(?:,\s*[A-Za-z_]+\s*)*)?\}", v):
        raise ValueError(f"expects a braced precision list, saw '{v}'")
    for p in v[1:-1].split(","):
        p = p.strip().lower()
        if p and p not in ("default", "high", "highest", "packed_nibble"):
            raise ValueError(f"expects precision, saw '{p}'")


def _v_replica_groups(v: str) -> None:
    if v.startswith("["):
        if not re.fullmatch(r"\[[\d,\s]*\]<=\[[\d,\s]*\](?:T\([\d,\s]*\))?", v):
            raise ValueError(f"malformed iota replica group list '{v}'")
        return
    if v.startswith("mesh["):
        return _v_mesh_groups(v)
    if v.startswith("{"):
        return
    raise ValueError(f"expects replica groups, saw '{v}'")


def _v_mesh_groups(v: str) -> None:
    """``mesh['x'=2,'y'=2, device_ids=(0,1,2,3)] {'y'}``: axis references
    must name (or index) an axis; device_ids must cover the mesh."""
    m = re.fullmatch(r"mesh\[(?P<axes>[^\]]*)\]\s*\{(?P<refs>[^{}]*)\}", v.strip())
    if not m:
        raise ValueError(f"malformed mesh replica group list '{v}'")
    axes_text = m.group("axes")
    dev = re.search(r"device_ids\s*=\s*\(([^)]*)\)", axes_text)
    if dev:
        axes_text = axes_text[:dev.start()]
    axes = re.findall(r"'([^']*)'\s*=\s*(-?\d+)", axes_text)
    names = [a for a, _ in axes]
    if dev:
        ids = [x for x in dev.group(1).split(",") if x.strip()]
        total = 1
        for _, size in axes:
            total *= int(size)
        if len(ids) != total:
            raise ValueError(f"mesh has {total} devices but device_ids lists {len(ids)}")
    for ref in re.findall(r"'([^']*)'", m.group("refs")):
        base = ref.split(":")[0]
        if base in names:
            continue
        if re.fullmatch(r"\d+", base):
            if int(base) >= len(names):
                raise ValueError(f"axis index {base} out of bounds for mesh with {len(names)} axes")
            continue
        raise ValueError(f"'{base}' is not a valid axis name or index")


def _v_debug_attributes(v: str) -> None:
    for mode in re.findall(r"log_mode\s*=\s*([A-Za-z_]\w*)", v):
        if mode not in ("default", "fusion_debugger"):
            raise ValueError(f"Invalid debug_log_mode value: {mode}")


def _v_slice(v: str) -> None:
    parse_slice(v)


def _v_window(v: str) -> None:
    parse_window(v)


def _v_padding(v: str) -> None:
    parse_padding(v)


def _v_dim_labels(v: str) -> None:
    parse_dim_labels(v)


def _v_shape(v: str) -> None:
    try:
        parse_shape_text(v)
    except (ShapeSyntaxError, ValueError) as e:
        raise ValueError(f"expects shape, saw '{v}': {e}") from None


def _v_shape_list(v: str) -> None:
    _v_braced(v)
    for p in split_top_level(v[1:-1]):
        if p.strip():
            _v_shape(p.strip())


def _v_aliasing(v: str) -> None:
    parse_output_to_operand_aliasing(v)


def _v_accept(v: str) -> None:
    return None


def _v_result_accuracy(v: str) -> None:
    _v_braced(v)
    body = v[1:-1].strip()
    m = re.match(r"([A-Za-z_]\w*)\s*=", body)
    if not m:
        raise ValueError("expects attribute name")
    key = m.group(1)
    if key == "mode":
        mode = body[m.end():].strip()
        if mode.lower() not in ("default", "highest"):
            raise ValueError(f"expects ResultAccuracy type but sees: {mode}")
    elif key == "tolerance":
        return
    else:
        raise ValueError(f"invalid attribute name: {key}")


#: Attribute types: name -> validator of the raw value text.  "computation"
#: and "computation_list" and "instruction_list" are resolved by the parser.
VALIDATORS: dict[str, Callable[[str], None]] = {
    "int": _v_int, "bool": _v_bool, "float": _v_float, "string": _v_string,
    "string_or_json": _v_string_or_json, "braced": _v_braced,
    "int_list": _v_int_list, "int_list_list": _v_int_list_list,
    "bool_list_or_bool": _v_bool_list_or_bool,
    "slice": _v_slice, "window": _v_window, "padding": _v_padding,
    "dim_labels": _v_dim_labels, "precision_list": _v_precision_list,
    "replica_groups": _v_replica_groups, "shape": _v_shape,
    "shape_list": _v_shape_list, "aliasing": _v_aliasing, "any": _v_accept,
    "fusion_kind": _enum("kLoop", "kInput", "kOutput", "kCustom"),
    "comparison_direction": _enum("EQ", "NE", "GE", "GT", "LE", "LT"),
    "comparison_type": _enum("FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"),
    "comparison_order": _enum("TOTAL", "WEAK", "PARTIAL"),
    "fft_type": _enum("FFT", "IFFT", "RFFT", "IRFFT"),
    "distribution": _enum("rng_uniform", "rng_normal"),
    "rng_algorithm": _enum("rng_default", "rng_three_fry", "rng_philox"),
    "padding_type": _enum("PADDING_INVALID", "PADDING_VALID", "PADDING_SAME"),
    "custom_call_schedule": _enum("SCHEDULE_NONE", "SCHEDULE_LATEST", "SCHEDULE_EARLIEST"),
    "api_version": _v_accept,  # checked by the parser (specific messages)
    "conv_kind": _v_accept,
    "result_accuracy": _v_result_accuracy,
    "mode": _v_accept,
    "transpose": _enum("TRANSPOSE_INVALID", "NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"),
    # PrecisionConfig::Algorithm as XLA prints it (AlgorithmToString: the
    # enum name without ALG_, lower case); hlorun.passes.algorithm_util
    # knows what each means.
    "algorithm": _enum("unset", *DOT_ALGORITHMS),
    "debug_attributes": _v_debug_attributes,
}

#: Attributes every instruction may carry.
COMMON: dict[str, tuple[str, bool]] = {
    "sharding": ("braced", False),
    "frontend_attributes": ("braced", False),
    "statistics": ("braced", False),
    "parameter_replication": ("braced", False),
    "control-predecessors": ("instruction_list", False),
    "origin": ("braced", False),
    "metadata": ("braced", False),
    "backend_config": ("string_or_json", False),
}

_UNARY_ACC = {"result_accuracy": ("result_accuracy", False)}
_COLLECTIVE = {"replica_groups": ("replica_groups", False), "channel_id": ("int", False),
               "constrain_layout": ("bool", False), "use_global_device_ids": ("bool", False)}
_DOT = {"lhs_contracting_dims": ("int_list", False), "rhs_contracting_dims": ("int_list", False),
        "lhs_batch_dims": ("int_list", False), "rhs_batch_dims": ("int_list", False),
        "operand_precision": ("precision_list", False), "algorithm": ("algorithm", False)}
_P2P = {"channel_id": ("int", False), "is_host_transfer": ("bool", False)}

#: opcode -> {attribute: (type, required)}, after XLA's parser.
SCHEMA: dict[str, dict[str, tuple[str, bool]]] = {
    **{op: dict(_UNARY_ACC) for op in (
        "acos", "acosh", "asin", "asinh", "atanh", "exponential-minus-one", "log",
        "log-plus-one", "logistic", "sqrt", "cbrt", "rsqrt", "tanh", "erf", "sine",
        "sinh", "cosine", "cosh", "tan", "exponential")},
    **{op: {} for op in (
        "abs", "all-gather-done", "all-reduce-done", "round-nearest-afz",
        "round-nearest-even", "bitcast", "ceil", "count-leading-zeros",
        "collective-permute-done", "copy", "copy-done", "opt-barrier", "imag",
        "is-finite", "floor", "not", "negate", "popcnt", "real", "sign",
        "add", "divide", "multiply", "mulhi", "subtract", "atan2", "complex",
        "maximum", "minimum", "power", "remainder", "and", "or", "xor",
        "shift-left", "shift-right-arithmetic", "shift-right-logical",
        "stochastic-convert", "clamp", "select", "convert", "bitcast-convert",
        "replica-id", "partition-id", "dynamic-reshape", "after-all",
        "add-dependency", "tuple", "dynamic-update-slice", "parameter", "constant",
        "ragged-all-to-all",)},
    "ragged-all-to-all": {**_COLLECTIVE, "dimensions": ("int_list", False)},
    "iota": {"iota_dimension": ("int", True)},
    "topk": {"k": ("int", True), "largest": ("bool", False), "is_stable": ("bool", False)},
    "all-gather": {**_COLLECTIVE, "dimensions": ("int_list", True)},
    "all-gather-start": {**_COLLECTIVE, "dimensions": ("int_list", True)},
    "all-reduce": {**_COLLECTIVE, "to_apply": ("computation", True), "mode": ("mode", False)},
    "all-reduce-start": {**_COLLECTIVE, "to_apply": ("computation", True), "mode": ("mode", False)},
    "reduce-scatter": {**_COLLECTIVE, "to_apply": ("computation", True), "mode": ("mode", False),
                       "dimensions": ("int_list", True)},
    "all-to-all": {"replica_groups": ("replica_groups", False), "channel_id": ("int", False),
                   "dimensions": ("int_list", False), "constrain_layout": ("bool", False)},
    "collective-broadcast": {"has_dynamic_root": ("bool", False),
                             "replica_groups": ("replica_groups", False),
                             "channel_id": ("int", False)},
    "collective-permute": {"source_target_pairs": ("int_list_list", True),
                           "channel_id": ("int", False), "slice_sizes": ("int_list_list", False)},
    "collective-permute-start": {"source_target_pairs": ("int_list_list", True),
                                 "channel_id": ("int", False),
                                 "slice_sizes": ("int_list_list", False)},
    "async-start": {"async_execution_thread": ("string", False),
                    "output_to_operand_aliasing": ("aliasing", False),
                    "calls": ("computation", True)},
    "async-update": {"async_execution_thread": ("string", False), "calls": ("computation", False)},
    "async-done": {"async_execution_thread": ("string", False), "calls": ("computation", False)},
    "copy-start": {"cross_program_prefetch_index": ("int", False)},
    "reshape": {"inferred_dimension": ("int", False)},
    "sort": {"dimensions": ("int_list", True), "is_stable": ("bool", False),
             "to_apply": ("computation", True)},
    "while": {"condition": ("computation", True), "body": ("computation", True)},
    "recv": dict(_P2P), "recv-done": dict(_P2P), "send": dict(_P2P), "send-done": dict(_P2P),
    "get-tuple-element": {"index": ("int", True)},
    "call": {"to_apply": ("computation", True), "is_composite": ("bool", False)},
    "reduce-window": {"window": ("window", False), "to_apply": ("computation", True)},
    "convolution": {"window": ("window", False), "dim_labels": ("dim_labels", True),
                    "feature_group_count": ("int", False), "batch_group_count": ("int", False),
                    "convolution_kind": ("conv_kind", False),
                    "operand_precision": ("precision_list", False),
                    "algorithm": ("algorithm", False), "sparsity_config": ("braced", False)},
    "fft": {"fft_type": ("fft_type", True), "fft_length": ("int_list", True)},
    "triangular-solve": {"left_side": ("bool", False), "lower": ("bool", False),
                         "unit_diagonal": ("bool", False), "transpose_a": ("transpose", False)},
    "compare": {"direction": ("comparison_direction", True),
                "type": ("comparison_type", False), "order": ("comparison_order", False)},
    "cholesky": {"lower": ("bool", False)},
    "broadcast": {"dimensions": ("int_list", False)},
    "concatenate": {"dimensions": ("int_list", True)},
    "map": {"to_apply": ("computation", True), "dimensions": ("int_list", False)},
    "scan": {"to_apply": ("computation", True), "dimensions": ("int_list", True),
             "num_carries": ("int", True), "is_reverse": ("bool", False),
             "is_associative": ("bool", False)},
    "reduce": {"to_apply": ("computation", True), "dimensions": ("int_list", True)},
    "reverse": {"dimensions": ("int_list", True)},
    "select-and-scatter": {"select": ("computation", True), "scatter": ("computation", True),
                           "window": ("window", False)},
    "slice": {"slice": ("slice", True)},
    "dynamic-slice": {"dynamic_slice_sizes": ("int_list", True)},
    "transpose": {"dimensions": ("int_list", True)},
    "batch-norm-training": {"epsilon": ("float", True), "feature_index": ("int", True)},
    "batch-norm-inference": {"epsilon": ("float", True), "feature_index": ("int", True)},
    "batch-norm-grad": {"epsilon": ("float", True), "feature_index": ("int", True)},
    "pad": {"padding": ("padding", True)},
    "fusion": {"calls": ("computation", True), "kind": ("fusion_kind", True),
               "output_to_operand_aliasing": ("aliasing", False)},
    "infeed": {"infeed_config": ("string", False)},
    "outfeed": {"outfeed_config": ("string", False), "outfeed_shape": ("shape", False)},
    "rng": {"distribution": ("distribution", True)},
    "rng-get-and-update-state": {"delta": ("int", True)},
    "rng-bit-generator": {"algorithm": ("rng_algorithm", True)},
    "reduce-precision": {"exponent_bits": ("int", True), "mantissa_bits": ("int", True)},
    "conditional": {"true_computation": ("computation", False),
                    "false_computation": ("computation", False),
                    "branch_computations": ("computation_list", False)},
    "custom-call": {"custom_call_target": ("string", True), "window": ("window", False),
                    "dim_labels": ("dim_labels", False), "feature_group_count": ("int", False),
                    "batch_group_count": ("int", False),
                    "operand_layout_constraints": ("shape_list", False),
                    "custom_call_has_side_effect": ("bool", False),
                    "to_apply": ("computation", False),
                    "called_computations": ("computation_list", False),
                    "output_to_operand_aliasing": ("aliasing", False),
                    "padding_type": ("padding_type", False), "literal": ("any", False),
                    "operand_precision": ("precision_list", False),
                    "schedule": ("custom_call_schedule", False),
                    "api_version": ("api_version", False)},
    "dot": dict(_DOT),
    "ragged-dot": {**_DOT, "lhs_ragged_dims": ("int_list", False),
                   "rhs_group_dims": ("int_list", False)},
    "scaled-dot": dict(_DOT),
    "gather": {"offset_dims": ("int_list", True), "collapsed_slice_dims": ("int_list", True),
               "start_index_map": ("int_list", True), "index_vector_dim": ("int", True),
               "slice_sizes": ("int_list", True), "indices_are_sorted": ("bool", False),
               "operand_batching_dims": ("int_list", False),
               "start_indices_batching_dims": ("int_list", False)},
    "scatter": {"update_window_dims": ("int_list", True),
                "inserted_window_dims": ("int_list", True),
                "scatter_dims_to_operand_dims": ("int_list", True),
                "index_vector_dim": ("int", True), "to_apply": ("computation", True),
                "indices_are_sorted": ("bool", False), "unique_indices": ("bool", False),
                "input_batching_dims": ("int_list", False),
                "scatter_indices_batching_dims": ("int_list", False)},
    "domain": {"domain": ("braced", True)},
    "get-dimension-size": {"dimensions": ("int_list", True)},
    "set-dimension-size": {"dimensions": ("int_list", True)},
}

#: Module header attributes.
HEADER_SCHEMA: dict[str, str] = {
    "is_scheduled": "bool", "replica_count": "int", "num_partitions": "int",
    "input_output_alias": "braced", "buffer_donor": "braced",
    "alias_passthrough_params": "bool", "entry_computation_layout": "braced",
    "frontend_attributes": "braced",
    "allow_spmd_sharding_propagation_to_parameters": "bool_list_or_bool",
    "allow_spmd_sharding_propagation_to_output": "bool_list_or_bool",
    "origin_recovery_table": "braced", "debug_attributes": "debug_attributes",
}

#: Attribute names that reference computations (resolved by the parser).
COMPUTATION_ATTRS = frozenset({
    "to_apply", "calls", "condition", "body", "select", "scatter",
    "true_computation", "false_computation", "branch_computations",
    "called_computations",
})

#: XLA's print order bucket for the attributes printed after the
#: opcode-specific ones (HloInstruction::PrintExtraAttributes and Print...).
PRINT_RANK: dict[str, int] = {
    "condition": 1, "body": 1, "select": 1, "scatter": 1, "true_computation": 1,
    "false_computation": 1, "branch_computations": 1, "to_apply": 1,
    "is_composite": 1, "called_computations": 1, "calls": 1,
    "sharding": 2, "frontend_attributes": 3, "control-predecessors": 4,
    "statistics": 5, "result_accuracy": 6, "origin": 7, "metadata": 8,
    "backend_config": 9,
}
