"""A FileCheck-compatible matcher (LLVM FileCheck semantics, in Python).

XLA's pass tests state their expectations as FileCheck patterns over the
module's text; this module lets hlorun check the same patterns without
LLVM.  Supported, with LLVM's rules:

* directives ``P:``, ``P-NEXT:``, ``P-SAME:``, ``P-NOT:``, ``P-DAG:``,
  ``P-LABEL:``, ``P-EMPTY:``, ``P-COUNT-<n>:`` and the ``{LITERAL}``
  modifier, for every prefix ``P`` given (``--check-prefixes``); ``COM:``
  and ``RUN:`` lines are comments;
* ``{{regex}}`` (POSIX ERE, translated), ``[[NAME:regex]]`` definitions,
  ``[[NAME]]`` uses (a backreference when defined earlier on the same line),
  ``[[@LINE]]``/``[[@LINE+n]]``, and numeric blocks ``[[#VAR:]]``,
  ``[[#%x,VAR:]]``, ``[[#VAR+1]]``, ``[[#@LINE]]``;
* horizontal whitespace canonicalization of both texts (runs of spaces and
  tabs match one space; ``--strict-whitespace`` turns it off);
* search ranges exactly as LLVM computes them: CHECK-LABEL splits the input
  into blocks first; CHECK-DAG groups match in any order without overlap;
  CHECK-NOT is checked in the gap before the next positive match (or the
  next DAG group); trailing NOT/DAG directives apply up to the end of input.

Known deviation: Python's regex engine is leftmost-first where POSIX is
leftmost-longest, which only matters for alternations whose earlier branch
is a prefix of a later one.

Usage::

    result = filecheck(output_text, pattern_text, prefixes=("CHECK",))
    if not result:
        print(result.message)
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

__all__ = ["CheckSyntaxError", "FileCheckResult", "filecheck", "has_checks",
           "parse_checks", "canonicalize_whitespace"]

_KINDS = ("NEXT", "SAME", "NOT", "DAG", "LABEL", "EMPTY")
_COMMENT_PREFIXES = ("COM", "RUN")
_PREFIX_RE = re.compile(r"[A-Za-z][A-Za-z0-9_-]*\Z")
_VAR_NAME = re.compile(r"\$?[A-Za-z_][A-Za-z0-9_]*")
_HSPACE = re.compile(r"[ \t]+")


class CheckSyntaxError(ValueError):
    """A malformed check file (FileCheck exits 2 on these)."""


def canonicalize_whitespace(text: str) -> str:
    """FileCheck's input canonicalization: CRLF -> LF, and each run of
    spaces/tabs becomes a single space."""
    return _HSPACE.sub(" ", text.replace("\r\n", "\n"))


# ---------------------------------------------------------------------------
# Patterns
# ---------------------------------------------------------------------------


@dataclass
class _Piece:
    kind: str          # "lit", "re", "def", "use", "numdef", "numuse", "line"
    text: str = ""
    name: str = ""
    fmt: str = "u"
    expr: str = ""


_POSIX_CLASSES = {
    "alpha": "a-zA-Z", "digit": "0-9", "alnum": "a-zA-Z0-9", "upper": "A-Z",
    "lower": "a-z", "space": r" \t\n\r\f\v", "blank": r" \t", "punct":
    r"!-/:-@\[-`{-~", "xdigit": "0-9A-Fa-f", "word": "a-zA-Z0-9_",
    "cntrl": r"\x00-\x1f\x7f", "print": r" -~", "graph": "!-~",
}


def _translate_ere(rx: str) -> str:
    """POSIX ERE (as LLVM's Regex reads it, with REG_NEWLINE) -> Python.

    Outside brackets a backslash makes the next character literal, except
    ``\\1``..``\\9`` (backreferences).  Inside brackets the backslash is an
    ordinary character, ``[:class:]`` names a class, and a negated list never
    matches a newline."""
    out: list[str] = []
    i, n = 0, len(rx)
    while i < n:
        c = rx[i]
        if c == "\\":
            if i + 1 >= n:
                raise CheckSyntaxError(f"trailing backslash in regex '{rx}'")
            d = rx[i + 1]
            out.append("\\" + d if d.isdigit() and d != "0" else re.escape(d))
            i += 2
        elif c == "[":
            j = i + 1
            parts = ["["]
            if j < n and rx[j] == "^":
                parts.append("^\\n")
                j += 1
            first = True
            while j < n:
                ch = rx[j]
                if ch == "]" and not first:
                    break
                if ch == "[" and j + 1 < n and rx[j + 1] in ":.=":
                    end = rx.find(rx[j + 1] + "]", j + 2)
                    if end < 0:
                        raise CheckSyntaxError(f"unterminated bracket class in regex '{rx}'")
                    name = rx[j + 2:end]
                    if rx[j + 1] == ":":
                        if name not in _POSIX_CLASSES:
                            raise CheckSyntaxError(f"invalid character class '{name}' in regex '{rx}'")
                        parts.append(_POSIX_CLASSES[name])
                    else:
                        parts.append(re.escape(name))
                    j = end + 2
                elif ch in "\\[&~|()":
                    parts.append("\\" + ch)
                    j += 1
                else:
                    parts.append(ch)
                    j += 1
                first = False
            if j >= n:
                raise CheckSyntaxError(f"unterminated bracket expression in regex '{rx}'")
            parts.append("]")
            out.append("".join(parts))
            i = j + 1
        elif c == "(" and rx[i + 1:i + 2] == "?":
            raise CheckSyntaxError(f"invalid regex '{rx}': '(?' is not POSIX")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _find_var_end(s: str) -> int:
    """LLVM's FindRegexVarEnd: index of the closing ']]', honouring nested
    brackets and backslash escapes; -1 if none."""
    depth = 0
    i = 0
    while i < len(s):
        if s.startswith("]]", i) and depth == 0:
            return i
        c = s[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            depth += 1
        elif c == "]":
            if depth == 0:
                raise CheckSyntaxError("missing closing \"]\" for regex variable")
            depth -= 1
        i += 1
    return -1


_NUM_FMT_RE = {"u": "[0-9]+", "d": "-?[0-9]+", "x": "[0-9a-f]+", "X": "[0-9A-F]+"}


class Pattern:
    """One directive's pattern, compiled lazily against current variables."""

    def __init__(self, kind: str, text: str, line: int, col: int, literal: bool = False,
                 count: int = 1, prefix: str = "CHECK"):
        self.kind = kind          # "", NEXT, SAME, NOT, DAG, LABEL, EMPTY, EOF
        self.text = text
        self.line = line
        self.col = col
        self.count = count
        self.prefix = prefix
        self.pieces: list[_Piece] = []
        self.fixed: str | None = None
        self.defines: list[str] = []
        if kind in ("EMPTY", "EOF"):
            return
        if literal or ("{{" not in text and "[[" not in text):
            self.fixed = text
            return
        self._parse(text)
        if kind == "LABEL" and any(p.kind in ("def", "use", "numdef", "numuse") for p in self.pieces):
            raise CheckSyntaxError(f"{prefix}-LABEL: cannot use or define variables: '{text}'")
        if kind == "NOT" and self.defines:
            raise CheckSyntaxError(f"{prefix}-NOT: cannot define variables: '{text}'")

    @property
    def directive(self) -> str:
        return self.prefix + ("-" + self.kind if self.kind and self.kind != "EOF" else "")

    def _parse(self, s: str) -> None:
        lit: list[str] = []

        def flush():
            if lit:
                self.pieces.append(_Piece("lit", "".join(lit)))
                lit.clear()

        i = 0
        while i < len(s):
            if s.startswith("{{", i):
                end = s.find("}}", i + 2)
                if end < 0:
                    raise CheckSyntaxError(f"found start of regex string with no end '}}}}' in '{s}'")
                flush()
                body = s[i + 2:end]
                if not body:
                    raise CheckSyntaxError("found empty regex '{{}}'")
                self.pieces.append(_Piece("re", _translate_ere(body)))
                i = end + 2
            elif s.startswith("[[", i):
                end = _find_var_end(s[i + 2:])
                if end < 0:
                    raise CheckSyntaxError(f"Invalid substitution block, no ]] found in '{s}'")
                flush()
                self._parse_block(s[i + 2:i + 2 + end])
                i = i + 2 + end + 2
            else:
                lit.append(s[i])
                i += 1
        flush()

    def _parse_block(self, body: str) -> None:
        if body.startswith("#"):
            expr = body[1:].strip()
            fmt = "u"
            m = re.match(r"%([udxX])\s*,\s*", expr)
            if m:
                fmt = m.group(1)
                expr = expr[m.end():]
            if ":" in expr:
                name, _, rhs = expr.partition(":")
                name = name.strip()
                if not _VAR_NAME.fullmatch(name) or rhs.strip():
                    raise CheckSyntaxError(f"unsupported numeric substitution '[[{body}]]'")
                self.pieces.append(_Piece("numdef", name=name, fmt=fmt))
                self.defines.append(name)
            else:
                self.pieces.append(_Piece("numuse", expr=expr, fmt=fmt))
            return
        if body.startswith("@LINE"):
            self.pieces.append(_Piece("line", expr=body))
            return
        name, sep, rx = body.partition(":")
        if not _VAR_NAME.fullmatch(name):
            raise CheckSyntaxError(f"invalid variable name in '[[{body}]]'")
        if sep:
            if not rx:
                raise CheckSyntaxError(f"empty regex for variable '{name}'")
            self.pieces.append(_Piece("def", _translate_ere(rx), name=name))
            self.defines.append(name)
        else:
            self.pieces.append(_Piece("use", name=name))

    # -- matching ---------------------------------------------------------------
    def _eval_line(self, expr: str) -> int:
        m = re.fullmatch(r"@LINE\s*(?:([+-])\s*(\d+))?", expr.strip())
        if not m:
            raise CheckSyntaxError(f"invalid @LINE expression '{expr}'")
        v = self.line
        if m.group(1):
            v = v + int(m.group(2)) if m.group(1) == "+" else v - int(m.group(2))
        return v

    def _eval_num(self, expr: str, ctx: "_Context") -> int:
        tokens = re.findall(r"\s*([+-]|[^\s+-]+)", expr)
        if not tokens:
            raise CheckSyntaxError("empty numeric expression")
        total = 0
        sign = 1
        expect_operand = True
        for t in tokens:
            if expect_operand:
                if t in "+-":
                    sign = -sign if t == "-" else sign
                    continue
                if t.startswith("@LINE"):
                    v = self.line
                elif re.fullmatch(r"\d+|0x[0-9a-fA-F]+", t):
                    v = int(t, 0)
                elif t in ctx.numeric:
                    v = ctx.numeric[t]
                else:
                    raise _Undefined(t)
                total += sign * v
                sign = 1
                expect_operand = False
            else:
                if t not in "+-":
                    raise CheckSyntaxError(f"invalid numeric expression '{expr}'")
                sign = -1 if t == "-" else 1
                expect_operand = True
        return total

    def regex(self, ctx: "_Context") -> tuple[re.Pattern, dict[str, tuple[str, str]]]:
        """The Python regex for the current variable values, and which named
        group defines which variable ({group: (kind, name)}).  Groups are
        opened in LLVM's order (one per regex block and definition), so a
        user's numeric backreference means what it means to FileCheck."""
        parts: list[str] = []
        groups: dict[str, tuple[str, str]] = {}
        defined_here: dict[str, str] = {}
        for p in self.pieces:
            if p.kind == "lit":
                parts.append(re.escape(p.text))
            elif p.kind == "re":
                parts.append("(" + p.text + ")")
            elif p.kind in ("def", "numdef"):
                if p.name in defined_here:
                    raise CheckSyntaxError(f"variable '{p.name}' defined twice in '{self.text}'")
                g = "v%d_%s" % (len(groups), p.name.replace("$", "_"))
                defined_here[p.name] = g
                if p.kind == "def":
                    groups[g] = ("str", p.name)
                    parts.append(f"(?P<{g}>{p.text})")
                else:
                    groups[g] = ("num" + p.fmt, p.name)
                    parts.append(f"(?P<{g}>{_NUM_FMT_RE[p.fmt]})")
            elif p.kind == "use":
                if p.name in defined_here:
                    parts.append(f"(?P={defined_here[p.name]})")
                elif p.name in ctx.strings:
                    parts.append(re.escape(ctx.strings[p.name]))
                elif p.name in ctx.numeric:
                    parts.append(re.escape(str(ctx.numeric[p.name])))
                else:
                    raise _Undefined(p.name)
            elif p.kind == "line":
                parts.append(re.escape(str(self._eval_line(p.expr))))
            elif p.kind == "numuse":
                v = self._eval_num(p.expr, ctx)
                parts.append(re.escape(format(v, {"u": "d", "d": "d"}.get(p.fmt, p.fmt))))
        return ctx.compile("".join(parts)), groups

    def match(self, buf: str, start: int, end: int, ctx: "_Context") -> tuple[int, int] | None:
        """First match inside ``buf[start:end]``: (position, length), or
        None.  Defines variables on success."""
        if self.kind == "EOF":
            return end, 0
        if self.kind == "EMPTY":
            m = ctx.compile(r"\n$").search(buf, start, end)
            return None if m is None else (m.start() + 1, 0)
        if self.fixed is not None:
            pos = buf.find(self.fixed, start, end)
            return None if pos < 0 else (pos, len(self.fixed))
        rx, groups = self.regex(ctx)
        # '^' matches at the start of the search range (LLVM searches a
        # sub-buffer): search a slice when the pattern has an anchor.
        if "^" in rx.pattern.replace("[^", ""):
            m = rx.search(buf[start:end])
            off = start
        else:
            m = rx.search(buf, start, end)
            off = 0
        if m is None:
            return None
        for g, (kind, name) in groups.items():
            val = m.group(g)
            if kind == "str":
                ctx.strings[name] = val
            else:
                ctx.numeric[name] = int(val, 16 if kind in ("numx", "numX") else 10)
        return off + m.start(), m.end() - m.start()


