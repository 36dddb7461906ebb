"""XLA's ``PhiGraph::Optimize``: phi values that resolve to one value are
replaced by it."""

from __future__ import annotations


class PhiGraph:
    """XLA's ``PhiGraph::Optimize``: a phi whose inputs (minus itself) are
    all one value, or a closure of phis fed by exactly one non-phi value, is
    replaced by that value.  Returns {phi id: replacement id}."""

    def __init__(self, phi_inputs: dict[int, list[int]], deleted: set[int]):
        self.inputs = {k: list(v) for k, v in phi_inputs.items() if k not in deleted}
        self.forward: dict[int, int] = {}

    def find(self, x: int) -> int:
        path = []
        while x in self.forward:
            path.append(x)
            x = self.forward[x]
        for p in path:
            self.forward[p] = x
        return x

    def optimize(self) -> dict[int, int]:
        phis = self.inputs
        changed = True
        while changed:
            changed = False
            checked: set[int] = set()
            for node in list(phis):
                if node in self.forward:
                    continue
                ops = [self.find(x) for x in phis[node]]
                ops = [x for x in ops if x != node]
                phis[node] = ops
                if not ops:
                    continue
                if all(x == ops[0] for x in ops):
                    self.forward[node] = ops[0]
                    changed = True
                    continue
                if node in checked:
                    continue
                work = [node]
                seen: set[int] = set()
                non_phi: int | None = None
                ok = True
                while work:
                    t = self.find(work.pop(0))
                    if t in seen:
                        continue
                    seen.add(t)
                    checked.add(t)
                    if t in phis and t not in self.forward:
                        work.extend(phis[t])
                    else:
                        if non_phi is not None and non_phi != t:
                            ok = False
                            break
                        non_phi = t
                if ok and non_phi is not None:
                    for t in seen:
                        if t != non_phi and t in phis:
                            self.forward[t] = non_phi
                            changed = True
        return {k: self.find(k) for k in self.forward}
