"""rename_fusions: XLA:GPU's RenameFusions (xla/backends/gpu/transforms/rename_fusions.cc).

Every non-custom fusion in a non-fusion computation is renamed after its
kind and its heroes: the instruction ``<kind>_<heroes>_fusion`` (kind
``loop``/``input``/``output``), its computation ``fused_<heroes>``, where
``<heroes>`` are the opcodes of the non-trivial heroes of the fusion's
roots (``FindNonTrivialHero``: the reduce or tiled transpose behind a chain
of trivial elementwise ops, else the root itself), sorted, joined by ``_``
with ``-`` written ``_``; both made unique in the module.  So a batch-1
linear layer's strength-reduced dot shows up as ``input_reduce_fusion``
calling ``fused_reduce``, its elementwise producer as
``loop_multiply_fusion``.

Postcondition: fusion names say what the kernel is.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.edit import rename
from ..ir.module import Instruction, Module
from .base import Pass
from .priority_fusion.analysis import fusible_computations, find_hero

_KIND = {"kLoop": "loop", "kInput": "input", "kOutput": "output", "kCustom": "custom"}


def hero_names(fusion: Instruction) -> str:
    body = fusion.fused_computation
    members = set(body.instructions)
    roots = body.root.operands if body.root.opcode == "tuple" else [body.root]
    heroes = sorted({find_hero(r, members).opcode for r in roots})
    return "_".join(heroes).replace("-", "_")


@dataclass(frozen=True)
class RenameFusions(Pass):
    """Name fusions after their kind and hero instructions."""

    name = "rename_fusions"

    def run(self, module: Module) -> bool:
        changed = False
        for comp in fusible_computations(module):
            for instr in comp.instructions:
                if instr.opcode != "fusion" or instr.fusion_kind == "kCustom":
                    continue
                heroes = hero_names(instr)
                old = instr.name
                rename(instr, module.unique_name(f"{_KIND.get(instr.fusion_kind, 'loop')}_{heroes}_fusion"))
                body = instr.fused_computation
                body.name = module.unique_name(f"fused_{heroes}")
                self.remark(instr, f"{old} renamed {instr.name} (hero: {heroes})", "analysis",
                            derived_from=[old], rule="rename", old_name=old)
                changed = True
        return changed
