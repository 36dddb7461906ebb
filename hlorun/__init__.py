"""hlorun: an HLO pass-pipeline runner.

Public API (``docs/ARCHITECTURE.md``, ``docs/GUIDE.md``)::

    import hlorun
    m = hlorun.load("model.hlo")            # path (.gz/.xz), HLO text, JAX Lowered/Compiled, f + args
    r = hlorun.compile(m, "gpu-cuda", disable_passes=["cse"])   # -> CompileResult
    r.passes, r.violations, r.failures, r.kernels, r.autotune, r.to_json()

Also ``CompileOptions`` (and its groups), the exceptions (``HloError``,
``HloSyntaxError``, ``UsageError``, ``PipelineError``, ``CompileError``,
``PassFailure``, ``ViolationError``, ``NumericsMismatch``), and
``parse_module`` / ``print_module``.  Imports are lazy: ``import hlorun``
loads nothing else, so ``hlorun --help`` starts fast.
"""

from __future__ import annotations

__version__ = "0.1.0"

_EXPORTS = {
    "load": "api", "compile": "api",
    "CompileResult": "result", "PassRecord": "result", "AutotuneDecision": "result",
    "CompileOptions": "options", "Selection": "options", "Diagnostics": "options",
    "Autotuning": "options", "Numerics": "options", "Device": "options", "Output": "options",
    "HloError": "errors", "HloSyntaxError": "errors", "HloParseError": "errors",
    "UsageError": "errors", "PipelineError": "errors", "PassError": "errors",
    "CompileError": "errors", "PassFailure": "errors", "ViolationError": "errors",
    "NumericsMismatch": "errors",
    "parse_module": "text.parser", "load_module": "text.parser", "print_module": "text.printer",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str):
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module 'hlorun' has no attribute {name!r}")
    from importlib import import_module
    value = getattr(import_module(f"{__name__}.{mod}"), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
