"""hlorun: an HLO pass-pipeline runner.

Public API: ``parse_module``, ``print_module``, ``HloParseError``.
Imports are lazy so that ``hlorun --help`` starts fast.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["parse_module", "print_module", "load_module", "HloParseError", "__version__"]


def __getattr__(name: str):
    if name in ("parse_module", "load_module"):
        from . import parser
        return getattr(parser, name)
    if name == "print_module":
        from .printer import print_module
        return print_module
    if name == "HloParseError":
        from .source import HloParseError
        return HloParseError
    raise AttributeError(f"module 'hlorun' has no attribute {name!r}")
