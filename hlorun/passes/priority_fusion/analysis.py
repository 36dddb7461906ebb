"""What kind of kernel a (would-be) fusion becomes: XLA:GPU's fusion
analysis (hlo_fusion_analysis.cc, ir_emission_utils.cc, reduction_utils.cc,
gpu_fusible.cc), restricted to what priority fusion and fusion naming need.

* :func:`is_fusible` -- PriorityFusion's ``IsFusible``;
* :func:`find_hero` -- ``FindNonTrivialHero``: up a chain of single-operand,
  single-user elementwise ops / bitcasts to a reduce or a tiled transpose;
* :func:`reduction_dims`, :func:`is_real_reduction_hero` -- the reduction
  facts (:mod:`.reductions`, re-exported here);
* :func:`emitter_kind` -- ``GetEmitterFusionKind``: "triton" / "custom",
  "reduction", "transpose", "loop" for a set of fused instructions.

A *virtual* fusion (producer + consumer, possibly fusions themselves) is
described by its instruction list and its roots (:class:`FusionView`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

from ...ir.module import Instruction
from ...ir.opcode import ELEMENTWISE
from ...ir.shape import bit_width, reshape_is_bitcast, transpose_is_bitcast
from .reductions import (BATCHED_REDUCTION_RACE_FREE_BOUND, MIN_THREADS_X_ROW_REDUCTION,
                         WARP_SIZE, ReductionDims, is_real_reduction_hero,
                         is_reduction_from_or_to_contiguous, reduction_dims,
                         unnested_faster_than_elemental)
from .transpose_emitter import tiled_transpose_description

_FUSIBLE_NON_ELEMENTWISE = frozenset({
    "copy", "iota", "constant", "reduce", "broadcast", "concatenate", "dynamic-slice",
    "dynamic-update-slice", "gather", "pad", "reduce-window", "reshape", "reverse", "scatter",
    "slice", "transpose"})
_NEVER_FUSIBLE = frozenset({
    "parameter", "tuple", "get-tuple-element", "custom-call", "dot", "convolution", "while",
    "conditional", "call", "rng", "rng-get-and-update-state", "infeed", "outfeed", "send",
    "recv", "send-done", "recv-done", "after-all", "all-reduce", "all-gather", "all-to-all",
    "collective-permute", "reduce-scatter", "sort", "fft", "triangular-solve", "cholesky",
    "domain", "opt-barrier", "add-dependency", "partition-id", "replica-id"})


_CONTROL_FLOW = frozenset({"while", "conditional", "call", "async-start", "async-update",
                           "async-done"})


def fusible_computations(module) -> list:
    """``GetFusibleComputations``: the entry and computations reached from it
    through control flow (while, conditional, call, async), callees first;
    not fusion bodies nor the scalar computations of reduce, sort, scatter..."""
    from ...ir.module import Computation
    keep: set = set()
    stack = [module.entry] if module.entry is not None else []
    while stack:
        c = stack.pop()
        if c in keep:
            continue
        keep.add(c)
        for i in c._instructions:
            if i.opcode in _CONTROL_FLOW:
                stack.extend(x for x in i.called_computations() if isinstance(x, Computation))
    return [c for c in module.computation_post_order() if c in keep]


def fusion_backend_kind(instr: Instruction) -> str | None:
    """``fusion_backend_config.kind`` of a fusion ("__triton_gemm", ...)."""
    if instr.opcode != "fusion":
        return None
    text = instr.attrs.get("backend_config")
    if text is None:
        return None
    return _backend_kind(text) if text else None


@lru_cache(maxsize=4096)
def _backend_kind(text: str):
    """The backend kind in a backend config's text (parsed once per text:
    priority fusion asks for every pair it considers)."""
    from ...ir.attrs import parse_backend_config
    cfg = parse_backend_config(text)
    if isinstance(cfg, dict):
        return (cfg.get("fusion_backend_config") or {}).get("kind")
    return None


def is_generic_triton_fusion(instr: Instruction) -> bool:
    return fusion_backend_kind(instr) == "__triton"


def is_fusible(instr: Instruction) -> bool:
    """PriorityFusion's ``IsFusible``."""
    op = instr.opcode
    if op in _NEVER_FUSIBLE:
        return False
    if op in ELEMENTWISE:
        return True
    if op == "bitcast":
        return is_fusible_bitcast(instr)
    if op == "fusion":
        return is_generic_triton_fusion(instr) or instr.fusion_kind != "kCustom"
    return op in _FUSIBLE_NON_ELEMENTWISE


