"""Data movement: broadcast, reshape, bitcast, transpose, copy, slice,
dynamic-slice, dynamic-update-slice, concatenate, pad, iota, reverse, and
the identity-like ops (domain, opt-barrier, add-dependency, ...).

Values are held in *logical* order (numpy shape == HLO dimensions); layouts
only matter where XLA reinterprets memory: ``bitcast`` reads the operand's
physical buffer (dimensions ordered by ``minor_to_major``) and lays it out
again in the result's physical order.
"""

from __future__ import annotations

import numpy as np

from ..ir.shape import Shape
from .dtypes import contiguous, dtype_of
from .registry import EvaluationError, handler, unsupported


def to_physical(x: np.ndarray, shape: Shape) -> np.ndarray:
    """The row-major view of ``x`` in ``shape``'s physical order (most major
    dimension first)."""
    m2m = shape.minor_to_major
    if len(m2m) != x.ndim:
        raise EvaluationError(f"layout {shape} does not match a rank-{x.ndim} value")
    return np.transpose(x, tuple(reversed(m2m)))


def from_physical(buf: np.ndarray, shape: Shape) -> np.ndarray:
    """Inverse of :func:`to_physical`: a flat physical buffer -> logical array."""
    m2m = shape.minor_to_major
    major_to_minor = tuple(reversed(m2m))
    phys_dims = tuple(shape.dimensions[d] for d in major_to_minor)
    arr = buf.reshape(phys_dims)
    inverse = [0] * len(major_to_minor)
    for i, d in enumerate(major_to_minor):
        inverse[d] = i
    return np.transpose(arr, inverse)


def _check_plain_layout(shape: Shape, what: str) -> None:
    lay = shape.layout
    if lay is not None and (lay.tiles or lay.element_size_in_bits):
        raise unsupported(f"{what} with tiled or packed layout {lay}")


@handler("bitcast")
def _bitcast(ev, instr, ops):
    x = ops[0]
    src = instr.operands[0].shape
    dst = instr.shape
    if ev.lifted and not src.dimensions and not dst.dimensions:
        # scalar -> scalar inside a lifted computation (a sort comparator
        # comparing f32 keys as s32 bits): elementwise over the batch
        if src.element_type == dst.element_type:
            return x
        sd, dd = dtype_of(src.element_type), dtype_of(dst.element_type)
        if sd.itemsize != dd.itemsize:
            raise unsupported(f"bitcast from {src} to {dst} (element size changes)")
        return contiguous(x).view(dd)
    _check_plain_layout(src, "bitcast")
    _check_plain_layout(dst, "bitcast")
    if src.element_type != dst.element_type:
        sd, dd = dtype_of(src.element_type), dtype_of(dst.element_type)
        if sd.itemsize != dd.itemsize or src.element_count != dst.element_count:
            raise unsupported(f"bitcast from {src} to {dst} (element size changes)")
        x = contiguous(x).view(dd)
    if src.element_count != dst.element_count:
        raise EvaluationError(f"bitcast from {src} to {dst} changes the element count")
    flat = contiguous(to_physical(x, src)).reshape(-1)
    return from_physical(flat, dst)


@handler("reshape")
def _reshape(ev, instr, ops):
    if ev.lifted and not instr.shape.dimensions:  # scalar -> scalar, lifted
        return ops[0]
    return np.reshape(ops[0], instr.shape.dimensions)


@handler("dynamic-reshape")
def _dynamic_reshape(ev, instr, ops):
    return np.reshape(ops[0], instr.shape.dimensions)


@handler("transpose")
def _transpose(ev, instr, ops):
    return np.transpose(ops[0], instr.dimensions)


@handler("copy", "domain", "opt-barrier", "optimization-barrier")
def _identity(ev, instr, ops):
    return ops[0]


@handler("add-dependency")
def _add_dependency(ev, instr, ops):
    return ops[0]


@handler("after-all")
def _after_all(ev, instr, ops):
    return None


@handler("broadcast")
def _broadcast(ev, instr, ops):
    x = ops[0]
    out_dims = instr.shape.dimensions
    dims = instr.dimensions
    if not out_dims and ev.lifted:  # scalar -> scalar inside a lifted computation
        return x
    if x.ndim != len(dims):
        raise EvaluationError(f"broadcast dimensions {list(dims)} do not match operand rank {x.ndim}")
    order = sorted(range(len(dims)), key=lambda i: dims[i])
    if order != list(range(len(dims))):
        x = np.transpose(x, order)
        dims = tuple(dims[i] for i in order)
    shape = [1] * len(out_dims)
    for i, d in enumerate(dims):
        shape[d] = x.shape[i]
    return np.broadcast_to(np.reshape(x, shape), out_dims)


