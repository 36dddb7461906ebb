"""scan: XLA's ``scan`` instruction (what ``jnp.cumsum`` and the other
cumulative reductions lower to since JAX 0.11).

``scan(inputs..., inits...), dimensions={d}, num_carries=c, to_apply=f``:
the last ``c`` operands are the initial carries, the others are scanned
along dimension ``d`` (from the end when ``is_reverse=true``).  At each step
``f(input slices..., carries...)`` returns ``(outputs..., carries...)``; the
result is the tuple of the step outputs stacked along ``d`` followed by the
final carries.  The parameter order (inputs before carries) follows the
operand order and the result tuple; XLA's text does not state it, and the
scans JAX emits (cumsum, cumprod, cummax, cummin, cumlogsumexp) are
symmetric in the two, so either order gives their values.

Each step evaluates ``f`` once on whole slices (one call per position along
``d``), so the cost is the scan length times one small computation.
"""

from __future__ import annotations

import numpy as np

from .dtypes import cast_result
from .registry import EvaluationError, handler


@handler("scan")
def _scan(ev, instr, ops):
    (dim,) = instr.dimensions
    carries_n = int(instr.attrs.get("num_carries", 0))
    n_in = len(ops) - carries_n
    if n_in < 1 or carries_n < 0:
        raise EvaluationError(f"scan with {len(ops)} operands and num_carries={carries_n}")
    xs = [np.asarray(x) for x in ops[:n_in]]
    carries = [np.asarray(c) for c in ops[n_in:]]
    shapes = instr.shape.tuple_shapes if instr.shape.is_tuple else [instr.shape]
    n_out = len(shapes) - carries_n
    length = xs[0].shape[dim]
    steps = range(length - 1, -1, -1) if instr.attrs.get("is_reverse") in (True, "true") \
        else range(length)
    outs: list[list[np.ndarray]] = [[] for _ in range(n_out)]
    for t in steps:
        res = ev.call(instr.to_apply, [np.take(x, t, axis=dim) for x in xs] + carries)
        res = list(res) if isinstance(res, tuple) else [res]
        if len(res) != n_out + carries_n:
            raise EvaluationError(f"scan body returns {len(res)} values, expected "
                                  f"{n_out} outputs and {carries_n} carries")
        for k in range(n_out):
            outs[k].append(np.asarray(res[k]))
        carries = [np.asarray(c) for c in res[n_out:]]
    if instr.attrs.get("is_reverse") in (True, "true"):
        outs = [o[::-1] for o in outs]
    stacked = [cast_result(np.stack(o, axis=dim), s.element_type) for o, s in zip(outs, shapes)]
    finals = [cast_result(c, s.element_type) for c, s in zip(carries, shapes[n_out:])]
    values = stacked + finals
    return tuple(values) if instr.shape.is_tuple else values[0]