def is_fusible_bitcast(instr: Instruction) -> bool:
    """``IsFusibleBitcast``: a bitcast that keeps the bit width
    (``hlo_instruction_utils::KeepsBitwidth``: f32 <-> s32 or bf16 <-> f16
    reinterpretations are fusible, s8 -> s16 packing is not)."""
    if instr.opcode != "bitcast":
        return False
    t, u = instr.shape.element_type, instr.operands[0].shape.element_type
    return t == u or bit_width(t) == bit_width(u)


# ---------------------------------------------------------------------------
# Heroes and emitter kinds
# ---------------------------------------------------------------------------


def is_intermediate(instr: Instruction, allowed_operands: int = 1) -> bool:
    """``IsIntermediate``: a single-user elementwise op (not copy) or a
    bitcast-like reshape/transpose with at most ``allowed_operands``."""
    n = len(instr.operands)
    if n == 0 or n > allowed_operands or instr.user_count > 1:
        return False
    if instr.opcode in ELEMENTWISE:
        return instr.opcode != "copy"
    if instr.opcode == "bitcast":
        return True
    if instr.opcode == "reshape":
        s, o = instr.shape, instr.operands[0].shape
        return s.layout is not None and o.layout is not None and reshape_is_bitcast(o, s)
    if instr.opcode == "transpose":
        s, o = instr.shape, instr.operands[0].shape
        return s.layout is not None and o.layout is not None and \
            transpose_is_bitcast(o, s, instr.dimensions)
    return False


#: (operand shape, shape, dimensions text) -> tiled?  The answer depends on
#: nothing else; priority fusion asks millions of times on large models.
_TILED: dict = {}


def tiled_transpose(instr: Instruction) -> bool:
    """A transpose the shared-memory transpose emitter takes
    (``GetDescriptionForTiledTransposeEmitter``, :mod:`.transpose_emitter`)."""
    if instr.opcode != "transpose":
        return False
    key = (instr.operands[0].shape, instr.shape, instr.attrs.get("dimensions"))
    got = _TILED.get(key)
    if got is None:
        got = _TILED[key] = tiled_transpose_description(instr) is not None
    return got


def _same(x: Instruction) -> Instruction:
    return x


def find_hero(root: Instruction, members: set[Instruction] | None = None,
              resolve=None, transposes: bool = True) -> Instruction:
    """``FindNonTrivialHero`` inside a fusion body (``members``: the body's
    instructions; None = the root's computation; ``resolve`` maps an operand
    to the member that computes it in a would-be fusion; ``transposes``:
    False when no member is a transpose, which skips the search for one)."""
    res = resolve or _same
    hero = root
    while is_intermediate(hero):
        x = res(hero.operands[0])
        if x.opcode == "parameter" or (members is not None and x not in members):
            break
        hero = x
    if transposes or members is None:
        # transposes reachable through elementwise ops are heroes too
        stack, seen = [hero], set()
        while stack:
            x = stack.pop()
            if x in seen:
                continue
            op = x.opcode
            if op == "parameter" or (members is not None and x not in members):
                continue
            seen.add(x)
            if op == "transpose":
                if tiled_transpose(x):
                    return x
            elif op in ELEMENTWISE or op == "bitcast":
                for o in x.operands:
                    stack.append(res(o))
    if hero.opcode != "reduce":
        return root
    return hero


