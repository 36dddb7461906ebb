"""Explanations of the kernels a pipeline produced (``--explain``,
``hlorun explain``).

For every final kernel (:mod:`hlorun.analysis.kernels`) the :class:`LineageTracker`
knows the original instructions it came from and every pass decision
(remark) made along the way.  :func:`explain_kernels` puts them together
and adds a plain-words *story* for dots -- why a linear layer became a
reduction, a GEMM fusion or a library call, and what would change it --
built from the decisions' rule names and numbers, not from guesses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..ir.module import Module
from .kernels import Kernel, kernel_list
from .lineage import Decision, LineageTracker, Origin

KIND_WORDS = {
    "loop-fusion": "an elementwise loop kernel (kLoop fusion)",
    "input-fusion": "a reduction/transpose kernel (kInput fusion: XLA's reduction emitter)",
    "gemm-fusion": "a Triton GEMM kernel (__triton_gemm fusion)",
    "custom-fusion": "a custom fusion kernel",
}


@dataclass
class KernelExplanation:
    kernel: Kernel
    origins: list[Origin]
    decisions: list[Decision]
    story: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.kernel.name

    def __repr__(self) -> str:
        return (f"Kernel({self.kernel.name}: {self.kernel.category}, {len(self.origins)} origins, "
                f"formed by {', '.join(self.formed_by) or '-'})")

    @property
    def category(self) -> str:
        return self.kernel.category

    @property
    def formed_by(self) -> list[str]:
        """Paths of the passes whose applied decisions shaped this kernel,
        in pipeline order (empty without lineage)."""
        seen: dict[str, None] = {}
        for d in self.decisions:
            if d.remark.kind == "applied":
                seen.setdefault(d.path, None)
        return list(seen)

    def to_json(self) -> dict[str, Any]:
        return {**self.kernel.to_json(), "origins": [o.to_json() for o in self.origins],
                "decisions": [d.to_json() for d in self.decisions], "story": self.story}


def kind_words(k: Kernel) -> str:
    if k.category.startswith("custom-call:"):
        target = k.category.split(":", 1)[1]
        lib = "cuDNN" if "cudnn" in target else "cuBLAS" if "cublas" in target else \
            "hipBLASLt" if "hipblas" in target else "a library"
        return f"a {lib} call ({target})"
    if k.category.startswith("op:"):
        return f"an unfused {k.category[3:]} kernel"
    return KIND_WORDS.get(k.category, k.category)


def _matches(pattern: str, k: Kernel, origins: list[Origin]) -> bool:
    if pattern in (k.name,) or any(o.name == pattern for o in origins):
        return True
    try:
        rx = re.compile(pattern)
    except re.error:
        return False
    return bool(rx.fullmatch(k.name) or any(rx.fullmatch(o.name) for o in origins)
                or any(o.op_name and rx.search(o.op_name) for o in origins))


def explain_kernels(module: Module, tracker: LineageTracker, pattern: str | None = None,
                    op: str | None = None) -> list[KernelExplanation]:
    """Kernels of ``module`` (those matching ``pattern``, or derived from the
    original instruction ``op``) with lineage, decisions and story."""
    out: list[KernelExplanation] = []
    for k in kernel_list(module):
        origins = tracker.origins_of(k.instruction)
        decisions = tracker.decisions_of(k.instruction)
        if op is not None:
            if not any(o.name == op for o in origins):
                continue
            decisions = [d for d in decisions if op in d.origins or d.remark.instruction == op
                         or op in d.remark.derived_from]
        elif pattern is not None and pattern != ".*" and not _matches(pattern, k, origins):
            continue
        e = KernelExplanation(k, origins, decisions)
        e.story = story(e, op, tracker.originals)
        out.append(e)
    return out


def plain_kernels(module: Module, pattern: str | None = None) -> list[KernelExplanation]:
    """Kernels of ``module`` without lineage (no origins, no decisions)."""
    out = []
    for k in kernel_list(module):
        if pattern is not None and pattern != ".*" and not _matches(pattern, k, []):
            continue
        out.append(KernelExplanation(k, [], []))
    return out


# ---------------------------------------------------------------------------
# Stories
# ---------------------------------------------------------------------------


def _dots(e: KernelExplanation) -> list[Origin]:
    return [o for o in e.origins if o.opcode in ("dot", "convolution")]


_STORY_PASSES = frozenset({
    "algsimp", "dot-strength-reduction", "gemv-rewriter", "splitk-rewriter",
    "triton-gemm-rewriter", "gemm-fusion", "autotuner", "cublas-gemm-rewriter",
    "conv-rewriter", "cudnn-fused-convolution-rewriter", "float-normalization-bf16",
    "priority-fusion", "rename_fusions", "fusion-wrapper"})
_QUIET_REASONS = ("the producer is not fusible", "the consumer is not fusible",
                  "not fusing because there are only bitcast users")


def _names(names, originals: dict[str, Origin] | None, limit: int = 4) -> str:
    items = sorted(names)
    shown = []
    for n in items[:limit]:
        o = originals.get(n) if originals else None
        tail = o.op_name.rsplit("/", 1)[-1] if o is not None and o.op_name else None
        shown.append(f"{n} ({tail})" if tail and tail != n else n)
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    return ", ".join(shown) + more


def _story_line(d: Decision, originals: dict[str, Origin] | None = None) -> str | None:
    r = d.remark
    rule = r.data.get("rule")
    p = r.pass_name
    if p not in _STORY_PASSES or r.kind == "analysis":
        return None
    if p == "algsimp":
        if rule == "remove-degenerate-dims":
            return (f"{d.path}: the size-1 (batch) dimension was dropped from "
                    f"{r.instruction}'s operands ({r.data.get('before')} -> "
                    f"{r.data.get('after')}): one operand is now a plain vector")
        return f"{d.path}: {r.instruction}: {r.message}" if rule else None
    if p == "dot-strength-reduction":
        n, m, k = r.data.get("n"), r.data.get("m"), r.data.get("k")
        if rule == "too-small":
            return (f"{d.path}: {r.instruction} multiplies a vector by a matrix with only "
                    f"(N + M) * K = ({n:,} + {m:,}) * {k:,} = {r.data['cost']:,} multiply-adds, "
                    f"below XLA's {r.data['threshold']:,} threshold -- too little work for a GEMM "
                    f"kernel; it became an elementwise multiply followed by a sum over the {k:,} "
                    f"inputs (a reduce), computed in f32 and converted back")
        if rule == "vector-vector":
            return (f"{d.path}: {r.instruction} is a vector-vector product, which GEMM kernels "
                    f"do not handle; it became multiply + reduce")
        if rule == "large-enough":
            return (f"{d.path}: {r.instruction} stays a matrix multiplication: (N + M) * K = "
                    f"({n:,} + {m:,}) * {k:,} = {r.data['cost']:,} >= {r.data['threshold']:,} is "
                    f"enough work for a GEMM kernel")
        return f"{d.path}: {r.instruction}: {r.message}"
    if p == "gemv-rewriter":
        return (f"{d.path}: the vector got a unit dimension so the GEMM emitters see a matrix "
                f"product ({r.message.split('product ')[-1]})")
    if p == "splitk-rewriter":
        if r.kind != "applied":
            return None
        return (f"{d.path}: with M={r.data['m']} and N={r.data['n']} there are too few output "
                f"tiles to keep the GPU busy, so K={r.data['k']:,} was split into "
                f"{r.data['split_k']} chunks computed in parallel and summed afterwards "
                f"(XLA's split-K cost model)")
    if p == "priority-fusion":
        if rule == "fused" and r.data.get("us_saved") is None:
            return None  # a bitcast
        if rule == "fused" and d.source_origins:
            what = r.data.get("producer_opcode") or "computation"
            note = f"; {r.data['note']}, so it runs in this {r.data.get('fusion_kind')} kernel" \
                if r.data.get("note") else ""
            return (f"{d.path}: the {what} from {_names(d.source_origins, originals)} is computed "
                    f"in the same kernel (fusing saves {r.data['us_saved']:.3f} us by the cost "
                    f"model){note}")
        if rule == "ineligible" and r.data.get("reason") in _QUIET_REASONS:
            return None
        if rule == "ineligible":
            return f"{d.path}: not fused further: {r.data.get('reason')}"
        if rule == "not-beneficial" and d.source_origins:
            return (f"{d.path}: {_names(d.source_origins, originals)} kept in a separate kernel: "
                    f"{r.message.split(' rejected: ', 1)[-1]}")
        return f"{d.path}: {r.message}"
    return f"{d.path}: {r.instruction}: {r.message}"


_SHAPING = ("dot-strength-reduction", "splitk-rewriter", "gemv-rewriter", "triton-gemm-rewriter",
            "gemm-fusion", "cublas-gemm-rewriter", "conv-rewriter",
            "cudnn-fused-convolution-rewriter")


def story(e: KernelExplanation, op: str | None = None,
          originals: dict[str, Origin] | None = None) -> list[str]:
    """Plain-words reasons, one per step that shaped the kernel."""
    lines: list[str] = []
    dots = [o for o in _dots(e) if op is None or o.name == op]
    primary = [o for o in dots if any(d.remark.pass_name in _SHAPING and o.name in d.origins
                                      and d.remark.kind == "applied" for d in e.decisions)]
    what = ", ".join(f"{o.name} ({o.op_name or o.opcode}, {o.shape})" for o in (primary or dots))
    # a kernel no dot decision shaped only carries part of a dot's rewrite
    # (the f32 scale conversions of an FP8 cuBLAS call)
    verb = "computing" if primary else "part of the rewrite of"
    lines.append(f"{e.kernel.name} is {kind_words(e.kernel)}" + (f" {verb} {what}" if what else ""))
    seen: set[str] = set()
    for d in e.decisions:
        line = _story_line(d, originals)
        if line is None:
            continue
        key = line.split(": ", 1)[1] if ": " in line else line
        if key in seen:
            continue
        seen.add(key)
        lines.append("- " + line)
    lines.extend(_advice(e, op))
    return lines


def _advice(e: KernelExplanation, op: str | None) -> list[str]:
    rules = {(d.remark.pass_name, d.remark.data.get("rule")) for d in e.decisions
             if d.remark.kind == "applied"}
    out: list[str] = []
    if ("dot-strength-reduction", "too-small") in rules:
        out.append("  To get a GEMM kernel instead: give the layer more work (a batch of more than "
                   "one row makes the activation a matrix, not a vector), or disable the rewrite "
                   "(--xla_disable_hlo_passes=dot-strength-reduction; hlorun: --disable-passes "
                   "dot-strength-reduction).")
    if ("splitk-rewriter", "splitk") in rules:
        out.append("  The split is chosen by a cost model; --xla_gpu_experimental_force_split_k=N "
                   "forces it (hlorun: splitk-rewriter option force_split_k).")
    return out


# ---------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------


def render_text(explanations: list[KernelExplanation], verbose: bool = False) -> str:
    lines: list[str] = []
    for e in explanations:
        k = e.kernel
        lines.append(f"kernel {k.name}: {k.category}" + (f" (hero {k.hero})" if k.hero else "")
                     + f" -> {k.shape}")
        if e.origins:
            shown = e.origins if verbose else e.origins[:8]
            lines.append("  from: " + ", ".join(
                f"{o.name}" + (f" [{o.op_name}]" if o.op_name else "") for o in shown)
                + (f" (+{len(e.origins) - len(shown)} more)" if len(shown) < len(e.origins) else ""))
        for s in e.story:
            lines.append("  " + s)
        if verbose:
            for d in e.decisions:
                r = d.remark
                lines.append(f"    #{d.index} {d.path} [{r.kind}] {r.instruction or '-'}: {r.message}")
        lines.append("")
    return "\n".join(lines)


def to_json(explanations: list[KernelExplanation]) -> list[dict[str, Any]]:
    return [e.to_json() for e in explanations]


__all__ = ["KernelExplanation", "explain_kernels", "kind_words", "plain_kernels", "render_text",
           "story", "to_json"]


# ---------------------------------------------------------------------------
# One instruction of the input (hlorun explain --op)
# ---------------------------------------------------------------------------


def op_matches(tracker: LineageTracker, op: str) -> list[str]:
    """Original instruction names ``op`` designates: the name itself, or
    the instructions whose op_name matches ``op`` as a regex."""
    if op in tracker.originals:
        return [op]
    try:
        rx = re.compile(op)
    except re.error:
        return []
    return sorted(n for n, o in tracker.originals.items()
                  if o.op_name and rx.search(o.op_name) and o.opcode in ("dot", "convolution"))


def is_primary(e: KernelExplanation, op: str) -> bool:
    """Does a kernel-shaping decision about ``op`` apply to this kernel (as
    opposed to ``op``'s result merely flowing through it, e.g. a bitcast)?"""
    return any(d.remark.pass_name in _SHAPING and op in d.origins
               and d.remark.kind == "applied" for d in e.decisions)


def render_op(op: str, origin: Origin, explanations: list[KernelExplanation]) -> str:
    """One screen: what ``op`` became and why."""
    primary = [e for e in explanations if is_primary(e, op)] or explanations
    others = [e for e in explanations if e not in primary]
    lines = [f"{op} ({origin.opcode}{', ' + origin.op_name if origin.op_name else ''}, "
             f"{origin.shape}) runs in {len(primary)} kernel(s):"]
    for e in primary:
        lines.append("")
        lines.append(f"  {e.kernel.name} [{e.kernel.category}" +
                     (f", hero {e.kernel.hero}" if e.kernel.hero else "") + f"] -> {e.kernel.shape}")
        for s in e.story[1:]:
            lines.append("  " + s)
    if others:
        lines.append("")
        lines.append("  its result also flows (unchanged) into: " + ", ".join(
            f"{e.kernel.name} [{e.kernel.category}]" for e in others))
    return "\n".join(lines) + "\n"
