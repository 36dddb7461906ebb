"""copy_fusion: XLA:GPU's CopyFusion (xla/backends/gpu/transforms/copy_fusion.cc),
after copy-insertion.

The copies of a loop fusion's output (copy-insertion gives each while-loop
state element initialised from the same value a buffer of its own) are
computed by that fusion as extra outputs (entry computation only; fusions
whose parameters feed only elementwise ops): the fusion becomes a multi-output
fusion whose root tuple holds the original value and one ``copy`` of it per
copy user, and the copies' users read ``get-tuple-element``\\ s.  Fusions
with a reduction or tiled-transpose hero, custom (Triton / library)
fusions, and fusions rooted at a dynamic-update-slice or already
multi-output are left alone, as in XLA.

Postcondition: no loop fusion in a non-fusion computation has a ``copy`` user
that could be one of its outputs.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.module import Instruction, Module
from ..ir.opcode import ELEMENTWISE
from ..ir.shape import Shape
from .base import Pass
from .priority_fusion.analysis import FusionView, emitter_kind


def _only_elementwise_from_params(body) -> bool:
    """``OnlyElementwiseOpsReachableFromParams``."""
    stack = [p for p in body.parameters if p is not None]
    seen = set(stack)
    while stack:
        x = stack.pop()
        for u in x.users:
            if (u.opcode not in ELEMENTWISE or u.opcode == "copy") and \
                    u.opcode not in ("bitcast", "tuple"):
                return False
            if u not in seen:
                seen.add(u)
                stack.append(u)
    return True


def _eligible(fusion: Instruction) -> bool:
    if fusion.opcode != "fusion" or fusion.fusion_kind == "kCustom":
        return False
    body = fusion.fused_computation
    if body.root.opcode in ("tuple", "dynamic-update-slice", "scatter"):
        return False
    if not _only_elementwise_from_params(body):
        return False
    return emitter_kind(FusionView.of(fusion)) == "loop"


@dataclass(frozen=True)
class CopyFusion(Pass):
    """Fuse copies of a loop fusion's output into it as extra outputs."""

    name = "copy_fusion"

    def run(self, module: Module) -> bool:
        changed = False
        # entry only: in loop bodies a copy shares its buffer with the loop state
        for comp in [module.entry] if module.entry is not None else []:
            for f in comp.post_order():
                if not _eligible(f):
                    continue
                copies = [u for u in f.users if u.opcode == "copy" and u.operands[0] is f
                          and not u.control_predecessors and not u.control_successors]
                if not copies:
                    continue
                body = f.fused_computation
                root = body.root
                outs = [root]
                for c in copies:
                    clone = Instruction("copy", c.shape, [root], "", dict(c.attrs))
                    body.add_instruction(clone, c.name)
                    outs.append(clone)
                tup = Instruction("tuple", Shape.tuple([o.shape for o in outs]), outs)
                body.add_instruction(tup, "tuple")
                body.root = tup
                others = [u for u in f.users if u not in copies]
                was_root = comp.root is f
                f.shape = tup.shape
                g0 = Instruction("get-tuple-element", root.shape, [f], "", {"index": "0"})
                comp.add_instruction(g0, "get-tuple-element")
                for u in others:
                    if u is not g0:
                        u.replace_operand_with(f, g0)
                if was_root:
                    comp.root = g0
                for k, c in enumerate(copies, start=1):
                    g = Instruction("get-tuple-element", c.shape, [f], "", {"index": str(k)})
                    comp.add_instruction(g, "get-tuple-element")
                    c.replace_all_uses_with(g)
                    if comp.root is c:
                        comp.root = g
                    comp.remove_instruction(c)
                self.remark(f, f"{len(copies)} copies of {f.name} become outputs of it",
                            "applied", rule="copy-fusion", copies=[c.name for c in copies])
                changed = True
        return changed


__all__ = ["CopyFusion"]
