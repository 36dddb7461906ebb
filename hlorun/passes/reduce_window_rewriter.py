"""Cumulative scans as tree reductions (XLA's ``AssociativeScanRewriter`` and
``ReduceWindowRewriter``, xla/hlo/transforms/simplifiers/reduce_window_rewriter.cc;
the GPU compiler uses a base length of 16).

* ``associative-scan-rewriter``: a forward ``scan`` with one input and one
  carry, marked ``is_associative``, whose body is ``tuple(op, op)`` of one
  elementwise binary op over its two parameters, whose final carry is not
  read and whose init is a broadcast scalar, becomes a cumulative
  ``reduce-window`` (window = the scan length, low padding = length - 1)
  over a scalar combiner ``<body>_scalarized_rw_wrapper`` (jnp.cumsum of
  JAX 0.11).  Past the base length the tree rewrite below folds the init
  twice, so the init must then be the op's identity (0 for add/or/xor, 0 or
  1 for multiply) or the op idempotent (min/max), as in XLA.
* ``reduce-window-rewriter``: a cumulative (inclusive or exclusive, forward
  or reverse) ``reduce-window`` over one dimension longer than the base
  length ``b`` becomes a two-level scan: the scan dimension (moved last by
  a transpose if needed, padded with the init to a multiple of ``b``) is
  reshaped to ``[n/b, b]``; each row of ``b`` is scanned; the last (first,
  reverse) column is scanned exclusively across rows; that is broadcast
  back and combined with the row scans by the reducer (XLA builds a
  ``map`` its MapInliner turns into the reducer's op: hlorun emits the op);
  the result is reshaped back, sliced, and padded by one init for an
  exclusive scan.  The cross-row scan is itself a cumulative reduce-window
  and is rewritten again while longer than ``b`` (4096 -> [256, 16], the
  256 -> [16, 16]).

Only single-input reduce-windows whose reducer is one binary elementwise op
of its two parameters are rewritten (what MapInliner needs; variadic and
tuple reducers are left alone -- stated gap).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.attrs import WindowDim, format_int_list, format_padding, format_window, parse_window
from ..ir.build import make_scalar_computation
from ..ir.module import Computation, Instruction, Module
from ..ir.opcode import ELEMENTWISE
from ..ir.shape import Shape
from .base import Pass
from .dfs_rewrite import nonfusion_computations

#: ``ReduceWindowRewriter(/*base_length=*/16)`` in XLA's GPU pipeline
BASE_LENGTH = 16
_COMBINERS = frozenset({"add", "multiply", "maximum", "minimum", "or", "xor", "and"})


def _array(t: str, dims) -> Shape:
    return Shape.array(t, list(dims))


def _binary_root(comp: Computation) -> str | None:
    """The opcode of ``comp``'s root if it is one binary elementwise op of
    the computation's two scalar parameters, else None."""
    root = comp.root
    params = [p for p in comp.parameters if p is not None]
    if len(params) != 2 or root.opcode not in ELEMENTWISE or len(root.operands) != 2:
        return None
    if set(root.operands) != set(params) or root.shape.is_tuple or root.shape.rank:
        return None
    return root.opcode


def _add(comp: Computation, opcode: str, shape: Shape, operands, meta: Instruction, **attrs
         ) -> Instruction:
    i = Instruction(opcode, shape, list(operands), "", dict(attrs))
    if "metadata" in meta.attrs:
        i.attrs["metadata"] = meta.attrs["metadata"]
    return comp.add_instruction(i, opcode)


# ---------------------------------------------------------------------------
# AssociativeScanRewriter
# ---------------------------------------------------------------------------


def _scalar_init(init: Instruction) -> Instruction | None:
    """``FindScalarInitSource``: the scalar behind broadcasts/reshapes/bitcasts."""
    while init.opcode in ("broadcast", "reshape", "bitcast"):
        if init.operands[0].shape.element_type != init.shape.element_type:
            return None
        init = init.operands[0]
    return init if init.shape.is_array and init.shape.rank == 0 else None


def _is_zero_or_one(init: Instruction, values) -> bool:
    lit = getattr(init, "literal", None)
    if init.opcode != "constant" or lit is None:
        return False
    return any(lit.is_scalar_value(v) for v in values)


def _tree_safe(op: str, init: Instruction) -> bool:
    """``IsTreeRewriteSafeInit``."""
    if op in ("maximum", "minimum"):
        return True
    if op in ("add", "or", "xor"):
        return _is_zero_or_one(init, (0.0,))
    if op == "multiply":
        return _is_zero_or_one(init, (0.0, 1.0))
    return False


