"""Mutations of HLO text for ``bench/fuzz.py``.

Each mutator takes ``(rng, text)`` and returns new text.  They are written
to hit what a hand-edited, truncated, mis-encoded or hostile file looks
like: byte and token edits, deleted/duplicated/swapped lines, extreme shape
dimensions (0, -1, 2^40), unknown opcodes, duplicate names, use-before-def
cycles, truncation, unbalanced brackets, odd unicode, CRLF line ends, a
byte-order mark, deep nesting and very long lines.
"""

from __future__ import annotations

import random
import re

_NUM = re.compile(r"-?\d+")
_NAME_DEF = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=", re.M)
_OPCODE = re.compile(r"\]\S*\s+([a-z][a-z0-9\-]*)\(|\)\s+([a-z][a-z0-9\-]*)\(")
_DIMS = re.compile(r"\[([0-9,<=?]*)\]")
_SHAPE = re.compile(r"\b(?:pred|s4|s8|s16|s32|s64|u4|u8|u16|u32|u64|f16|bf16|f32|f64|"
                    r"f8e4m3fn|f8e5m2|c64|c128)\[[0-9,<=?]*\](?:\{[^}]*\})?")

HOSTILE_INTS = ["0", "-1", "1", "2", "1099511627776", "4294967296", "2147483647",
                "2147483648", "-2147483649", "9223372036854775807", "9223372036854775808",
                "18446744073709551616", "99999999999999999999999999", "007", "-0"]
UNKNOWN_OPCODES = ["frobnicate", "add-start", "fusion-done", "custom-call-update",
                   "all-reduce-done", "rng-bit", "tuple2", "parameterx", "Add", "add_"]
OPCODES = ["add", "multiply", "tuple", "get-tuple-element", "parameter", "constant",
           "reshape", "broadcast", "transpose", "dot", "reduce", "fusion", "while",
           "conditional", "call", "custom-call", "slice", "concatenate", "copy",
           "bitcast", "convert", "select", "compare", "iota", "gather", "scatter",
           "all-reduce", "async-start", "async-done", "send", "recv", "sort", "pad"]
ODD_UNICODE = ["\u200b", "\u202e", "\ufeff", "\u0301", "\U0001f600", "\x00", "\x7f",
               "\u00a0", "\u2028", "\u3000", "\udcff", "\uffff", "é", "ß", "\t", "\x0c"]
BRACKETS = "(){}[]<>\"'"


def _pick_span(rng: random.Random, n: int) -> tuple[int, int]:
    a = rng.randrange(n + 1)
    return a, min(n, a + rng.randrange(1, 16))


def byte_flip(rng, t):
    if not t:
        return t
    b = bytearray(t.encode("utf-8", "surrogatepass"))
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(b))
        b[i] = rng.randrange(256)
    return b.decode("utf-8", "replace")


def char_insert(rng, t):
    i = rng.randrange(len(t) + 1)
    ch = rng.choice([rng.choice(BRACKETS), rng.choice(ODD_UNICODE), chr(rng.randrange(32, 127)),
                     ",", "=", "%", "#", "/*", "*/", "//", "\n", ":", "->", "..."])
    return t[:i] + ch + t[i:]


def span_delete(rng, t):
    a, b = _pick_span(rng, len(t))
    return t[:a] + t[b:]


def span_duplicate(rng, t):
    a, b = _pick_span(rng, len(t))
    return t[:b] + t[a:b] + t[b:]


def int_replace(rng, t):
    ms = list(_NUM.finditer(t))
    if not ms:
        return t
    m = rng.choice(ms)
    return t[:m.start()] + rng.choice(HOSTILE_INTS) + t[m.end():]


def dim_replace(rng, t):
    ms = [m for m in _DIMS.finditer(t)]
    if not ms:
        return t
    m = rng.choice(ms)
    dims = [d for d in m.group(1).split(",") if d] or ["1"]
    dims[rng.randrange(len(dims))] = rng.choice(["0", "-1", "1099511627776", "4294967296",
                                                 "<=-1", "?", "<=1099511627776", ""])
    if rng.random() < 0.2:
        dims = dims * rng.randint(2, 40)  # very high rank
    return t[:m.start(1)] + ",".join(dims) + t[m.end(1):]


def opcode_replace(rng, t):
    ms = [m for m in _OPCODE.finditer(t)]
    if not ms:
        return t
    m = rng.choice(ms)
    g = 1 if m.group(1) else 2
    new = rng.choice(UNKNOWN_OPCODES if rng.random() < 0.4 else OPCODES)
    return t[:m.start(g)] + new + t[m.end(g):]


