"""The GEMM rewriter visitor: dot -> BLAS custom call (``HandleDot``) and
the dispatch of the epilogue / FP8 handlers, bottom-up over one computation
(XLA's ``DfsHloRewriteVisitor``: instructions in post order, instructions
created during the walk are not visited)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...ir.module import Computation, Instruction
from ...ir.opcode import is_elementwise
from ...ir.shape import Shape
from ...errors import PassError
from . import bias, epilogues, fp8, fp8_output
from . import hlo as H
from .config import CUBLAS_GEMM, CUBLAS_LT_MATMUL, DotDims, Gpu, gpu_backend_config_json, new_gemm_config
from .matmul import (cublas_support_reason, matmul_sizes, normalize_batch_dimensions,
                     operand_layouts, supported_by_classical_emitters, too_small_for_rewriting)
from .types import lt_types_reason

#: Ops whose result does not depend on their operands' layouts: a pinned
#: GEMM output may feed them directly.  Any other user (bitcast, tuple,
#: custom-call, call, while, root of the computation ...) gets a copy back
#: to the layout it was compiled against.
LAYOUT_AGNOSTIC = frozenset({
    "abs", "add", "and", "atan2", "broadcast", "cbrt", "ceil", "clamp", "compare",
    "complex", "concatenate", "convert", "copy", "cosine", "divide", "dot",
    "dynamic-slice", "dynamic-update-slice", "erf", "exponential",
    "exponential-minus-one", "floor", "gather", "imag", "is-finite", "log",
    "log-plus-one", "logistic", "maximum", "minimum", "multiply", "negate", "not",
    "or", "pad", "power", "real", "reduce", "reduce-precision", "remainder",
    "reshape", "reverse", "round-nearest-afz", "round-nearest-even", "rsqrt",
    "select", "sign", "sine", "slice", "sqrt", "subtract", "tan", "tanh",
    "transpose", "xor",
})


@dataclass(frozen=True)
class Options:
    fp8_only: bool
    bias: bool
    cublaslt: bool
    pin_output_layout: bool
    size_threshold: int


class GemmRewriterVisitor:
    """One run of XLA's ``GemmRewriterVisitor`` (kFp8Only or kNonFp8Only)."""

    def __init__(self, owner: Any, gpu: Gpu, options: Options):
        self.owner = owner  # the Pass: remarks go there
        self.gpu = gpu
        self.opts = options
        self.changed = False

    # -- remarks ---------------------------------------------------------------
    def missed(self, instr: Instruction | str | None, message: str, **data: Any) -> None:
        self.owner.note(instr, message, "missed", **data)

    def applied(self, instr: Instruction | str | None, message: str, **data: Any) -> None:
        self.owner.note(instr, message, "applied", **data)

    def note_analysis(self, instr: Instruction | str | None, message: str, **data: Any) -> None:
        self.owner.note(instr, message, "analysis", **data)

    # -- GEMM lineage (remarks name the dot a GEMM came from) ------------------------
    def clone(self, comp: Computation, instr: Instruction, shape: Shape | None = None,
              operands: list[Instruction] | None = None, name: str | None = None) -> Instruction:
        new = H.clone(comp, instr, shape, operands, name)
        origin = self.owner.origin.get(instr)
        if origin is not None:
            self.owner.origin[new] = origin
        return new

    def label(self, gemm: Instruction) -> str:
        """How remarks name a GEMM: by the dot it was rewritten from (its
        own name changes as epilogues are fused)."""
        origin = self.owner.origin.get(gemm)
        return f"the GEMM of {origin}" if origin else gemm.name

    # -- replacement helpers ---------------------------------------------------------
    def replace(self, old: Instruction, new: Instruction) -> None:
        if not H.replace(old, new):
            raise PassError(f"cannot replace {old.name}: it has control dependencies",
                            instruction=old.name, computation=old.parent.name if old.parent else None)
        self.changed = True

    # -- traversal ----------------------------------------------------------------------
    def run(self, comp: Computation) -> bool:
        for instr in comp.post_order():
            if instr.parent is not comp:
                continue
            handler = self._HANDLERS.get(instr.opcode)
            if handler is not None:
                handler(self, instr)
        return self.changed

    # -- dot -------------------------------------------------------------------------------
    def handle_dot(self, instr: Instruction) -> None:
        reason = cublas_support_reason(instr)
        if reason is not None:
            self.missed(instr, f"dot not rewritten: {reason}")
            return
        normalized = normalize_batch_dimensions(instr)
        if normalized is not None:
            self.replace(instr, normalized)
            instr = normalized.operands[0]
        if too_small_for_rewriting(instr, self.opts.size_threshold) and supported_by_classical_emitters(instr):
            m, n, k = matmul_sizes(instr)
            self.missed(instr, f"dot left to the classical emitters: (m+n)*k = {(m + n) * k} is below "
                               f"the rewrite size threshold {self.opts.size_threshold}",
                        m=m, n=n, k=k, threshold=self.opts.size_threshold)
            return
        dims = DotDims.of(instr)
        lhs, rhs = (o.shape for o in instr.operands)
        nb = len(dims.lhs_batch)

        def stride(s: Shape) -> int:
            return s.dimensions[nb] if s.rank == nb + 1 else s.dimensions[nb] * s.dimensions[nb + 1]

        config = new_gemm_config(instr, dims, stride(lhs), stride(rhs))
        if self.opts.fp8_only:
            fp8.handle_dot_fp8(self, instr, config)
            return
        if config["precision_config"]["algorithm"] == "ALG_DOT_BF16_BF16_F32":
            # MakeConvertToHlo: an operand already in bf16 is used as it is (XLA's
            # later algsimp would remove a bf16 -> bf16 convert; hlorun has none there)
            lhs_c, rhs_c = (o if o.shape.element_type == "bf16" else
                            H.add(instr.parent, "convert", o.shape.with_element_type("bf16"), [o])
                            for o in instr.operands[:2])
            config["precision_config"]["algorithm"] = "ALG_UNSET"
            self._make_gemm(instr, config, [lhs_c, rhs_c])
            return
        self._make_gemm(instr, config, list(instr.operands))

    def lt_support_reason(self, dot: Instruction, config: dict) -> str | None:
        """``GemmIsSupportedByCublasLt``: None if cuBLAS-LT (hipBLASLt) can
        run this GEMM, else why not."""
        a, b = (o.shape.element_type for o in dot.operands)
        out = dot.shape.element_type
        prec = config["precision_config"]
        reason = lt_types_reason(self.gpu, a, b, out, out, prec["algorithm"], prec["operand_precision"])
        if reason is None and self.gpu.is_rocm and not self.gpu.has_hipblaslt:
            reason = f"{self.gpu.gfx} has no hipBLASLt"
        if reason is None and out == "c64" and not self.gpu.cuda_at_least(8, 0):
            lay = operand_layouts(dot.operands[0].shape, dot.operands[1].shape,
                                  DotDims.from_json(config["dot_dimension_numbers"]))[1]
            if lay is not None and lay.cols > 4194240:
                reason = f"c64 GEMM with {lay.cols} columns exceeds cuBLAS-LT's limit of 4194240"
        return reason

    def non_fp8_target(self, dot: Instruction, config: dict) -> tuple[str | None, str]:
        """``GetNonFp8GemmCustomCallTarget``: (target or None, why not LT)."""
        if not self.opts.cublaslt:
            return CUBLAS_GEMM, "cuBLAS-LT disabled (cublaslt: false)"
        reason = self.lt_support_reason(dot, config)
        if reason is None:
            return CUBLAS_LT_MATMUL, ""
        return None, reason

    def _make_gemm(self, instr: Instruction, config: dict, operands: list[Instruction]) -> None:
        target, why = self.non_fp8_target(instr, config)
        if target is None:
            # XLA at the corpus commit has no legacy cuBLAS fallback: the
            # compilation fails here.
            raise PassError(f"GEMM is not supported by cublasLt and legacy cublas fallback is removed "
                            f"({why})", instruction=instr.name,
                            computation=instr.parent.name if instr.parent else None)
        comp = instr.parent
        shape = self.pinned(instr.shape)
        gemm = H.custom_call(comp, shape, operands, target, gpu_backend_config_json(config))
        self.owner.origin[gemm] = instr.name
        self.replace(instr, gemm)
        self.fix_pinned_users(gemm, instr.shape)
        self.applied(gemm, f"rewrote {instr.name} into {target}", target=target,
                     derived_from=instr.name, shape=str(shape))

    # -- output layout pinning -------------------------------------------------------------
    def pinned(self, shape: Shape) -> Shape:
        """The GEMM output shape: descending layout when pinning is on."""
        if self.opts.pin_output_layout and shape.is_array and not H.is_descending(shape):
            return H.descending(shape)
        return shape

    def fix_pinned_users(self, gemm: Instruction, original: Shape) -> None:
        """After pinning, users whose meaning depends on the operand layout
        (bitcasts, tuples, calls, the computation root) read a copy in the
        layout they were built for; layout-agnostic users (reshape,
        elementwise ...) read the pinned buffer directly, which is what can
        turn a bitcast-compatible reshape into a non-bitcast one (S0)."""
        if gemm.shape == original:
            return
        comp = gemm.parent
        self.applied(gemm, f"pinned the output of {gemm.name} to the canonical layout "
                           f"{gemm.shape.layout} (was {original.layout})",
                     pinned_layout=str(gemm.shape.layout), original_layout=str(original.layout))
        sensitive = [u for u in gemm.users if u.opcode not in LAYOUT_AGNOSTIC
                     or self._elementwise_in_other_layout(u, gemm)]
        needs_root_copy = comp.root is gemm
        if not sensitive and not needs_root_copy:
            return
        copy = H.add(comp, "copy", original, [gemm])
        for u in sensitive:
            u.replace_operand_with(gemm, copy)
        if needs_root_copy:
            comp.root = copy

    @staticmethod
    def _elementwise_in_other_layout(user: Instruction, gemm: Instruction) -> bool:
        """An elementwise user computes in its own layout, which every
        operand of equal rank shares after layout assignment (XLA's layout
        normalization checks it).  When the pinned buffer no longer has
        that layout (a fissioned GEMM fusion whose epilogue was laid out
        with the dot's non-descending output), the user reads the copy in
        the layout it was built for, as a layout-sensitive user does."""
        shape = gemm.shape
        if not is_elementwise(user.opcode) or not user.shape.is_array or not shape.is_array:
            return False
        return user.shape.rank == shape.rank and user.shape.layout is not None \
            and user.shape.minor_to_major != shape.minor_to_major

    _HANDLERS: dict = {}


GemmRewriterVisitor._HANDLERS = {
    "dot": GemmRewriterVisitor.handle_dot,
    "multiply": epilogues.handle_multiply,
    "divide": fp8_output.handle_divide,
    "add": bias.handle_add,
    "maximum": epilogues.handle_maximum,
    "convert": fp8_output.handle_convert,
}
