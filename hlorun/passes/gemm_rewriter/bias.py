"""Bias fusion: ``add(gemm, broadcast(vector))`` -> epilogue BIAS and
``add(gemm, matrix)`` -> ``beta = 1`` with the matrix as operand 2 (in
place when the bias buffer may be overwritten).  XLA's ``HandleAdd``,
``FuseVectorBiasAdd`` and ``FuseMatrixBiasAdd``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...ir.attrs import format_output_to_operand_aliasing
from ...ir.module import Instruction
from ...ir.shape import compatible
from . import hlo as H
from .config import CUBLAS_GEMM, CUBLAS_LT_MATMUL_F8, read_gemm_config, write_gemm_config
from .epilogues import constant_fold_bias, lt_targets, supports_epilogue_fusion
from .patterns import LT, LT_MAYBE_F8, is_custom_call
from .types import lt_types_reason

if TYPE_CHECKING:  # pragma: no cover
    from .rewriter import GemmRewriterVisitor


def _is_gemm(x: Instruction, targets) -> bool:
    return is_custom_call(x, targets)


def _opt_bitcast_slice(x: Instruction, targets, slice_one_user: bool):
    """``OptionalBitcast(OptionalSlice(gemm.WithOneUser())[.WithOneUser()])``
    with the whole thing single-use: (gemm, slice, bitcast) or None."""
    if x.user_count != 1:
        return None

    def inner(y: Instruction):
        if y.opcode == "slice" and _is_gemm(y.operands[0], targets) and y.operands[0].user_count == 1:
            if slice_one_user and y.user_count != 1:
                return None
            return y.operands[0], y
        if _is_gemm(y, targets) and y.user_count == 1:
            return y, None
        return None

    if x.opcode == "bitcast":
        got = inner(x.operands[0])
        if got is not None:
            return got[0], got[1], x
    got = inner(x)
    if got is not None:
        return got[0], got[1], None
    return None


def handle_add(v: "GemmRewriterVisitor", instr: Instruction) -> None:
    """The visitor's HandleAdd: bias fusion (when the options allow it)."""
    if v.opts.bias:
        handle_add_bias(v, instr)


def handle_add_bias(v: "GemmRewriterVisitor", instr: Instruction) -> None:
    comp = instr.parent
    targets = LT_MAYBE_F8
    # 1. Vector bias: add(bitcast?(slice?(gemm)), broadcast(convert?(v))).
    for x, bcast in ((instr.operands[0], instr.operands[1]), (instr.operands[1], instr.operands[0])):
        if bcast.opcode != "broadcast":
            continue
        got = _opt_bitcast_slice(x, targets, slice_one_user=True)
        if got is None:
            continue
        gemm, sl, bc = got
        conv = bcast.operands[0] if bcast.operands[0].opcode == "convert" else None
        if fuse_vector_bias(v, instr, bcast, gemm, sl, conv, bc):
            return
        break
    # 2. add(bitcast(gemm), broadcast(b)) -> bitcast(add(gemm, bitcast(broadcast(b)))).
    for x, bcast in ((instr.operands[0], instr.operands[1]), (instr.operands[1], instr.operands[0])):
        if (x.opcode == "bitcast" and x.user_count == 1 and _is_gemm(x.operands[0], targets)
                and x.operands[0].user_count == 1 and bcast.opcode == "broadcast" and bcast.user_count == 1):
            gemm = x.operands[0]
            new_add = H.binary(comp, "add", gemm, H.bitcast(comp, bcast, gemm.shape))
            v.replace(instr, H.bitcast(comp, new_add, instr.shape))
            instr = new_add
            break
    # 3. add(bitcast(gemm), bias) -> bitcast(add(gemm, bitcast(bias))).
    for x, bias in ((instr.operands[0], instr.operands[1]), (instr.operands[1], instr.operands[0])):
        if (x.opcode == "bitcast" and x.user_count == 1 and bias.opcode != "broadcast"
                and _is_gemm(x.operands[0], lt_targets(v, LT_MAYBE_F8)) and x.operands[0].user_count == 1):
            gemm = x.operands[0]
            md = bias.attrs.get("metadata")
            nb = H.bitcast(comp, bias, gemm.shape, metadata=md)
            new_add = H.binary(comp, "add", gemm, nb, metadata=md)
            v.replace(instr, H.bitcast(comp, new_add, instr.shape))
            instr = new_add
            break
    # 4. add(gemm | convert(gemm), bias): matrix bias, cuBLAS-LT (or legacy).
    plain = lt_targets(v, LT)
    for x, bias in ((instr.operands[0], instr.operands[1]), (instr.operands[1], instr.operands[0])):
        if bias.opcode == "broadcast":
            continue
        gemm = None
        if _is_gemm(x, plain) and x.user_count == 1:
            gemm = x
        elif (x.opcode == "convert" and x.user_count == 1 and _is_gemm(x.operands[0], plain)
              and x.operands[0].user_count == 1):
            gemm = x.operands[0]
        if gemm is None:
            continue
        cfg = read_gemm_config(gemm)
        a, b = (o.shape.element_type for o in gemm.operands[:2])
        why = lt_types_reason(v.gpu, a, b, instr.shape.element_type, gemm.shape.element_type,
                              cfg["precision_config"].get("algorithm", "ALG_UNSET"),
                              cfg["precision_config"].get("operand_precision", []))
        users = instr.users
        no_consumer = (instr.shape.element_type == gemm.shape.element_type or not users
                       or (len(users) == 1 and users[0].opcode == "tuple" and not users[0].has_users()))
        if why is None and no_consumer:
            fuse_matrix_bias(v, instr, bias, gemm)
            return
        if why is not None:
            v.missed(instr, f"matrix bias not fused into {v.label(gemm)}: {why}")
        break
    # 5. add(bitcast?(slice?(gemm)), bias): matrix bias.
    for x, bias in ((instr.operands[0], instr.operands[1]), (instr.operands[1], instr.operands[0])):
        if bias.opcode == "broadcast":
            continue
        got = _opt_bitcast_slice(x, lt_targets(v, LT_MAYBE_F8), slice_one_user=False)
        if got is None:
            continue
        gemm, sl, bc = got
        if bias.shape.element_type.startswith("f8"):
            v.missed(instr, f"matrix bias not fused: an FP8 bias ({bias.shape.element_type}) is not supported")
            return
        fuse_matrix_bias(v, instr, bias, gemm, bc, sl)
        return


