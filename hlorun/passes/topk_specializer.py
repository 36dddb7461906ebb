"""topk-splitter and topk-specializer: XLA:GPU's TopKSplitter
(xla/backends/gpu/transforms/topk_splitter.cc) and TopkSpecializer
(topk_specializer.cc), the first passes of GpuCompiler's optimization
pipeline (then the TopkDecomposer lowers the ``TopK`` calls left).

**topk-splitter** (``split_threshold``, XLA's default 1024*1024): a
``TopK`` call on ``[n]`` or ``[1, n]`` with ``k <= sqrt(n)``, ``n`` a
multiple of 1024 and ``n > split_threshold`` is computed as ``B =
min(bit_floor(n / split_threshold), 1024)`` top-k's of ``[B, n/B]``
(another ``TopK`` call) whose indices are offset by ``j * n/B``, followed
by a stable sort of the ``B*k`` candidates (the call's comparator) and a
slice of the first ``k``.  (A 2-parameter comparator -- a values-only
sort -- cannot order the candidate pairs; such calls are left alone.)

**topk-specializer** (``SmallBufferOptimization``, CUDA without
``xla_gpu_experimental_use_raft_select_k``): a ``TopK`` call becomes
XLA's ``__gpu$TopK`` kernel (``API_VERSION_TYPED_FFI``, the comparator as
its called computation, no metadata) when the data is f32 or bf16 of rank
1 or 2, ``k <= 16``, ``n >= 1024`` and ``k / n < 0.85``; otherwise it is
left for the decomposer (sort + slice).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..ir.literal import Literal
from ..ir.module import Instruction, Module, has_opcode, module_has_opcode
from ..ir.shape import Shape
from .base import Pass
from .dfs_rewrite import nonfusion_computations, replace_instruction
from .topk_util import (GPU_TOPK_TARGET, TOPK_TARGET, comparator_of, derived, gte, is_topk_call,
                        make_sort, make_topk_call, slice_prefix, topk_sizes)

REQUIRED_ALIGNMENT = 1024
MAXIMUM_BATCH_SIZE = 1024
MAX_K = 16
MIN_N = 1024
MAX_K_OVER_N = 0.85


def _bit_floor(x: int) -> int:
    return 1 << (x.bit_length() - 1) if x > 0 else 0


def split(call: Instruction, threshold: int) -> Instruction | None:
    """The replacement of a ``TopK`` call (or None: not split)."""
    data = call.operands[0].shape
    has_batch = data.rank == 2
    if has_batch and data.dimensions[0] != 1:
        return None
    comparator = comparator_of(call)
    if comparator is None or comparator.num_parameters != 4:
        return None
    _, n, k = topk_sizes(call)
    if k > math.sqrt(n) or n % REQUIRED_ALIGNMENT != 0 or n <= threshold:
        return None
    comp = call.parent
    t = data.element_type
    new_batch = min(_bit_floor(n // threshold), MAXIMUM_BATCH_SIZE)
    new_n = n // new_batch
    reshaped = derived(None, comp, "reshape", Shape.array(t, [new_batch, new_n]), [call.operands[0]])
    batch_shape = Shape.tuple([Shape.array(t, [new_batch, k]), Shape.array("s32", [new_batch, k])])
    batch_topk = make_topk_call(None, comp, batch_shape, reshaped, comparator, TOPK_TARGET,
                                call.attrs.get("backend_config"))
    indices, values = gte(None, batch_topk, 1), gte(None, batch_topk, 0)
    iota_shape = Shape.array("s32", [new_batch])
    iota = derived(None, comp, "iota", iota_shape, [], iota_dimension="0")
    step = derived(None, comp, "constant", Shape.array("s32", []), [])
    step.literal = Literal(str(new_n), step.shape)
    fix = derived(None, comp, "multiply", iota_shape,
                  [iota, derived(None, comp, "broadcast", iota_shape, [step], dimensions="{}")])
    indices = derived(None, comp, "add", indices.shape,
                      [indices, derived(None, comp, "broadcast", indices.shape, [fix],
                                        dimensions="{0}")])
    lin_idx = Shape.array("s32", [k * new_batch])
    lin_val = Shape.array(t, [k * new_batch])
    sort = make_sort(None, comp, Shape.tuple([lin_val, lin_idx]),
                     [derived(None, comp, "reshape", lin_val, [values]),
                      derived(None, comp, "reshape", lin_idx, [indices])], 0, comparator, True)
    parts = []
    for i in (0, 1):
        sl = slice_prefix(None, gte(None, sort, i), Shape.array(sort.shape.tuple_shapes[i].element_type, [k]))
        parts.append(derived(None, comp, "reshape", call.shape.tuple_shapes[i], [sl]))
    return derived(None, comp, "tuple", call.shape, parts)


def specialize(call: Instruction) -> str | Instruction:
    """``SmallBufferOptimization``: the ``__gpu$TopK`` call, or why not."""
    data = call.operands[0].shape
    if data.element_type not in ("f32", "bf16"):
        return f"invalid dtype {data.element_type}"
    if data.rank > 2:
        return f"invalid input dimensions {data}"
    _, n, k = topk_sizes(call)
    if n and k / n >= MAX_K_OVER_N:
        return f"k/n ratio ({k / n:f}) is too high for TopK: sort + slice"
    if k > MAX_K:
        return f"k too large ({k}), must be <= {MAX_K}"
    if n < MIN_N:
        return f"input too small (n={n}, min_n={MIN_N})"
    return make_topk_call(None, call.parent, call.shape, call.operands[0], comparator_of(call),
                          GPU_TOPK_TARGET, call.attrs.get("backend_config"), typed_ffi=True)


_CUSTOM_CALL = frozenset({"custom-call"})


def _calls(module: Module) -> list[Instruction]:
    if not module_has_opcode(module, _CUSTOM_CALL):
        return []
    return [i for c in nonfusion_computations(module) if has_opcode(c, _CUSTOM_CALL)
            for i in c.post_order() if is_topk_call(i)]


@dataclass(frozen=True)
class TopKSplitter(Pass):
    """Split a large single-row TopK into batched TopKs and a final sort."""

    name = "topk-splitter"
    split_threshold: int = 1024 * 1024

    def run(self, module: Module) -> bool:
        changed = False
        for call in _calls(module):
            new = split(call, self.split_threshold)
            if new is None:
                continue
            name = call.name
            replace_instruction(call, new)
            self.remark(new, f"{name} split into batched TopK calls and a sort of the candidates",
                        derived_from=[name])
            changed = True
        return changed


@dataclass(frozen=True)
class TopkSpecializer(Pass):
    """Rewrite TopK custom calls XLA's TopK kernel serves into __gpu$TopK."""

    name = "topk-specializer"

    def run(self, module: Module) -> bool:
        changed = False
        for call in _calls(module):
            new = specialize(call)
            name = call.name
            if isinstance(new, str):
                self.remark(call, f"{name} stays a {TOPK_TARGET} call (sort + slice): {new}",
                            "declined")
                continue
            replace_instruction(call, new)
            new.attrs.pop("metadata", None)  # HloComputation::AddInstruction: none
            self.remark(new, f"{name} runs as XLA's {GPU_TOPK_TARGET} kernel", derived_from=[name])
            changed = True
        return changed


__all__ = ["TopKSplitter", "TopkSpecializer", "specialize", "split"]
