"""FP8 output fusion: the scaling of the result (``F8ScaleD``), the
saturating clamp + conversion to f8 (``F8ConvertD``) and the abs-max
reduction (``F8AddDAmax``) fold into an existing ``__cublas$lt$matmul$f8``.
Every near miss records which sub-pattern failed."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...ir.module import Instruction
from ...ir.shape import Shape
from . import hlo as H
from .config import CUBLAS_LT_MATMUL_F8, read_gemm_config, write_gemm_config
from .patterns import is_custom_call, scalar_value

if TYPE_CHECKING:  # pragma: no cover
    from .rewriter import GemmRewriterVisitor

F8_RANGE = {"f8e4m3fn": 448.0, "f8e5m2": 57344.0}


# ---------------------------------------------------------------------------
# Output scaling and conversion
# ---------------------------------------------------------------------------


def _invert_and_convert(comp, scalar: Instruction, invert: bool) -> Instruction:
    md = scalar.attrs.get("metadata")
    if invert:
        one = H.constant(comp, scalar.shape.element_type, 1)
        scalar = H.binary(comp, "divide", one, scalar, metadata=md)
    return H.convert(comp, scalar, "f32", metadata=md)


def scale_d(v: "GemmRewriterVisitor", instr: Instruction, gemm: Instruction, d_scale: Instruction) -> None:
    """``F8ScaleD``."""
    if not d_scale.shape.is_scalar:
        v.missed(instr, f"output scale not fused: scale is not a scalar ({d_scale.name}: {d_scale.shape})")
        return
    if scalar_value(gemm.operands[2]) != 1.0:
        v.note_analysis(instr, f"output scale {d_scale.name} not folded into the A scale of {v.label(gemm)}: "
                               f"A is already scaled; it can still fuse with the conversion to FP8 "
                               f"(clamp + convert)")
        return
    cfg = read_gemm_config(gemm)
    if cfg["epilogue"] not in ("DEFAULT", "RELU") or cfg["beta"] != 0:
        v.missed(instr, f"output scale not fused into {v.label(gemm)}: epilogue {cfg['epilogue']}"
                        + (" with a matrix bias" if cfg["beta"] != 0 else ""))
        return
    comp = instr.parent
    s = _invert_and_convert(comp, d_scale, instr.opcode == "divide")
    gemm.set_operand(2, s)
    v.replace(instr, gemm)
    v.applied(gemm, f"folded output scale {d_scale.name} into the A scale of {v.label(gemm)}")


def handle_divide(v: "GemmRewriterVisitor", instr: Instruction) -> None:
    g, s = instr.operands
    if (is_custom_call(g, (CUBLAS_LT_MATMUL_F8,)) and g.user_count == 1
            and s.opcode == "broadcast" and s.user_count == 1):
        scale_d(v, instr, g, s.operands[0])


def _scaled_gemm(x: Instruction):
    """``AnyOf(gemm_f8, Divide(gemm_f8, Broadcast(s)), MultiplyAnyOrder(gemm_f8, Broadcast(s)))``:
    (gemm, d_scale, binary) or None."""
    f8 = lambda y: is_custom_call(y, (CUBLAS_LT_MATMUL_F8,))  # noqa: E731
    if f8(x):
        return x, None, None
    if x.opcode == "divide" and f8(x.operands[0]) and x.operands[1].opcode == "broadcast":
        return x.operands[0], x.operands[1].operands[0], x
    if x.opcode == "multiply":
        for g, s in ((x.operands[0], x.operands[1]), (x.operands[1], x.operands[0])):
            if f8(g) and s.opcode == "broadcast":
                return g, s.operands[0], x
    return None


def _reaches_f8_gemm(x: Instruction, depth: int = 3) -> Instruction | None:
    """An FP8 GEMM a few ops up the operand chain (not through tuples: XLA's
    patterns never look through get-tuple-element)."""
    if is_custom_call(x, (CUBLAS_LT_MATMUL_F8,)):
        return x
    if depth == 0 or x.opcode == "get-tuple-element":
        return None
    for op in x.operands:
        found = _reaches_f8_gemm(op, depth - 1)
        if found is not None:
            return found
    return None


def handle_convert(v: "GemmRewriterVisitor", instr: Instruction) -> None:
    clamp = instr.operands[0]
    target = instr.shape.element_type
    if clamp.opcode != "clamp":
        if target.startswith("f8") and (g := _reaches_f8_gemm(clamp)) is not None:
            v.missed(instr, f"conversion to {target} not fused into {v.label(g)}: clamp missing "
                            f"(convert reads {clamp.opcode} {clamp.name}; XLA fuses only "
                            f"convert(clamp(lowest, x, max)))", gemm=g.name)
        return
    lo, x, hi = clamp.operands
    got = _scaled_gemm(x)
    bounds_ok = (lo.opcode == "broadcast" and hi.opcode == "broadcast"
                 and scalar_value(lo.operands[0]) is not None and scalar_value(hi.operands[0]) is not None)
    if got is None or not bounds_ok or clamp.user_count != 1:
        if target.startswith("f8") and (g := _reaches_f8_gemm(x)) is not None:
            if got is None:
                why = (f"the clamped value is {x.opcode} {x.name}, not the FP8 GEMM output or its "
                       f"scaling by a broadcast scalar")
            elif not bounds_ok:
                why = "clamp bounds are not broadcast scalar constants"
            else:
                why = f"clamp {clamp.name} has {clamp.user_count} users"
            v.missed(instr, f"conversion to {target} not fused into {v.label(g)}: {why}", gemm=g.name)
        return
    gemm, d_scale, binary = got
    convert_d(v, instr, gemm, d_scale, lo.operands[0], hi.operands[0],
              mult_scale=binary is not None and binary.opcode == "multiply")


def _is_damax_reduce(r: Instruction) -> bool:
    if r.opcode != "reduce" or len(r.operands) != 2:
        return False
    init = r.operands[1]
    if init.opcode != "constant" or not init.shape.is_scalar:
        return False
    val = scalar_value(init)
    if val is None or isinstance(val, complex) or val > 0:
        return False
    comp = r.to_apply
    root = comp.root if comp is not None else None
    return (root is not None and root.opcode == "maximum"
            and all(o.opcode == "parameter" for o in root.operands))


def convert_d(v: "GemmRewriterVisitor", instr: Instruction, gemm: Instruction, d_scale: Instruction | None,
              lo: Instruction, hi: Instruction, mult_scale: bool) -> None:
    """``F8ConvertD``."""
    t = instr.shape.element_type

    def miss(message: str, **data) -> None:
        v.missed(instr, f"conversion to {t} not fused into {v.label(gemm)}: {message}", gemm=gemm.name, **data)

    if v.gpu.is_rocm:
        return miss("output conversion fusion is not supported on ROCm")
    if t not in F8_RANGE:
        return miss(f"{t} is not f8e4m3fn or f8e5m2")
    lo_v, hi_v, rng = scalar_value(lo), scalar_value(hi), F8_RANGE[t]
    if lo_v != -rng or hi_v != rng:
        return miss(f"clamp bounds [{lo_v:g}, {hi_v:g}] are not the {t} range [{-rng:g}, {rng:g}]",
                    clamp_lower=lo_v, clamp_upper=hi_v, expected_lower=-rng, expected_upper=rng)
    if d_scale is not None and not d_scale.shape.is_scalar:
        return miss(f"scale is not a scalar ({d_scale.name}: {d_scale.shape})", scale_shape=str(d_scale.shape))
    users = gemm.users
    reduce_damax = None
    if len(users) == 2:
        cfg = read_gemm_config(gemm)
        for u in users:
            if u.opcode == "abs":
                if u.user_count != 1:
                    continue
                maybe = u.users[0]
            else:
                if cfg["epilogue"] not in ("BIAS_RELU", "RELU"):
                    continue
                maybe = u
            if _is_damax_reduce(maybe):
                reduce_damax = maybe
        if reduce_damax is None:
            others = [u.name for u in users]
            return miss(f"the FP8 GEMM has a second user that is not an abs-max reduction "
                        f"(users: {', '.join(others)}); without a ReLU epilogue the amax needs abs()",
                        users=others)
    elif len(users) > 2:
        return miss(f"the FP8 GEMM has {len(users)} users (at most the clamp path and one amax reduction)",
                    users=len(users))
    cfg = read_gemm_config(gemm)
    if cfg["beta"] != 0:
        bt = gemm.operands[2].shape.element_type
        if bt not in ("bf16", "f16"):
            return miss(f"it conflicts with the fused matrix bias of type {bt} (needs bf16 or f16)")
        gemm.attrs.pop("output_to_operand_aliasing", None)
    comp = instr.parent
    if d_scale is not None:
        d_scale = _invert_and_convert(comp, d_scale, not mult_scale)
    else:
        d_scale = H.constant(comp, "f32", 1.0)
    gemm.add_operand(d_scale)
    if reduce_damax is not None:
        _add_damax(v, instr, gemm, reduce_damax)
        return
    new = v.clone(comp, gemm, instr.shape)
    v.replace(instr, new)
    v.applied(new, f"fused the scaling, clamp and conversion to {t} into {v.label(new)}", output_type=t)


def _add_damax(v: "GemmRewriterVisitor", instr: Instruction, gemm: Instruction, reduce: Instruction) -> None:
    comp = instr.parent
    damax_shape = Shape.array("f32", ())
    call = v.clone(comp, gemm, Shape.tuple([instr.shape, damax_shape]))
    cfg = read_gemm_config(call)
    cfg["damax_output"] = True
    write_gemm_config(call, cfg)
    d = H.gte(comp, call, 0)
    damax = H.gte(comp, call, 1)
    conv = H.add(comp, "convert", reduce.shape, [damax])
    v.replace(reduce, conv)
    v.replace(instr, d)
    v.applied(call, f"fused the conversion to {instr.shape.element_type} and the amax reduction "
                    f"{reduce.name} into {v.label(call)} (damax_output)")
