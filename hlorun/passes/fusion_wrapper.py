"""fusion-wrapper: XLA:GPU's FusionWrapper (xla/backends/gpu/transforms/fusion_wrapper.cc).

Every instruction that needs a kernel but was not fused (an elementwise op,
broadcast, reshape, transpose, reduce, slice, convert ... left alone by
priority fusion) is wrapped into a fusion of its own, so that every kernel
of the module is a fusion or a library call: ``wrapped_<opcode>`` calling
``wrapped_<opcode>_computation`` (names made unique), with the kind the
emitter would use (reduction / transpose -> ``kInput``, else ``kLoop``).

Postcondition: no unfused instruction that needs a kernel remains in a
non-fusion computation.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.edit import rename
from ..ir.module import Module
from ..ir.opcode import ELEMENTWISE
from .base import Pass
from .priority_fusion.analysis import fusible_computations, FusionView, emitter_kind, fusion_kind_for
from .priority_fusion.fuse import create_fusion, replace_with_fusion

MUST_WRAP = (ELEMENTWISE - {"copy"}) | frozenset({
    "bitcast-convert", "broadcast", "concatenate", "convolution", "dot", "dynamic-slice",
    "dynamic-update-slice", "gather", "iota", "map", "pad", "reshape", "reduce",
    "reduce-precision", "reduce-window", "reverse", "scatter", "select", "slice", "transpose"})


@dataclass(frozen=True)
class FusionWrapper(Pass):
    """Wrap every kernel-producing unfused instruction into a fusion."""

    name = "fusion-wrapper"

    def run(self, module: Module) -> bool:
        changed = False
        for comp in fusible_computations(module):
            for instr in comp.post_order():
                if instr.opcode not in MUST_WRAP:
                    continue
                # ChooseFusionKind: only reductions, scatters and tiled
                # transposes make input fusions (a wrapped concatenate is kLoop)
                emitter = emitter_kind(FusionView.of(instr))
                kind = "kLoop" if emitter == "concatenate" else fusion_kind_for(emitter)
                fusion = create_fusion(instr, kind)
                op = instr.opcode.replace("-", "_")
                body = fusion.fused_computation
                body.name = module.unique_name(f"wrapped_{op}_computation")
                old = instr.name
                replace_with_fusion(instr, fusion)
                rename(fusion, module.unique_name(f"wrapped_{op}"))
                self.remark(fusion, f"{old} ({instr.opcode}) was not fused with anything: it runs as "
                                    f"its own {kind} kernel {fusion.name}", "applied",
                            derived_from=[old], rule="wrap")
                changed = True
        return changed