class _Undefined(Exception):
    pass


@dataclass
class _Context:
    strings: dict[str, str] = field(default_factory=dict)
    numeric: dict[str, int] = field(default_factory=dict)
    _cache: dict[str, re.Pattern] = field(default_factory=dict)

    def compile(self, rx: str) -> re.Pattern:
        got = self._cache.get(rx)
        if got is None:
            try:
                got = re.compile(rx, re.MULTILINE)
            except re.error as e:
                raise CheckSyntaxError(f"invalid regex: {e}: {rx}") from None
            self._cache[rx] = got
        return got


@dataclass
class CheckString:
    """A positive directive with the DAG/NOT directives that precede it."""

    pattern: Pattern
    dag_nots: list[Pattern] = field(default_factory=list)


# ---------------------------------------------------------------------------
# Parsing the check file
# ---------------------------------------------------------------------------


def _validate_prefixes(prefixes) -> tuple[str, ...]:
    if isinstance(prefixes, str):
        prefixes = [p for p in prefixes.split(",")]
    out = tuple(p.strip() for p in prefixes)
    if not out:
        raise CheckSyntaxError("no check prefixes given")
    for p in out:
        if not _PREFIX_RE.match(p):
            raise CheckSyntaxError(f"supplied check prefix must start with a letter and contain only "
                                   f"alphanumeric characters, hyphens, and underscores: '{p}'")
    if len(set(out)) != len(out):
        raise CheckSyntaxError(f"supplied check prefix must be unique: {','.join(out)}")
    return out


