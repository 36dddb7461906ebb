"""Which buffers must, may or must not share: XLA's ``AliasInfo``
(``GetInPlaceInputOutputPairs``, the backend ``MayAlias`` hint) and
``HloDataflowAnalysis::CanShareOperandBufferWithUser``, plus hlorun's
custom-call policy table.

Must-alias (in place): dynamic-update-slice (operand 0), scatter (its
inputs), all-reduce-start, in-place collective-permute(-start),
set-dimension-size, ragged-all-to-all (operand 1), custom calls' and
fusions' ``output_to_operand_aliasing``, async ops' aliasing, and fusions
whose root (through tuples, bitcasts and, on GPU, reshapes) is an in-place
op fed by a fusion parameter.

May-alias (a dead operand's buffer can be reused for the output): the
GPU rules (``FusionCanShareBufferHint``: loop/elementwise paths from the
parameter to the output, scatter/sort/DUS roots, the reduction emitter's
hero; NVPTX: all-reduce and collective-broadcast in place, cuBLASLt's
bias ``C`` when beta != 0, no other custom call), then XLA's default rules
(equal shapes and elementwise on the operand, while/conditional, DUS and
scatter on operand 0, sort, call).

Custom calls follow the policy table of :mod:`.targets`,
``custom_call_targets`` (pipeline YAML):
``{target-or-glob: {in_place: bool, autotuned: bool}}``.
``in_place: true`` declares a target safe to run in place (a dead operand
of the same size may be reused for its output); ``in_place: false`` says it
must never alias.  XLA's own library targets (``__cublas$*``,
``__cudnn$*``, ``__cusolver$*``, ``__cub$*``, ``__gpu$*``...) are built in as
``in_place: false`` (what NVPTXAliasInfo does for them).  Targets not in the
table follow ``"*"``, which by default is *undeclared*: nothing forbids the
reuse, so equal-shaped dead operands may be shared -- the condition of the
S1 incident.  Set ``"*": {in_place: false}`` to get XLA:GPU's strict rule
(no custom call ever reuses an operand buffer).
"""

from __future__ import annotations

from typing import Any, Mapping

from ..ir.module import Instruction
from ..ir.opcode import ELEMENTWISE
from .targets import TargetPolicy, TargetTable

Pair = tuple[tuple[int, tuple], tuple]  # ((operand_number, operand_index), output_index)

CUBLAS_LT_MATMUL = "__cublas$lt$matmul"