def fuse_vector_bias(v: "GemmRewriterVisitor", instr: Instruction, bcast: Instruction, gemm: Instruction,
                     sl: Instruction | None, conv: Instruction | None, bc: Instruction | None) -> bool:
    comp = instr.parent
    if bc is None and not compatible(bcast.shape, (sl or gemm).shape):
        return False
    t = gemm.shape.element_type
    if not supports_epilogue_fusion(v, t):
        v.missed(instr, f"vector bias not fused: epilogue fusion does not support {t} output")
        return False
    bias = bcast.operands[0]
    cfg = read_gemm_config(gemm)
    dims = cfg["dot_dimension_numbers"]
    num_col_dims = (gemm.operands[1].shape.rank - len(dims.get("rhs_batch_dimensions", []))
                    - len(dims.get("rhs_contracting_dimensions", [])))
    if gemm.user_count != 1 or cfg["epilogue"] != "DEFAULT":
        v.missed(instr, f"vector bias not fused into {v.label(gemm)}: "
                 + (f"epilogue is already {cfg['epilogue']}" if cfg["epilogue"] != "DEFAULT"
                    else f"it has {gemm.user_count} users"))
        return False
    if num_col_dims > 1 or bias.shape.rank != num_col_dims:
        v.missed(instr, f"vector bias not fused: bias rank {bias.shape.rank} does not match the "
                        f"{num_col_dims} output column dimension(s)")
        return False
    out = (sl or gemm).shape
    if num_col_dims == 1 and bias.shape.dimensions[0] != out.dimensions[out.minor_to_major[0]]:
        v.missed(instr, f"vector bias not fused: bias length {bias.shape.dimensions[0]} is not the "
                        f"minor-most output dimension ({out.dimensions[out.minor_to_major[0]]})",
                 bias_length=bias.shape.dimensions[0])
        return False
    is_f8 = gemm.custom_call_target == CUBLAS_LT_MATMUL_F8
    if is_f8 and cfg["beta"] != 0:
        return True  # XLA keeps only the matrix bias here (and leaves the add).
    if is_f8 and bias.shape.element_type == "f32":
        if conv is None:
            v.missed(instr, "vector bias not fused: cuBLAS-LT does not take an f32 bias on FP8 GEMMs")
            return False
        src = conv.operands[0].shape.element_type
        ok = ((src == "bf16" and t in ("f8e4m3fn", "f8e5m2", "f32", "bf16"))
              or (src == "f16" and t in ("f16", "f8e4m3fn", "f8e5m2")))
        if not ok:
            v.missed(instr, f"vector bias not fused: {src} bias is not supported with {t} FP8 output")
            return False
        bias = conv.operands[0]
    if is_f8 and bc is not None:
        from .fp8 import pad_to_multiple_of_16
        bias = pad_to_multiple_of_16(comp, bias, [int(d) for d in dims.get("rhs_batch_dimensions", [])])
    cfg["epilogue"] = "BIAS"
    result = v.clone(comp, gemm, gemm.shape, list(gemm.operands) + [bias])
    write_gemm_config(result, cfg)
    H.set_gemm_name(result)
    fused = result
    if sl is not None:
        result = H.clone(comp, sl, sl.shape, [result])
    if bc is not None:
        result = H.clone(comp, bc, bc.shape, [result])
    v.replace(instr, result)
    v.applied(fused, f"fused vector bias {bias.name} into {v.label(fused)} (epilogue BIAS)")
    return True


