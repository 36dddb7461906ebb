"""The top-k custom calls of XLA:GPU's top-k passes:

``TopK`` (TopkRewriter's, before the GPU passes lower it) and ``__gpu$TopK``
(TopkSpecializer's: XLA's top-k kernel)
    one operand ``x`` of shape ``[n]`` or ``[batch, n]``; result
    ``(values, indices)`` of shape ``[.., k]`` (values of ``x``'s type,
    indices s32), ``k`` the result's last dimension.  The call's comparator
    (``called_computations`` / ``to_apply``; parameters ``p.0.lhs, p.0.rhs
    [, p.1.lhs, p.1.rhs]`` for the values and, when present, the indices)
    orders the row; the result is the first ``k`` of the stably sorted row --
    what TopkDecomposer turns the call into (``slice(sort(x, iota))``), so
    ties keep the lower index.  A ``compare(p.0.lhs, p.0.rhs), direction=GT``
    comparator (total order for floats, or the integer image ComparisonExpander
    made of it) is XLA's ``greater-than``: descending in IEEE total order
    (NaN first, +0 before -0).
"""

from __future__ import annotations

import numpy as np

from .registry import EvaluationError, custom_call
from .reduction import _network_sort, _simple_comparator, _sort_key


def _comparator(instr):
    comp = instr.to_apply
    if comp is None:
        called = instr.called_computations()
        comp = called[0] if called else None
    return comp


@custom_call("TopK", "__gpu$TopK")
def _topk_call(ev, instr, ops):
    target = instr.custom_call_target
    if len(ops) != 1:
        raise EvaluationError(f"{target} takes one operand, got {len(ops)}")
    shapes = instr.shape.tuple_shapes if instr.shape.is_tuple else ()
    if len(shapes) != 2:
        raise EvaluationError(f"{target} returns (values, indices)")
    x = np.asarray(ops[0])
    if x.ndim not in (1, 2):
        raise EvaluationError(f"{target} takes [n] or [batch, n], got rank {x.ndim}")
    k = shapes[0].dimensions[-1]
    if k > x.shape[-1]:
        raise EvaluationError(f"{target}: k={k} exceeds the row length {x.shape[-1]}")
    comp = _comparator(instr)
    element_type = instr.operands[0].shape.element_type
    simple = _simple_comparator(comp) if comp is not None else None
    if comp is None or (simple is not None and simple[0] == 0):
        descending = True if simple is None else simple[1]
        key = _sort_key(x, element_type).astype(np.int64)
        idx = np.argsort(-key if descending else key, axis=-1, kind="stable")
    else:
        iota = np.broadcast_to(np.arange(x.shape[-1], dtype=np.int32), x.shape)
        n_params = comp.num_parameters
        if n_params not in (2, 4):
            raise EvaluationError(f"{target}: comparator {comp.name} has {n_params} parameters")
        idx = _network_sort(ev, comp, [x, iota][: n_params // 2], x.ndim - 1)
    idx = idx[..., :k]
    return (np.take_along_axis(x, idx, axis=-1), idx.astype(np.int32))
