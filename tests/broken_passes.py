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


#: a module whose reshape-decomposer step must insert a physical copy (the
#: reshape changes layout), so a wrong decomposer changes the numbers
ALIGN_INPUT_MODULE = """HloModule align_input

ENTRY %align_input (p: f32[4,2,3], q: f32[8,3]) -> f32[8,3] {
  %p = f32[4,2,3]{0,1,2} parameter(0)
  %q = f32[8,3]{1,0} parameter(1)
  %e = f32[4,2,3]{0,1,2} exponential(%p)
  %r = f32[8,3]{1,0} reshape(%e)
  ROOT %a = f32[8,3]{1,0} add(%r, %q)
}
"""

#: a pipeline around it; DECOMPOSER is replaced by the decomposer under test
ALIGN_INPUT_PIPELINE = """name: numerics-test
target: {platform: cuda, device: H100, compute_capability: "9.0"}
steps:
  - pipeline: layout_normalization
    steps: [dce, DECOMPOSER, layout_normalization, cse]
"""