def fused_members(body) -> list[Instruction]:
    """A fused computation's instructions other than parameters, in post order."""
    return [i for i in body.post_order() if i.opcode != "parameter"]


@dataclass
class FusionView:
    """The instructions of a (real or would-be) fusion and its root;
    ``links`` maps an operand (a fused producer, a body parameter) to the
    member computing it.  The member set, the opcodes and the hero are
    computed once per view (a view is not edited after it is made)."""

    members: list[Instruction]
    root: Instruction
    backend_kind: str | None = None
    links: dict | None = None
    _set: set | None = field(default=None, init=False, repr=False, compare=False)
    _ops: set | None = field(default=None, init=False, repr=False, compare=False)
    _hero: Instruction | None = field(default=None, init=False, repr=False, compare=False)

    def resolve(self, x: Instruction) -> Instruction:
        links = self.links
        if links:
            while x in links:
                x = links[x]
        return x

    def member_set(self) -> set[Instruction]:
        s = self._set
        if s is None:
            s = self._set = set(self.members)
        return s

    def opcodes(self) -> set[str]:
        ops = self._ops
        if ops is None:
            ops = self._ops = {m.opcode for m in self.members}
        return ops

    def has_opcode(self, opcode: str) -> bool:
        return opcode in self.opcodes()

    @staticmethod
    def of(instr: Instruction, members=None) -> "FusionView":
        """``members(body)``, when given, returns the body's non-parameter
        instructions in post order (a cache); by default they are computed."""
        if instr.opcode == "fusion":
            body = instr.fused_computation
            return FusionView(members(body) if members is not None else fused_members(body),
                              body.root, fusion_backend_kind(instr))
        return FusionView([instr], instr)

    @staticmethod
    def of_pair(producer: Instruction, consumer: Instruction, members=None) -> "FusionView":
        p, c = FusionView.of(producer, members), FusionView.of(consumer, members)
        links: dict = {producer: p.root} if producer.opcode == "fusion" else {}
        for unit in (producer, consumer):
            if unit.opcode == "fusion":
                for prm in unit.fused_computation.parameters:
                    if prm is not None:
                        links[prm] = unit.operands[prm.parameter_number]
        return FusionView(p.members + c.members, c.root, c.backend_kind or p.backend_kind, links)

    def _find_hero(self, root: Instruction) -> Instruction:
        return find_hero(root, self.member_set(), self.resolve, self.has_opcode("transpose"))

    def hero(self) -> Instruction:
        """The hero of a single-output fusion; of a multi-output fusion (a
        tuple root), the first real reduction hero among its roots, else the
        first tiled transpose hero, else the tuple."""
        h = self._hero
        if h is None:
            h = self._hero = self._compute_hero()
        return h

    def _compute_hero(self) -> Instruction:
        if self.root.opcode != "tuple":
            return self._find_hero(self.root)
        heroes = self.roots_and_heroes()
        for root, hero in heroes:
            if hero.opcode == "reduce" and is_real_reduction_hero(root, hero):
                return hero
        for _, hero in heroes:
            if tiled_transpose(hero):
                return hero
        return self.root

    def roots_and_heroes(self, members=None) -> list[tuple[Instruction, Instruction]]:
        """(root, hero) per output (the tuple's operands for a multi-output fusion)."""
        roots = [self.resolve(o) for o in self.root.operands] if self.root.opcode == "tuple" \
            else [self.root]
        if members is not None and members is not self._set:
            return [(r, find_hero(r, members, self.resolve)) for r in roots]
        return [(r, self._find_hero(r)) for r in roots]


