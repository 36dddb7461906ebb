"""The kernels a compiled module launches, and their kinds.

After XLA:GPU's pipeline every kernel is a fusion or a library call in the
entry computation (or a control-flow computation): :func:`kernel_list`
lists them with a *category* that compares across compilers:

* ``custom-call:<target>`` -- cuDNN / cuBLAS / other library calls
  (``__cudnn$convBiasActivationForward``, ``__cublas$lt$matmul`` ...);
* ``gemm-fusion`` -- a Triton GEMM fusion (``__triton_gemm`` /
  ``__triton_nested_gemm_fusion`` backend config);
* ``loop-fusion`` / ``input-fusion`` (reduction or transpose emitter) /
  ``custom-fusion`` (other kCustom fusions); XLA's late fusion dispatch
  turns some loop/reduction fusions into generic Triton fusions (kCustom,
  backend kind ``__triton``): those count by the emitter kind of their body;
* ``op:<opcode>`` -- an instruction that needs a kernel but is not wrapped
  in a fusion (before fusion-wrapper runs).

Bitcasts, parameters, constants, tuples and get-tuple-elements launch
nothing.  ``hero`` is the fusion's main instruction (reduce, multiply ...).

:func:`kind` is the strict form the kernel-list comparison against XLA
uses: the fusion kind, with the backend kind for ``kCustom`` fusions
(``kCustom:__triton``, ``kCustom:__triton_nested_gemm_fusion`` ...), the
custom-call target, or the opcode of an unfused instruction.
:func:`kinds_matched` counts kernels matched kind for kind.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from ..ir.module import Instruction, Module
from ..passes.priority_fusion.analysis import find_hero, fusible_computations, fusion_backend_kind

_NO_KERNEL = frozenset({"parameter", "constant", "bitcast", "tuple", "get-tuple-element",
                        "after-all", "add-dependency", "opt-barrier", "partition-id",
                        "replica-id", "domain", "call", "while", "conditional",
                        # an async pair launches the instruction it wraps, which is
                        # listed from the async computation
                        "async-start", "async-update", "async-done"})
_GEMM_KINDS = ("__triton_gemm", "__triton_nested_gemm_fusion", "__triton")


@dataclass
class Kernel:
    name: str
    category: str
    kind: str
    opcode: str
    shape: str
    hero: str | None
    instruction: Instruction

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "category": self.category, "kind": self.kind,
                "opcode": self.opcode,
                "shape": self.shape, "hero": self.hero}


def category(instr: Instruction) -> str | None:
    op = instr.opcode
    if op in _NO_KERNEL:
        return None
    if op == "custom-call":
        return f"custom-call:{instr.custom_call_target}"
    if op == "fusion":
        kind = instr.fusion_kind
        backend = fusion_backend_kind(instr)
        if kind == "kCustom":
            if backend in _GEMM_KINDS and _has_dot(instr):
                return "gemm-fusion"
            if backend == "__triton":
                # XLA's late fusion dispatch re-emits some loop / reduction
                # fusions as generic Triton fusions: count them by emitter kind
                from ..passes.priority_fusion.analysis import FusionView, emitter_kind
                view = FusionView.of(instr)
                view.backend_kind = None
                return {"reduction": "input-fusion", "transpose": "input-fusion",
                        "scatter": "input-fusion"}.get(emitter_kind(view), "loop-fusion")
            return "custom-fusion"
        return {"kLoop": "loop-fusion", "kInput": "input-fusion",
                "kOutput": "output-fusion"}.get(kind or "", "fusion")
    if op == "reshape" or op == "transpose":
        from ..ir.shape import reshape_is_bitcast, transpose_is_bitcast
        s, o = instr.shape, instr.operands[0].shape
        if s.layout is not None and o.layout is not None and (
                (op == "reshape" and reshape_is_bitcast(o, s))
                or (op == "transpose" and transpose_is_bitcast(o, s, instr.dimensions))):
            return None
    return f"op:{op}"


def kind(instr: Instruction) -> str:
    """The strict kernel kind: ``kLoop`` / ``kInput`` / ``kOutput`` /
    ``kCustom:<backend kind>`` for fusions, the target for custom calls,
    the opcode otherwise (call only for instructions :func:`category`
    counts as kernels)."""
    if instr.opcode == "custom-call":
        return str(instr.custom_call_target)
    if instr.opcode == "fusion":
        k = instr.fusion_kind or "kLoop"
        if k == "kCustom":
            backend = fusion_backend_kind(instr)
            return f"kCustom:{backend}" if backend else "kCustom"
        return k
    return instr.opcode


def _has_dot(fusion: Instruction) -> bool:
    body = fusion.fused_computation
    return body is not None and any(i.opcode in ("dot", "scaled-dot") for i in body._instructions)


def kernel_list(module: Module) -> list[Kernel]:
    out: list[Kernel] = []
    for comp in fusible_computations(module):
        for instr in comp.post_order():
            cat = category(instr)
            if cat is None:
                continue
            hero = None
            if instr.opcode == "fusion" and instr.fused_computation is not None:
                body = instr.fused_computation
                roots = body.root.operands if body.root.opcode == "tuple" else [body.root]
                hero = ",".join(sorted({find_hero(r, set(body._instructions)).opcode
                                        for r in roots}))
            out.append(Kernel(instr.name, cat, kind(instr), instr.opcode, str(instr.shape), hero, instr))
    return out


def kernel_counts(kernels: list[Kernel]) -> Counter:
    return Counter(k.category for k in kernels)


def compare_kernel_lists(ours: list[Kernel], theirs: list[Kernel]) -> list[tuple[str, int, int]]:
    """(category, our count, their count) for every category either has,
    sorted; equal counts are matches."""
    a, b = kernel_counts(ours), kernel_counts(theirs)
    return [(c, a.get(c, 0), b.get(c, 0)) for c in sorted(set(a) | set(b))]


def kinds_matched(ours: list[Kernel], theirs: list[Kernel]) -> int:
    """How many of ``theirs`` are matched kind for kind by ``ours``
    (multiset intersection of :func:`kind`)."""
    a, b = Counter(k.kind for k in ours), Counter(k.kind for k in theirs)
    return sum(min(n, a.get(c, 0)) for c, n in b.items())


def compare_kinds(ours: list[Kernel], theirs: list[Kernel]) -> list[tuple[str, int, int]]:
    """(kind, our count, their count) for every strict kind either has."""
    a, b = Counter(k.kind for k in ours), Counter(k.kind for k in theirs)
    return [(c, a.get(c, 0), b.get(c, 0)) for c in sorted(set(a) | set(b))]


__all__ = ["Kernel", "category", "compare_kernel_lists", "compare_kinds", "kernel_counts",
           "kernel_list", "kind", "kinds_matched"]
