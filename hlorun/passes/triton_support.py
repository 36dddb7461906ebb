"""What XLA:GPU's generic (block-level) Triton emitter can compile, and the
block-level configs hlorun gives such fusions.

* :func:`triton_supported_computation` -- ``IsTritonSupportedComputation``
  (xla/backends/gpu/codegen/triton/support.cc), restricted to what the
  kernel-kind decisions need: every instruction's opcode and element types
  must be supported by the generic emitter (no gather, scatter, dynamic
  slices, concatenate, sort, pad, reduce-window, control flow, custom
  calls, complex / f64 arithmetic; reductions with a single add / max /
  min / mul / and / or reducer; a single (non-tuple) output);
* :func:`block_level_config_for` -- a ``block_level_fusion_config`` for a
  generic Triton fusion: XLA searches tilings with its indexing cost model
  (``TryFindBestTilingForFusion``); hlorun picks the output tile whose
  input footprint (output elements x reduced elements each) is about 16 Ki
  elements, powers of two from the minor-most output dimension outwards,
  and 1 to 8 warps by that footprint (stated simplification).
"""

from __future__ import annotations

import math

from ..ir.module import Instruction
from ..ir.opcode import ELEMENTWISE
from .convert_triton_gemm_config import block_level_config
from .triton_tiling import untileable

_SUPPORTED_OTHER = frozenset({
    "parameter", "constant", "broadcast", "bitcast", "reshape", "transpose", "reduce", "iota",
    "slice", "tuple"})
_UNSUPPORTED_ELEMENTWISE = frozenset({
    "complex", "real", "imag", "stochastic-convert", "reduce-precision", "bitcast-convert",
    "mulhi", "count-leading-zeros", "popcnt", "cbrt", "tan", "erf", "atan2", "acos", "acosh",
    "asin", "asinh", "atanh", "cosh", "sinh", "round-nearest-afz", "is-finite"})
_REDUCERS = frozenset({"add", "maximum", "minimum", "multiply", "and", "or"})
_BAD_TYPES = ("c64", "c128", "f64", "token")
_FOOTPRINT = 16384


def _types_ok(instr: Instruction) -> bool:
    shapes = instr.shape.tuple_shapes if instr.shape.is_tuple else [instr.shape]
    return all(s.is_array and s.element_type not in _BAD_TYPES for s in shapes)


def _reducer_ok(reduce: Instruction) -> bool:
    if len(reduce.operands) != 2 or reduce.shape.is_tuple:
        return False
    comps = reduce.called_computations()
    if not comps:
        return False
    root = comps[0].root
    return root.opcode in _REDUCERS and all(o.opcode == "parameter" for o in root.operands)


def unsupported_instruction(instr: Instruction) -> str | None:
    """Why the generic Triton emitter cannot compile ``instr`` (None: it can)."""
    op = instr.opcode
    if op in ELEMENTWISE:
        if op in _UNSUPPORTED_ELEMENTWISE:
            return f"{op} is not supported by the Triton emitter"
    elif op not in _SUPPORTED_OTHER:
        return f"{op} is not supported by the Triton emitter"
    if op == "reduce" and not _reducer_ok(instr):
        return "only single-input reductions with a plain add/max/min/mul/and/or reducer"
    if op == "reduce" and len(instr.dimensions) != 1:
        # CanTritonHandleReduce: "Reduction is not a row-reduction of a single operand."
        return "only reductions of one dimension"
    if op == "reduce" and instr.shape.element_type in ("f8e4m3fn", "f8e5m2"):
        return "F8E4M3FN and F8E5M2 are not supported for reductions"
    if op != "tuple" and not _types_ok(instr):
        return f"{instr.name}: element type {instr.shape.element_type} is not supported"
    return None


def triton_supported_computation(fusion: Instruction) -> str | None:
    """Why ``fusion``'s body cannot be a generic Triton fusion (None: it can)."""
    body = fusion.fused_computation
    if body is None:
        return "not a fusion"
    if body.root.opcode == "tuple":
        return "multi-output fusions are not supported"
    for i in body.instructions:
        why = unsupported_instruction(i)
        if why:
            return why
    return untileable(body.post_order())


def _reduced_elements(fusion: Instruction) -> int:
    """Input elements read per output element (the largest reduction)."""
    body = fusion.fused_computation
    out = max(1, math.prod(body.root.shape.dimensions))
    worst = 1
    for i in body.instructions:
        if i.opcode == "reduce":
            worst = max(worst, math.prod(i.operands[0].shape.dimensions) //
                        max(1, math.prod(i.shape.dimensions)))
    for p in body.parameters:
        if p is not None and p.shape.is_array:
            worst = max(worst, math.prod(p.shape.dimensions) // out)
    return worst


def _pow2_floor(n: int) -> int:
    return 1 << (max(1, n).bit_length() - 1)


def block_level_config_for(fusion: Instruction) -> dict:
    """A block-level config for a generic Triton fusion (see module doc)."""
    root = fusion.fused_computation.root
    dims = list(root.shape.dimensions)
    per_out = _reduced_elements(fusion)
    budget = max(1, _FOOTPRINT // per_out)
    tiles = [1] * len(dims)
    order = list(root.shape.minor_to_major) if root.shape.layout is not None \
        else list(reversed(range(len(dims))))
    for d in order:
        if budget <= 1:
            break
        size = dims[d]
        t = size if size <= budget else _pow2_floor(budget)
        tiles[d] = t
        budget //= 1 << (t - 1).bit_length()
    footprint = math.prod(tiles) * per_out
    warps = min(8, max(1, _pow2_floor(footprint // 1024)))
    return block_level_config(tiles, num_warps=warps)


__all__ = ["block_level_config_for", "triton_supported_computation", "unsupported_instruction"]
