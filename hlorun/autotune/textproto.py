"""A small protocol-buffer text-format reader (no schema, no new deps).

``parse(text)`` returns a :class:`Message`: field name -> list of values
(every field may repeat), where a value is a nested Message, a str (string
literals, unescaped; adjacent literals concatenated), an int, a float, a
bool (``true``/``false``) or an enum name (str).  Comments (``#``), ``:`` before
messages, ``<...>`` message brackets, ``;``/``,`` separators and
``[extension.names]`` are accepted.  Errors carry line and column.
"""

from __future__ import annotations

import re
from typing import Any, Iterator

from ..errors import HloError


class TextprotoError(HloError):
    exit_code = 1

    def __init__(self, message: str, filename: str | None = None, line: int = 0, column: int = 0):
        self.filename, self.line, self.column = filename, line, column
        super().__init__(message)

    def render(self) -> str:
        where = f"{self.filename or '<textproto>'}:{self.line}:{self.column}: " if self.line else ""
        return f"{where}error: {self.args[0]}"


class Message(dict):
    """field -> [values].  ``m.one('f')`` is the single value (or None),
    ``m.all('f')`` the list, ``m.path('a.b.c')`` follows single fields."""

    def one(self, name: str, default: Any = None) -> Any:
        v = self.get(name)
        return v[-1] if v else default

    def all(self, name: str) -> list[Any]:
        return self.get(name, [])

    def path(self, dotted: str, default: Any = None) -> Any:
        cur: Any = self
        for part in dotted.split("."):
            if not isinstance(cur, Message):
                return default
            cur = cur.one(part)
            if cur is None:
                return default
        return cur

    def to_plain(self) -> dict[str, Any]:
        """A JSON-able dict: single fields unwrapped, repeated ones lists."""
        out: dict[str, Any] = {}
        for k, vs in self.items():
            conv = [v.to_plain() if isinstance(v, Message) else v for v in vs]
            out[k] = conv[0] if len(conv) == 1 else conv
        return out


_TOKEN = re.compile(r"""
    (?P<ws>\s+|\#[^\n]*)
  | (?P<str>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<num>[-+]?(?:0[xX][0-9a-fA-F]+|(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?[fF]?|inf(?:inity)?|nan)(?![\w.]))
  | (?P<ext>\[[\w./]+\])
  | (?P<ident>[A-Za-z_][\w.]*)
  | (?P<punct>[{}<>:;,\[\]-])
""", re.VERBOSE)

_ESC = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"', "a": "\a",
        "b": "\b", "f": "\f", "v": "\v", "?": "?"}


def _unescape(s: str) -> str:
    body = s[1:-1]
    if "\\" not in body:
        return body
    out: list[str] = []
    raw = bytearray()
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            raw.extend(c.encode("utf-8"))
            i += 1
            continue
        i += 1
        c = body[i]
        if c in "01234567":
            j = i
            while j < len(body) and j < i + 3 and body[j] in "01234567":
                j += 1
            raw.append(int(body[i:j], 8) & 0xFF)
            i = j
        elif c == "x":
            j = i + 1
            while j < len(body) and j < i + 3 and body[j] in "0123456789abcdefABCDEF":
                j += 1
            raw.append(int(body[i + 1:j], 16))
            i = j
        else:
            raw.extend(_ESC.get(c, c).encode("utf-8"))
            i += 1
    out.append(raw.decode("utf-8", errors="replace"))
    return "".join(out)


