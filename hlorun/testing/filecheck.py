"""FileCheck for the pass tests: the ``filecheck`` package (a Python port of
LLVM's FileCheck, https://github.com/AntonLydike/filecheck), used as a
library on strings.

One correction to filecheck 1.0.6: a ``CHECK-NEXT`` pattern is matched from
the start of the next line with a *greedy* ``[^\n]*`` in front, so a
capture at its beginning (``CHECK-NEXT: [[C1:[^ ]+]] = f32[] constant(1)``,
as XLA's FP8 GEMM tests write) gets only the last characters of the name
(``t`` of ``%constant``).  LLVM takes the leftmost match on the next line;
:class:`_Matcher` does too (a lazy prefix).

XLA's pass tests state their expectations as FileCheck patterns over the
module's text; :func:`filecheck` runs them on our output::

    result = filecheck(output_text, pattern_text, prefixes=("CHECK",))
    if not result:
        print(result.message)
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field

__all__ = ["FileCheckResult", "filecheck", "has_checks"]


@dataclass
class FileCheckResult:
    ok: bool
    errors: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return self.ok

    @property
    def message(self) -> str:
        return "\n".join(self.errors)


def _prefixes(prefixes) -> str:
    return prefixes if isinstance(prefixes, str) else ",".join(prefixes)


def _options(prefixes, check_name: str, input_name: str, strict_whitespace: bool):
    from filecheck.options import Options
    return Options(match_filename=check_name, input_file=input_name,
                   check_prefixes=_prefixes(prefixes), strict_whitespace=strict_whitespace)


def _parser(check_text: str, opts):
    from filecheck.parser import Parser, pattern_for_opts
    return Parser(opts, io.StringIO(check_text), *pattern_for_opts(opts))


def has_checks(check_text: str, prefixes=("CHECK",)) -> bool:
    """True if the text holds at least one directive for these prefixes
    (a malformed directive counts: running it reports the error)."""
    from filecheck.error import ParseError
    try:
        return next(iter(_parser(check_text, _options(prefixes, "<check>", "-", False))),
                    None) is not None
    except ParseError:
        return True


def _matcher_class():
    import re

    from filecheck.compiler import compile_uops
    from filecheck.error import CheckError
    from filecheck.matcher import Matcher

    class _Matcher(Matcher):
        def match_immediately(self, op) -> None:
            pattern, repl = compile_uops(op, self.ctx.live_variables, self.opts)
            if op.name == "NEXT" and pattern.pattern.startswith("\\n?[^\\n]*"):
                # leftmost match on the next line, as LLVM (see the module docstring)
                pattern = re.compile("\\n?[^\\n]*?" + pattern.pattern[len("\\n?[^\\n]*"):],
                                     pattern.flags)
            match = self.file.match(pattern)
            if match is None:
                raise CheckError(f'Couldn\'t match "{op.arg}".', op)
            self.file.move_to(match.end(0))
            self.capture_results(match, repl, op)
    return _Matcher


def filecheck(input_text: str, check_text: str, prefixes=("CHECK",), *,
              check_name: str = "<check>", input_name: str = "<stdin>",
              strict_whitespace: bool = False, allow_empty_checks: bool = False) -> FileCheckResult:
    """Does ``input_text`` satisfy the directives in ``check_text``?  A
    failure carries FileCheck's own message (check line, what was expected,
    where it scanned, the possible intended match)."""
    from filecheck.finput import FInput
    opts = _options(prefixes, check_name, input_name, strict_whitespace)
    if allow_empty_checks and not has_checks(check_text, prefixes):
        return FileCheckResult(True)
    matcher = _matcher_class()(opts, FInput(input_name, FInput.canonicalize_line_ends(input_text)),
                      _parser(check_text, opts))
    matcher.stderr = io.StringIO()
    from contextlib import redirect_stdout
    try:
        with redirect_stdout(io.StringIO()):  # filecheck 1.0.6 prints a debug line in CHECK-DAG
            code = matcher.run()
    except NotImplementedError as e:  # [[#VAR+1]]: numeric substitution (not in XLA's tests)
        return FileCheckResult(False, [f"{check_name}: error: {e}"])
    return FileCheckResult(code == 0, [matcher.stderr.getvalue().rstrip()] if code else [])
