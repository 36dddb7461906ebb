"""A numpy interpreter for HLO modules (the reference for numerical checks).

``evaluate(module, args)`` runs the entry computation; ``random_inputs``
makes seeded arguments; ``compare_values`` compares two results with
per-dtype tolerances.  Unsupported opcodes or custom-call targets raise
:class:`EvaluationError` naming them: the evaluator never guesses.

Handler modules (one per opcode family) register themselves in
:mod:`.registry` when imported here.
"""

from __future__ import annotations

from typing import Any, Sequence

from . import (conv, core, custom_calls, elementwise, extra_ops, fmha, indexing,  # noqa: F401
               linalg, reduction, scan, shapes, topk_calls)
from .compare import (Comparison, LeafDiff, compare_arrays, compare_values, tolerance_for,
                      tolerance_types)
from .core import DEFAULT_MAX_BYTES, DEFAULT_MAX_WHILE_ITERATIONS, Evaluator
from .inputs import coerce_input, random_inputs
from .memory import estimate_peak_bytes, format_bytes
from .registry import CUSTOM_CALLS, HANDLERS, EvaluationError


def evaluate(module, args: Sequence[Any], max_bytes: int | None = DEFAULT_MAX_BYTES,
             max_while_iterations: int = DEFAULT_MAX_WHILE_ITERATIONS) -> Any:
    """Evaluate ``module``'s entry computation on ``args``."""
    return Evaluator(module, max_bytes=max_bytes,
                     max_while_iterations=max_while_iterations).evaluate(args)


def supported_opcodes() -> list[str]:
    return sorted(HANDLERS)


def supported_custom_calls() -> list[str]:
    return sorted(CUSTOM_CALLS)


def output_types(module) -> list[str]:
    """Element types of the entry result's leaves (depth-first)."""
    root = module.entry.root
    return [s.element_type for _, s in root.shape.leaves()]


def unsupported_ops(module) -> list[str]:
    """Opcodes / custom-call targets the evaluator lacks among the
    instructions an evaluation of the entry would reach (dead code and
    uncalled computations do not count)."""
    missing: set[str] = set()
    if module.entry is None or module.entry.root is None:
        return ["(no entry computation)"]
    seen: set = set()
    stack = [module.entry.root]
    while stack:
        ins = stack.pop()
        if ins in seen:
            continue
        seen.add(ins)
        if ins.opcode not in HANDLERS:
            missing.add(ins.opcode)
        elif ins.opcode == "custom-call" and ins.custom_call_target not in CUSTOM_CALLS:
            missing.add(f"custom-call {ins.custom_call_target}")
        stack.extend(ins.operands)
        if ins.attrs:
            for comp in ins.called_computations():
                if comp.root is not None:
                    stack.append(comp.root)
    return sorted(missing)


__all__ = [
    "Comparison", "DEFAULT_MAX_BYTES", "EvaluationError", "Evaluator", "LeafDiff",
    "coerce_input", "compare_arrays", "compare_values", "estimate_peak_bytes", "evaluate",
    "format_bytes", "output_types", "random_inputs", "supported_custom_calls",
    "supported_opcodes", "tolerance_for", "tolerance_types", "unsupported_ops",
]