def _can_overwrite_bias(bias: Instruction) -> bool:
    if bias.user_count > 1:
        return False
    if bias.opcode != "parameter":
        return True
    comp = bias.parent
    if comp is None or not comp.is_entry:
        return False
    module = comp.module
    return any(p == bias.parameter_number and tuple(pi) == () for _, p, pi, _ in module.input_output_alias)


def fuse_matrix_bias(v: "GemmRewriterVisitor", instr: Instruction, bias: Instruction, gemm: Instruction,
                     bc: Instruction | None = None, sl: Instruction | None = None) -> None:
    ref = (bc or sl or gemm).shape
    if (bias.shape.dimensions != ref.dimensions or bias.shape.minor_to_major != ref.minor_to_major):
        v.missed(instr, f"matrix bias not fused into {v.label(gemm)}: bias shape {bias.shape} differs from "
                        f"the GEMM output {ref}")
        return
    if gemm.shape.element_type == "s32":
        v.missed(instr, "matrix bias not fused: s32 GEMMs only support fixed alpha/beta")
        return
    if sl is not None:
        starts, strides = [], []
        from ...ir.attrs import parse_slice
        for s, _l, st in parse_slice(sl.attrs["slice"]):
            starts.append(s)
            strides.append(st)
        if any(starts) or any(st != 1 for st in strides):
            v.missed(instr, "matrix bias not fused: the slice does not start at 0 with stride 1")
            return
    can_overwrite = _can_overwrite_bias(bias)
    want = gemm.custom_call_target != CUBLAS_GEMM or can_overwrite
    cfg = read_gemm_config(gemm)
    if cfg["beta"] != 0 or not want or gemm.user_count != 1 or cfg["epilogue"] not in ("DEFAULT", "BIAS"):
        why = ("it already has a matrix bias" if cfg["beta"] != 0 else
               "legacy cuBLAS would overwrite a bias buffer that is still needed" if not want else
               f"it has {gemm.user_count} users" if gemm.user_count != 1 else
               f"epilogue {cfg['epilogue']} does not commute with a matrix bias")
        v.missed(instr, f"matrix bias not fused into {v.label(gemm)}: {why}")
        return
    cfg["beta"] = 1.0
    comp = instr.parent
    operands = list(gemm.operands)
    folded = constant_fold_bias(bias)
    if bc is not None:
        folded = H.bitcast(comp, folded, (sl or gemm).shape)
    folded = H.pad_to(comp, folded, gemm.shape)
    operands.insert(2, folded)
    fused = v.clone(comp, gemm, gemm.shape.with_element_type(bias.shape.element_type), operands)
    write_gemm_config(fused, cfg)
    if can_overwrite:
        fused.attrs.pop("output_to_operand_aliasing", None)
        attrs = dict(fused.attrs)
        fused.attrs.clear()
        for k, val in attrs.items():
            fused.attrs[k] = val
            if k == "custom_call_target":
                fused.attrs["output_to_operand_aliasing"] = format_output_to_operand_aliasing([((), 2, ())])
    H.set_gemm_name(fused)
    result = fused
    if sl is not None:
        result = H.clone(comp, sl, sl.shape, [result])
    if bc is not None:
        result = H.clone(comp, bc, bc.shape, [result])
    v.replace(instr, result)
    v.applied(fused, f"fused matrix bias {bias.name} into {v.label(fused)} (beta=1"
                     + (", in place" if can_overwrite else "") + ")")