def parse_checks(check_text: str, prefixes=("CHECK",), strict_whitespace: bool = False
                 ) -> list[CheckString]:
    """The check strings of a check file (raises CheckSyntaxError)."""
    prefixes = _validate_prefixes(prefixes)
    text = check_text.replace("\r\n", "\n")
    if not strict_whitespace:
        text = _HSPACE.sub(" ", text)
    names = sorted(set(prefixes) | set(_COMMENT_PREFIXES), key=len, reverse=True)
    finder = re.compile(r"(?<![A-Za-z0-9_-])(" + "|".join(map(re.escape, names)) + ")")
    suffix = re.compile(r"(?:-(COUNT-(\d+)|NEXT|SAME|NOT|DAG|LABEL|EMPTY))?((?:\{LITERAL\})?):")
    checks: list[CheckString] = []
    pending: list[Pattern] = []
    pos = 0
    line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
    import bisect
    while True:
        m = finder.search(text, pos)
        if m is None:
            break
        name = m.group(1)
        sm = suffix.match(text, m.end())
        if sm is None:
            pos = m.end()
            continue
        eol = text.find("\n", sm.end())
        if eol < 0:
            eol = len(text)
        if name in _COMMENT_PREFIXES and name not in prefixes:
            if sm.group(1) is None and not sm.group(3):
                pos = eol
                continue
            pos = m.end()
            continue
        kind = sm.group(1) or ""
        count = 1
        if kind.startswith("COUNT-"):
            count = int(sm.group(2))
            if count == 0:
                raise CheckSyntaxError(f"invalid count in -COUNT specification on prefix '{name}'")
            kind = ""
        body = text[sm.end():eol].strip(" \t")
        lineno = bisect.bisect_right(line_starts, m.start())
        col = m.start() - line_starts[lineno - 1] + 1
        if kind == "EMPTY":
            if body:
                raise CheckSyntaxError(f"found non-empty check string for empty check with prefix '{name}:'")
        elif not body:
            raise CheckSyntaxError(f"found empty check string with prefix '{name}:'")
        pat = Pattern(kind, body, lineno, col, literal=bool(sm.group(3)), count=count, prefix=name)
        if kind in ("NEXT", "SAME", "EMPTY") and not checks:
            raise CheckSyntaxError(f"found '{name}-{kind}' without previous '{name}: line")
        if kind in ("NOT", "DAG"):
            pending.append(pat)
        else:
            checks.append(CheckString(pat, pending))
            pending = []
        pos = eol
    if pending:
        checks.append(CheckString(Pattern("EOF", "", 0, 0), pending))
    return checks


