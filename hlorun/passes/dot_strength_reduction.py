"""dot-strength-reduction: XLA:GPU's DotStrengthReduction
(xla/backends/gpu/transforms/dot_strength_reduction.cc).

A dot is rewritten into an elementwise multiply followed by a reduce over
the contracting dimensions when

1. one operand is *vector-like* (it has only batch and contracting
   dimensions), or it is an s32 x s32 -> s32 dot whose rhs contracts
   dimension 1 (the loop emitter is slow for those), and
2. either both operands are vector-like (GemmFusion does not handle
   vector-vector dots), or the matmul is small: ``(N + M) * K < 10,000,000``
   (``IsMatrixMultiplicationTooSmallForRewriting`` with XLA's threshold;
   M, N: the lhs and rhs non-contracting sizes, K: the contracting size),
   or Triton cannot handle the dot (``CanTritonHandleGEMM``: types,
   precision, algorithm).

The rewrite (``ExpandInstruction``): each operand is converted to the dot's
output type, transposed to [batch, non-contracting, contracting] order,
broadcast to [batch, lhs non-contracting, rhs non-contracting,
contracting]; the two are multiplied (as the dot's precision algorithm
prescribes), the contracting dimensions are reduced in the GEMM
accumulator type (f32 for floating outputs up to 32 bits: an f16/bf16 dot
becomes ``convert -> reduce f32 -> convert``) and the result converted back
to the dot's type.  Every new instruction carries the dot's metadata.

Remarks: one per dot, ``applied`` with the rule that fired and its numbers,
or ``missed`` with the condition that failed.

Postcondition: no dot in a non-fusion computation matches the conditions.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.build import (insert_dimensions_at_index, make_broadcast, make_constant,
                        make_convert, make_reduce, make_scalar_computation, make_transpose,
                        delete_dimensions, metadata_of, permute_dimensions)
from ..ir.edit import replace_instruction
from ..ir.module import Instruction, Module, has_opcode
from .base import Pass
from .dfs_rewrite import nonfusion_computations
from .dot_algorithm_multiply import make_multiply_for_algorithm
from .dot_utils import (BATCH, CONTRACTING, NON_CONTRACTING, OperandDims, algorithm, fmt_int,
                        gemm_accumulator_type, matmul_cost, triton_gemm_forbidden)

#: XLA's threshold for IsMatrixMultiplicationTooSmallForRewriting here.
SMALL_DOT_THRESHOLD = 10_000_000


_DOT = frozenset({"dot"})


@dataclass(frozen=True)
class DotStrengthReduction(Pass):
    """Dots with a vector-like operand that GEMM kernels would not serve well
    become multiply + reduce."""

    name = "dot-strength-reduction"
    #: (N + M) * K below this counts as "too small for a GEMM".
    threshold: int = SMALL_DOT_THRESHOLD

    # -- the pattern ----------------------------------------------------------------
    def decide(self, dot: Instruction) -> tuple[bool, str, dict]:
        """(rewrite?, the reason in words, numbers) for one dot."""
        lhs, rhs = OperandDims.from_dot(dot)
        m, n, k, cost = matmul_cost(dot)
        data = {"m": m, "n": n, "k": k, "cost": cost, "threshold": self.threshold,
                "lhs_vector": lhs.is_vector, "rhs_vector": rhs.is_vector}
        lt, rt, ot = (dot.operands[0].shape.element_type, dot.operands[1].shape.element_type,
                      dot.shape.element_type)
        favourable_s32 = (lt == rt == ot == "s32" and dot.int_list("rhs_contracting_dims") == (1,))
        if not lhs.is_vector and not rhs.is_vector and not favourable_s32:
            return False, (f"not strength-reduced: neither operand is vector-like (lhs has "
                           f"non-contracting size {fmt_int(m)}, rhs {fmt_int(n)}); it stays a "
                           f"matrix multiplication for GEMM fusion / cuBLAS"), \
                dict(data, rule="no-vector-operand")
        which = ("lhs and rhs are" if lhs.is_vector and rhs.is_vector else
                 "lhs is" if lhs.is_vector else "rhs is" if rhs.is_vector else None)
        if lhs.is_vector and rhs.is_vector:
            return True, ("vector-vector dot (both operands have only batch and contracting "
                          "dimensions; GEMM fusion cannot handle it): rewritten to multiply+reduce"), \
                dict(data, rule="vector-vector")
        subject = (f"{which} vector-like" if which else
                   "s32 x s32 -> s32 dot contracting rhs dimension 1 (slow in the loop emitter)")
        if cost < self.threshold:
            return True, (f"{subject} and the matmul is too small for a GEMM kernel: "
                          f"(N + M) * K = ({fmt_int(n)} + {fmt_int(m)}) * {fmt_int(k)} = "
                          f"{fmt_int(cost)} < {fmt_int(self.threshold)}; rewritten to "
                          f"multiply+reduce"), dict(data, rule="too-small")
        reason = triton_gemm_forbidden(dot, self.target)
        if reason is not None:
            return True, (f"{subject} and Triton cannot handle this GEMM ({reason.rstrip('.')}); "
                          f"rewritten to multiply+reduce"), dict(data, rule="triton-unsupported",
                                                                 triton_reason=reason)
        return False, (f"not strength-reduced: {subject} but the matmul is large enough for a "
                       f"GEMM kernel: (N + M) * K = ({fmt_int(n)} + {fmt_int(m)}) * {fmt_int(k)} = "
                       f"{fmt_int(cost)} >= {fmt_int(self.threshold)}, and Triton can handle it"), \
            dict(data, rule="large-enough")

    # -- the rewrite ----------------------------------------------------------------
    def expand(self, dot: Instruction) -> Instruction:
        md = metadata_of(dot)
        out_type = dot.shape.element_type
        dims = list(OperandDims.from_dot(dot))
        operands = list(dot.operands)
        for i in range(2):
            ours, other = dims[i], dims[1 - i]
            op = make_convert(operands[i], out_type, md)
            perm = ours.indices(BATCH) + ours.indices(NON_CONTRACTING) + ours.indices(CONTRACTING)
            if perm != sorted(perm):
                op = make_transpose(op, perm, md)
                ours.apply_permutation(perm, op.shape)
            insert_before = ours.rank(BATCH) + (ours.rank(NON_CONTRACTING) if i == 0 else 0)
            bounds = other.sizes(NON_CONTRACTING)
            if bounds:
                op = make_broadcast(op, insert_dimensions_at_index(op.shape, insert_before, bounds),
                                    [d if d < insert_before else d + len(bounds)
                                     for d in range(op.shape.rank)], md)
            operands[i] = op
        lhs, rhs = operands
        assert lhs.shape.dimensions == rhs.shape.dimensions, (lhs.shape, rhs.shape)
        flow = make_multiply_for_algorithm(lhs, rhs, algorithm(dot))
        if md:
            flow.attrs["metadata"] = md
        n_contracting = dims[0].rank(CONTRACTING)
        if n_contracting:
            acc = gemm_accumulator_type(dot)
            comp = dot.parent
            rank = flow.shape.rank
            reduce_dims = list(range(rank - n_contracting, rank))
            shape = delete_dimensions(reduce_dims, flow.shape).with_element_type(acc)
            zero = make_constant(comp, acc, 0)
            add = make_scalar_computation(comp.module, "add", acc, "scalar_add_computation")
            flow = make_reduce(make_convert(flow, acc, md), zero, reduce_dims, add, shape, md)
        return make_convert(flow, out_type, md)

    def run(self, module: Module) -> bool:
        todo: list[Instruction] = []
        for comp in nonfusion_computations(module):
            if not has_opcode(comp, _DOT):
                continue
            for instr in comp.post_order():
                if instr.opcode != "dot":
                    continue
                rewrite, why, data = self.decide(instr)
                self.remark(instr, why, "applied" if rewrite else "missed",
                            derived_from=[instr], **data)
                if rewrite:
                    todo.append(instr)
        for dot in todo:
            new = self.expand(dot)
            replace_instruction(dot.parent, dot, new)
        return bool(todo)
