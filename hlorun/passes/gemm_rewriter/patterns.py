"""Small pattern predicates in the spirit of XLA's ``pattern_matcher``
(``m::Broadcast(m::ConstantScalar(v))``, ``MultiplyAnyOrder`` ...)."""

from __future__ import annotations

import math
from typing import Iterable

import numpy as np

from ...ir.module import Instruction
from .config import CUBLAS_GEMM, CUBLAS_LT_GROUPED, CUBLAS_LT_MATMUL, CUBLAS_LT_MATMUL_F8


def scalar_value(instr: Instruction) -> complex | float | None:
    """Value of a rank-0 constant (``m::ConstantScalar``), else None."""
    if instr.opcode != "constant" or not instr.shape.is_array or instr.shape.rank != 0:
        return None
    lit = instr.literal
    if lit is None:
        return None
    try:
        v = np.asarray(lit.value)
    except ValueError:
        return None
    if v.dtype.kind == "c":
        return complex(v.item())
    if v.dtype.kind == "b":
        return float(bool(v.item()))
    return float(v.astype(np.float64).item())


def is_const_scalar(instr: Instruction, value: float | None = None) -> bool:
    v = scalar_value(instr)
    if v is None:
        return False
    return value is None or v == value


def bcast_const_scalar(instr: Instruction, value: float | None = None) -> Instruction | None:
    """``m::Broadcast(m::ConstantScalar(value))``: the constant, or None."""
    if instr.opcode == "broadcast" and is_const_scalar(instr.operands[0], value):
        return instr.operands[0]
    return None


_EPS = {"f16": 2.0 ** -10, "bf16": 2.0 ** -7, "f32": 2.0 ** -23, "f64": 2.0 ** -52}


def bcast_const_near(instr: Instruction, expected: float) -> bool:
    """``BcastConstScalarNear``: within 128 ulp-epsilons (relative)."""
    if instr.opcode != "broadcast":
        return False
    c = instr.operands[0]
    v = scalar_value(c)
    eps = _EPS.get(c.shape.element_type)
    if v is None or eps is None or isinstance(v, complex):
        return False
    return abs(v - expected) < abs(v + expected) * 128 * eps


def is_custom_call(instr: Instruction, targets: Iterable[str]) -> bool:
    return instr.opcode == "custom-call" and instr.custom_call_target in tuple(targets)


LT = (CUBLAS_LT_MATMUL,)
LT_F8 = (CUBLAS_LT_MATMUL_F8,)
LT_MAYBE_F8 = (CUBLAS_LT_MATMUL, CUBLAS_LT_MATMUL_F8)
LT_MAYBE_F8_OR_GROUPED = (CUBLAS_LT_MATMUL, CUBLAS_LT_MATMUL_F8, CUBLAS_LT_GROUPED)
ANY_GEMM = (CUBLAS_GEMM, CUBLAS_LT_MATMUL, CUBLAS_LT_MATMUL_F8)


SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
