"""Reduction strategies, in the order the driver tries them each round
(big cuts first, cosmetics last).  ``hlorun reduce --strategies`` picks a
subset by name."""

from __future__ import annotations

from .base import Strategy
from .cosmetic import DefaultLayouts, DropConfigs, DropMetadata, ShortNames
from .dims import HalveDims, ShrinkDimsToMin
from .graph import (DropDead, DropOutputs, ForwardOperand, InlineCalls, ReplaceWithParameters,
                    ReplaceWithZeros, ReRoot)

#: name -> strategy class, in the default order.
STRATEGIES: dict[str, type[Strategy]] = {
    cls.name: cls for cls in (
        DropOutputs, DropDead, ReplaceWithParameters, ReplaceWithZeros, ForwardOperand, ReRoot, InlineCalls,
        ShrinkDimsToMin, HalveDims, DropMetadata, DropConfigs, DefaultLayouts, ShortNames)
}


def make_strategies(names=None) -> list[Strategy]:
    """Instances for ``names`` (all, in the default order, when None)."""
    if not names:
        return [cls() for cls in STRATEGIES.values()]
    from ...errors import UsageError
    out = []
    for n in names:
        cls = STRATEGIES.get(n)
        if cls is None:
            import difflib
            near = difflib.get_close_matches(n, STRATEGIES, n=3)
            raise UsageError(f"unknown strategy '{n}'" + (f"; did you mean {', '.join(near)}?" if near
                                                          else f" (known: {', '.join(STRATEGIES)})"))
        out.append(cls())
    return out


__all__ = ["STRATEGIES", "Strategy", "make_strategies"]
