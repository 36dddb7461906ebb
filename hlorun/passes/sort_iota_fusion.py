"""sort-iota-fusion: XLA:GPU's SortIotaFusion
(xla/backends/gpu/transforms/sort_iota_fusion.cc), the first pass of the
fusion pipeline.  A ``sort`` with ``iota`` operands (the index operand of
argsort / top-k, or the tie-breaker the stable-sort-expander added) becomes
a ``kCustom`` fusion of the sort with its distinct iotas, so the sort
kernel computes the indices instead of reading them: one kernel, as in
XLA's dumps (``fusion(...), kind=kCustom, calls={iota, sort}``).  An iota
with other users stays for them.  Priority fusion leaves such fusions
alone (a kCustom fusion is neither producer nor consumer there).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.edit import remove_dead
from ..ir.module import Module, has_opcode, module_has_opcode
from .base import Pass
from .dfs_rewrite import nonfusion_computations
from .priority_fusion.fuse import create_fusion, fuse_into, replace_with_fusion


_SORT = frozenset({"sort"})


@dataclass(frozen=True)
class SortIotaFusion(Pass):
    """Fuse the iota operands of a sort into a kCustom sort fusion."""

    name = "sort-iota-fusion"

    def run(self, module: Module) -> bool:
        changed = False
        if not module_has_opcode(module, _SORT):
            return False
        for comp in nonfusion_computations(module):
            if not has_opcode(comp, _SORT):
                continue
            for sort in comp.post_order():
                if sort.parent is not comp or sort.opcode != "sort":
                    continue
                iotas = []
                for op in sort.operands:
                    if op.opcode == "iota" and op not in iotas:
                        iotas.append(op)
                if not iotas:
                    continue
                name = sort.name
                fusion = create_fusion(sort, "kCustom")
                replace_with_fusion(sort, fusion)
                for iota in iotas:
                    fuse_into(fusion, iota)
                remove_dead(comp, iotas)
                self.remark(fusion, f"{name} and its iota operands "
                                    f"({', '.join(i.name for i in iotas)}) form one sort kernel",
                            derived_from=[name])
                changed = True
        return changed


__all__ = ["SortIotaFusion"]