@handler("iota")
def _iota(ev, instr, ops):
    dims = instr.shape.dimensions
    d = instr.int_attr("iota_dimension")
    dt = dtype_of(instr.shape.element_type)
    n = dims[d]
    line = np.arange(n, dtype=np.float64 if dt.kind not in "iub" else np.int64).astype(dt)
    shape = [1] * len(dims)
    shape[d] = n
    return np.broadcast_to(line.reshape(shape), dims)


@handler("slice")
def _slice(ev, instr, ops):
    from ..ir.attrs import parse_slice
    ranges = parse_slice(instr.attrs["slice"])
    return ops[0][tuple(slice(s, l, st) for s, l, st in ranges)]


def _clamped_starts(starts, operand_dims, sizes) -> list[int]:
    out = []
    for s, dim, size in zip(starts, operand_dims, sizes):
        v = int(np.asarray(s).reshape(()))
        out.append(min(max(v, 0), dim - size))
    return out


@handler("dynamic-slice")
def _dynamic_slice(ev, instr, ops):
    x = ops[0]
    sizes = instr.int_list("dynamic_slice_sizes")
    idx = ops[1:]
    if len(idx) == 1 and np.asarray(idx[0]).ndim == 1 and x.ndim != 1:
        idx = list(np.asarray(idx[0]))  # old form: one index vector
    starts = _clamped_starts(idx, x.shape, sizes)
    return x[tuple(slice(s, s + n) for s, n in zip(starts, sizes))]


@handler("dynamic-update-slice")
def _dynamic_update_slice(ev, instr, ops):
    x, upd = ops[0], ops[1]
    idx = ops[2:]
    if len(idx) == 1 and np.asarray(idx[0]).ndim == 1 and x.ndim != 1:
        idx = list(np.asarray(idx[0]))
    starts = _clamped_starts(idx, x.shape, upd.shape)
    out = np.array(x, copy=True)
    out[tuple(slice(s, s + n) for s, n in zip(starts, upd.shape))] = upd
    return out


@handler("concatenate")
def _concatenate(ev, instr, ops):
    (d,) = instr.dimensions
    return np.concatenate(ops, axis=d)


@handler("reverse")
def _reverse(ev, instr, ops):
    dims = instr.dimensions
    return np.flip(ops[0], axis=dims) if dims else ops[0]


def pad_array(x: np.ndarray, value, config) -> np.ndarray:
    """XLA pad: per dimension (low, high, interior); low/high may be negative."""
    out = x
    for axis, (lo, hi, interior) in enumerate(config):
        n = out.shape[axis]
        if interior and n > 1:
            size = n + (n - 1) * interior
            shape = list(out.shape)
            shape[axis] = size
            dil = np.full(shape, value, dtype=out.dtype)
            sl = [slice(None)] * out.ndim
            sl[axis] = slice(None, None, interior + 1)
            dil[tuple(sl)] = out
            out = dil
            n = size
        start = max(-lo, 0)
        stop = n - max(-hi, 0)
        if start or stop != n:
            sl = [slice(None)] * out.ndim
            sl[axis] = slice(start, max(stop, start))
            out = out[tuple(sl)]
        if lo > 0 or hi > 0:
            widths = [(0, 0)] * out.ndim
            widths[axis] = (max(lo, 0), max(hi, 0))
            pad_shape = list(out.shape)
            pad_shape[axis] = out.shape[axis] + widths[axis][0] + widths[axis][1]
            full = np.full(pad_shape, value, dtype=out.dtype)
            sl = [slice(None)] * out.ndim
            sl[axis] = slice(widths[axis][0], widths[axis][0] + out.shape[axis])
            full[tuple(sl)] = out
            out = full
    return out


@handler("pad")
def _pad(ev, instr, ops):
    from ..ir.attrs import parse_padding
    config = parse_padding(instr.attrs["padding"])
    value = np.asarray(ops[1]).reshape(())
    return pad_array(ops[0], value, config)


@handler("get-dimension-size")
def _get_dimension_size(ev, instr, ops):
    (d,) = instr.dimensions
    return np.array(ops[0].shape[d], dtype=dtype_of(instr.shape.element_type))

