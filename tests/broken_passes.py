"""Deliberately wrong passes for the tests that must catch them (numerics
checking, numeric reduce conditions).  Tests register them in
``hlorun.passes.REGISTRY`` with monkeypatch, under a test name or in place
of the real pass."""

from __future__ import annotations

from dataclasses import dataclass

from hlorun.ir.shape import Layout
from hlorun.passes.reshape_decomposer import ReshapeDecomposer


@dataclass(frozen=True)
class SwappedReshapeDecomposer(ReshapeDecomposer):
    """reshape-decomposer with a bug (the S0 fix done wrong): the physical
    copy it inserts before a bitcast gets its two most minor layout
    dimensions swapped (the wrong transpose).  No checker notices it; only
    the numbers do."""

    def run(self, module) -> bool:
        changed = super().run(module)
        for comp in module.computations:
            for ins in comp.instructions:
                if ins.opcode == "copy" and any(u.opcode == "bitcast" for u in ins.users):
                    m2m = list(ins.shape.minor_to_major)
                    if len(m2m) >= 2:
                        m2m[0], m2m[1] = m2m[1], m2m[0]
                        ins.shape = ins.shape.with_layout(Layout(m2m))
        return changed
