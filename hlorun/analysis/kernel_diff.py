"""How the final kernels of two compiles of the same module differ
(``hlorun diff-pipelines``; scenario S3: one ``__cublas$lt$matmul$f8``
call with one pipeline version, a bf16 GEMM fusion plus separate
dequantize fusions with the next).

Both runs are watched by a :class:`~hlorun.analysis.lineage.LineageTracker`, so
every kernel knows the input instructions it computes and the decisions
that shaped it.  :func:`compare_kernels` gives

* the kernel count per category on each side (:mod:`hlorun.analysis.kernels`);
* the kernels only one side has: kernels are paired by *signature*
  (category, result shape, hero), names are ignored since two pipelines
  number them differently;
* for each dot and convolution of the input, the kernels that compute it
  on each side when those differ (the kernels a shaping decision such as a
  GEMM rewrite or a strength reduction applied to, as ``hlorun explain``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .explain import KernelExplanation, explain_kernels, is_primary
from ..ir.module import Module
from .kernels import compare_kernel_lists
from .lineage import LineageTracker, Origin


def signature(e: KernelExplanation) -> tuple[str, str, str]:
    k = e.kernel
    return (k.category, k.shape, k.hero or "")


@dataclass
class OpOutcome:
    """The kernels computing one dot/convolution of the input on each side."""

    op: Origin
    a: list[KernelExplanation]
    b: list[KernelExplanation]

    def to_json(self) -> dict[str, Any]:
        def side(es):
            return [{"name": e.kernel.name, "category": e.kernel.category} for e in es]
        return {"op": self.op.to_json(), "a": side(self.a), "b": side(self.b)}


@dataclass
class KernelDiff:
    kernels_a: list[KernelExplanation]
    kernels_b: list[KernelExplanation]
    categories: list[tuple[str, int, int]]  # (category, count in a, count in b)
    only_a: list[KernelExplanation] = field(default_factory=list)
    only_b: list[KernelExplanation] = field(default_factory=list)
    ops: list[OpOutcome] = field(default_factory=list)  # those computed differently

    @property
    def same(self) -> bool:
        return not (self.only_a or self.only_b or self.ops)

    def to_json(self) -> dict[str, Any]:
        return {"same": self.same,
                "counts": [len(self.kernels_a), len(self.kernels_b)],
                "categories": [{"category": c, "a": x, "b": y} for c, x, y in self.categories],
                "only_a": [e.to_json() for e in self.only_a],
                "only_b": [e.to_json() for e in self.only_b],
                "ops": [o.to_json() for o in self.ops],
                "kernels_a": [e.kernel.to_json() for e in self.kernels_a],
                "kernels_b": [e.kernel.to_json() for e in self.kernels_b]}


def _unpaired(mine: list[KernelExplanation], theirs: list[KernelExplanation]
              ) -> list[KernelExplanation]:
    left = Counter(signature(e) for e in theirs)
    out = []
    for e in mine:
        s = signature(e)
        if left[s]:
            left[s] -= 1
        else:
            out.append(e)
    return out


def _by_op(exps: list[KernelExplanation]) -> dict[str, list[KernelExplanation]]:
    """Input dot/convolution name -> the kernels a shaping decision about it
    applied to (else every kernel it flows into)."""
    flows: dict[str, list[KernelExplanation]] = {}
    for e in exps:
        for o in e.origins:
            if o.opcode in ("dot", "convolution"):
                flows.setdefault(o.name, []).append(e)
    return {op: [e for e in es if is_primary(e, op)] or es for op, es in flows.items()}


def compare_kernels(module_a: Module, tracker_a: LineageTracker,
                    module_b: Module, tracker_b: LineageTracker) -> KernelDiff:
    ka = explain_kernels(module_a, tracker_a)
    kb = explain_kernels(module_b, tracker_b)
    d = KernelDiff(ka, kb, compare_kernel_lists([e.kernel for e in ka], [e.kernel for e in kb]),
                   _unpaired(ka, kb), _unpaired(kb, ka))
    ops_a, ops_b = _by_op(ka), _by_op(kb)
    originals = {**tracker_b.originals, **tracker_a.originals}
    for name in sorted(set(ops_a) | set(ops_b)):
        a, b = ops_a.get(name, []), ops_b.get(name, [])
        if sorted(map(signature, a)) != sorted(map(signature, b)) and name in originals:
            d.ops.append(OpOutcome(originals[name], a, b))
    return d


def render_text(d: KernelDiff, name_a: str, name_b: str, limit: int = 12) -> list[str]:
    """Lines for the terminal: category table, the input dots computed
    differently, the unpaired kernels with their stories."""
    w = max([len(c) for c, _, _ in d.categories] + [len("category")])
    wa, wb = max(len(name_a), 5), max(len(name_b), 5)
    lines = [f"final kernels: {name_a} {len(d.kernels_a)}, {name_b} {len(d.kernels_b)}"
             + (" (same kinds and shapes)" if d.same else "")]
    lines.append(f"  {'category':<{w}}  {name_a:>{wa}}  {name_b:>{wb}}")
    for c, x, y in d.categories:
        mark = "" if x == y else "  *"
        lines.append(f"  {c:<{w}}  {x:>{wa}}  {y:>{wb}}{mark}")
    if d.ops:
        lines.append("dots and convolutions of the input computed by different kernels:")
        for o in d.ops:
            lines.append(f"  {o.op.name} ({o.op.op_name or o.op.opcode}, {o.op.shape}):")
            for side, es in ((name_a, o.a), (name_b, o.b)):
                ks = ", ".join(f"{e.kernel.name} [{e.kernel.category}]" for e in es) or "no kernel"
                lines.append(f"    {side}: {ks}")
    for side, es in ((name_a, d.only_a), (name_b, d.only_b)):
        if not es:
            continue
        lines.append(f"kernels only {side} has ({len(es)}):")
        for e in es[:limit]:
            k = e.kernel
            lines.append(f"  {k.name}: {k.category}" + (f" (hero {k.hero})" if k.hero else "")
                         + f" -> {k.shape}")
            lines.extend("    " + s for s in e.story)
        if len(es) > limit:
            lines.append(f"  (+{len(es) - limit} more; --format json lists all)")
    return lines


__all__ = ["KernelDiff", "OpOutcome", "compare_kernels", "render_text", "signature"]
