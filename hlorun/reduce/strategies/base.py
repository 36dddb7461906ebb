"""The strategy contract.

A strategy names the *units* it could change in a module (tuple outputs,
instructions, dimension classes, attributes ...), as hashable keys in a
deterministic order, and applies itself to any subset of them on a copy
of the module.  The driver does the delta debugging: it tries chunks of
units (all of them, then halves, quarters ... down to single units),
cleans up, verifies and tests every candidate, and keeps the ones that
stay interesting and are smaller.
"""

from __future__ import annotations

from typing import ClassVar, Hashable, Sequence

from ...ir.module import Module


class Strategy:
    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    #: True if the candidate computes the same values as the module it came
    #: from (usable when the condition compares against a fixed reference).
    preserves_semantics: ClassVar[bool] = False

    def units(self, module: Module) -> list[Hashable]:  # pragma: no cover - abstract
        raise NotImplementedError

    def apply(self, module: Module, units: Sequence[Hashable]) -> bool:  # pragma: no cover
        """Change ``module`` (a private copy) for ``units``; False if nothing
        could be done (the candidate is then skipped)."""
        raise NotImplementedError


def key(instr) -> tuple[str, str]:
    return (instr.parent.name, instr.name)