def _scan_op(scan: Instruction) -> str | None:
    """The body's op if ``scan`` is a standard associative scan."""
    body = scan.called_computations()[0]
    root = body.root
    if root.opcode != "tuple" or len(root.operands) != 2 or root.operands[0] is not root.operands[1]:
        return None
    op = root.operands[0]
    params = [p for p in body.parameters if p is not None]
    if op.opcode not in _COMBINERS or len(op.operands) != 2 or set(op.operands) != set(params):
        return None
    return op.opcode


def rewrite_scan(scan: Instruction, module: Module, base: int):
    """Rewrite one scan; returns (remark, reduce-window), or None when left alone."""
    if (len(scan.operands) != 2 or scan.int_attr("num_carries") != 1
            or scan.attrs.get("is_associative") != "true"
            or scan.attrs.get("is_reverse") == "true" or not scan.shape.is_tuple):
        return None
    op = _scan_op(scan)
    if op is None:
        return None
    for u in scan.users:
        if u.opcode != "get-tuple-element":
            return None
        if u.tuple_index == 1 and (u.users or u.is_root()):
            return None
    data, init_vec = scan.operands
    init = _scalar_init(init_vec)
    if init is None:
        return None
    (dim,) = scan.dimensions
    length = data.shape.dimensions[dim]
    if length > base and not _tree_safe(op, init):
        return None
    comp = scan.parent
    body = scan.called_computations()[0]
    t = data.shape.element_type
    combiner = make_scalar_computation(module, op, t, f"{body.name}_scalarized_rw_wrapper",
                                       ("carry_0", "input_0"))
    # XLA's wrapper calls the body as (input, carry): the op reads them in that order
    root = combiner.root
    root.operands = [root.operands[1], root.operands[0]]
    window = [WindowDim() for _ in range(data.shape.rank)]
    window[dim] = WindowDim(size=length, padding_low=length - 1)
    rw = _add(comp, "reduce-window", _array(t, data.shape.dimensions), [data, init], scan,
              window=format_window(window), to_apply=combiner)
    new = _add(comp, "tuple", scan.shape, [rw, init_vec], scan)
    scan.replace_all_uses_with(new)
    comp.remove_instruction(scan)
    return (f"{scan.name}: associative {op} scan over dimension {dim} ({length}) -> "
            f"cumulative reduce-window {rw.name}"), rw


# ---------------------------------------------------------------------------
# ReduceWindowRewriter
# ---------------------------------------------------------------------------


def _cumulative(rw: Instruction):
    """(scan dim, length, forward, exclusive) of a cumulative reduce-window, or None."""
    if len(rw.operands) != 2 or rw.shape.is_tuple:
        return None
    x = rw.operands[0]
    window = parse_window(rw.attrs.get("window", "{}"))
    trivial = [w.size == 1 and w.stride == 1 and not w.padding_low and not w.padding_high
               and w.base_dilation == 1 and w.window_dilation == 1 for w in window]
    moving = [d for d, ok in enumerate(trivial) if not ok]
    if len(moving) != 1 or len(window) != x.shape.rank:
        return None
    d = moving[0]
    n = x.shape.dimensions[d]
    w = window[d]
    if w.stride != 1 or w.size != n or w.window_reversal or w.base_dilation != 1 \
            or w.window_dilation != 1:
        return None
    forward = w.padding_low in (n - 1, n) and w.padding_high == 0
    reverse = w.padding_high in (n - 1, n) and w.padding_low == 0
    if not (forward or reverse):
        return None
    exclusive = (w.padding_low if forward else w.padding_high) == n
    return d, n, forward, exclusive


