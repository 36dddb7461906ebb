"""Arguments for an evaluation: seeded random values with ranges that suit
each element type, or ``.npy`` files.

Floats are uniform in [-1, 1) (rounded to the type); signed integers in
[-8, 8], unsigned in [0, 8], pred fair coin flips.  Integer parameters used
as indices (gather/scatter indices, dynamic-slice starts; followed through
converts, reshapes, fusion and call parameters) are drawn from [0, bound]
so every slice is in bounds, like XLA's ``MakeFakeArguments``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.module import Computation, Instruction, Module
from ..ir.shape import Shape, is_complex, is_floating, is_integral, is_signed_integral
from .dtypes import dtype_of, int_range
from .registry import EvaluationError

_PASS_THROUGH = frozenset({"convert", "bitcast", "reshape", "broadcast", "copy", "transpose",
                           "slice", "concatenate", "bitcast-convert", "get-tuple-element",
                           "tuple", "clamp", "select"})


def _index_bound(user: Instruction, operand_index: int) -> int | None:
    """Largest safe value when the operand feeds ``user`` as an index."""
    op = user.opcode
    if op == "dynamic-slice" and operand_index >= 1:
        sizes = user.int_list("dynamic_slice_sizes")
        dims = user.operands[0].shape.dimensions
        d = operand_index - 1
        if d < len(dims):
            return max(dims[d] - sizes[d], 0)
        return min((a - b for a, b in zip(dims, sizes)), default=0)
    if op == "dynamic-update-slice" and operand_index >= 2:
        dims = user.operands[0].shape.dimensions
        upd = user.operands[1].shape.dimensions
        d = operand_index - 2
        return max(dims[d] - upd[d], 0) if d < len(dims) else 0
    if op == "gather" and operand_index == 1:
        dims = user.operands[0].shape.dimensions
        sizes = user.int_list("slice_sizes")
        smap = user.int_list("start_index_map")
        return min((max(dims[d] - sizes[d], 0) for d in smap), default=0)
    if op == "scatter":
        n = (len(user.operands) - 1) // 2
        if operand_index == n:
            dims = user.operands[0].shape.dimensions
            smap = user.int_list("scatter_dims_to_operand_dims")
            return min((max(dims[d] - 1, 0) for d in smap), default=0)
    return None


def index_bounds(module: Module) -> dict[int, int]:
    """Entry parameter number -> inclusive upper bound for index parameters."""
    out: dict[int, int] = {}
    entry = module.entry
    if entry is None:
        return out
    for p in entry.parameters:
        if p is None or not p.shape.is_array or not is_integral(p.shape.element_type):
            continue
        bound = _follow(p, 0, set())
        if bound is not None:
            out[p.parameter_number] = bound
    return out


def _follow(instr: Instruction, depth: int, seen: set) -> int | None:
    if depth > 12 or instr in seen:
        return None
    seen.add(instr)
    best: int | None = None
    for user in instr.users:
        for i, o in enumerate(user.operands):
            if o is not instr:
                continue
            b = _index_bound(user, i)
            if b is None and user.opcode in _PASS_THROUGH:
                b = _follow(user, depth + 1, seen)
            elif b is None and user.opcode in ("fusion", "call"):
                callee = user.fused_computation if user.opcode == "fusion" else user.to_apply
                if isinstance(callee, Computation) and i < len(callee.parameters) \
                        and callee.parameters[i] is not None:
                    b = _follow(callee.parameters[i], depth + 1, seen)
            if b is not None:
                best = b if best is None else min(best, b)
    return best


def random_value(shape: Shape, rng: np.random.Generator, bound: int | None = None) -> Any:
    if shape.is_tuple:
        return tuple(random_value(s, rng) for s in shape.tuple_shapes)
    if not shape.is_array:
        return None
    if shape.is_dynamic:
        raise EvaluationError(f"dynamic shape {shape}: dynamic dimensions are not supported by the evaluator")
    t = shape.element_type
    dims = shape.dimensions
    dt = dtype_of(t)
    if t == "pred":
        return np.asarray(rng.random(dims) < 0.5)
    if is_floating(t):  # drawn in f32 (not f64): big parameters stay affordable
        return np.asarray(rng.random(dims, dtype=np.float32) * np.float32(2) - np.float32(1)).astype(dt)
    if is_complex(t):
        return np.asarray(rng.uniform(-1, 1, dims) + 1j * rng.uniform(-1, 1, dims)).astype(dt)
    if is_integral(t):
        lo, hi = int_range(t)
        if bound is not None:
            lo, hi = 0, min(bound, hi)
        elif is_signed_integral(t):
            lo, hi = max(lo, -8), min(hi, 8)
        else:
            lo, hi = 0, min(hi, 8)
        return np.asarray(rng.integers(lo, hi + 1, size=dims, dtype=np.int64)).astype(dt)
    raise EvaluationError(f"cannot make random values of type {t}")


def random_inputs(module: Module, seed: int = 0) -> list[Any]:
    """One seeded random value per entry parameter."""
    entry = module.entry
    if entry is None:
        raise EvaluationError("module has no entry computation")
    rng = np.random.default_rng(seed)
    bounds = index_bounds(module)
    out = []
    for i, p in enumerate(entry.parameters):
        if p is None:
            raise EvaluationError(f"entry computation has no parameter {i}")
        out.append(random_value(p.shape, rng, bounds.get(i)))
    return out


def coerce_input(value: np.ndarray, shape: Shape, what: str) -> np.ndarray:
    """An array loaded from a file, checked against the parameter shape;
    values of another numeric dtype are converted (XLA convert rules)."""
    if shape.is_tuple or not shape.is_array:
        raise EvaluationError(f"{what}: tuple and token parameters cannot be read from .npy files")
    value = np.asarray(value)
    if tuple(value.shape) != tuple(shape.dimensions):
        raise EvaluationError(f"{what}: expected dimensions {list(shape.dimensions)}, the file has "
                              f"{list(value.shape)}")
    dt = dtype_of(shape.element_type)
    if value.dtype == dt:
        return value
    if value.dtype.kind not in "biufcV":
        raise EvaluationError(f"{what}: cannot use a {value.dtype} array for {shape.element_type}")
    from .dtypes import convert
    src = {"b": "pred", "f": "f64", "c": "c128"}.get(value.dtype.kind)
    if value.dtype.kind in "iu":
        src = ("s" if value.dtype.kind == "i" else "u") + str(value.dtype.itemsize * 8)
    if src is None:
        raise EvaluationError(f"{what}: expected {dt.name}, the file has {value.dtype}")
    return convert(value.astype({"f64": np.float64, "c128": np.complex128}.get(src, value.dtype)),
                   src, shape.element_type)
