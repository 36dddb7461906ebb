"""What XLA:GPU's generic (block-level) Triton emitter can compile, and the
block-level configs hlorun gives such fusions.

* :func:`triton_supported_computation` -- ``IsTritonSupportedComputation``
  (xla/backends/gpu/codegen/triton/support.cc) for a Hopper GPU: every
  instruction must pass ``IsTritonSupportedInstruction`` --
  element types of the result and of every operand among pred, s4-s64,
  f16, bf16, f32, f64, f8e5m2, f8e4m3fn (no unsigned integers: jax.random's
  u32 bit mixing stays native); conversions by ``IsTritonSupportedConversion``;
  elementwise ops from the per-type sets (keyed by the last operand's
  type: f32/f64 have divide, remainder, power, atan2; bf16/f16 lack divide;
  no shifts, sign, logistic, rounding or is-finite); only scalar constants;
  pad only with nonzero high padding; reductions of one dimension with one
  input and a supported reducer; bitcasts keeping the element count;
  broadcast, reshape, slice, transpose, iota, concatenate (see below);
  never gather, scatter, dynamic-(update-)slice, reduce-window, dot
  (nested GEMM fusions only), tuples, sort or custom calls; and the body
  must be tileable (:mod:`.triton_tiling`, and a symbolic tile for every
  instruction, :mod:`.triton_indexing`).
  Concatenate: the support.cc in the reference index (2025) accepts it only
  inside nested GEMM fusions, but the XLA that JAX 0.11.2 ships emits it in
  generic ``__triton`` fusions -- held-out set 7's flow_matching_mlp_bf16
  has four (layer-norm Triton fusions grown by priority fusion with their
  concatenate consumer: ``bf16[256,1024]`` tiles ``[2,512]``,
  ``bf16[256,3072]`` tiles ``[8,512]``) and lstm_scan_train_f32 one (an
  autotuned block-level reduction reading a concatenate).  Its exact
  constraints are not known here (none is checked beyond the element type);
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

#: IsTritonSupportedDataType (CUDA): no unsigned integers, no complex, no
#: f8 variants other than e5m2 / e4m3fn
_TYPES = frozenset({"pred", "s4", "s8", "s16", "s32", "s64", "f16", "f32", "f64",
                    "f8e5m2", "f8e4m3fn", "bf16"})
_F8 = frozenset({"f8e5m2", "f8e4m3fn"})
_FLOATS = frozenset({"f16", "bf16", "f32", "f64"}) | _F8
_INTEGRAL = frozenset({"s4", "s8", "s16", "s32", "s64", "u4", "u8", "u16", "u32", "u64"})
#: IsTritonUnsupportedOpcode
_NEVER = frozenset({"dynamic-reshape", "dynamic-update-slice", "gather", "ragged-dot",
                    "reduce-window", "scatter", "select-and-scatter", "set-dimension-size"})
#: the generic emitter's other non-elementwise opcodes (dot, concatenate and
#: nested fusions only inside nested GEMM fusions, dynamic-slice "supported
#: but not enabled yet"; tuple, sort, custom calls ... are not handled at all)
_SHAPE_OPS = frozenset({"broadcast", "reshape", "slice", "transpose"})
#: floating-point math the unary set adds for f16 / bf16 / f32 / f64
_FLOAT_MATH = frozenset({"cosine", "floor", "log-plus-one", "sqrt", "tanh", "acosh",
                         "exponential", "exponential-minus-one", "cbrt", "erf", "log", "tan",
                         "ceil", "rsqrt", "sine"})
_FOOTPRINT = 16384


def _unary_ops(t: str) -> frozenset[str]:
    """``TritonSupportedUnaryElementwiseOps``."""
    if t == "pred":
        return frozenset({"not", "copy"})
    if t == "s4":
        return frozenset()
    if t == "u16":
        return frozenset({"abs"})
    ops = {"abs", "copy"}
    if t not in _F8:
        ops.add("negate")
    if t in _INTEGRAL:
        ops.add("not")
    if t in ("bf16", "f16", "f32", "f64"):
        ops |= _FLOAT_MATH
    if t in _FLOATS:
        ops.add("reduce-precision")
    return frozenset(ops)


def _binary_ops(t: str) -> frozenset[str]:
    """``TritonSupportedBinaryElementwiseOps``."""
    if t in ("s4", "u16") or t in _F8:
        return frozenset()
    ops = {"add", "compare", "maximum", "minimum", "multiply"}
    if t == "pred":
        return frozenset(ops | {"and", "or", "xor"})
    ops.add("subtract")
    if t in _INTEGRAL:
        ops |= {"divide", "and", "or", "xor"}
    if t in ("f32", "f64"):
        ops |= {"atan2", "divide", "remainder", "power"}
    if t in ("bf16", "f16"):
        ops |= {"atan2", "power", "remainder"}
    return frozenset(ops)


def _ternary_ops(t: str) -> frozenset[str]:
    if t in ("s4", "u16"):
        return frozenset()
    return frozenset({"select"}) if t in _F8 else frozenset({"select", "clamp"})


def _conversion(out: str, inp: str) -> str | None:
    """``IsTritonSupportedConversion`` on Hopper (why not, or None)."""
    why = f"unsupported conversion in Triton: {inp} to {out}"
    kinds = {out, inp}
    is_f8 = bool(kinds & _F8)
    if out != inp and is_f8 and not kinds <= _F8 and not kinds & {"f16", "bf16", "f32"}:
        return why
    if inp == "s4" and out not in ("s8", "f16", "bf16", "f32", "f64"):
        return why
    if out == "s4":
        return why
    return None if out in _TYPES and inp in _TYPES else why


def _element_type(i: Instruction) -> str | None:
    return i.shape.element_type if i.shape.is_array else None


def _reduce_refusal(reduce: Instruction) -> str | None:
    """``CanTritonHandleReduce``."""
    if reduce.shape.is_tuple or len(reduce.operands) != 2:
        return "only single-input reductions of one dimension"
    if reduce.shape.element_type in _F8:
        return "F8E4M3FN and F8E5M2 are not supported for reductions"
    comps = reduce.called_computations()
    if not comps or any(unsupported_instruction(i) for i in comps[0].instructions):
        return "unsupported reduction computation by Triton"
    if len(reduce.dimensions) != 1:
        return "only reductions of one dimension"
    return None


def unsupported_instruction(instr: Instruction) -> str | None:
    """Why the generic Triton emitter cannot compile ``instr`` (None: it can):
    XLA's ``IsTritonSupportedInstruction`` for a Hopper GPU."""
    op = instr.opcode
    if op in _NEVER:
        return f"{op} is not supported by the Triton emitter"
    if op == "parameter":
        return None
    out = _element_type(instr)
    if op == "convert":
        return _conversion(out or "", _element_type(instr.operands[0]) or "")
    if out not in _TYPES:
        return f"{op}: element type {out or 'tuple'} is not supported by the Triton emitter"
    if any(_element_type(o) not in _TYPES for o in instr.operands):
        return f"{op}: an operand's element type is not supported by the Triton emitter"
    if op == "pad":
        return _pad_refusal(instr)
    if op == "constant":
        if instr.shape.dimensions and any(d != 1 for d in instr.shape.dimensions):
            return "only scalar constants are supported in Triton"
        return None if out != "s4" else "S4 is not supported"
    if op == "iota":
        return None if out not in _F8 and out != "s4" else f"{out} iota is not supported"
    if op == "reduce":
        return _reduce_refusal(instr)
    if op == "bitcast":
        src = instr.operands[0].shape
        if math.prod(src.dimensions) != math.prod(instr.shape.dimensions):
            return "only bitcasts with the same number of elements are supported"
        return None if out != "s4" else "S4 is not supported"
    if op in _SHAPE_OPS or op == "concatenate":
        return None if out != "s4" else "S4 is not supported"
    if op in ELEMENTWISE:
        t = _element_type(instr.operands[-1]) or ""
        if op in _unary_ops(t) or op in _binary_ops(t) or op in _ternary_ops(t):
            return None
        return f"{op} on {t} is not supported by the Triton emitter"
    return f"{op} is not supported by the Triton emitter"


