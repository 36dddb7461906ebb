"""The interpreter: evaluates a computation instruction by instruction.

Only instructions the root depends on are evaluated, in a def-before-use
order; a value is dropped as soon as its last user has run, so peak memory
follows XLA's liveness rather than the module size.  Called computations
(call, fusion, while, conditional, reducers) are interpreted the same way.

*Lifted* evaluation runs a scalar computation (a reducer, a comparator) on
whole arrays at once: every scalar value becomes an array of the batch
shape and numpy broadcasting does the rest.  That is how reduce, sort,
scatter and reduce-window apply arbitrary ``to_apply`` computations without
a Python loop over elements.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..ir.module import Computation, Instruction, Module
from ..ir.shape import Shape
from .allocator import keep_freed_memory
from .dtypes import dtype_of
from .memory import EvalPlan, check_memory
from .registry import CUSTOM_CALLS, HANDLERS, EvaluationError

#: default for --max-bytes: refuse evaluations whose estimated peak exceeds it
DEFAULT_MAX_BYTES = 4 << 30
#: a while loop running longer than this is reported, not waited for
DEFAULT_MAX_WHILE_ITERATIONS = 100_000

#: opcodes whose scalar computations can be lifted over arrays
LIFTABLE = frozenset({
    "parameter", "constant", "tuple", "get-tuple-element", "compare", "select", "clamp",
    "convert", "bitcast-convert", "copy", "abs", "negate", "sign", "not", "add",
    "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "power", "and",
    "or", "xor", "shift-left", "shift-right-arithmetic", "shift-right-logical",
    "exponential", "log", "sqrt", "rsqrt", "tanh", "is-finite", "floor", "ceil",
    "round-nearest-even", "round-nearest-afz", "atan2", "logistic", "log-plus-one",
    "exponential-minus-one", "sine", "cosine", "erf", "cbrt", "reduce-precision",
    "popcnt", "count-leading-zeros", "real", "imag", "complex",
})


def _liftable(comp: Computation, cache: dict) -> bool:
    got = cache.get(comp)
    if got is not None:
        return got
    ok = True
    for ins in comp.instructions:
        shape = ins.shape
        leaves = shape.leaves() if shape.is_tuple else [((), shape)]
        if any(s.dimensions for _, s in leaves):
            ok = False
            break
        if ins.opcode in LIFTABLE:
            continue
        if ins.opcode in ("broadcast", "reshape", "bitcast"):
            continue  # scalar -> scalar
        if ins.opcode in ("call", "fusion"):
            callee = ins.to_apply or ins.fused_computation
            if callee is not None and _liftable(callee, cache):
                continue
        ok = False
        break
    cache[comp] = ok
    return ok


class Evaluator:
    """Evaluates a module's computations on numpy values.

    ``max_bytes`` bounds the estimated peak memory (checked before anything
    is allocated); ``max_while_iterations`` bounds each while loop."""

    def __init__(self, module: Module, max_bytes: int | None = DEFAULT_MAX_BYTES,
                 max_while_iterations: int = DEFAULT_MAX_WHILE_ITERATIONS,
                 tune_malloc: bool = True):
        if tune_malloc:  # a compiler pass evaluating a few constants leaves malloc alone
            keep_freed_memory()  # reuse freed arrays' memory: no page faults per op
        self.module = module
        self.max_bytes = max_bytes
        self.max_while_iterations = max_while_iterations
        self.lifted = False
        self._plans: dict[Computation, EvalPlan] = {}
        self._liftable: dict[Computation, bool] = {}

    # -- entry -----------------------------------------------------------------------
    def evaluate(self, args: Sequence[Any]) -> Any:
        """Evaluate the entry computation on ``args`` (one value per
        parameter, numpy arrays of the parameter's dtype and dimensions)."""
        entry = self.module.entry
        if entry is None:
            raise EvaluationError("module has no entry computation")
        params = entry.parameters
        if len(args) != len(params):
            raise EvaluationError(f"entry computation {entry.name} takes {len(params)} "
                                  f"arguments, {len(args)} given")
        for ins in self.module.instructions():
            if ins.shape.is_dynamic or (ins.shape.is_tuple and any(
                    leaf.is_dynamic for _, leaf in ins.shape.leaves())):
                raise EvaluationError(f"dynamic shape {ins.shape}: dynamic dimensions are not "
                                      "supported by the evaluator").at(ins)
        for i, (p, a) in enumerate(zip(params, args)):
            if p is None:
                raise EvaluationError(f"entry computation {entry.name} has no parameter {i}")
            check_value(p.shape, a, f"argument {i} ({p.name})")
        if self.max_bytes is not None:
            check_memory(self.module, args, self.max_bytes)
        return self.call(entry, list(args))

    # -- computations --------------------------------------------------------------------
    def plan(self, comp: Computation) -> EvalPlan:
        p = self._plans.get(comp)
        if p is None:
            p = self._plans[comp] = EvalPlan(comp)
        return p

    def call(self, comp: Computation, args: Sequence[Any]) -> Any:
        plan = self.plan(comp)
        env: dict[Instruction, Any] = {}
        frees = plan.frees
        check = not self.lifted
        for i, ins in enumerate(plan.order):
            op = ins.opcode
            if op == "parameter":
                n = ins.parameter_number
                if n is None or n >= len(args):
                    raise EvaluationError(f"parameter {n} was not passed to {comp.name}").at(ins)
                val = args[n]
            else:
                val = self._eval(ins, [env[o] for o in ins.operands])
                if check:
                    check_result(ins, val)
            env[ins] = val
            for dead in frees[i]:
                del env[dead]
        return env[plan.root]

    def call_lifted(self, comp: Computation, args: Sequence[Any]) -> Any:
        """Evaluate a scalar computation on arrays (elementwise, broadcast)."""
        if not _liftable(comp, self._liftable):
            raise EvaluationError(
                f"computation {comp.name} is not elementwise on scalars; cannot apply it "
                "to whole arrays")
        saved = self.lifted
        self.lifted = True
        try:
            return self.call(comp, args)
        finally:
            self.lifted = saved

    def is_liftable(self, comp: Computation) -> bool:
        return _liftable(comp, self._liftable)

    # -- one instruction -------------------------------------------------------------------
    def _eval(self, ins: Instruction, ops: list[Any]) -> Any:
        op = ins.opcode
        fn = HANDLERS.get(op)
        if fn is None:
            raise EvaluationError(f"opcode '{op}' is not supported by the evaluator").at(ins)
        try:
            val = fn(self, ins, ops)
            return np.asarray(val) if isinstance(val, np.generic) else val
        except EvaluationError as e:
            raise e.at(ins)
        except (ValueError, TypeError, IndexError, ArithmeticError, KeyError) as e:
            raise EvaluationError(f"evaluating {op} failed: {e}").at(ins) from e
        except MemoryError as e:
            raise EvaluationError("out of memory (lower the input sizes or --max-bytes)").at(ins) from e


def check_value(shape: Shape, value: Any, what: str) -> None:
    """Raise if ``value`` does not have ``shape``'s structure, dims and dtype."""
    if shape.is_tuple:
        if not isinstance(value, tuple) or len(value) != len(shape.tuple_shapes):
            raise EvaluationError(f"{what}: expected a tuple of {len(shape.tuple_shapes)} values")
        for i, (s, v) in enumerate(zip(shape.tuple_shapes, value)):
            check_value(s, v, f"{what}[{i}]")
        return
    if not shape.is_array:
        return
    if not isinstance(value, np.ndarray):
        raise EvaluationError(f"{what}: expected an array {shape}, got {type(value).__name__}")
    dt = dtype_of(shape.element_type)
    if tuple(value.shape) != tuple(shape.dimensions) or value.dtype != dt:
        raise EvaluationError(f"{what}: expected {shape.to_string(False)} ({dt.name}), got "
                              f"{value.dtype.name}{list(value.shape)}")


def check_result(ins: Instruction, value: Any) -> None:
    shape = ins.shape
    if shape.is_array:
        if (not isinstance(value, np.ndarray) or value.shape != shape.dimensions
                or value.dtype != dtype_of(shape.element_type)):
            got = (f"{value.dtype.name}{list(value.shape)}" if isinstance(value, np.ndarray)
                   else type(value).__name__)
            raise EvaluationError(f"internal error: {ins.opcode} produced {got}, expected "
                                  f"{shape.to_string(False)}").at(ins)
    elif shape.is_tuple and not isinstance(value, tuple):
        raise EvaluationError(f"internal error: {ins.opcode} produced a non-tuple").at(ins)


# ---------------------------------------------------------------------------
# Structural opcodes
# ---------------------------------------------------------------------------

from .registry import handler  # noqa: E402


@handler("parameter")
def _parameter(ev, instr, ops):  # pragma: no cover - the interpreter binds parameters itself
    raise EvaluationError("parameter evaluated outside its computation")


@handler("constant")
def _constant(ev, instr, ops):
    lit = instr.literal
    if lit is None:
        raise EvaluationError("constant without a literal")
    if "..." in lit.text:
        raise EvaluationError("constant values are elided ({...}); cannot evaluate")
    v = lit.value
    if isinstance(v, tuple):
        return v
    return np.asarray(v)


@handler("tuple")
def _tuple(ev, instr, ops):
    return tuple(ops)


@handler("get-tuple-element")
def _gte(ev, instr, ops):
    t = ops[0]
    if not isinstance(t, tuple):
        raise EvaluationError("get-tuple-element of a non-tuple value")
    return t[instr.tuple_index]


@handler("call", "fusion")
def _call(ev, instr, ops):
    comp = instr.to_apply if instr.opcode == "call" else instr.fused_computation
    if comp is None:
        raise EvaluationError(f"{instr.opcode} without a called computation")
    return ev.call(comp, ops)


@handler("while")
def _while(ev, instr, ops):
    cond = instr.attrs.get("condition")
    body = instr.attrs.get("body")
    state = ops[0]
    for _ in range(ev.max_while_iterations):
        if not bool(np.asarray(ev.call(cond, [state])).reshape(())):
            return state
        state = ev.call(body, [state])
    raise EvaluationError(f"while loop did not finish within {ev.max_while_iterations} iterations")


@handler("conditional")
def _conditional(ev, instr, ops):
    branches = instr.attrs.get("branch_computations")
    if not isinstance(branches, list):
        branches = [instr.attrs.get("true_computation"), instr.attrs.get("false_computation")]
    sel = np.asarray(ops[0]).reshape(())
    if sel.dtype == np.bool_:
        idx = 0 if bool(sel) else 1
    else:
        idx = int(sel)
        if idx < 0 or idx >= len(branches):
            idx = len(branches) - 1
    return ev.call(branches[idx], [ops[idx + 1]])


@handler("custom-call")
def _custom_call(ev, instr, ops):
    target = instr.custom_call_target
    fn = CUSTOM_CALLS.get(target)
    if fn is None:
        raise EvaluationError(f"custom-call target '{target}' is not supported by the evaluator")
    return fn(ev, instr, ops)


def _zeros_for(shape: Shape) -> Any:
    if shape.is_tuple:
        return tuple(_zeros_for(s) for s in shape.tuple_shapes)
    if not shape.is_array:
        return None
    return np.zeros(shape.dimensions, dtype=dtype_of(shape.element_type))


@handler("async-start", "call-start")
def _async_start(ev, instr, ops):
    comp = instr.attrs.get("calls") or instr.attrs.get("to_apply")
    if isinstance(comp, list):
        comp = comp[0]
    if comp is None:
        raise EvaluationError(f"{instr.opcode} without a called computation")
    result = ev.call(comp, ops)
    extra = tuple(_zeros_for(s) for s in instr.shape.tuple_shapes[2:])
    return (tuple(ops), result) + extra


@handler("async-update")
def _async_update(ev, instr, ops):
    return ops[0]


@handler("async-done", "call-done")
def _async_done(ev, instr, ops):
    return ops[0][1]


@handler("copy-start")
def _copy_start(ev, instr, ops):
    extra = tuple(_zeros_for(s) for s in instr.shape.tuple_shapes[2:])
    return (ops[0], ops[0]) + extra


@handler("copy-done")
def _copy_done(ev, instr, ops):
    return ops[0][0]