def rewrite_reduce_window(rw: Instruction, base: int):
    """Rewrite one reduce-window; returns (remark, result, cross-row
    reduce-window), or None when left alone."""
    got = _cumulative(rw)
    if got is None:
        return None
    dim, n, forward, exclusive = got
    if n <= base:
        return None
    reducer = rw.called_computations()[0]
    op = _binary_root(reducer)
    if op is None:
        return None
    comp = rw.parent
    x, init = rw.operands
    t = x.shape.element_type
    rank = x.shape.rank
    last = rank - 1
    perm = list(range(rank))
    if dim != last:
        perm[dim], perm[last] = last, dim
        x = _add(comp, "transpose", _array(t, [x.shape.dimensions[p] for p in perm]), [x], rw,
                 dimensions=format_int_list(perm))
    dims = list(x.shape.dimensions)
    padded = -(-n // base) * base
    if padded != n:
        cfg = [(0, 0, 0)] * last + [(0, padded - n, 0)]
        dims[last] = padded
        x = _add(comp, "pad", _array(t, dims), [x, init], rw, padding=format_padding(cfg))
    cols = padded // base
    tiled = dims[:last] + [cols, base]
    x = _add(comp, "reshape", _array(t, tiled), [x], rw)
    # 3) scan each row of `base`
    outer_w = [WindowDim() for _ in tiled]
    outer_w[-1] = WindowDim(size=base, padding_low=base - 1 if forward else 0,
                            padding_high=0 if forward else base - 1)
    outer = _add(comp, "reduce-window", _array(t, tiled), [x, init], rw,
                 window=format_window(outer_w), to_apply=reducer)
    # 4) the last (first) column of each row
    start = [0] * len(tiled)
    limit = list(tiled)
    if forward:
        start[-1] = base - 1
    else:
        limit[-1] = 1
    col = _add(comp, "slice", _array(t, tiled[:-1] + [1]), [outer], rw,
               slice="{" + ", ".join(f"[{a}:{b}]" for a, b in zip(start, limit)) + "}")
    col = _add(comp, "reshape", _array(t, tiled[:-1]), [col], rw)
    # 5) exclusive scan across rows
    inner_w = [WindowDim() for _ in range(rank)]
    inner_w[last] = WindowDim(size=cols, padding_low=cols if forward else 0,
                              padding_high=0 if forward else cols)
    cross = _add(comp, "reduce-window", _array(t, tiled[:-2] + [cols + 1]), [col, init], rw,
                 window=format_window(inner_w), to_apply=reducer)
    s0, s1 = (0, cols) if forward else (1, cols + 1)
    inner = _add(comp, "slice", _array(t, tiled[:-1]), [cross], rw,
                 slice="{" + ", ".join([f"[0:{s}]" for s in tiled[:-2]] + [f"[{s0}:{s1}]"]) + "}")
    # 6) broadcast back, 7) combine (the map XLA's MapInliner inlines)
    b = _add(comp, "broadcast", _array(t, tiled), [inner], rw,
             dimensions=format_int_list(range(rank)))
    lhs, rhs = reducer.root.operands
    first = reducer.parameters[0]
    ordered = [outer, b] if lhs is first else [b, outer]
    y = _add(comp, op, _array(t, tiled), ordered, rw)
    y = _add(comp, "reshape", _array(t, dims), [y], rw)
    if dim != last:
        y = _add(comp, "transpose", _array(t, [dims[p] for p in perm]), [y], rw,
                 dimensions=format_int_list(perm))
    if padded != n:
        out = list(y.shape.dimensions)
        out[dim] = n
        y = _add(comp, "slice", _array(t, out), [y], rw,
                 slice="{" + ", ".join(f"[0:{s}]" for s in out) + "}")
    if exclusive:
        cfg = [(0, 0, 0)] * rank
        cfg[dim] = (1, 0, 0) if forward else (0, 1, 0)
        y = _add(comp, "pad", _array(t, rw.shape.dimensions), [y, init], rw,
                 padding=format_padding(cfg))
    name = rw.name
    rw.replace_all_uses_with(y)
    comp.remove_instruction(rw)
    return (f"{name}: {'exclusive' if exclusive else 'inclusive'} "
            f"{'forward' if forward else 'reverse'} scan of {n} over dimension {dim} -> "
            f"rows of {base} ({cols} rows), cross-row scan {cross.name}"), y, cross


@dataclass(frozen=True)
class AssociativeScanRewriter(Pass):
    """Associative cumulative scans -> cumulative reduce-windows."""

    name = "associative-scan-rewriter"
    base_length: int = BASE_LENGTH

    def run(self, module: Module) -> bool:
        changed = False
        for comp in nonfusion_computations(module):
            for instr in [i for i in comp.instructions if i.opcode == "scan"]:
                got = rewrite_scan(instr, module, self.base_length)
                if got:
                    changed = True
                    self.remark(got[1], got[0], derived_from=[instr])
        return changed


@dataclass(frozen=True)
class ReduceWindowRewriter(Pass):
    """Long cumulative reduce-windows -> two-level (tree) scans, to a fixed point."""

    name = "reduce-window-rewriter"
    base_length: int = BASE_LENGTH

    def run(self, module: Module) -> bool:
        changed = False
        for comp in nonfusion_computations(module):
            # the cross-row scan a rewrite makes is rewritten in turn (linear:
            # each rewrite divides the scan length by the base length)
            work = [i for i in comp.instructions if i.opcode == "reduce-window"]
            while work:
                rw = work.pop()
                got = rewrite_reduce_window(rw, self.base_length)
                if got:
                    changed = True
                    self.remark(got[1], got[0], derived_from=[rw])
                    work.append(got[2])
        return changed


__all__ = ["AssociativeScanRewriter", "BASE_LENGTH", "ReduceWindowRewriter"]