def emitter_kind(view: FusionView) -> str:
    """``GetEmitterFusionKind`` (single-output fusions)."""
    if view.backend_kind in ("__triton", "__triton_gemm", "__triton_nested_gemm_fusion"):
        return "triton"
    if view.backend_kind in ("__custom_fusion", "__cudnn$fusion"):
        return "custom"
    if view.root.opcode == "tuple":
        return _multi_output_emitter_kind(view)
    hero = view.hero()
    if hero.opcode == "reduce" and is_real_reduction_hero(view.root, hero):
        return "reduction"
    if tiled_transpose(hero):
        return "transpose"
    if view.root.opcode == "scatter":
        return "scatter"
    concat = concatenate_hero(view)
    if concat is not None and len(concat.operands) <= 4:
        return "concatenate"
    return "loop"


def concatenate_hero(view: FusionView) -> Instruction | None:
    """The concatenate hero of a single-output fusion (``FindNonTrivialHero``
    with ``UseConcatenateFusion``'s test): down the root's chain of
    one-operand intermediates, then through intermediates of up to three
    operands, exactly one concatenate whose users in the fusion are all
    intermediates; None when there is none (the loop emitter)."""
    if not view.has_opcode("concatenate"):
        return None  # the search below finds only members that are concatenates
    members = view.member_set()
    res = view.resolve

    def inside(x: Instruction) -> bool:
        return x.opcode != "parameter" and x in members
    x = view.root
    while is_intermediate(x) and inside(res(x.operands[0])):
        x = res(x.operands[0])
    found: list[Instruction] = []
    stack, seen = [x], set()
    while stack:
        y = stack.pop()
        if y in seen or not inside(y):
            continue
        seen.add(y)
        if y.opcode == "concatenate":
            found.append(y)
        elif is_intermediate(y, 3):
            stack.extend(res(o) for o in y.operands)
    if len(found) != 1:
        return None
    concat = found[0]
    # nothing but intermediates between the concatenate and the root
    stack, seen = [u for u in concat.users if u in members], set()
    while stack:
        y = stack.pop()
        if y in seen:
            continue
        seen.add(y)
        if y.opcode != "tuple" and not is_intermediate(y, 3):
            return None
        stack.extend(u for u in y.users if u in members)
    return concat


def _multi_output_emitter_kind(view: FusionView) -> str:
    """``GetEmitterFusionKind`` of a multi-output fusion: the reduction
    emitter if a root has a real reduction hero and every other root is a
    compatible reduction or has as many elements as that reduction's input;
    the transpose emitter for tiled transpose heroes; else the loop emitter."""
    heroes = view.roots_and_heroes()
    first = next((h for r, h in heroes if h.opcode == "reduce" and is_real_reduction_hero(r, h)),
                 None)
    if first is not None:
        n_in = math.prod(first.operands[0].shape.dimensions)
        dims = reduction_dims(first)
        ok = True
        for r, h in heroes:
            if h is first:
                continue
            if h.opcode == "reduce" and is_real_reduction_hero(r, h):
                ok = reduction_dims(h) == dims
            else:
                ok = not r.shape.is_tuple and math.prod(r.shape.dimensions) == n_in
            if not ok:
                break
        if ok:
            return "reduction"
    if any(tiled_transpose(h) for _, h in heroes):
        return "transpose"
    return "loop"


def fusion_kind_for(kind: str) -> str:
    """``PriorityFusion::ChooseKind``."""
    return {"loop": "kLoop", "triton": "kCustom", "custom": "kCustom", "reduction": "kInput",
            "transpose": "kInput", "scatter": "kInput", "concatenate": "kInput"}[kind]


__all__ = ["BATCHED_REDUCTION_RACE_FREE_BOUND", "MIN_THREADS_X_ROW_REDUCTION", "WARP_SIZE",
           "FusionView", "ReductionDims", "emitter_kind", "find_hero", "fused_members",
           "fusion_backend_kind", "fusion_kind_for", "is_fusible", "is_fusible_bitcast",
           "is_generic_triton_fusion", "is_intermediate", "is_real_reduction_hero",
           "is_reduction_from_or_to_contiguous", "reduction_dims", "tiled_transpose",
           "unnested_faster_than_elemental"]
