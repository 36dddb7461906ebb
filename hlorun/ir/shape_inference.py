"""Shape inference for the common opcodes (XLA's ShapeInference, subset).

Used by the parser when an instruction omits its result shape, and by the
``hlo-verifier`` checker to compare declared and inferred shapes.  Returns
``None`` when the opcode is not covered (the caller decides what that means);
raises ``ValueError`` with a message when the operands are inconsistent.
"""

from __future__ import annotations

from typing import Any, Sequence

from . import attrs as A
from .opcode import ELEMENTWISE_BINARY, ELEMENTWISE_UNARY
from .shape import Shape, change_element_type, is_array_type, permute_dimensions

_SAME_SHAPE_UNARY = ELEMENTWISE_UNARY - {"convert", "bitcast-convert", "is-finite",
                                         "real", "imag", "reduce-precision"}


def _array(shape: Shape, what: str) -> Shape:
    if not shape.is_array:
        raise ValueError(f"{what} must be an array, got {shape}")
    return shape


def infer_shape(opcode: str, operands: Sequence[Any], attrs: dict[str, Any]) -> Shape | None:
    """Inferred result shape, or None if unknown.  Like XLA's
    ShapeInference, ops that keep their operand's shape keep its layout
    (elementwise ops: the first operand's; transpose: the permuted layout
    that makes it a bitcast); new shapes get the default layout."""
    shapes = [o.shape for o in operands]
    if opcode in _SAME_SHAPE_UNARY or opcode == "reduce-precision":
        if len(shapes) != 1:
            return None
        return shapes[0]
    if opcode == "is-finite":
        return change_element_type(_array(shapes[0], "operand"), "pred")
    if opcode in ("real", "imag"):
        s = _array(shapes[0], "operand")
        et = {"c64": "f32", "c128": "f64"}.get(s.element_type, s.element_type)
        return change_element_type(s, et)
    if opcode in ELEMENTWISE_BINARY:
        if len(shapes) != 2:
            return None
        a, b = (_array(s, "operand") for s in shapes)
        if a.dimensions != b.dimensions and a.rank and b.rank:
            raise ValueError(f"binary op {opcode} with incompatible shapes {a} and {b}")
        base = a if a.rank >= b.rank else b
        if a.dimensions != b.dimensions:
            base = base.with_default_layout()
        if opcode == "compare":
            return change_element_type(base, "pred")
        if opcode == "complex":
            et = {"f32": "c64", "f64": "c128"}.get(a.element_type, a.element_type)
            return change_element_type(base, et)
        return base
    if opcode in ("select", "clamp"):
        if len(shapes) != 3:
            return None
        return shapes[1]
    if opcode == "tuple":
        return Shape.tuple(shapes)
    if opcode == "get-tuple-element":
        s = shapes[0]
        if not s.is_tuple:
            raise ValueError(f"get-tuple-element operand must be a tuple, got {s}")
        idx = int(attrs["index"])
        if not 0 <= idx < len(s.tuple_shapes):
            raise ValueError(f"tuple index {idx} out of range for {s}")
        return s.tuple_shapes[idx]
    if opcode == "transpose":
        s = _array(shapes[0], "operand")
        perm = A.parse_int_list(attrs["dimensions"])
        if sorted(perm) != list(range(s.rank)):
            raise ValueError(f"transpose dimensions {list(perm)} are not a permutation of rank {s.rank}")
        if s.layout is None:
            return Shape.array(s.element_type, [s.dimensions[p] for p in perm])
        return permute_dimensions(perm, s)
    if opcode == "concatenate":
        dim = A.parse_int_list(attrs["dimensions"])[0]
        s0 = _array(shapes[0], "operand")
        dims = list(s0.dimensions)
        dims[dim] = sum(s.dimensions[dim] for s in shapes)
        return Shape.array(s0.element_type, dims)
    if opcode == "slice":
        s = _array(shapes[0], "operand")
        ranges = A.parse_slice(attrs["slice"])
        if len(ranges) != s.rank:
            raise ValueError(f"slice has {len(ranges)} ranges for rank {s.rank}")
        dims = [max(0, (hi - lo + st - 1) // st) for lo, hi, st in ranges]
        return Shape.array(s.element_type, dims)
    if opcode == "dot":
        a, b = (_array(s, "operand") for s in shapes)
        lb = A.parse_int_list(attrs.get("lhs_batch_dims", "{}"))
        rb = A.parse_int_list(attrs.get("rhs_batch_dims", "{}"))
        lc = A.parse_int_list(attrs.get("lhs_contracting_dims", "{}"))
        rc = A.parse_int_list(attrs.get("rhs_contracting_dims", "{}"))
        dims = [a.dimensions[d] for d in lb]
        dims += [a.dimensions[d] for d in range(a.rank) if d not in lb and d not in lc]
        dims += [b.dimensions[d] for d in range(b.rank) if d not in rb and d not in rc]
        return Shape.array(a.element_type, dims)
    if opcode == "reduce":
        n = len(shapes) // 2
        dims = set(A.parse_int_list(attrs["dimensions"]))
        outs = [Shape.array(s.element_type, [d for i, d in enumerate(s.dimensions) if i not in dims])
                for s in shapes[:n]]
        return outs[0] if n == 1 else Shape.tuple(outs)
    if opcode in ("after-all",):
        return Shape.token()
    if opcode == "add-dependency":
        return shapes[0]
    if opcode in ("copy-start",):
        return Shape.tuple([shapes[0], shapes[0], Shape.array("u32", [])])
    if opcode == "cholesky":
        return shapes[0]
    if opcode == "triangular-solve":
        return shapes[1]
    if opcode in ("partition-id", "replica-id"):
        return Shape.array("u32", [])
    if opcode == "get-dimension-size":
        return Shape.array("s32", [])
    if opcode == "opt-barrier":
        return shapes[0]
    if opcode == "pad":
        s = _array(shapes[0], "operand")
        cfg = A.parse_padding(attrs["padding"])
        dims = []
        for d, (lo, hi, it) in zip(s.dimensions, cfg):
            dims.append(lo + hi + d + max(0, d - 1) * it)
        return Shape.array(s.element_type, dims)
    if opcode == "reverse":
        return shapes[0]
    if opcode == "dynamic-slice":
        s = _array(shapes[0], "operand")
        return Shape.array(s.element_type, A.parse_int_list(attrs["dynamic_slice_sizes"]))
    if opcode == "dynamic-update-slice":
        return shapes[0]
    if opcode == "conditional":
        comp = attrs.get("true_computation")
        if comp is None and attrs.get("branch_computations"):
            comp = attrs["branch_computations"][0]
        return comp.root.shape if comp is not None and comp.root is not None else None
    if opcode in ("call", "fusion"):
        comp = attrs.get("to_apply") if opcode == "call" else attrs.get("calls")
        return comp.root.shape if comp is not None and comp.root is not None else None
    if opcode == "while":
        return shapes[0]
    if opcode == "map":
        comp = attrs.get("to_apply")
        if comp is None or comp.root is None or not shapes:
            return None
        return Shape.array(comp.root.shape.element_type, shapes[0].dimensions)
    if opcode == "bitcast-convert" or opcode == "convert":
        return None
    if opcode in ("sort",):
        return shapes[0] if len(shapes) == 1 else Shape.tuple(shapes)
    return None
