"""``triton-gemm-rewriter``: XLA's GemmFusion pass (backends/gpu/transforms/
gemm_fusion.cc; XLA's ``name()`` is "triton-gemm-rewriter", dumps say
``after_triton-gemm-rewriter``; hlorun also accepts ``gemm-fusion``).

Every dot Triton can compute becomes ``fusion(kind=kCustom)`` named
``gemm_fusion_<dot>`` calling ``gemm_fusion_<dot>_computation``, with
backend config ``"fusion_backend_config":{"kind":"__triton_gemm"}``:

* toward the operands (per dot operand, breadth first, at most 4 fusion
  parameters each -- ``kMaxParameterPerDotOperand``): bitcasts, bitcast
  reshapes, transposes/copies, broadcasts, slices and Triton-supported
  elementwise ops (converts, scalar/broadcast multiplies ...), when
  profitable (``IsInputWorthFusing``: the input grows by at most 1 KiB, or
  all its operands are single-use parameters/constants; or a binary op
  with a broadcast parameter/constant);
* toward the single-user chain of consumers: elementwise ops, bitcasts,
  bitcast reshapes, transposes, when ``IsOutputWorthFusing`` and their other
  operands are (broadcasts of) parameters or scalars.  Those other operands
  are then fused toward their operands like a dot operand (no parameter
  limit), starting from the user's dimension order (XLA's FuseTowardUsers:
  ``GetOperandDimOrdersAndCombinedReqs``): a broadcast of a scalar gives its
  operand an empty order, scalar ops and bitcasts keep it, and a slice to an
  effective scalar is refused ("Slice to scalar is not implemented yet") --
  an fp8 delayed-scaling recipe's ``scales[0] * scales[1]`` joins the
  epilogue, its two slices stay outside as fusion parameters.

Skipped: dots too small for rewriting that the classical emitters handle,
dots Triton does not support (types, precision, no non-contracting
dimension: ``legacy_triton::IsTritonSupportedInstruction``), and -- with
``triton_gemm_any: false`` -- "pure matmuls" (only bitcast/reshape/parameter
around the dot).  The default ``triton_gemm_any: true`` matches the
JAX 0.11 dumps in shared/xla-dumps, where plain matmuls are fused.

Dimension orders (:mod:`.gemm_dim_order`, XLA's triton_tiling_propagation):
the dot's batch / contracting / non-contracting dimensions are followed
through each candidate bitcast, reshape, transpose, broadcast or slice; a
candidate whose operand would interleave the pieces of one dot dimension
with another (attention's head transpose in front of a dot batched over
(batch, heads)) is not fused, nor is such a consumer.  Simplification
(stated, not hidden): XLA's other tiling requirements (splits of the
non-contracting dimension, slices of split dimensions) are not checked.
Concatenates join along the operand's non-contracting dimension only
(pieces of 64 elements or more, see :mod:`.gemm_dim_order`); instructions
that feed a concatenate or dynamic slice are never fused.  Every skipped dot gets a ``missed`` remark with the reason.

Postcondition: every Triton-supported dot above the size threshold in a
fusible computation is inside a ``__triton_gemm`` fusion.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from ..ir.module import Computation, Instruction, Module
from ..ir.opcode import ELEMENTWISE
from ..ir.shape import reshape_is_bitcast, transpose_is_bitcast
from . import gemm_dim_order as dim_order
from .algorithm_util import triton_algorithm_reason
from .base import Pass

MAX_PARAMS_PER_OPERAND = 4
IO_TOLERANCE_BYTES = 1024
GEMM_BACKEND_CONFIG = {"device_type": "DEVICE_TYPE_INVALID", "force_earliest_schedule": False,
                       "fusion_backend_config": {"kind": "__triton_gemm"},
                       "operation_queue_id": "0", "reification_cost": []}

_FLOAT_UNARY = {"acos", "acosh", "asin", "asinh", "atanh", "cbrt", "ceil", "cosine", "cosh", "erf",
                "exponential", "exponential-minus-one", "floor", "log", "log-plus-one",
                "round-nearest-even", "rsqrt", "sine", "sinh", "sqrt", "tan", "tanh"}
_FLOATS = ("f32", "bf16", "f16", "f64")


def _supported_elementwise(opcode: str, t: str) -> bool:
    """``IsTritonSupportedElementwiseUpToFloatNormalization``."""
    if opcode in ("select", "clamp", "convert"):
        return True
    if t == "pred":
        return opcode in ("not", "and", "or", "xor", "compare")
    if opcode in ("abs", "negate", "add", "compare", "maximum", "minimum", "multiply", "subtract"):
        return True
    if t in _FLOATS:
        if opcode in _FLOAT_UNARY or opcode in ("atan2", "power"):
            return True
        if opcode == "divide" and t != "f16":
            return True
    return False


def _dot_output_type_ok(t: str, platform: str, cc: str) -> bool:
    if t in ("f16", "f32", "bf16"):
        return True
    if t == "f8e5m2":
        return platform != "rocm" or cc.startswith("gfx95") or cc.startswith("gfx12")
    if t == "f8e4m3fn":
        return platform == "rocm" and (cc.startswith("gfx95") or cc.startswith("gfx12")) or \
            platform != "rocm" and _cc_at_least(cc, 9)
    if t in ("f8e4m3fnuz", "f8e5m2fnuz"):
        return platform == "rocm" and cc.startswith("gfx94")
    if t == "s32":
        return platform != "rocm" and _cc_at_least(cc, 8)
    return False


def _cc_at_least(cc: str, major: int) -> bool:
    try:
        return int(cc.split(".")[0]) >= major
    except ValueError:
        return True


def _type_ok(t: str, platform: str, cc: str) -> bool:
    return _dot_output_type_ok(t, platform, cc) or t in ("pred", "s8", "s16", "s32")


@dataclass(frozen=True)
class GemmFusion(Pass):
    """Wrap dots with their fusible producers and consumers into __triton_gemm fusions."""

    name = "triton-gemm-rewriter"
    triton_gemm_any: bool = True
    size_threshold: int = 100

    # -- support checks (legacy_triton) ----------------------------------------------------
    def _platform(self) -> tuple[str, str]:
        return self.target.platform, str(self.target.compute_capability or "")

    def instruction_supported(self, i: Instruction) -> str | None:
        """None if Triton can emit ``i`` (IsTritonSupportedInstruction), else why."""
        platform, cc = self._platform()
        if not i.shape.is_array:
            return "tuple-shaped"
        if i.opcode in ELEMENTWISE:
            if not _type_ok(i.shape.element_type, platform, cc):
                return f"unsupported output type {i.shape.element_type}"
            for o in i.operands:
                if not (o.shape.is_array and _type_ok(o.shape.element_type, platform, cc)):
                    return f"unsupported input type {o.shape.element_type if o.shape.is_array else 'tuple'}"
            if not _supported_elementwise(i.opcode, i.operands[0].shape.element_type):
                return f"{i.opcode} on {i.operands[0].shape.element_type} is not supported by Triton"
            return None
        if i.opcode == "bitcast":
            return None if i.shape.element_type == i.operands[0].shape.element_type \
                else "bitcast-convert is not supported"
        if i.opcode in ("transpose", "slice", "reshape", "broadcast", "parameter", "concatenate"):
            return None
        if i.opcode == "constant":
            return None if i.shape.rank == 0 else "non-scalar constant"
        return f"{i.opcode} is not supported by Triton GEMM fusion"

    def dot_reason(self, dot: Instruction) -> str | None:
        platform, cc = self._platform()
        if platform == "sycl":
            pass  # hlorun models Intel's Triton (S4); upstream XLA forbids it
        lhs, rhs = dot.operands[0].shape, dot.operands[1].shape
        lb, lc = dot.int_list("lhs_batch_dims"), dot.int_list("lhs_contracting_dims")
        rb, rc = dot.int_list("rhs_batch_dims"), dot.int_list("rhs_contracting_dims")
        if len(lb) + len(lc) == lhs.rank or len(rb) + len(rc) == rhs.rank:
            return "no non-contracting dimensions"
        alg = dot.attrs.get("algorithm")
        prec = dot.attrs.get("operand_precision", "")
        if not alg and prec and any(p.strip().lower() not in ("default", "")
                                    for p in prec.strip("{}").split(",")):
            return "non-default operand precisions with unset algorithm"
        if alg:
            # IsSupportedDotAlgorithm + AreDotAlgorithmInputAndOutputConversionsSupported
            why = triton_algorithm_reason(alg.lower(), lhs.element_type, rhs.element_type,
                                          dot.shape.element_type, self.target)
            if why:
                return why
        out = dot.shape.element_type
        if not _dot_output_type_ok(out, platform, cc):
            return f"unsupported dot output type {out}"
        a, b = lhs.element_type, rhs.element_type
        if a != b and not (a.startswith("f8") and b.startswith("f8")):
            return f"operand types differ ({a} x {b})"
        if not (_type_ok(a, platform, cc) and _type_ok(b, platform, cc)):
            return f"unsupported operand type {a}"
        if out == "s32" and a not in ("s8", "u8"):
            return "s32 output needs 8-bit integer operands"
        if (a[0] in "su") != (out[0] in "su"):
            return "dot between integer and floating-point types"
        return None

    # -- profitability (triton_tiling_propagation.cc) ------------------------------------------
    @staticmethod
    def _in_minus_out(i: Instruction) -> int | None:
        if any(o.shape.is_tuple for o in i.operands):
            return None
        return sum(o.shape.byte_size() for o in i.operands) - i.shape.byte_size()

    def input_worth_fusing(self, i: Instruction) -> bool:
        d = self._in_minus_out(i)
        if d is None:
            return False
        if d <= IO_TOLERANCE_BYTES:
            return True
        if i.user_count > 1:
            return False
        if i.opcode == "slice" and all(o.opcode in ("parameter", "constant") for o in i.operands):
            return True
        if i.opcode == "multiply":
            return False  # xla_gpu_experimental_enable_subchannel_dequantisation_fusion is off
        return all(o.opcode in ("parameter", "constant") and o.user_count == 1 for o in i.operands)

    def fusible_toward_operand(self, i: Instruction) -> str | None:
        """None if ``i`` may join the fusion on the operand side, else why."""
        if i.opcode in ("tuple", "get-tuple-element"):
            return "tuple ops are not fused"
        if i.opcode in ("reduce", "all-reduce", "all-reduce-start", "all-reduce-done"):
            return "reductions are not fused"
        if i.opcode == "pad":
            return "pads are not fused"
        if i.opcode == "power" and i.user_count > 1:
            return "power with several users would be duplicated"
        if i.opcode in ("dynamic-slice", "dot", "fusion", "custom-call"):
            return f"{i.opcode} is not fused"
        if any(u.opcode in ("concatenate", "dynamic-slice") for u in i.users):
            # "No fusion into concatenations or dynamic slice": their
            # operands stay fusion parameters
            return "feeds a concatenate or dynamic slice"
        why = self.instruction_supported(i)
        if why is not None:
            return why
        if i.opcode == "reshape" and not reshape_is_bitcast(i.operands[0].shape, i.shape):
            return "non-bitcast reshape"
        if i.opcode == "constant":
            return None
        if i.opcode in ELEMENTWISE and len(i.operands) == 2:
            for o in i.operands:
                if o.opcode == "broadcast" and o.operands[0].opcode in ("parameter", "constant"):
                    return None
        if not self.input_worth_fusing(i):
            return "not obviously profitable to fuse as input"
        return None

    def fusible_toward_user(self, src: Instruction, u: Instruction) -> str | None:
        if u.opcode in ("tuple", "get-tuple-element", "reduce", "pad", "broadcast", "slice",
                        "dynamic-slice", "concatenate"):
            return f"{u.opcode} is not fused as output"
        if u.opcode == "power" and u.user_count > 1:
            return "power with several users"
        why = self.instruction_supported(u)
        if why is not None:
            return why
        if u.opcode == "reshape" and not reshape_is_bitcast(u.operands[0].shape, u.shape):
            return "non-bitcast reshape"
        if u.opcode not in ELEMENTWISE and u.opcode not in ("bitcast", "reshape", "transpose"):
            return f"{u.opcode} is not fused as output"
        if u.opcode == "transpose" and not (u.shape.layout is not None and
                                            transpose_is_bitcast(src.shape, u.shape, u.dimensions)):
            # none of the 223 GEMM fusions in XLA's JAX 0.11 dumps has a physical
            # transpose in its epilogue (its output-side requirements refuse them)
            return "a physical transpose is not fused as output"
        for o in u.operands:
            if o is src:
                continue
            if o.opcode == "broadcast" and (o.operands[0].shape.rank == 0 or
                                            _effective_parameter(o.operands[0])):
                continue
            if _effective_parameter(o):
                continue
            return "has several inputs that are not (broadcast) parameters"
        d = self._in_minus_out(u)
        if d is None:
            return "tuple operand"
        root = u.is_root() or (u.user_count == 1 and u.users[0].is_root() and u.users[0].opcode == "tuple")
        if not (root or d >= -IO_TOLERANCE_BYTES):
            return "not obviously profitable to fuse as output"
        return None

    # -- the pass ----------------------------------------------------------------------------------
    def run(self, module: Module) -> bool:
        from .gemm_rewriter import fusible_computations
        changed = False
        for comp in fusible_computations(module):
            for instr in comp.post_order():
                if instr.parent is comp and instr.opcode == "dot":
                    changed |= self.handle_dot(module, comp, instr)
        return changed

    def handle_dot(self, module: Module, comp: Computation, dot: Instruction) -> bool:
        from .gemm_rewriter.matmul import supported_by_classical_emitters, too_small_for_rewriting
        if too_small_for_rewriting(dot, self.size_threshold) and supported_by_classical_emitters(dot):
            self.remark(dot, f"not fused: too small for a GEMM (threshold {self.size_threshold}); "
                             f"left to the classical emitters", kind="missed")
            return False
        why = self.dot_reason(dot)
        if why is not None:
            self.remark(dot, f"not fused into a Triton GEMM: {why}", kind="missed")
            return False
        plan = _Plan(self, dot)
        plan.build()
        if not self.triton_gemm_any and plan.is_pure_matmul():
            self.remark(dot, "not fused: pure matmul (only bitcasts/reshapes around the dot; "
                             "triton_gemm_any is off)", kind="missed")
            return False
        fusion = plan.materialize(module, comp)
        self.remark(fusion, f"wrapped {dot.name} into {fusion.name}"
                    + (f" with {', '.join(plan.fused_names())}" if plan.fused_names() else ""),
                    kind="applied", derived_from=[dot.name] + plan.fused_names(),
                    skipped=plan.skipped)
        return True


def _operand_orders(node: Instruction, orders: dict) -> str | None:
    """Propagate ``node``'s dimension order onto its operands (XLA's
    GetPropagatedDimOrders); why not, if an operand would be untileable."""
    got = []
    for k, o in enumerate(node.operands):
        oo = dim_order.to_operand(node, orders[node], k)
        if oo is None:
            return "Triton cannot tile the dimension order through it"
        why = dim_order.unsupported(o.shape, oo)
        if why is not None:
            return why
        got.append((o, oo))
    for o, oo in got:
        orders.setdefault(o, oo)
    return None


def _effective_parameter(i: Instruction) -> bool:
    while i.opcode in ("bitcast", "get-tuple-element"):
        i = i.operands[0]
    return i.opcode == "parameter"


class _Plan:
    """Which instructions around one dot join its fusion."""

    def __init__(self, p: GemmFusion, dot: Instruction):
        self.p, self.dot = p, dot
        self.fused: set[Instruction] = {dot}
        self.output = dot
        self.skipped: list[str] = []

    def _toward_operands(self, start: Instruction, max_params: int | None,
                         order: dict | None = None) -> None:
        if start in self.fused:
            return
        orders = {start: order} if order is not None else {}
        inputs = {start}
        queue: deque[Instruction] = deque([start])
        requeued = 0
        seen = {start}
        while len(queue) > requeued:
            node = queue.popleft()
            added = 0 if node.opcode == "parameter" or (node.opcode == "constant" and node.shape.rank > 0) \
                else len(node.operands) - 1
            if max_params is not None and len(inputs) + added > max_params:
                queue.append(node)
                requeued += 1
                continue
            requeued = 0
            if node.opcode == "parameter":
                continue
            why = self.p.fusible_toward_operand(node)
            if why is None and node in orders:
                why = _operand_orders(node, orders)
            elif why is None and node.opcode == "concatenate":
                why = "a concatenate needs the dot's dimension order"
            if why is not None:
                if node.opcode not in ("parameter",):
                    self.skipped.append(f"{node.name}: {why}")
                continue
            inputs.discard(node)
            self.fused.add(node)
            for o in node.operands:
                if o not in seen and o not in self.fused:
                    seen.add(o)
                    inputs.add(o)
                    queue.append(o)

    def build(self) -> None:
        for idx, op in enumerate(self.dot.operands):
            self._toward_operands(op, MAX_PARAMS_PER_OPERAND, dim_order.operand_order(self.dot, idx))
        cur = self.dot
        order = dim_order.output_order(self.dot)
        while cur.user_count == 1:
            u = cur.users[0]
            why = self.p.fusible_toward_user(cur, u)
            if why is None:
                order = dim_order.to_user(u, cur, order)
                why = "Triton cannot tile its dimension order" if order is None else \
                    dim_order.unsupported(u.shape, order)
            if why is not None:
                self.skipped.append(f"{u.name} (consumer): {why}")
                break
            self.fused.add(u)
            for k, o in enumerate(u.operands):
                if o is not cur:
                    self._toward_operands(o, None, dim_order.to_operand(u, order, k))
            cur = u
        self.output = cur

    def is_pure_matmul(self) -> bool:
        return all(i.opcode in ("bitcast", "dot", "parameter", "reshape") for i in self.fused)

    def fused_names(self) -> list[str]:
        return sorted(i.name for i in self.fused if i is not self.dot)  # deterministic remarks

    def materialize(self, module: Module, comp: Computation) -> Instruction:
        dot = self.dot
        name = f"gemm_fusion_{dot.name}"
        body = Computation(module.unique_name(f"{name}_computation"))
        # keep callees before callers in the module's list (prints as XLA
        # does): just before ``comp``, in O(1)
        module.insert_computation_before(body, comp)
        params: list[Instruction] = []
        mapping: dict[Instruction, Instruction] = {}

        def build(i: Instruction) -> Instruction:
            # iterative DFS: operands first-to-last, parameters in first-use order
            stack = [(i, False)]
            while stack:
                cur, expanded = stack.pop()
                if cur in mapping:
                    continue
                if cur not in self.fused:
                    n = len(params)
                    prm = Instruction("parameter", cur.shape, [], "", {})
                    prm.parameter_number = n
                    body.add_instruction(prm, f"parameter_{n}")
                    params.append(cur)
                    mapping[cur] = prm
                    continue
                if not expanded:
                    stack.append((cur, True))
                    for o in reversed(cur.operands):
                        if o not in mapping:
                            stack.append((o, False))
                    continue
                c = Instruction(cur.opcode, cur.shape, [mapping[o] for o in cur.operands], "",
                                {k: v for k, v in cur.attrs.items() if k != "backend_config"})
                c.literal = cur.literal
                body.add_instruction(c, cur.name)
                mapping[cur] = c
            return mapping[i]

        # XLA builds the lhs side, the rhs side, then the output chain
        build(dot.operands[0])
        build(dot.operands[1])
        body.root = build(self.output)
        fusion = Instruction("fusion", self.output.shape, list(params), "",
                             {"kind": "kCustom", "calls": body})
        if "metadata" in dot.attrs:
            fusion.attrs["metadata"] = dot.attrs["metadata"]
        comp.add_instruction(fusion, name)
        fusion.set_backend_config(GEMM_BACKEND_CONFIG)
        comp.replace_instruction(self.output, fusion)
        _remove_dead(comp, [o for i in self.fused for o in i.operands] + list(self.fused))
        return fusion


def _remove_dead(comp: Computation, candidates: list[Instruction]) -> None:
    stack = list(candidates)
    while stack:
        i = stack.pop()
        if i.parent is not comp or i.has_users() or i is comp.root or i.opcode == "parameter":
            continue
        if i.opcode in ("custom-call", "send", "recv", "infeed", "outfeed", "rng", "after-all") \
                or i.control_successors:
            continue
        ops = list(i.operands)
        comp.remove_instruction(i)
        stack.extend(ops)


@dataclass(frozen=True)
class GemmFusionAlias(GemmFusion):
    """``gemm-fusion``: another name for triton-gemm-rewriter (XLA's class is GemmFusion)."""

    name = "gemm-fusion"


__all__ = ["GemmFusion", "GemmFusionAlias"]