def _pad_refusal(pad: Instruction) -> str | None:
    """Only "high" padding (no low or interior padding), and not a no-op."""
    from ..ir.attrs import parse_padding
    cfg = parse_padding(pad.attrs["padding"])
    if any(lo != 0 or interior != 0 for lo, _, interior in cfg):
        return "only high padding is supported"
    if all(hi == 0 for _, hi, _ in cfg):
        return "no-op pad ops are not allowed"
    return None if pad.shape.element_type != "s4" else "S4 is not supported"


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
    why = untileable(body.post_order())
    if why or body.root.shape.is_tuple:
        return why
    from .triton_indexing import untileable_indexing
    return untileable_indexing(body.root, lambda x: x.parent is body)


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


def make_block_level(fusion: Instruction) -> list[str]:
    """Make ``fusion`` a generic Triton fusion (``kind=kCustom``,
    ``{"kind":"__triton","block_level_fusion_config":...}``, as XLA's
    ``BlockLevelEmitterBackend::ApplyConfig`` and FusionBlockLevelRewriter
    write it); returns the output tile sizes."""
    bc = fusion.backend_config
    bc = dict(bc) if isinstance(bc, dict) else {}
    fbc = dict(bc.get("fusion_backend_config") or {})
    fbc["kind"] = "__triton"
    fbc["block_level_fusion_config"] = block_level_config_for(fusion)
    bc["fusion_backend_config"] = fbc
    for key, default in (("device_type", "DEVICE_TYPE_INVALID"),
                         ("force_earliest_schedule", False), ("operation_queue_id", "0"),
                         ("reification_cost", [])):
        bc.setdefault(key, default)
    fusion.set_backend_config(bc)
    fusion.attrs["kind"] = "kCustom"
    return fbc["block_level_fusion_config"]["output_tiles"][0]["sizes"]


__all__ = ["block_level_config_for", "make_block_level", "triton_supported_computation", "unsupported_instruction"]
