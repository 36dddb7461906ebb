"""gather and scatter, with every dimension-number form (batching dims
included), through numpy advanced indexing.

Gather clamps each start index so the slice fits in the operand (XLA's
semantics); scatter skips an update window that would not fit entirely
(as XLA's evaluator does).  Scatter combiners: assignment (the root is
parameter 1) and add/mul/max/min/and/or run as one ``ufunc.at``; any other
computation runs in rounds, one lifted call per round, where round r
applies the r-th update of every target index.
"""

from __future__ import annotations

import numpy as np

from .dtypes import contiguous
from .reduction import combine_at
from .registry import EvaluationError, handler


def _normalized_indices(indices: np.ndarray, ivd: int) -> tuple[np.ndarray, list[int]]:
    """Indices as batch_shape + (vector,) and the original dims of the batch."""
    idx = np.asarray(indices)
    rank = idx.ndim
    if ivd == rank:
        idx = idx[..., None]
    batch_dims = [d for d in range(idx.ndim) if d != ivd]
    return np.moveaxis(idx, ivd, -1).astype(np.int64), batch_dims


def _placed(arr: np.ndarray, positions: list[int], rank: int) -> np.ndarray:
    """Reshape ``arr`` (one axis per entry of ``positions``) so each axis
    sits at that position of a rank-``rank`` broadcast shape."""
    shape = [1] * rank
    for k, d in enumerate(positions):
        shape[d] = arr.shape[k]
    return arr.reshape(shape)


@handler("gather")
def _gather(ev, instr, ops):
    operand, indices = ops
    offset_dims = list(instr.int_list("offset_dims"))
    collapsed = set(instr.int_list("collapsed_slice_dims"))
    start_index_map = list(instr.int_list("start_index_map"))
    ivd = instr.int_attr("index_vector_dim")
    slice_sizes = instr.int_list("slice_sizes")
    obd = list(instr.int_list("operand_batching_dims"))
    sibd = list(instr.int_list("start_indices_batching_dims"))
    idx, idx_batch_dims = _normalized_indices(indices, ivd)
    batch_shape = idx.shape[:-1]
    out_shape = instr.shape.dimensions
    rank = len(out_shape)
    batch_out = [d for d in range(rank) if d not in offset_dims]
    window_dims = [d for d in range(operand.ndim) if d not in collapsed and d not in obd]
    if len(window_dims) != len(offset_dims) or len(batch_out) != len(batch_shape):
        raise EvaluationError("gather dimension numbers do not match the shapes")
    full = []
    for d in range(operand.ndim):
        part = np.zeros((1,) * rank, dtype=np.int64)
        if d in start_index_map:
            s = idx[..., start_index_map.index(d)]
            s = np.clip(s, 0, max(operand.shape[d] - slice_sizes[d], 0))
            part = part + _placed(s, batch_out, rank)
        if d in obd:
            k = idx_batch_dims.index(sibd[obd.index(d)])
            part = part + _placed(np.arange(batch_shape[k]), [batch_out[k]], rank)
        if d in window_dims:
            od = offset_dims[window_dims.index(d)]
            part = part + _placed(np.arange(out_shape[od]), [od], rank)
        full.append(part)
    got = operand[tuple(full)] if full else operand
    return contiguous(np.broadcast_to(got, out_shape))


@handler("scatter")
def _scatter(ev, instr, ops):
    n = (len(ops) - 1) // 2
    operands, indices, updates = ops[:n], ops[n], ops[n + 1:]
    uwd = list(instr.int_list("update_window_dims"))
    iwd = set(instr.int_list("inserted_window_dims"))
    sdod = list(instr.int_list("scatter_dims_to_operand_dims"))
    ivd = instr.int_attr("index_vector_dim")
    ibd = list(instr.int_list("input_batching_dims"))
    sibd = list(instr.int_list("scatter_indices_batching_dims"))
    idx, idx_batch_dims = _normalized_indices(indices, ivd)
    upd_shape = updates[0].shape
    rank = len(upd_shape)
    op_shape = operands[0].shape
    scatter_upd_dims = [d for d in range(rank) if d not in uwd]
    window_dims = [d for d in range(len(op_shape)) if d not in iwd and d not in ibd]
    if len(window_dims) != len(uwd) or len(scatter_upd_dims) != idx.ndim - 1:
        raise EvaluationError("scatter dimension numbers do not match the shapes")
    full = []
    valid = np.ones((1,) * rank, dtype=bool)
    for d in range(len(op_shape)):
        part = np.zeros((1,) * rank, dtype=np.int64)
        wsize = 1
        start = None
        if d in window_dims:
            ud = uwd[window_dims.index(d)]
            wsize = upd_shape[ud]
        if d in sdod:
            start = _placed(idx[..., sdod.index(d)], scatter_upd_dims, rank)
        if d in ibd:
            k = idx_batch_dims.index(sibd[ibd.index(d)])
            b = _placed(np.arange(idx.shape[k]), [scatter_upd_dims[k]], rank)
            start = b if start is None else start + b
        if start is not None:
            valid = valid & (start >= 0) & (start <= op_shape[d] - wsize)
            part = part + start
        if d in window_dims:
            ud = uwd[window_dims.index(d)]
            part = part + _placed(np.arange(upd_shape[ud]), [ud], rank)
        full.append(part)
    full_b = [np.broadcast_to(p, upd_shape) for p in full]
    valid_b = np.broadcast_to(valid, upd_shape)
    if full_b:
        clipped = [np.clip(p, 0, max(s - 1, 0)) for p, s in zip(full_b, op_shape)]
        flat_t = np.ravel_multi_index(clipped, op_shape) if op_shape else np.zeros(upd_shape, np.int64)
    else:
        flat_t = np.zeros(upd_shape, np.int64)
    keep = valid_b.reshape(-1)
    targets = flat_t.reshape(-1)[keep]
    values = [u.reshape(-1)[keep] for u in updates]
    results = [np.array(o, copy=True).reshape(-1) for o in operands]
    types = [o.shape.element_type for o in instr.operands[:n]]
    combine_at(ev, instr.to_apply, results, [targets], values, types)
    out = [r.reshape(op_shape) for r in results]
    return tuple(out) if instr.shape.is_tuple else out[0]