def has_checks(check_text: str, prefixes=("CHECK",)) -> bool:
    """True if the text holds at least one directive for these prefixes."""
    try:
        return bool(parse_checks(check_text, prefixes))
    except CheckSyntaxError:
        return True


# ---------------------------------------------------------------------------
# Matching
# ---------------------------------------------------------------------------


@dataclass
class FileCheckResult:
    ok: bool
    errors: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return self.ok

    @property
    def message(self) -> str:
        return "\n".join(self.errors)


class _Failure(Exception):
    pass


class _Matcher:
    def __init__(self, buf: str, check_text: str, check_name: str, input_name: str):
        self.buf = buf
        self.check_lines = check_text.replace("\r\n", "\n").split("\n")
        self.check_name = check_name
        self.input_name = input_name
        self.ctx = _Context()
        self.errors: list[str] = []

    # -- diagnostics -------------------------------------------------------------
    def _where_input(self, pos: int) -> tuple[int, int, str]:
        line_start = self.buf.rfind("\n", 0, pos) + 1
        line_end = self.buf.find("\n", pos)
        if line_end < 0:
            line_end = len(self.buf)
        lineno = self.buf.count("\n", 0, pos) + 1
        return lineno, pos - line_start + 1, self.buf[line_start:line_end]

    def fail(self, pat: Pattern, message: str, pos: int | None = None, note: str = "scanning from here",
             fuzzy_from: int | None = None) -> None:
        src = self.check_lines[pat.line - 1] if 0 < pat.line <= len(self.check_lines) else pat.text
        out = [f"{self.check_name}:{pat.line}:{pat.col}: error: {pat.directive}: {message}",
               src, " " * (pat.col - 1) + "^"]
        if pos is not None:
            ln, col, text = self._where_input(pos)
            out += [f"{self.input_name}:{ln}:{col}: note: {note}", text, " " * (col - 1) + "^"]
        for p in pat.pieces:
            if p.kind == "use" and p.name in self.ctx.strings:
                out.append(f"{self.check_name}:{pat.line}:{pat.col}: note: with \"{p.name}\" equal to "
                           f"\"{self.ctx.strings[p.name]}\"")
        if fuzzy_from is not None:
            hint = self._fuzzy(pat, fuzzy_from)
            if hint is not None:
                ln, text = hint
                out += [f"{self.input_name}:{ln}:1: note: possible intended match here", text]
        self.errors.append("\n".join(out))
        raise _Failure()

    def _fuzzy(self, pat: Pattern, start: int) -> tuple[int, str] | None:
        want = pat.text
        best, best_ratio = None, 0.0
        first_line = self.buf.count("\n", 0, start) + 1
        for i, line in enumerate(self.buf[start:].split("\n")[:2000]):
            r = difflib.SequenceMatcher(None, want, line.strip(), autojunk=False).quick_ratio()
            if r > best_ratio:
                best_ratio, best = r, (first_line + i, line)
        return best if best_ratio >= 0.5 else None

    # -- primitives ------------------------------------------------------------------
    def _match(self, pat: Pattern, start: int, end: int) -> tuple[int, int] | None:
        try:
            return pat.match(self.buf, start, end, self.ctx)
        except _Undefined as e:
            self.fail(pat, f"undefined variable: {e.args[0]}")
        return None

    def check_not(self, nots: list[Pattern], start: int, end: int) -> None:
        for pat in nots:
            got = self._match(pat, start, end)
            if got is not None:
                self.fail(pat, "excluded string found in input", got[0], note="found here")

    def check_dag(self, dag_nots: list[Pattern], start: int, end: int, nots: list[Pattern]) -> int:
        """LLVM's CheckDag: DAG groups (split by NOTs) match in any order,
        without overlapping each other; NOTs between groups are checked in
        the gap before the next group's earliest match."""
        if not dag_nots:
            return start
        ranges: list[tuple[int, int]] = []
        for k, pat in enumerate(dag_nots):
            if pat.kind == "NOT":
                nots.append(pat)
                continue
            match_pos = start
            i = 0
            while True:
                got = self._match(pat, match_pos, end)
                if got is None:
                    self.fail(pat, "expected string not found in input", match_pos, fuzzy_from=match_pos)
                mr = (got[0], got[0] + got[1])
                if i == len(ranges) or mr[1] <= ranges[i][0]:
                    ranges.insert(i, mr)
                    break
                if ranges[i][1] <= mr[0]:
                    i += 1
                    continue
                match_pos = ranges[i][1]  # overlap: try again after that match
                i += 1
            if k + 1 == len(dag_nots) or dag_nots[k + 1].kind == "NOT":
                if nots:
                    self.check_not(nots, start, ranges[0][0])
                    nots.clear()
                start = ranges[-1][1]
                ranges = []
        return start

    def check(self, cs: CheckString, start: int, end: int, label_scan: bool = False) -> tuple[int, int]:
        """LLVM's FileCheckString::Check in buf[start:end]: (match pos, len)."""
        nots: list[Pattern] = []
        last = start
        if not label_scan:
            last = self.check_dag(cs.dag_nots, start, end, nots)
        pat = cs.pattern
        match_end = last
        first = None
        for _ in range(pat.count):
            got = self._match(pat, match_end, end)
            if got is None:
                self.fail(pat, "expected string not found in input", match_end, fuzzy_from=match_end)
            if first is None:
                first = got[0]
            match_end = got[0] + got[1]
        assert first is not None
        if not label_scan:
            skipped = self.buf[last:first]
            if pat.kind in ("NEXT", "EMPTY"):
                nl = skipped.count("\n")
                if nl == 0:
                    self.fail(pat, "is on the same line as previous match", first,
                              note="'next' match was here")
                if nl > 1:
                    self.fail(pat, "is not on the line after the previous match", first,
                              note="'next' match was here")
            if pat.kind == "SAME" and "\n" in skipped:
                self.fail(pat, "is not on the same line as the previous match", first,
                          note="'next' match was here")
            self.check_not(nots, last, first)
        return first, match_end - first

    def run(self, checks: list[CheckString]) -> bool:
        """CHECK-LABELs cut the input into blocks first; each block's checks
        then match inside it.  A failing block does not stop later blocks
        (more errors are reported); a missing label does."""
        ok = True
        buf_pos = 0
        i = 0
        n = len(checks)
        while i < n:
            j = i
            while j < n and checks[j].pattern.kind != "LABEL":
                j += 1
            if j < n:
                try:
                    pos, length = self.check(checks[j], buf_pos, len(self.buf), label_scan=True)
                except _Failure:
                    return False
                region_end = pos + length
                j += 1
            else:
                region_end = len(self.buf)
            cur = buf_pos
            try:
                for k in range(i, j):
                    pos, length = self.check(checks[k], cur, region_end)
                    cur = pos + length
            except _Failure:
                ok = False
            buf_pos = region_end
            i = j
        return ok


