"""reduce, reduce-window, map, sort, select-and-scatter.

Reducers XLA programs use almost always are a single add / multiply /
maximum / minimum / and / or of the two parameters: those run as one numpy
ufunc reduction (floats accumulate in at least f32; f32 sums in f64, so the
reference is not less accurate than any GPU summation order).  Any other
``to_apply`` (variadic argmax reducers, reducers with converts ...) is
applied as a pairwise tree: log2(n) lifted calls of the computation on whole
arrays.  Sort uses ``argsort`` for a plain compare comparator and a bitonic
network of lifted comparator calls (stable through an index tie-break)
otherwise.
"""

from __future__ import annotations

import numpy as np

from ..ir.attrs import parse_window
from ..ir.comparison import comparison_order
from .dtypes import contiguous, cast_result, is_float_dtype, total_order_key, widen
from .registry import EvaluationError, handler
from .shapes import pad_array

_UFUNCS = {
    "add": np.add, "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum,
}
_BOOL_UFUNCS = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor,
                "add": np.logical_or, "maximum": np.logical_or, "minimum": np.logical_and,
                "multiply": np.logical_and}
_INT_UFUNCS = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}


def simple_reducer(comp) -> str | None:
    """The opcode if ``comp`` is ``op(p0, p1)`` for a known monoid, else None."""
    if comp is None or len(comp.parameters) != 2:
        return None
    root = comp.root
    if root is None or len(root.operands) != 2 or root.shape.dimensions:
        return None
    if root.opcode not in _UFUNCS and root.opcode not in _INT_UFUNCS:
        return None
    p0, p1 = comp.parameters
    if {id(o) for o in root.operands} != {id(p0), id(p1)}:
        return None
    if p0.shape.element_type != root.shape.element_type:
        return None
    return root.opcode


def _ufunc(kind: str, dtype: np.dtype):
    if dtype == np.bool_:
        return _BOOL_UFUNCS.get(kind)
    if dtype.kind in "iu":
        return _UFUNCS.get(kind) or _INT_UFUNCS.get(kind)
    return _UFUNCS.get(kind)


def _acc_dtype(kind: str, x: np.ndarray):
    if kind in ("add", "multiply") and x.dtype == np.float32:
        return np.float64
    return None


def ufunc_reduce(kind: str, x: np.ndarray, init: np.ndarray, axes: tuple[int, ...],
                 out_type: str) -> np.ndarray:
    xw = widen(x)
    fn = _ufunc(kind, xw.dtype)
    if fn is None:
        raise EvaluationError(f"reducer {kind} is not defined for {x.dtype}")
    acc = _acc_dtype(kind, xw)
    with np.errstate(all="ignore"):
        if acc is not None:
            r = fn.reduce(xw, axis=axes, dtype=acc)
            r = fn(r, widen(init).astype(acc))
        else:
            r = fn.reduce(xw, axis=axes) if xw.size else None
            iw = widen(init)
            r = fn(r, iw) if r is not None else np.broadcast_to(
                iw, tuple(s for i, s in enumerate(x.shape) if i not in axes))
    return cast_result(np.asarray(r), out_type)


def tree_reduce(ev, comp, xs: list[np.ndarray], inits: list[np.ndarray],
                out_types: list[str], valid: np.ndarray | None = None) -> list[np.ndarray]:
    """Reduce the last axis of every array in ``xs`` with the lifted
    computation ``comp`` (arguments: accumulators..., elements...).
    ``valid`` (same shape as the arrays) marks real elements: padding and
    dilation holes of reduce-window take no part, as in XLA."""
    n = len(xs)
    length = xs[0].shape[-1]
    lead = xs[0].shape[:-1]
    cur = list(xs)
    cur_valid = valid

    def apply(a, b):
        res = ev.call_lifted(comp, list(a) + list(b))
        res = list(res) if n > 1 else [res]
        shape = np.broadcast_shapes(*(np.shape(x) for x in list(a) + list(b)))
        return [np.broadcast_to(cast_result(np.asarray(r), t), shape) for r, t in zip(res, out_types)]

    while length > 1:
        half = length // 2
        a = [c[..., 0:2 * half:2] for c in cur]
        b = [c[..., 1:2 * half:2] for c in cur]
        red = apply(a, b)
        if cur_valid is not None:
            va, vb = cur_valid[..., 0:2 * half:2], cur_valid[..., 1:2 * half:2]
            red = [np.where(va & vb, r, np.where(vb, y, x)) for r, x, y in zip(red, a, b)]
            nv = va | vb
        if length % 2:
            red = [np.concatenate([r, c[..., -1:]], axis=-1) for r, c in zip(red, cur)]
            if cur_valid is not None:
                nv = np.concatenate([nv, cur_valid[..., -1:]], axis=-1)
        cur = red
        if cur_valid is not None:
            cur_valid = nv
        length = half + length % 2
    init_b = [np.broadcast_to(i, lead) for i in inits]
    if length == 0:
        return [np.array(i, copy=True) for i in init_b]
    out = apply(init_b, [c[..., 0] for c in cur])
    if cur_valid is not None:
        v = cur_valid[..., 0]
        out = [np.where(v, o, i) for o, i in zip(out, init_b)]
    return [contiguous(r) for r in out]


