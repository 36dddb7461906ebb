"""Source locations, diagnostics and the error hierarchy.

Every user-facing error renders as ``file:line:col: error: message`` followed by
the offending source line and a caret, on one screen, never a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Span:
    """A 1-based line/column position in a named source text."""

    filename: str | None
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.filename or '<string>'}:{self.line}:{self.column}"


def offset_to_line_col(text: str, offset: int) -> tuple[int, int]:
    """1-based (line, column) of a character offset."""
    offset = max(0, min(offset, len(text)))
    line = text.count("\n", 0, offset) + 1
    start = text.rfind("\n", 0, offset) + 1
    return line, offset - start + 1


def source_line(text: str, line: int) -> str:
    lines = text.split("\n")
    if 1 <= line <= len(lines):
        return lines[line - 1].rstrip("\r")
    return ""


def render_location(filename: str | None, line: int, column: int, severity: str,
                    message: str, text: str | None) -> str:
    head = f"{filename or '<string>'}:{line}:{column}: {severity}: {message}"
    if text is None:
        return head
    src = source_line(text, line)
    if not src:
        return head
    # Long lines (model dumps) are clipped around the caret.
    col = max(1, column)
    if len(src) > 160:
        start = max(0, col - 80)
        clipped = src[start:start + 160]
        prefix = "..." if start else ""
        caret_pad = len(prefix) + (col - 1 - start)
        return f"{head}\n{prefix}{clipped}\n{' ' * caret_pad}^"
    return f"{head}\n{src}\n{' ' * (col - 1)}^"


@dataclass
class Diagnostic:
    """A finding about a module: which rule, where, and a message.

    ``instruction`` is the instruction's name; ``computation`` its
    computation.  ``line``/``column`` point into the source text when known.
    """

    rule: str
    message: str
    severity: str = "error"
    instruction: str | None = None
    computation: str | None = None
    filename: str | None = None
    line: int | None = None
    column: int | None = None
    notes: list[str] = field(default_factory=list)

    def render(self, text: str | None = None) -> str:
        where = ""
        if self.instruction:
            where = f" [{self.computation + '/' if self.computation else ''}{self.instruction}]"
        msg = f"{self.message}{where} ({self.rule})"
        if self.line is not None:
            out = render_location(self.filename, self.line, self.column or 1,
                                  self.severity, msg, text)
        else:
            out = f"{self.filename + ': ' if self.filename else ''}{self.severity}: {msg}"
        for n in self.notes:
            out += f"\n  note: {n}"
        return out

    def to_json(self) -> dict:
        return {
            "rule": self.rule, "severity": self.severity, "message": self.message,
            "instruction": self.instruction, "computation": self.computation,
            "file": self.filename, "line": self.line, "column": self.column,
            "notes": list(self.notes),
        }


class HloError(Exception):
    """Base of every error hlorun reports to users (never a traceback)."""

    exit_code = 1

    def render(self) -> str:
        return str(self)


class HloSyntaxError(HloError):
    """A located error in HLO text.  ``line``/``column`` are 1-based."""

    def __init__(self, message: str, line: int = 0, column: int = 0,
                 filename: str | None = None, text: str | None = None):
        self.message = message
        self.line = line
        self.column = column
        self.filename = filename
        self.text = text
        super().__init__(f"{filename or '<string>'}:{line}:{column}: error: {message}")

    def render(self) -> str:
        return render_location(self.filename, self.line, self.column, "error",
                               self.message, self.text)


#: The older name of :class:`HloSyntaxError`.
HloParseError = HloSyntaxError


class UsageError(HloError):
    """Bad command line, options or configuration (exit code 1)."""


class PipelineError(UsageError):
    """An unknown pipeline or a bad pipeline YAML file (exit code 1)."""


class PassError(HloError):
    """A pass met something it cannot handle.  Caught by the pipeline."""

    exit_code = 2

    def __init__(self, message: str, instruction: str | None = None,
                 computation: str | None = None):
        self.message = message
        self.instruction = instruction
        self.computation = computation
        super().__init__(message)


class CompileError(HloError):
    """A compile that ran but did not succeed (exit code 2):
    :meth:`hlorun.CompileResult.raise_for_status` raises a subclass.
    ``result`` is the :class:`hlorun.CompileResult`."""

    exit_code = 2

    def __init__(self, message: str, result=None):
        self.message = message
        self.result = result
        super().__init__(message)


class PassFailure(CompileError):
    """A pass raised (``result.failures[0]`` says which, where and why)."""


class ViolationError(CompileError):
    """A checker found a broken invariant (``result.violations``)."""


class NumericsMismatch(CompileError):
    """``check_numerics``: a pass changed the module's outputs beyond tolerance."""