class _Lexer:
    def __init__(self, text: str, filename: str | None):
        self.text, self.filename = text, filename
        self.toks: list[tuple[str, str, int]] = []
        pos = 0
        n = len(text)
        while pos < n:
            m = _TOKEN.match(text, pos)
            if m is None:
                self.fail(f"unexpected character {text[pos]!r}", pos)
            kind = m.lastgroup
            if kind != "ws":
                self.toks.append((kind, m.group(), pos))
            pos = m.end()
        self.i = 0

    def fail(self, message: str, pos: int | None = None) -> None:
        if pos is None:
            pos = self.toks[self.i][2] if self.i < len(self.toks) else len(self.text)
        line = self.text.count("\n", 0, pos) + 1
        col = pos - (self.text.rfind("\n", 0, pos) + 1) + 1
        raise TextprotoError(message, self.filename, line, col)

    def peek(self) -> tuple[str, str, int] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def next(self) -> tuple[str, str, int]:
        t = self.peek()
        if t is None:
            self.fail("unexpected end of input")
        self.i += 1
        return t  # type: ignore[return-value]


def parse(text: str, filename: str | None = None) -> Message:
    lx = _Lexer(text, filename)
    msg = _fields(lx, None)
    if lx.peek() is not None:
        lx.fail(f"unexpected {lx.peek()[1]!r}")
    return msg


def _fields(lx: _Lexer, close: str | None) -> Message:
    msg = Message()
    while True:
        t = lx.peek()
        if t is None:
            if close is not None:
                lx.fail(f"missing '{close}'")
            return msg
        kind, val, _ = t
        if kind == "punct" and val == close:
            lx.next()
            return msg
        if kind == "punct" and val in ";,":
            lx.next()
            continue
        if kind not in ("ident", "ext"):
            lx.fail(f"expected a field name, got {val!r}")
        lx.next()
        name = val
        colon = False
        t = lx.peek()
        if t is not None and t[0] == "punct" and t[1] == ":":
            lx.next()
            colon = True
        t = lx.peek()
        if t is None:
            lx.fail(f"missing value for {name}")
        if t[0] == "punct" and t[1] in "{<":
            lx.next()
            value: Any = _fields(lx, "}" if t[1] == "{" else ">")
        elif t[0] == "punct" and t[1] == "[":
            lx.next()
            items: list[Any] = []
            while True:
                t2 = lx.peek()
                if t2 is not None and t2[0] == "punct" and t2[1] == "]":
                    lx.next()
                    break
                items.append(_scalar(lx) if not (t2 and t2[0] == "punct" and t2[1] in "{<")
                             else _fields(lx, "}" if lx.next()[1] == "{" else ">"))
                t2 = lx.peek()
                if t2 is not None and t2[0] == "punct" and t2[1] == ",":
                    lx.next()
            msg.setdefault(name, []).extend(items)
            continue
        else:
            if not colon:
                lx.fail(f"expected ':' after {name}")
            value = _scalar(lx)
        msg.setdefault(name, []).append(value)


def _scalar(lx: _Lexer) -> Any:
    kind, val, pos = lx.next()
    if kind == "str":
        s = _unescape(val)
        while (t := lx.peek()) is not None and t[0] == "str":
            s += _unescape(lx.next()[1])
        return s
    if kind == "punct" and val == "-":
        kind, val, pos = lx.next()
        val = "-" + val
        if kind == "ident" and val.lower() in ("-inf", "-infinity", "-nan"):
            return float(val)
        kind = "num"
    if kind == "num":
        v = val.rstrip("fF") if not val.lower().startswith(("0x", "-0x")) else val
        low = v.lower()
        if low in ("inf", "infinity", "+inf", "-inf", "nan"):
            return float(low)
        try:
            return int(v, 0) if re.fullmatch(r"[-+]?(0[xX][0-9a-fA-F]+|\d+)", v) else float(v)
        except ValueError:
            lx.fail(f"bad number {val!r}", pos)
    if kind == "ident":
        if val == "true" or val == "True" or val == "t":
            return True
        if val == "false" or val == "False" or val == "f":
            return False
        return val  # enum
    lx.fail(f"expected a value, got {val!r}", pos)


def iter_messages(msg: Message, name: str) -> Iterator[Message]:
    for v in msg.all(name):
        if isinstance(v, Message):
            yield v
