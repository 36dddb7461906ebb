"""A higher-precision referee for comparisons that fail.

When B's outputs differ from A's beyond the per-type tolerance, that can be
a wrong rewrite, or two legitimate roundings of the same math (a reduction
reassociated, an intermediate kept in f32 instead of bf16).  The referee
evaluates A once more with every floating type promoted to f64 (constants
re-read at f64, arguments widened exactly) and asks, element by element,
whether B is about as close to that exact answer as A itself::

    |B - R| <= max(2 |A - R|, atol * scale + rtol * |R|)

A leaf that passes is reported as agreeing "against the f64 reference";
a wrong rewrite (an element A gets right and B does not) still fails.
Modules the promotion cannot express (custom calls, whose semantics follow
their operand types, bit casts of floats, precision reductions) or that
fail to evaluate are left as they are, with a note.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..ir.clone import clone_module
from ..ir.literal import Literal
from ..ir.module import Module
from ..ir.shape import is_floating, map_array_leaves
from .compare import Comparison, _leaves
from .registry import EvaluationError

#: opcodes whose meaning depends on the exact float format
_FORMAT_BOUND = frozenset({"bitcast-convert", "reduce-precision", "rng-bit-generator"})


def _widen(shape):
    return map_array_leaves(shape, lambda s: s.with_element_type("f64")
                            if s.is_array and is_floating(s.element_type)
                            and s.element_type != "f64" else s)


def promote_to_f64(module: Module) -> Module:
    """A copy of ``module`` computing every floating value in f64."""
    m = clone_module(module)
    for comp in m.computations:
        for ins in comp.instructions:
            if ins.opcode in _FORMAT_BOUND or ins.opcode == "custom-call":
                # custom calls (FP8 GEMMs apply scales by operand type, ...) and
                # bit-level ops mean something else in f64
                raise EvaluationError(f"{ins.opcode} {ins.name} depends on its element types")
            wide = _widen(ins.shape)
            if wide is not ins.shape:
                ins.shape = wide
                if ins.literal is not None:
                    ins.literal = Literal(ins.literal.text, wide)
    return m


def widen_args(args: Sequence[Any]) -> list[Any]:
    def w(v):
        if isinstance(v, tuple):
            return tuple(w(x) for x in v)
        if isinstance(v, np.ndarray) and v.dtype.kind == "f" or (
                isinstance(v, np.ndarray) and v.dtype.kind == "V"):
            return v.astype(np.float64)
        if isinstance(v, np.ndarray) and v.dtype.name.startswith(("bfloat16", "float8")):
            return v.astype(np.float64)
        return v
    return [w(a) for a in args]


def f64_reference(module_a: Module, args: Sequence[Any], max_bytes: int | None = None) -> Any:
    """A evaluated with every floating type promoted to f64 (EvaluationError
    when the module cannot be promoted or evaluated)."""
    from .core import Evaluator
    return Evaluator(promote_to_f64(module_a), max_bytes=max_bytes).evaluate(widen_args(args))


def referee(cmp: Comparison, a: Any, b: Any, ref: Any) -> str:
    """Re-judge ``cmp``'s failing leaves against ``ref`` (an f64 evaluation
    of A; in place: leaves B is as close to as A pass).  Returns a one-line
    note of what was done."""
    bad = [k for k, leaf in enumerate(cmp.leaves) if not leaf.ok and not leaf.message]
    if not bad:
        return ""
    la, lb, lr = _leaves(a), _leaves(b), _leaves(ref)
    if not (len(la) == len(lb) == len(lr)):
        return "no f64 reference: output structure differs"
    fixed = 0
    for k in bad:
        leaf = cmp.leaves[k]
        va = np.asarray(la[k][1]).astype(np.float64)
        vb = np.asarray(lb[k][1]).astype(np.float64)
        vr = np.asarray(lr[k][1]).astype(np.float64)
        with np.errstate(all="ignore"):
            fin = np.isfinite(vr)
            rms = float(np.sqrt(np.mean(vr[fin] ** 2))) if fin.any() else 1.0
            tol = leaf.atol * max(1.0, rms) + leaf.rtol * np.abs(vr)
            ea, eb = np.abs(va - vr), np.abs(vb - vr)
            ok = (eb <= np.maximum(2 * ea, tol)) | (~fin & ((vb == vr) | (np.isnan(vb) & np.isnan(vr))))
        if bool(np.all(ok)):
            leaf.ok = True
            leaf.referee = (f"agrees against the f64 reference: B's largest error "
                            f"{float(np.nanmax(eb)) if eb.size else 0:.3g} vs A's own "
                            f"{float(np.nanmax(ea)) if ea.size else 0:.3g}")
            fixed += 1
        else:
            i = int(np.argmax(np.where(ok, 0, eb)))
            leaf.referee = (f"also differs from the f64 reference: at "
                            f"[{','.join(map(str, np.unravel_index(i, vr.shape)))}] exact "
                            f"{vr.reshape(-1)[i]:.6g}, A {va.reshape(-1)[i]:.6g}, "
                            f"B {vb.reshape(-1)[i]:.6g}")
    return (f"f64 reference of A: {fixed} of {len(bad)} differing outputs are as close to "
            f"it as A is")