@handler("reduce")
def _reduce(ev, instr, ops):
    n = len(ops) // 2
    xs, inits = ops[:n], ops[n:]
    axes = tuple(sorted(instr.dimensions))
    comp = instr.to_apply
    out_types = ([s.element_type for s in instr.shape.tuple_shapes] if instr.shape.is_tuple
                 else [instr.shape.element_type])
    kind = simple_reducer(comp) if n == 1 else None
    if kind is not None and _ufunc(kind, widen(xs[0]).dtype) is not None:
        return ufunc_reduce(kind, xs[0], inits[0], axes, out_types[0])
    keep = [d for d in range(xs[0].ndim) if d not in axes]
    moved = []
    for x in xs:
        t = np.transpose(x, keep + list(axes))
        moved.append(t.reshape(t.shape[:len(keep)] + (-1,)))
    res = tree_reduce(ev, comp, moved, [np.asarray(i) for i in inits], out_types)
    return tuple(res) if instr.shape.is_tuple else res[0]


@handler("map")
def _map(ev, instr, ops):
    res = ev.call_lifted(instr.to_apply, ops)
    return np.broadcast_to(cast_result(np.asarray(res), instr.shape.element_type),
                           instr.shape.dimensions)


def _identity(kind: str, dt: np.dtype):
    """The neutral element of a simple reducer in ``dt`` (None if unknown)."""
    if kind == "add" or kind in ("or", "xor"):
        return np.zeros((), dt)
    if kind == "multiply":
        return np.ones((), dt)
    if kind == "and":
        return np.array(True) if dt == np.bool_ else np.array(-1).astype(dt)
    big = kind == "minimum"
    if dt == np.bool_:
        return np.array(big)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return np.array(info.max if big else info.min, dt)
    if is_float_dtype(dt):
        import ml_dtypes
        fi = ml_dtypes.finfo(dt) if dt.name not in ("float16", "float32", "float64") else np.finfo(dt)
        with np.errstate(all="ignore"):
            inf = np.array(np.inf).astype(dt)
        if np.isinf(inf.astype(np.float64)):
            return inf if big else np.array(-np.inf).astype(dt)
        return np.array(fi.max if big else fi.min).astype(dt)
    return None


