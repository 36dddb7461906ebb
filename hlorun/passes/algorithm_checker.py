"""algorithm-checker: refuse dot precision algorithms the GPU cannot run
(XLA's ``AlgorithmChecker``, xla/service/gpu/transforms/algorithm_checker.cc,
first pass of the "hlo normalization" pipeline's GEMM part).

For every dot outside fusion computations with ``algorithm=`` set:

* operands of different types: "Dot operands must have the same type when
  using an algorithm" (DotOperandConverter has run by then, so this only
  fires for fp8 pairs or hand-written modules);
* ``IsSupportedDotAlgorithmOnGpu`` false for the target and the operand /
  result types: "Unsupported algorithm on the current device(s): ALG_..."
  -- the error JAX users see for ``F16_F16_F16`` or ``BF16_BF16_BF16`` on
  an H100, or ``BF16_BF16_F32`` on a T4.

Both are PassErrors naming the dot.  Never changes the module.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.module import Module
from .algorithm_util import algorithm_of, enum_name, supported_on_gpu
from .base import Pass
from .dfs_rewrite import nonfusion_computations


@dataclass(frozen=True)
class AlgorithmChecker(Pass):
    """Fail on dots whose precision algorithm the target GPU does not support."""

    name = "algorithm-checker"

    def run(self, module: Module) -> bool:
        for comp in nonfusion_computations(module):
            for dot in comp.instructions:
                if dot.opcode != "dot":
                    continue
                alg = algorithm_of(dot)
                if alg is None:
                    continue
                lhs, rhs = (o.shape.element_type for o in dot.operands[:2])
                out = dot.shape.element_type
                if lhs != rhs:
                    self.fail(f"Dot operands must have the same type when using an algorithm: "
                              f"{dot.name} ({lhs} x {rhs}, algorithm={alg})", dot)
                if not supported_on_gpu(alg, self.target, lhs, rhs, out):
                    self.fail(f"Unsupported algorithm on the current device(s): {enum_name(alg)} "
                              f"({lhs} x {rhs} -> {out} on {self.target.platform} "
                              f"{self.target.compute_capability})", dot)
                self.remark(dot, f"{enum_name(alg)} on {lhs} x {rhs} -> {out} is supported",
                            kind="analysis")
        return False
