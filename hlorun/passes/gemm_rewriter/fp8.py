"""FP8 GEMMs: dequantize -> dot -> (scale) -> clamp -> convert to f8 into one
``__cublas$lt$matmul$f8`` custom call (scenario S3).

Steps, as in XLA's GemmRewriter (RFC openxla/xla#22):

1. each dot operand is ``convert(f8)`` optionally multiplied/divided by a
   broadcast scalar scale, followed only by ops that commute with
   dequantization (bitcast, broadcast, copy, dynamic-slice, pad, reshape,
   select-with-zero, slice, transpose) -> the custom call takes the f8
   values and the f32 scales (``HandleDot``, ``CreateF8CustomCall``);
2. a multiply/divide of the result by a broadcast scalar folds into the
   A scale when A is unscaled (``F8ScaleD``, :mod:`fp8_output`);
3. ``convert_to_f8(clamp(lowest, [result * or / scale], max))`` folds into
   the call (``F8ConvertD``), optionally with the abs-max of the result as
   a second output (``F8AddDAmax``, :mod:`fp8_output`).

Every place where a candidate does not match records a "missed" remark
saying which sub-pattern failed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...ir.module import Instruction
from ...ir.shape import Shape
from . import hlo as H
from .config import CUBLAS_LT_MATMUL_F8, DotDims, gpu_backend_config_json
from .matmul import non_contracting_dims, operand_layouts
from .patterns import scalar_value

if TYPE_CHECKING:  # pragma: no cover
    from .rewriter import GemmRewriterVisitor

_COMMUTATIVE = ("bitcast", "broadcast", "copy", "dynamic-slice", "pad", "reshape", "select", "slice",
                "transpose")
_MAX_DEPTH = 400


def is_f8(instr: Instruction) -> bool:
    return instr.shape.is_array and instr.shape.element_type.startswith("f8")


# ---------------------------------------------------------------------------
# Operand matching
# ---------------------------------------------------------------------------


@dataclass
class Fp8Param:
    fp8_input: Instruction
    scale: Instruction | None = None
    mult_scale: bool = False
    commutative_ops: list[tuple[Instruction, int]] = field(default_factory=list)


def _find_f8_path(instr: Instruction, visited: set, depth: int = 0) -> list[tuple[Instruction, int]] | None:
    """``FindF8SubgraphRecursive``: path [(instr, operand index)] from an FP8
    instruction up to ``instr``, through unary ops, divide, dynamic-slice,
    pad (operand 0), multiply (either operand) and select (operand 1 or 2)."""
    if instr in visited or depth > _MAX_DEPTH:
        return None
    visited.add(instr)
    if is_f8(instr):
        return [(instr, -1)]
    if len(instr.operands) == 1 or instr.opcode in ("divide", "dynamic-slice", "pad"):
        sub = _find_f8_path(instr.operands[0], visited, depth + 1)
        if sub is not None:
            sub.append((instr, 0))
        return sub
    if instr.opcode in ("multiply", "select"):
        for k in (0, 1):
            idx = k + (instr.opcode == "select")
            sub = _find_f8_path(instr.operands[idx], visited, depth + 1)
            if sub is not None:
                sub.append((instr, idx))
                return sub
    return None


def _dequant(instr: Instruction, opcode: str):
    """``Multiply[AnyOrder]/Divide(Convert(x), Broadcast(scale))``."""
    if instr.opcode != opcode:
        return None
    a, b = instr.operands
    orders = ((a, b), (b, a)) if opcode == "multiply" else ((a, b),)
    for c, s in orders:
        if c.opcode == "convert" and s.opcode == "broadcast":
            return c.operands[0], s.operands[0]
    return None


def match_fp8_param(instr: Instruction) -> tuple[Fp8Param | None, str | None]:
    """``MatchFp8Param``: (param, None) on a match; (None, reason) when an
    FP8 value feeds the operand but not through a fusible dequantization;
    (None, None) when no FP8 value feeds it at all."""
    path = _find_f8_path(instr, set())
    if path is None:
        return None, None
    if len(path) == 1:
        return Fp8Param(path[0][0]), None
    if len(path) > 2 and (got := _dequant(path[2][0], "multiply")) is not None:
        param, n = Fp8Param(got[0], got[1], True), 2
    elif len(path) > 2 and (got := _dequant(path[2][0], "divide")) is not None:
        param, n = Fp8Param(got[0], got[1], False), 2
    elif len(path) > 1 and path[1][0].opcode == "convert":
        param, n = Fp8Param(path[1][0].operands[0]), 1
    else:
        second = path[1][0]
        return None, (f"{path[0][0].name} ({path[0][0].shape.element_type}) reaches the dot through "
                      f"{second.opcode} {second.name}, not convert(+ scale multiply/divide)")
    for op, idx in path[1 + n:]:
        ok = op.opcode in _COMMUTATIVE
        if op.opcode == "bitcast" and op.shape.element_type != op.operands[0].shape.element_type:
            ok = False
        if not ok:
            return None, (f"{op.opcode} {op.name} between the dequantization and the dot does not "
                          f"commute with dequantization")
        if op.opcode == "select":
            other = op.operands[1 if idx == 2 else 2]
            if not (other.opcode == "broadcast" and scalar_value(other.operands[0]) == 0):
                return None, f"select {op.name} needs a zero operand to commute with dequantization"
    param.commutative_ops = path[1 + n:]
    return param, None


# ---------------------------------------------------------------------------
# HandleDot (kFp8Only)
# ---------------------------------------------------------------------------


def handle_dot_fp8(v: "GemmRewriterVisitor", instr: Instruction, config: dict) -> None:
    lt_reason = v.lt_support_reason(instr, config)
    a, a_why = match_fp8_param(instr.operands[0])
    b, b_why = (None, None)
    if a is not None:
        b, b_why = match_fp8_param(instr.operands[1])
    if lt_reason is None and a is not None and b is not None:
        if v.gpu.is_rocm and v.gpu.toolkit < (6, 2, 0) and instr.shape.element_type not in ("f16", "f32"):
            instr = _f8_dot_output_to_f32(v, instr)
        if create_f8_custom_call(v, instr, config, a, b):
            return
    else:
        why = a_why or b_why
        if why is not None:
            side = "lhs" if a_why else "rhs"
            v.missed(instr, f"not an FP8 GEMM: {side} operand: {why}", operand=side)
        elif lt_reason is not None and (a is not None or b is not None):
            v.missed(instr, f"FP8 GEMM not rewritten: {lt_reason}")
    if is_f8(instr.operands[0]):
        _f8_dot_to_f16(v, instr)


def _f8_dot_output_to_f32(v: "GemmRewriterVisitor", instr: Instruction) -> Instruction:
    comp = instr.parent
    f32_dot = H.clone(comp, instr, instr.shape.with_element_type("f32"))
    conv = H.add(comp, "convert", instr.shape, [f32_dot])
    v.replace(instr, conv)
    return f32_dot


def _f8_dot_to_f16(v: "GemmRewriterVisitor", instr: Instruction) -> None:
    """``TurnF8DotIntoF16Dot``."""
    comp = instr.parent
    t = "bf16" if instr.shape.element_type == "bf16" else "f16"
    for i in (0, 1):
        op = instr.operands[i]
        conv = H.add(comp, "convert", op.shape.with_element_type(t), [op])
        instr.set_operand(i, conv)
    v.changed = True
    target = instr
    if is_f8(instr):
        f16_dot = H.clone(comp, instr, instr.shape.with_element_type("f16"))
        conv = H.add(comp, "convert", instr.shape, [f16_dot])
        v.replace(instr, conv)
        target = f16_dot
    v.missed(target, f"FP8 dot not rewritten into an FP8 custom call: computed in {t} instead")


# ---------------------------------------------------------------------------
# CreateF8CustomCall
# ---------------------------------------------------------------------------


def _transpose_matrix(comp, x: Instruction, contracting: int, batch: list[int]) -> Instruction:
    """``TransposeMatrix``: swap the contracting and non-contracting dims,
    keeping the layout."""
    s = x.shape
    perm = [-1] * s.rank
    for d in batch:
        perm[d] = d
    nc = [i for i in range(s.rank) if perm[i] == -1 and i != contracting][-1]
    if H.is_descending(s):
        perm[nc], perm[contracting] = contracting, nc
        return H.transpose(comp, x, perm, H.permute_dims_keep_layout(s, perm, s.layout))
    a0 = H.bitcast(comp, x, H.same_physical_descending(s))
    layout_perm = list(reversed(s.minor_to_major))
    inv = [0] * len(layout_perm)
    for i, p in enumerate(layout_perm):
        inv[p] = i
    perm = list(range(s.rank))
    perm[inv[contracting]], perm[inv[nc]] = perm[inv[nc]], perm[inv[contracting]]
    tshape = H.permute_dims_keep_layout(a0.shape, perm, a0.shape.layout)
    t = H.transpose(comp, a0, perm, tshape)
    final = H.permute_dims_keep_layout(tshape, inv, s.layout)
    return H.bitcast(comp, t, final)


def pad_shape_16(shape: Shape, batch: list[int]) -> Shape:
    dims = [d if i in batch else (d + 15) // 16 * 16 for i, d in enumerate(shape.dimensions)]
    return Shape.array(shape.element_type, dims, shape.layout)


def pad_to_multiple_of_16(comp, x: Instruction, batch: list[int]) -> Instruction:
    return H.pad_to(comp, x, pad_shape_16(x.shape, batch))


def _type_failure(v: "GemmRewriterVisitor", a: str, b: str) -> str | None:
    gpu = v.gpu
    if gpu.is_cuda:
        if a == b == "f8e5m2":
            return "one of the operands must be f8e4m3fn (got f8e5m2 x f8e5m2)"
        ok = ("f8e5m2", "f8e4m3fn")
        if a not in ok or b not in ok:
            return f"the input types must be f8e5m2 or f8e4m3fn, but got {a} and {b}"
    if gpu.is_rocm:
        if gpu.has_ocp_fp8_support:
            if a == b == "f8e5m2":
                return f"for {gpu.gfx}, one of the input types must be f8e4m3fn, but got {a} and {b}"
            if a not in ("f8e5m2", "f8e4m3fn") or b not in ("f8e5m2", "f8e4m3fn"):
                return f"for {gpu.gfx}, the input types must be f8e5m2 or f8e4m3fn, but got {a} and {b}"
        if gpu.has_nanoo_fp8_support:
            if a == b == "f8e5m2fnuz":
                return f"for {gpu.gfx}, one of the input types must be f8e4m3fnuz, but got {a} and {b}"
            if a not in ("f8e5m2fnuz", "f8e4m3fnuz") or b not in ("f8e5m2fnuz", "f8e4m3fnuz"):
                return (f"for {gpu.gfx}, the input types must be f8e5m2fnuz or f8e4m3fnuz, "
                        f"but got {a} and {b}")
    return None


def _output_type_failure(v: "GemmRewriterVisitor", d: str) -> str | None:
    gpu = v.gpu
    supported = {"bf16", "f16", "f32"}
    if gpu.is_cuda:
        supported |= {"f8e4m3fn", "f8e5m2"}
        if d not in supported:
            return f"output type must be f8e4m3fn, f8e5m2, bf16, f16 or f32, but got {d}"
    if gpu.is_rocm:
        if gpu.toolkit < (6, 2, 0) and d not in supported:
            return f"for ROCm < 6.2, output type must be bf16, f16 or f32, but got {d}"
        if gpu.has_ocp_fp8_support:
            supported |= {"f8e4m3fn", "f8e5m2"}
            if d not in supported:
                return f"for {gpu.gfx} output type must be f8e4m3fn, f8e5m2, bf16, f16 or f32, but got {d}"
        if gpu.has_nanoo_fp8_support:
            supported |= {"f8e4m3fnuz", "f8e5m2fnuz"}
            if d not in supported:
                return f"for {gpu.gfx} output type must be f8e4m3fnuz, f8e5m2fnuz, bf16, f16 or f32, but got {d}"
    return None


def create_f8_custom_call(v: "GemmRewriterVisitor", instr: Instruction, config: dict,
                          a: Fp8Param, b: Fp8Param) -> bool:
    gpu = v.gpu
    comp = instr.parent

    def fail(message: str, **data) -> bool:
        v.missed(instr, f"FP8 GEMM not rewritten: {message}", **data)
        return False

    if gpu.is_cuda:
        if not gpu.cuda_at_least(8, 9):
            return fail(f"FP8 custom calls require Ada, Hopper, or later architectures "
                        f"(target is sm_{gpu.cuda[0]}{gpu.cuda[1]})", compute_capability=list(gpu.cuda))
        if gpu.toolkit < (12, 0, 0):
            return fail("FP8 custom calls require CUDA 12.0 or newer", toolkit=list(gpu.toolkit))
    if gpu.is_rocm:
        if not gpu.has_fp8_support:
            return fail(f"FP8 custom calls require MI300 or later ({gpu.gfx})")
        if gpu.toolkit < (6, 0, 0):
            return fail("FP8 custom calls require ROCm 6.0 or newer", toolkit=list(gpu.toolkit))
    at, bt = a.fp8_input.shape.element_type, b.fp8_input.shape.element_type
    why = _type_failure(v, at, bt)
    if why:
        return fail(why, a_type=at, b_type=bt)
    dims = DotDims.from_json(config["dot_dimension_numbers"])
    nb = len(dims.lhs_batch)
    # Scales (created before the remaining checks, as XLA does).
    one_holder: list[Instruction] = []

    def one() -> Instruction:
        if not one_holder:
            one_holder.append(H.constant(comp, "f32", 1.0))
        return one_holder[0]

    scales: list[Instruction] = []
    for p in (a, b):
        if p.scale is None:
            scales.append(one())
            continue
        if not p.scale.shape.is_scalar:
            return fail(f"scale is not a scalar: {p.scale.name} has shape {p.scale.shape}",
                        scale=p.scale.name, scale_shape=str(p.scale.shape))
        s = p.scale
        if not p.mult_scale:
            s = H.add(comp, "divide", p.scale.shape, [one(), p.scale])
        if s.shape.element_type != "f32":
            s = H.add(comp, "convert", Shape.array("f32", ()), [s])
        scales.append(s)
    why = _output_type_failure(v, instr.shape.element_type)
    if why:
        return fail(why, d_type=instr.shape.element_type)
    if len(dims.lhs_contracting) != 1 or len(dims.rhs_contracting) != 1:
        return fail("A and B must have one contracting dimension")
    for p in (a, b):
        inp = p.commutative_ops[-1][0] if p.commutative_ops else p.fp8_input
        if inp.shape.rank != nb + 2:
            return fail("inputs must have exactly one contracting and one non-contracting dimension")
    a_in = _shift_ops(comp, a.fp8_input, a.commutative_ops)
    b_in = _shift_ops(comp, b.fp8_input, b.commutative_ops)
    a_nc = non_contracting_dims(a_in.shape.rank, dims.lhs_batch, dims.lhs_contracting)
    b_nc = non_contracting_dims(b_in.shape.rank, dims.rhs_batch, dims.rhs_contracting)
    if len(a_nc) != 1 or len(b_nc) != 1:
        return fail("A and B must have one non-contracting dimension")
    lhs_layout, rhs_layout = operand_layouts(instr.operands[0].shape, instr.operands[1].shape, dims)
    if lhs_layout is None or rhs_layout is None:
        return fail("operand layouts are not supported by cuBLAS-LT (batch dimension is minor)")
    new_dims = DotDims(list(dims.lhs_batch), list(dims.lhs_contracting), list(dims.rhs_batch),
                       list(dims.rhs_contracting))
    if not gpu.is_blackwell:
        if lhs_layout.order == "col":
            new_dims.lhs_contracting[0] = a_nc[0]
            a_in = _transpose_matrix(comp, a_in, dims.lhs_contracting[0], dims.lhs_batch)
        if rhs_layout.order == "row":
            new_dims.rhs_contracting[0] = b_nc[0]
            b_in = _transpose_matrix(comp, b_in, dims.rhs_contracting[0], dims.rhs_batch)
    a_in = pad_to_multiple_of_16(comp, a_in, dims.lhs_batch)
    b_in = pad_to_multiple_of_16(comp, b_in, dims.rhs_batch)
    out_shape = pad_shape_16(instr.shape, list(range(nb)))
    config["dot_dimension_numbers"] = new_dims.to_json()
    config["scale_mode"] = 1
    shape = v.pinned(Shape.array(instr.shape.element_type, out_shape.dimensions, instr.shape.layout))
    call = H.custom_call(comp, shape, [a_in, b_in, scales[0], scales[1]], CUBLAS_LT_MATMUL_F8,
                         gpu_backend_config_json(config))
    H.set_gemm_name(call)
    v.owner.origin[call] = instr.name
    result = call
    if out_shape.dimensions != instr.shape.dimensions:
        n = instr.shape.rank
        result = H.slice_(comp, call, instr.shape.with_layout(call.shape.layout), [0] * n,
                          list(instr.shape.dimensions), [1] * n)
    v.replace(instr, result)
    if result is call:
        v.fix_pinned_users(call, instr.shape)
    v.applied(call, f"rewrote {instr.name} into {CUBLAS_LT_MATMUL_F8} "
                    f"({at} x {bt} -> {instr.shape.element_type})",
              a_scale=scales[0].name, b_scale=scales[1].name, derived_from=instr.name)
    return True


def _shift_ops(comp, x: Instruction, ops: list[tuple[Instruction, int]]) -> Instruction:
    """Apply the ops that commute with dequantization to the raw FP8 value."""
    for op, idx in ops:
        operands = [x]
        if op.opcode == "dynamic-slice":
            operands.extend(op.operands[1:])
        if op.opcode == "pad":
            operands.append(H.add(comp, "convert", op.operands[1].shape.with_element_type(x.shape.element_type),
                                  [op.operands[1]]))
        if op.opcode == "select":
            operands.insert(0, op.operands[0])
            other_idx = 1 if idx == 2 else 2
            conv = H.add(comp, "convert", op.operands[other_idx].shape.with_element_type(x.shape.element_type),
                         [op.operands[other_idx]])
            operands.insert(other_idx, conv)
        shape = Shape.array(x.shape.element_type, op.shape.dimensions, op.shape.layout)
        x = H.clone(comp, op, shape, operands)
    return x
