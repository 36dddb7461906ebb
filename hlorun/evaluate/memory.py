"""Peak-memory estimate of an evaluation, from shapes alone.

The estimate walks each computation in evaluation order with the same
liveness the interpreter uses (a value dies after its last user), adds the
peak of every called computation at its call site and the scratch space of
the heavy opcodes (f32/f64 copies of dot operands, im2col matrices of
convolutions, index arrays of gather/scatter, sort permutations).  It is an
upper bound in practice (views such as broadcasts are counted as if
materialized), so ``--max-bytes`` refuses before anything big is allocated.
"""

from __future__ import annotations

import math

from ..ir.module import Computation, Instruction, Module
from ..ir.shape import Shape
from .registry import EvaluationError


def value_bytes(shape: Shape) -> int:
    if shape.is_tuple:
        return sum(value_bytes(s) for s in shape.tuple_shapes)
    if not shape.is_array:
        return 0
    from .dtypes import dtype_of
    return shape.element_count * dtype_of(shape.element_type).itemsize


def _array_leaves(shape: Shape) -> list[Shape]:
    return [s for _, s in shape.leaves()] if shape.is_tuple else [shape]


def _scratch(ins: Instruction) -> int:
    op = ins.opcode
    out = value_bytes(ins.shape)
    if op in ("dot", "custom-call", "convolution"):
        # operands widened for BLAS (narrow floats -> f32, integers -> s64)
        extra = sum(_widened_bytes(o.shape) for o in ins.operands if o.shape.is_array)
        extra += out * max(1, 4 // max(1, _itemsize(ins)))  # the f32 accumulator
        if op == "convolution" or (op == "custom-call" and "conv" in (ins.custom_call_target or "")):
            extra += _im2col_bytes(ins)
        return extra
    if op == "gather":  # broadcast index arrays the size of the output
        return 16 * ins.shape.element_count + out
    if op == "scatter":  # a copy of the operand, flat targets and values
        n = (len(ins.operands) - 1) // 2
        upd = sum(o.shape.element_count for o in ins.operands[n + 1:])
        return out + 24 * upd
    if op in ("sort",):
        return 3 * 8 * ins.operands[0].shape.element_count + out
    if op in ("reduce", "reduce-window", "select-and-scatter", "map"):
        return 3 * sum(value_bytes(o.shape) for o in ins.operands) + 2 * out
    return 0


def _widened_bytes(shape: Shape) -> int:
    t = shape.element_type
    if t in ("f32", "f64", "c64", "c128"):
        return 0
    if t.startswith(("s", "u")) or t == "pred":
        return 8 * shape.element_count
    return 4 * shape.element_count


def _itemsize(ins: Instruction) -> int:
    leaves = _array_leaves(ins.shape)
    if not leaves or not leaves[0].is_array:
        return 4
    from .dtypes import dtype_of
    return dtype_of(leaves[0].element_type).itemsize


def _im2col_bytes(ins: Instruction) -> int:
    if len(ins.operands) < 2 or not ins.operands[1].shape.is_array:
        return 0
    out_shape = _array_leaves(ins.shape)[0]
    kernel = ins.operands[1].shape
    text = ins.attrs.get("dim_labels")
    if not text:
        return 0
    from ..ir.attrs import parse_dim_labels
    try:
        d = parse_dim_labels(text)
    except ValueError:
        return 0
    ksz = math.prod(kernel.dimensions[i] for i in d.kernel_spatial)
    cin = kernel.dimensions[d.kernel_input_feature]
    positions = out_shape.element_count // max(1, out_shape.dimensions[d.output_feature]) \
        if out_shape.dimensions else 1
    in_elems = ins.operands[0].shape.element_count
    return 8 * (positions * cin * ksz + 4 * in_elems)


#: opcodes whose value is (or only references) an existing value: no new memory
_ALIASING = frozenset({"tuple", "get-tuple-element", "copy", "domain", "opt-barrier",
                       "optimization-barrier", "add-dependency", "async-update"})


class EvalPlan:
    """The evaluation order of a computation (what its root needs, operands
    first) and, per step, the values whose last user it is."""

    __slots__ = ("order", "frees", "root")

    def __init__(self, comp: Computation):
        root = comp.root
        if root is None:
            raise EvaluationError(f"computation {comp.name} has no root")
        # Post order of what the root needs (iterative DFS, operands in order).
        order: list[Instruction] = []
        state: dict[Instruction, int] = {}
        stack = [root]
        while stack:
            cur = stack[-1]
            st = state.get(cur)
            if st is None:
                state[cur] = 1
                for o in reversed(cur.operands):
                    if o not in state:
                        stack.append(o)
            else:
                stack.pop()
                if st == 1:
                    state[cur] = 2
                    order.append(cur)
        last: dict[Instruction, int] = {}
        for i, ins in enumerate(order):
            for o in ins.operands:
                last[o] = i
        frees: list[list[Instruction]] = [[] for _ in order]
        for o, i in last.items():
            if o is not root:
                frees[i].append(o)
        self.order = order
        self.frees = frees
        self.root = root


class _Estimator:
    def __init__(self):
        self.peaks: dict[Computation, tuple[int, Instruction | None]] = {}

    def peak(self, comp: Computation, count_params: bool) -> tuple[int, Instruction | None]:
        key = comp
        if not count_params and key in self.peaks:
            return self.peaks[key]
        plan = EvalPlan(comp)
        live = 0
        best, at = 0, None
        sizes: dict[Instruction, int] = {}
        for i, ins in enumerate(plan.order):
            size = 0 if ins.opcode in _ALIASING else value_bytes(ins.shape)
            if ins.opcode == "parameter" and not count_params:
                size = 0
            extra = _scratch(ins) + self._callees(ins)
            live += size
            sizes[ins] = size
            if live + extra > best:
                best, at = live + extra, ins
            for dead in plan.frees[i]:
                live -= sizes.get(dead, 0)
        if not count_params:
            self.peaks[key] = (best, at)
        return best, at

    def _callees(self, ins: Instruction) -> int:
        if not ins.attrs:
            return 0
        total = 0
        for callee in ins.called_computations():
            if callee.root is None:
                continue
            total = max(total, self.peak(callee, False)[0])
        return total


def estimate_peak_bytes(module: Module) -> tuple[int, Instruction | None]:
    """(estimated peak bytes, the instruction where it is reached)."""
    if module.entry is None:
        return 0, None
    return _Estimator().peak(module.entry, True)


def format_bytes(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def check_memory(module: Module, args, max_bytes: int) -> int:
    """Raise if the estimated peak exceeds ``max_bytes``; return the estimate."""
    peak, at = estimate_peak_bytes(module)
    if peak > max_bytes:
        shape = str(at.shape) if at is not None else ""
        if len(shape) > 100:
            shape = shape[:97] + "..."
        where = f" (reached at %{at.name}: {shape})" if at is not None else ""
        err = EvaluationError(
            f"evaluation needs an estimated {format_bytes(peak)} of memory{where}, more than "
            f"--max-bytes {format_bytes(max_bytes)}; raise --max-bytes to evaluate anyway")
        raise err
    return peak


__all__ = ["check_memory", "estimate_peak_bytes", "format_bytes", "value_bytes"]
