"""Arguments for an evaluation: seeded random values with ranges that suit
each element type and each parameter's use, or ``.npy`` files.

The default scheme (``describe_inputs`` prints it per parameter):

* floats are uniform in [-1, 1) (rounded to the type), except *weights*:
  a floating parameter that reaches a dot as its right-hand operand or a
  convolution as its kernel (through converts, reshapes, transposes,
  bitcasts, fusion and call parameters) is uniform in
  [-sqrt(3/fan_in), sqrt(3/fan_in)) as LeCun/Glorot initializers make them
  (fan_in: the contracting size of that dot, input features times window
  size of that convolution), so activations of a deep network keep unit
  scale instead of growing by sqrt(fan_in) per layer and overflowing bf16;
* integer parameters used as indices (gather/scatter indices, dynamic-slice
  starts) are drawn from [0, bound] so every slice is in bounds, like XLA's
  ``MakeFakeArguments``; token ids compared with an ``iota`` (one-hot
  encoding) are below the iota's size (the vocabulary);
* other signed integers are in [-8, 8], unsigned in [0, 8], pred fair coin
  flips.
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


def _iota_size(instr: Instruction, depth: int = 0) -> int | None:
    """Size of the iota dimension ``instr`` (through broadcasts, reshapes,
    converts) enumerates, or None if it is no iota."""
    if depth > 6:
        return None
    if instr.opcode == "iota":
        d = instr.int_attr("iota_dimension", 0)
        dims = instr.shape.dimensions
        return dims[d] if d < len(dims) else None
    if instr.opcode in ("broadcast", "reshape", "convert", "bitcast", "copy", "transpose") \
            and instr.operands:
        return _iota_size(instr.operands[0], depth + 1)
    return None


def _index_bound(user: Instruction, operand_index: int) -> int | None:
    """Largest safe value when the operand feeds ``user`` as an index."""
    op = user.opcode
    if op == "compare" and len(user.operands) == 2:
        n = _iota_size(user.operands[1 - operand_index])
        if n:  # one-hot: ids == iota(vocabulary)
            return n - 1
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


def _tuple_slot(tup: Instruction, i: int) -> list[Instruction]:
    """Where element ``i`` of tuple ``tup`` is read: get-tuple-elements of
    it, and of the parameter of a while loop (body and condition) or a
    called computation it is passed to."""
    out: list[Instruction] = []
    for user in tup.users:
        if user.opcode == "get-tuple-element" and user.tuple_index == i:
            out.append(user)
        elif user.opcode == "while":
            for comp in user.called_computations():
                p = comp.parameters[0] if comp.parameters else None
                if p is not None:
                    out.extend(u for u in p.users
                               if u.opcode == "get-tuple-element" and u.tuple_index == i)
    return out


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
            if b is None and user.opcode == "tuple":
                bs = [x for x in (_follow(g, depth + 1, seen) for g in _tuple_slot(user, i))
                      if x is not None]
                b = min(bs) if bs else None
            elif b is None and user.opcode in _PASS_THROUGH:
                b = _follow(user, depth + 1, seen)
            elif b is None and user.opcode in ("fusion", "call"):
                callee = user.fused_computation if user.opcode == "fusion" else user.to_apply
                if isinstance(callee, Computation) and i < len(callee.parameters) \
                        and callee.parameters[i] is not None:
                    b = _follow(callee.parameters[i], depth + 1, seen)
            if b is not None:
                best = b if best is None else min(best, b)
    return best


#: ops a weight passes through on its way to a dot or convolution
_WEIGHT_THROUGH = frozenset({"convert", "bitcast", "reshape", "copy", "transpose",
                             "get-tuple-element", "broadcast", "bitcast-convert"})


def _fan_in(user: Instruction, operand_index: int) -> int | None:
    if user.opcode == "dot" and operand_index == 1:
        dims = user.operands[1].shape.dimensions
        n = 1
        for d in user.int_list("rhs_contracting_dims"):
            n *= dims[d] if d < len(dims) else 1
        return n
    if user.opcode == "convolution" and operand_index == 1 and "dim_labels" in user.attrs:
        from ..ir.attrs import parse_dim_labels
        try:
            dn = parse_dim_labels(user.attrs["dim_labels"])
        except ValueError:
            return None
        dims = user.operands[1].shape.dimensions
        n = dims[dn.kernel_input_feature]
        for d in dn.kernel_spatial:
            n *= dims[d]
        return n
    return None


def _follow_weight(instr: Instruction, depth: int, seen: set) -> tuple[int, str] | None:
    """(fan-in, the dot/convolution) when ``instr`` is a weight, else None."""
    if depth > 12 or instr in seen:
        return None
    seen.add(instr)
    for user in instr.users:
        for i, o in enumerate(user.operands):
            if o is not instr:
                continue
            f = _fan_in(user, i)
            if f:
                return f, user.name
            if user.opcode == "tuple":
                got = next((g for g in (_follow_weight(x, depth + 1, seen)
                                        for x in _tuple_slot(user, i)) if g), None)
            elif user.opcode in _WEIGHT_THROUGH:
                got = _follow_weight(user, depth + 1, seen)
            elif user.opcode in ("fusion", "call"):
                callee = user.fused_computation if user.opcode == "fusion" else user.to_apply
                got = None
                if isinstance(callee, Computation) and i < len(callee.parameters) \
                        and callee.parameters[i] is not None:
                    got = _follow_weight(callee.parameters[i], depth + 1, seen)
            else:
                got = None
            if got:
                return got
    return None


def weight_fan_ins(module: Module) -> dict[int, tuple[int, str]]:
    """Entry parameter number -> (fan-in, dot/convolution name) for weights."""
    out: dict[int, tuple[int, str]] = {}
    entry = module.entry
    if entry is None:
        return out
    for p in entry.parameters:
        if p is None or not p.shape.is_array or not is_floating(p.shape.element_type):
            continue
        got = _follow_weight(p, 0, set())
        if got:
            out[p.parameter_number] = got
    return out


def random_value(shape: Shape, rng: np.random.Generator, bound: int | None = None,
                 scale: float = 1.0) -> Any:
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
        x = rng.random(dims, dtype=np.float32) * np.float32(2) - np.float32(1)
        if scale != 1.0:
            x *= np.float32(scale)
        return np.asarray(x).astype(dt)
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
    weights = weight_fan_ins(module)
    out = []
    for i, p in enumerate(entry.parameters):
        if p is None:
            raise EvaluationError(f"entry computation has no parameter {i}")
        scale = (3.0 / weights[i][0]) ** 0.5 if i in weights else 1.0
        out.append(random_value(p.shape, rng, bounds.get(i), min(scale, 1.0)))
    return out


def describe_inputs(module: Module) -> list[str]:
    """One line per entry parameter: the range its default input comes from
    and why (the rules of this module's docstring)."""
    entry = module.entry
    if entry is None:
        return []
    bounds = index_bounds(module)
    weights = weight_fan_ins(module)
    out = []
    for i, p in enumerate(entry.parameters):
        if p is None:
            continue
        s = p.shape
        head = f"{p.name} {s.to_string(False)}: "
        if s.is_tuple or not s.is_array:
            out.append(head + "per element as below")
            continue
        t = s.element_type
        if t == "pred":
            out.append(head + "random true/false")
        elif is_floating(t) or is_complex(t):
            if i in weights:
                fan, user = weights[i]
                lim = min((3.0 / fan) ** 0.5, 1.0)
                out.append(head + f"uniform [-{lim:.3g}, {lim:.3g}) (weight: fan-in {fan} of {user})")
            else:
                out.append(head + "uniform [-1, 1)")
        elif i in bounds:
            out.append(head + f"integers [0, {bounds[i]}] (indices: kept in range)")
        elif is_signed_integral(t):
            out.append(head + "integers [-8, 8]")
        else:
            out.append(head + "integers [0, 8]")
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