class AliasRules:
    """The alias oracle the dataflow, alias analysis and assigner consult.

    ``platform``: "cuda" (NVPTXAliasInfo), "rocm"/"sycl" (GpuAliasInfo) or
    "cpu" (XLA's default rules only)."""

    def __init__(self, platform: str = "cuda",
                 custom_call_targets: Mapping[str, Mapping[str, Any]] | None = None):
        self.platform = platform
        self.gpu = platform in ("cuda", "rocm", "sycl")
        self.targets = TargetTable(custom_call_targets)
        self._pairs_cache: dict[Instruction, list[Pair]] = {}
        self._elementwise_cache: dict[tuple[Instruction, int], bool] = {}

    # -- custom-call policy ---------------------------------------------------------
    def policy(self, target: str | None) -> TargetPolicy:
        return self.targets.policy(target)

    # -- must-alias: in-place input/output pairs --------------------------------------
    def in_place_pairs(self, instr: Instruction) -> list[Pair]:
        got = self._pairs_cache.get(instr)
        if got is None:
            got = self._compute_pairs(instr)
            self._pairs_cache[instr] = got
        return got

    def _compute_pairs(self, instr: Instruction) -> list[Pair]:
        op = instr.opcode
        n = len(instr.operands)
        if op in ("dynamic-update-slice", "scatter", "all-reduce-start"):
            k = n
            if op == "scatter":
                k = len(instr.shape.tuple_shapes) if instr.shape.is_tuple else 1
            elif op == "dynamic-update-slice":
                k = 1
            if k == 1:
                return [((0, ()), ())]
            return [((i, ()), (i,)) for i in range(k)]
        if op in ("collective-permute", "collective-permute-start") and n == 4:
            src = instr.operands[1].shape
            base = () if op == "collective-permute" else (1,)
            pairs: list[Pair] = [((1, ()), base)]
            if src.is_tuple:
                pairs += [((1, (i,)), base + (i,)) for i in range(len(src.tuple_shapes))]
            return pairs
        if op == "custom-call":
            return [((opnd, oidx), out) for out, opnd, oidx in declared_aliasing(instr)]
        if op == "fusion":
            return self._fusion_pairs(instr) + [((opnd, oidx), out)
                                                for out, opnd, oidx in declared_aliasing(instr)]
        if op == "async-start":
            pairs = []
            for out, opnd, oidx in declared_aliasing(instr):
                if out and opnd < n:
                    try:
                        instr.shape.subshape(out)
                    except IndexError:
                        continue
                    pairs.append(((opnd, oidx), out))
            return pairs
        if op == "set-dimension-size":
            return [((0, ()), ())]
        if op == "ragged-all-to-all":
            return [((1, ()), ())]
        return []

    def _noop(self, instr: Instruction) -> bool:
        return instr.opcode == "bitcast" or (self.gpu and instr.opcode == "reshape")

    def _follow(self, instr: Instruction, index: tuple) -> tuple[Instruction, tuple]:
        while instr.opcode == "tuple" and index:
            instr, index = instr.operands[index[0]], index[1:]
        while instr.opcode == "get-tuple-element":
            index = (int(instr.attrs.get("index", 0)),) + index
            instr = instr.operands[0]
        while not index and self._noop(instr) and instr.operands:
            instr = instr.operands[0]
        return instr, index

    def _fusion_pairs(self, fusion: Instruction) -> list[Pair]:
        body = fusion.fused_computation
        if body is None or body.root is None:
            return []
        out: list[Pair] = []
        from .values import shape_indices
        for index in shape_indices(fusion.shape):
            sub = fusion.shape.subshape(index) if index else fusion.shape
            if sub.is_tuple:
                continue
            src, src_index = self._follow(body.root, index)
            pairs = (self._fusion_pairs(src) + []) if src.opcode == "fusion" else self.in_place_pairs(src)
            in_src: Instruction | None = None
            in_index: tuple = ()
            for (opnd, oidx), oindex in pairs:
                if oindex == src_index and opnd < len(src.operands):
                    in_src, in_index = self._follow(src.operands[opnd], oidx)
                    if in_src.opcode == "fusion":
                        for (o2, oi2), out2 in self.in_place_pairs(in_src):
                            if out2 == in_index:
                                in_src, in_index = self._follow(in_src.operands[o2], oi2)
            if in_src is not None and in_src.opcode == "parameter" and in_src.parent is body:
                out.append(((in_src.parameter_number or 0, in_index), index))
        return out

    # -- may-alias hint ------------------------------------------------------------------
    def may_alias(self, operand: Instruction, operand_index: tuple, user: Instruction,
                  user_index: tuple) -> bool | None:
        op = user.opcode
        if op == "custom-call":
            target = user.custom_call_target or ""
            if self.platform == "cuda" and target == CUBLAS_LT_MATMUL:
                cfg = user.backend_config or {}
                gemm = cfg.get("gemm_backend_config", cfg) if isinstance(cfg, dict) else {}
                beta = float(gemm.get("beta", 0) or 0) if isinstance(gemm, dict) else 0.0
                return (beta != 0.0 and len(user.operands) > 2 and operand is user.operands[2]
                        and user.operands.count(operand) == 1 and user_index == (0,))
            pol = self.policy(target)
            if pol.in_place is False:
                return False
            a = operand.shape.subshape(operand_index) if operand_index else operand.shape
            b = user.shape.subshape(user_index) if user_index else user.shape
            if pol.in_place is True:
                return a.is_array and b.is_array and a.byte_size() == b.byte_size()
            return a == b and a.is_array
        if self.platform == "cuda" and op in ("all-reduce", "collective-broadcast"):
            return len(user.operands) == 1 or (len(user_index) == 1 and user_index[0] < len(user.operands)
                                               and user.operands[user_index[0]] is operand)
        if self.gpu and op == "fusion":
            from .fusion_hint import fusion_can_share
            return fusion_can_share(self, operand, user, user_index)
        return None

    # -- CanShareOperandBufferWithUser --------------------------------------------------
    def can_share(self, dataflow, operand: Instruction, operand_index: tuple,
                  user: Instruction, user_index: tuple) -> bool:
        if operand.opcode == "constant":
            return False
        a = operand.shape.subshape(operand_index) if operand_index else operand.shape
        b = user.shape.subshape(user_index) if user_index else user.shape
        equal = a == b
        if equal:
            pairs = self.in_place_pairs(user)
            if pairs:
                uses = {(u[0], u[1], u[2]) for u in dataflow.unique_value(operand, operand_index).uses}
                for (opnd, oidx), out in pairs:
                    if out == user_index and (user, opnd, oidx) in uses:
                        return True
        hint = self.may_alias(operand, operand_index, user, user_index)
        if hint is not None:
            return hint
        if not equal:
            return False
        op = user.opcode
        if op == "fusion":
            body = user.fused_computation
            kind = user.fusion_kind
            if body is None:
                return False
            k = user.operands.index(operand)
            if kind in ("kLoop", "kInput"):
                return _transitive_uses_elementwise(self, body.parameters[k])
            root = body.root
            if kind == "kOutput" and root is not None and root.opcode == "add":
                dots = [o for o in root.operands if o.opcode in ("convolution", "dot")]
                if not dots:
                    return False
                other = 1 if dots[0] is root.operands[0] else 0
                param = body.parameters[k]
                pv = dataflow.defined_at(param, operand_index)
                if pv is not None and len(pv.uses) == 1:
                    u = pv.uses[0]
                    return u[0] is root and u[1] == other
                return False
        if op in ("while", "conditional"):
            return True
        if op in ("dynamic-update-slice", "scatter", "triangular-solve", "set-dimension-size"):
            idx = [i for i, o in enumerate(user.operands) if o is operand]
            want = 1 if op == "triangular-solve" else 0
            return len(idx) == 1 and idx[0] == want
        if op == "sort":
            if len(operand._users) != 1:
                return False
            if len(user.operands) == 1:
                return True
            idx = [i for i, o in enumerate(user.operands) if o is operand]
            return len(idx) == 1 and bool(user_index) and user_index[0] == idx[0]
        if op == "call":
            uses = dataflow.defined_at(operand, operand_index)
            if uses is None:
                return False
            callee = user.to_apply
            croot = callee.root if callee is not None else None
            caller_use = any(u[0] is user for u in uses.uses)
            callee_use = any(u[0] is croot and self.is_elementwise_on_operand(croot, u[1])
                             for u in uses.uses)
            return len(uses.uses) == 2 and caller_use and callee_use
        return self.is_elementwise_on_operand(user, user.operands.index(operand))

    # -- elementwise ------------------------------------------------------------------------
    def is_elementwise(self, instr: Instruction) -> bool:
        op = instr.opcode
        if op == "fusion":
            body = instr.fused_computation
            return body is not None and all(i.opcode == "parameter" or self.is_elementwise(i)
                                            for i in body._instructions)
        if op == "constant":
            return True
        if op == "map":
            return _map_elementwise(instr)
        if op == "bitcast-convert":
            return _same_width(instr)
        return op in ELEMENTWISE

    def is_elementwise_on_operand(self, instr: Instruction, k: int) -> bool:
        op = instr.opcode
        if op == "dynamic-update-slice":
            return k == 0
        if op == "fusion":
            key = (instr, k)
            got = self._elementwise_cache.get(key)
            if got is None:
                got = self._fusion_elementwise_on(instr, k)
                self._elementwise_cache[key] = got
            return got
        return self.is_elementwise(instr)

    def _fusion_elementwise_on(self, fusion: Instruction, k: int) -> bool:
        body = fusion.fused_computation
        if body is None or k >= len(body.parameters) or body.parameters[k] is None:
            return False
        start = body.parameters[k]
        work = [start]
        seen = {start}
        while work:
            cur = work.pop(0)
            for user in cur._users:
                if user in seen:
                    continue
                if self.is_elementwise(user) or all(
                        self.is_elementwise_on_operand(user, i)
                        for i, o in enumerate(user.operands) if o is cur):
                    work.append(user)
                    seen.add(user)
                else:
                    return False
        return True


