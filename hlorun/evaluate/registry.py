"""The opcode -> handler table and the evaluator's error type.

A handler is ``fn(ev, instr, operands) -> value`` where ``operands`` are the
evaluated operand values (numpy arrays, tuples of values for tuple shapes,
None for tokens) and ``ev`` is the running :class:`~.core.Evaluator` (for
calling computations).  Handlers never mutate their operands.

Handler modules register with ``@handler("add", "subtract")``; custom-call
targets with ``@custom_call("__cublas$gemm")``.
"""

from __future__ import annotations

from typing import Any, Callable

from ..errors import HloError, render_location

Handler = Callable[..., Any]

HANDLERS: dict[str, Handler] = {}
CUSTOM_CALLS: dict[str, Handler] = {}


def handler(*opcodes: str) -> Callable[[Handler], Handler]:
    def deco(fn: Handler) -> Handler:
        for op in opcodes:
            HANDLERS[op] = fn
        return fn
    return deco


def custom_call(*targets: str) -> Callable[[Handler], Handler]:
    def deco(fn: Handler) -> Handler:
        for t in targets:
            CUSTOM_CALLS[t] = fn
        return fn
    return deco


class EvaluationError(HloError):
    """The module cannot be evaluated (unsupported op, limit, bad input).
    Exit code 1; rendered at the instruction's source line when known."""

    exit_code = 1

    def __init__(self, message: str, instruction: Any = None):
        self.message = message
        self.instruction = instruction
        super().__init__(message)

    def at(self, instr: Any) -> "EvaluationError":
        if self.instruction is None:
            self.instruction = instr
        return self

    def render(self) -> str:
        instr = self.instruction
        if instr is None:
            return f"error: {self.message}"
        comp = instr.parent
        module = comp.module if comp is not None else None
        where = f"{comp.name + '/' if comp is not None else ''}%{instr.name}"
        msg = f"{self.message} [{where}]"
        if module is not None and module.source is not None and instr.pos >= 0:
            line, col = instr.location()
            return render_location(module.filename, line, col, "error", msg, module.source)
        fname = module.filename if module is not None else None
        return f"{fname + ': ' if fname else ''}error: {msg}"

    def __str__(self) -> str:
        return self.render()


def unsupported(what: str) -> EvaluationError:
    return EvaluationError(f"cannot evaluate {what}: not supported by the evaluator")