def _windows(x: np.ndarray, fill, window) -> np.ndarray:
    """Padded, dilated, strided windows: shape (out..., window...); padding
    and dilation holes hold ``fill``."""
    config = [(w.padding_low, w.padding_high, w.base_dilation - 1) for w in window]
    padded = pad_array(x, np.asarray(fill).reshape(()), config)
    ext = [(w.size - 1) * w.window_dilation + 1 for w in window]
    if any(e > s for e, s in zip(ext, padded.shape)):
        shape = tuple(max(0, (s - e) // w.stride + 1) for s, e, w in zip(padded.shape, ext, window))
        return np.empty(shape + tuple(w.size for w in window), dtype=x.dtype)
    v = np.lib.stride_tricks.sliding_window_view(padded, ext)
    rank = x.ndim
    sl = tuple(slice(None, None, w.stride) for w in window) + \
        tuple(slice(None, None, w.window_dilation) for w in window)
    return v[sl] if rank else v


@handler("reduce-window")
def _reduce_window(ev, instr, ops):
    """XLA: each output starts from the init value and combines the window's
    real elements (padding and base-dilation holes are skipped)."""
    n = len(ops) // 2
    xs, inits = ops[:n], ops[n:]
    text = instr.attrs.get("window")
    rank = xs[0].ndim
    window = parse_window(text) if text else ()
    if len(window) != rank:
        raise EvaluationError(f"reduce-window window has {len(window)} dimensions, operand rank {rank}")
    out_types = ([s.element_type for s in instr.shape.tuple_shapes] if instr.shape.is_tuple
                 else [instr.shape.element_type])
    waxes = tuple(range(rank, 2 * rank))
    kind = simple_reducer(instr.to_apply) if n == 1 else None
    if kind is not None and _ufunc(kind, widen(xs[0]).dtype) is not None:
        ident = _identity(kind, xs[0].dtype)
        if ident is not None:
            return ufunc_reduce(kind, _windows(xs[0], ident, window), inits[0], waxes, out_types[0])
    wins = [_windows(x, np.zeros((), x.dtype), window) for x in xs]
    valid = _windows(np.ones(xs[0].shape, dtype=bool), np.array(False), window)
    flat = [w.reshape(w.shape[:rank] + (-1,)) for w in wins]
    res = tree_reduce(ev, instr.to_apply, flat, [np.asarray(i) for i in inits], out_types,
                      valid.reshape(valid.shape[:rank] + (-1,)))
    return tuple(res) if instr.shape.is_tuple else res[0]


# ---------------------------------------------------------------------------
# Sort
# ---------------------------------------------------------------------------


def _simple_comparator(comp):
    """(operand index, descending, total_order) for ``compare(p[2k], p[2k+1])``."""
    root = comp.root
    if root is None or root.opcode != "compare":
        return None
    a, b = root.operands
    if a.opcode != "parameter" or b.opcode != "parameter":
        return None
    direction = root.attrs.get("direction")
    na, nb = a.parameter_number, b.parameter_number
    if na // 2 != nb // 2 or na == nb:
        return None
    if direction not in ("LT", "GT"):
        return None
    descending = (direction == "GT") == (na % 2 == 0)
    return na // 2, descending, comparison_order(root) == "TOTAL"


def _sort_key(x: np.ndarray, element_type: str) -> np.ndarray:
    if is_float_dtype(x.dtype):
        return total_order_key(x, element_type)
    if x.dtype == np.bool_:
        return x.astype(np.int8)
    return widen(x)


@handler("sort")
def _sort(ev, instr, ops):
    (dim,) = instr.dimensions
    comp = instr.to_apply
    types = [o.shape.element_type for o in instr.operands]
    simple = _simple_comparator(comp)
    if simple is not None:
        k, descending, _ = simple
        key = _sort_key(ops[k], types[k])
        if descending:
            key = -key.astype(np.int64) if key.dtype.kind != "u" else np.iinfo(key.dtype).max - key
        idx = np.argsort(key, axis=dim, kind="stable")
    else:
        idx = _network_sort(ev, comp, ops, dim)
    out = [np.take_along_axis(o, idx, axis=dim) for o in ops]
    return tuple(out) if instr.shape.is_tuple else out[0]


def _network_sort(ev, comp, ops, dim: int) -> np.ndarray:
    """Bitonic sort of the index along ``dim`` with the lifted comparator;
    ties (neither a<b nor b<a) keep the original order."""
    moved = [np.moveaxis(o, dim, -1) for o in ops]
    n = moved[0].shape[-1]
    lead = moved[0].shape[:-1]
    size = 1
    while size < n:
        size *= 2
    perm = np.broadcast_to(np.arange(size, dtype=np.int64), lead + (size,)).copy()
    if n == 0:
        return np.moveaxis(perm[..., :0], -1, dim)

    def less(ia, ib):
        pa, pb = ia >= n, ib >= n
        ca, cb = np.minimum(ia, n - 1), np.minimum(ib, n - 1)
        args_ab, args_ba = [], []
        va = [np.take_along_axis(m, ca, axis=-1) for m in moved]
        vb = [np.take_along_axis(m, cb, axis=-1) for m in moved]
        for x, y in zip(va, vb):
            args_ab += [x, y]
            args_ba += [y, x]
        ab = np.broadcast_to(np.asarray(ev.call_lifted(comp, args_ab), dtype=bool), ia.shape)
        ba = np.broadcast_to(np.asarray(ev.call_lifted(comp, args_ba), dtype=bool), ia.shape)
        real = ~pa & ~pb
        return (~pa & pb) | (real & (ab | (~ba & (ia < ib))))

    positions = np.arange(size)
    k = 2
    while k <= size:
        j = k // 2
        while j >= 1:
            lo = positions[(positions & j) == 0]
            hi = lo | j
            plo, phi = perm[..., lo], perm[..., hi]
            asc = (lo & k) == 0
            swap = np.where(asc, less(phi, plo), less(plo, phi))
            perm[..., lo] = np.where(swap, phi, plo)
            perm[..., hi] = np.where(swap, plo, phi)
            j //= 2
        k *= 2
    return np.moveaxis(perm[..., :n], -1, dim)


@handler("select-and-scatter")
def _select_and_scatter(ev, instr, ops):
    operand, source, init = ops
    select, scatter = instr.attrs.get("select"), instr.attrs.get("scatter")
    text = instr.attrs.get("window")
    rank = operand.ndim
    window = parse_window(text) if text else ()
    if len(window) != rank or any(w.base_dilation != 1 or w.window_dilation != 1 for w in window):
        raise EvaluationError("select-and-scatter with dilation is not supported")
    # Positions of every window element in the unpadded operand.
    config = [(w.padding_low, w.padding_high, 0) for w in window]
    index = np.arange(operand.size, dtype=np.int64).reshape(operand.shape)
    pidx = pad_array(index, np.int64(-1), config)
    ext = [w.size for w in window]
    iw = np.lib.stride_tricks.sliding_window_view(pidx, ext)[
        tuple(slice(None, None, w.stride) for w in window)]
    out_shape = iw.shape[:rank]
    if tuple(out_shape) != tuple(source.shape):
        raise EvaluationError(f"select-and-scatter source shape {source.shape} does not match "
                              f"the window count {out_shape}")
    cand = iw.reshape(out_shape + (-1,))
    flat = operand.reshape(-1)
    best = cand[..., 0].copy()
    for k in range(1, cand.shape[-1]):
        c = cand[..., k]
        valid_c = c >= 0
        valid_b = best >= 0
        keep = np.asarray(ev.call_lifted(select, [flat[np.maximum(best, 0)], flat[np.maximum(c, 0)]]),
                          dtype=bool)
        keep = np.broadcast_to(keep, best.shape)
        take = valid_c & (~valid_b | ~keep)
        best = np.where(take, c, best)
    result = np.broadcast_to(init, operand.shape).astype(operand.dtype).reshape(-1).copy()
    targets = best.reshape(-1)
    vals = source.reshape(-1)
    ok = targets >= 0
    combine_at(ev, scatter, [result], [targets[ok]], [vals[ok]], [instr.shape.element_type])
    return result.reshape(operand.shape)


def combine_at(ev, comp, results: list[np.ndarray], targets: list[np.ndarray],
               values: list[np.ndarray], types: list[str]) -> None:
    """``results[i][t] = comp(results..[t], values..)`` for every update,
    in place on the flat ``results`` arrays; ``targets`` are flat indices."""
    t = targets[0]
    if t.size == 0:
        return
    root = comp.root
    n = len(results)
    if root.opcode == "parameter" and n == 1:
        if root.parameter_number == 1:
            results[0][t] = values[0]
        return
    kind = simple_reducer(comp) if n == 1 else None
    if kind is not None:
        wide = widen(results[0])
        fn = _ufunc(kind, wide.dtype)
        if fn is not None:
            w = wide.copy() if wide is results[0] else wide
            with np.errstate(all="ignore"):
                fn.at(w, t, widen(values[0]).astype(w.dtype))
            results[0][...] = cast_result(w, types[0])
            return
    # General combiner: rounds of distinct targets.
    order = np.argsort(t, kind="stable")
    ts = t[order]
    first = np.r_[True, ts[1:] != ts[:-1]]
    group_start = np.maximum.accumulate(np.where(first, np.arange(ts.size), 0))
    rank = np.arange(ts.size) - group_start
    for r in range(int(rank.max()) + 1):
        sel = order[rank == r]
        tr = t[sel]
        cur = [res[tr] for res in results]
        new = ev.call_lifted(comp, cur + [v[sel] for v in values])
        new = list(new) if n > 1 else [new]
        for res, val, typ in zip(results, new, types):
            res[tr] = np.broadcast_to(cast_result(np.asarray(val), typ), tr.shape)