def declared_aliasing(instr: Instruction) -> tuple:
    """``output_to_operand_aliasing`` as ((out_index, operand, operand_index), ...)."""
    text = instr.attrs.get("output_to_operand_aliasing")
    if not text:
        return ()
    from ..ir.attrs import parse_output_to_operand_aliasing
    try:
        return parse_output_to_operand_aliasing(text)
    except ValueError:
        return ()


def _transitive_uses_elementwise(rules: AliasRules, start: Instruction) -> bool:
    seen = set()
    stack = [start]
    while stack:
        cur = stack.pop()
        seen.add(cur)
        for user in cur._users:
            for i, o in enumerate(user.operands):
                if o is cur and not rules.is_elementwise_on_operand(user, i) and user.opcode != "tuple":
                    return False
            if user not in seen:
                stack.append(user)
    return True


def _same_width(instr: Instruction) -> bool:
    from ..ir.shape import bit_width, is_array_type
    a, b = instr.shape.element_type, instr.operands[0].shape.element_type
    if not (is_array_type(a) and is_array_type(b)):
        return False
    return bit_width(a) == bit_width(b)


def _map_elementwise(instr: Instruction) -> bool:
    dims = instr.int_list("dimensions")
    if dims:
        return len(dims) == instr.shape.rank and all(d == i for i, d in enumerate(dims))
    return True