def filecheck(input_text: str, check_text: str, prefixes=("CHECK",), *,
              check_name: str = "<check>", input_name: str = "<stdin>",
              strict_whitespace: bool = False, allow_empty_checks: bool = False) -> FileCheckResult:
    """Run FileCheck: does ``input_text`` satisfy the directives in
    ``check_text``?  Malformed check files and "no check strings" are
    failures with LLVM's message (FileCheck would exit 2)."""
    try:
        checks = parse_checks(check_text, prefixes, strict_whitespace)
    except CheckSyntaxError as e:
        return FileCheckResult(False, [f"{check_name}: error: {e}"])
    if not checks and not allow_empty_checks:
        names = ", ".join(f"'{p}'" for p in _validate_prefixes(prefixes))
        return FileCheckResult(False, [f"{check_name}: error: no check strings found with prefix"
                                       f"{'es' if ',' in names else ''} {names}"])
    buf = input_text.replace("\r\n", "\n")
    if not strict_whitespace:
        buf = _HSPACE.sub(" ", buf)
    m = _Matcher(buf, check_text if strict_whitespace else _HSPACE.sub(" ", check_text),
                 check_name, input_name)
    try:
        ok = m.run(checks)
    except CheckSyntaxError as e:
        return FileCheckResult(False, m.errors + [f"{check_name}: error: {e}"])
    return FileCheckResult(ok, m.errors)