def name_games(rng, t):
    """Duplicate a definition name, or make an operand refer to a later
    instruction or to itself (a cycle in the text)."""
    defs = [m for m in _NAME_DEF.finditer(t)]
    if len(defs) < 2:
        return t
    a, b = rng.sample(defs, 2)
    if rng.random() < 0.5:  # duplicate names
        return t[:b.start(1)] + a.group(1) + t[b.end(1):]
    # replace an operand occurrence of a's name after a with b's name (or a's own)
    target = rng.choice([b.group(1), a.group(1)])
    line_end = t.find("\n", a.end())
    line_end = len(t) if line_end < 0 else line_end
    seg = t[a.end():min(line_end, a.end() + 20_000)]
    # names start at a boundary: without the lookbehind a 1 MB run of word
    # characters (long_line) is rescanned from every position (quadratic)
    ops = list(re.finditer(r"(?<![\w.\-%])%?([A-Za-z_][\w.\-]*)(?=[,)])", seg))
    if not ops:
        return t
    o = rng.choice(ops)
    s0 = a.end() + o.start(1)
    return t[:s0] + target + t[a.end() + o.end(1):]


def line_delete(rng, t):
    ls = t.split("\n")
    if len(ls) > 1:
        del ls[rng.randrange(len(ls))]
    return "\n".join(ls)


def line_duplicate(rng, t):
    ls = t.split("\n")
    i = rng.randrange(len(ls))
    ls.insert(i, ls[i])
    return "\n".join(ls)


def line_swap(rng, t):
    ls = t.split("\n")
    if len(ls) > 2:
        i, j = rng.sample(range(len(ls)), 2)
        ls[i], ls[j] = ls[j], ls[i]
    return "\n".join(ls)


def truncate(rng, t):
    return t[:rng.randrange(len(t) + 1)]


def unbalance(rng, t):
    idx = [i for i, c in enumerate(t) if c in "(){}[]"]
    if not idx:
        return t
    i = rng.choice(idx)
    if rng.random() < 0.5:
        return t[:i] + t[i + 1:]
    return t[:i] + t[i] * rng.randint(2, 5) + t[i + 1:]


def crlf(rng, t):
    return t.replace("\n", "\r\n") if rng.random() < 0.7 else t.replace("\n", "\r")


def bom(rng, t):
    return "\ufeff" + t


def odd_unicode(rng, t):
    i = rng.randrange(len(t) + 1)
    return t[:i] + "".join(rng.choice(ODD_UNICODE) for _ in range(rng.randint(1, 3))) + t[i:]


def deep_nesting(rng, t):
    """Wrap a shape in many tuple levels (type errors expected; the point is
    linear time and no RecursionError)."""
    ms = list(_SHAPE.finditer(t))
    if not ms:
        return t
    m = rng.choice(ms)
    d = rng.choice([50, 300, 1200, 5000])
    return t[:m.start()] + "(" * d + m.group(0) + ")" * d + t[m.end():]


def long_line(rng, t):
    """A very long token or attribute (10^5..10^6 characters)."""
    i = t.find("\n", rng.randrange(len(t) + 1))
    i = len(t) if i < 0 else i
    n = rng.choice([100_000, 1_000_000])
    filler = rng.choice([", metadata={op_name=\"" + "x" * n + "\"}",
                         ", dimensions={" + ",".join(["0"] * (n // 2)) + "}",
                         " " * n, "a" * n, ", backend_config=" + "{" * (n // 100)])
    return t[:i] + filler + t[i:]


def many_operands(rng, t):
    defs = [m for m in _NAME_DEF.finditer(t)]
    if not defs:
        return t
    a = rng.choice(defs)
    n = rng.choice([1000, 100_000])
    line_end = t.find("\n", a.end())
    line_end = len(t) if line_end < 0 else line_end
    extra = "\n  many.fz = (" + ", ".join(["f32[]"] * 3) + ") tuple(" + \
        ", ".join([a.group(1)] * n) + ")"
    return t[:line_end] + extra + t[line_end:]


MUTATORS = [byte_flip, char_insert, span_delete, span_duplicate, int_replace, dim_replace,
            opcode_replace, name_games, line_delete, line_duplicate, line_swap, truncate,
            unbalance, crlf, bom, odd_unicode, deep_nesting, long_line, many_operands]
#: Relative weights: cheap local edits most often, hostile sizes rarely.
WEIGHTS = [6, 6, 5, 3, 8, 8, 6, 6, 5, 4, 3, 3, 4, 1, 1, 3, 1, 0.3, 0.3]


def mutate(rng: random.Random, text: str) -> tuple[str, list[str]]:
    names = []
    for _ in range(rng.choice([1, 1, 1, 2, 2, 3])):
        m = rng.choices(MUTATORS, WEIGHTS)[0]
        text = m(rng, text)
        names.append(m.__name__)
    return text, names
