"""Comparing two evaluations element by element, with per-dtype tolerances.

An element passes when ``|a - b| <= atol * scale + rtol * max(|a|, |b|)``,
where ``scale`` is ``max(1, rms(reference))``: sums of many products cancel
to values near zero whose absolute error follows the magnitude of the
terms, not of the result.  NaNs must match NaNs, infinities must match
exactly, integers and pred compare exactly.  Default tolerances allow a few
units in the last place of each type (a reordered f32 sum, one extra bf16
rounding) and nothing like a wrong element.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .dtypes import is_float_dtype

#: element type -> (rtol, atol)
TOLERANCES: dict[str, tuple[float, float]] = {
    "f64": (1e-9, 1e-9),
    "f32": (1e-4, 1e-4),
    "c64": (1e-4, 1e-4),
    "c128": (1e-9, 1e-9),
    "f16": (4e-3, 4e-3),
    "bf16": (3e-2, 3e-2),
    "f8e4m3fn": (0.25, 0.25),
    "f8e4m3": (0.25, 0.25),
    "f8e4m3fnuz": (0.25, 0.25),
    "f8e4m3b11fnuz": (0.25, 0.25),
    "f8e3m4": (0.125, 0.125),
    "f8e5m2": (0.5, 0.5),
    "f8e5m2fnuz": (0.5, 0.5),
}


def tolerance_for(element_type: str, rtol: float | None = None,
                  atol: float | None = None) -> tuple[float, float]:
    r, a = TOLERANCES.get(element_type, (0.0, 0.0))
    return (r if rtol is None else rtol), (a if atol is None else atol)


@dataclass
class LeafDiff:
    """How one output array of B differs from A."""

    index: tuple[int, ...]           # position in the output tuple ({} for arrays)
    element_type: str
    shape: tuple[int, ...]
    ok: bool
    rtol: float = 0.0
    atol: float = 0.0
    mismatches: int = 0
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0
    worst_index: tuple[int, ...] | None = None
    worst_a: Any = None
    worst_b: Any = None
    worst_ratio: float = 0.0         # |a - b| / tolerance at the worst element
    message: str = ""
    terms: int = 1                   # longest low-precision reduction feeding it
    referee: str = ""                # verdict of the f64 reference (reference.py)

    def to_json(self) -> dict:
        return {
            "output": list(self.index), "type": self.element_type, "shape": list(self.shape),
            "ok": self.ok, "rtol": self.rtol, "atol": self.atol, "mismatches": self.mismatches,
            "max_abs_error": self.max_abs_error, "max_rel_error": self.max_rel_error,
            "worst_index": list(self.worst_index) if self.worst_index is not None else None,
            "worst_a": _jsonable(self.worst_a), "worst_b": _jsonable(self.worst_b),
            "worst_ratio_to_tolerance": _jsonable(self.worst_ratio), "message": self.message,
            "reduction_terms": self.terms, "f64_referee": self.referee or None,
        }

    def describe(self) -> str:
        where = "output" + ("{" + ",".join(map(str, self.index)) + "}" if self.index else "")
        if self.message:
            return f"{where}: {self.message}"
        head = (f"{where} {self.element_type}[{','.join(map(str, self.shape))}]: "
                f"{'ok' if self.ok else f'{self.mismatches} elements differ'}")
        if self.referee:
            head += f" ({self.referee})"
        if self.worst_index is None:
            return head
        ratio = (f", {self.worst_ratio:.2g}x the tolerance" if self.worst_ratio != float("inf")
                 else "")
        return (f"{head}; worst at [{','.join(map(str, self.worst_index))}]: "
                f"{_fmt(self.worst_a)} vs {_fmt(self.worst_b)} "
                f"(|diff| {abs(_num(self.worst_a) - _num(self.worst_b)):.3g}{ratio}; "
                f"max |diff| {self.max_abs_error:.3g}; rtol {self.rtol:g}, atol {self.atol:g})")


@dataclass
class Comparison:
    leaves: list[LeafDiff] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(leaf.ok for leaf in self.leaves)

    def worst(self) -> LeafDiff | None:
        bad = [leaf for leaf in self.leaves if not leaf.ok]
        if not bad:
            return None
        return max(bad, key=lambda x: (x.message != "", x.max_abs_error))

    def to_json(self) -> dict:
        return {"ok": self.ok, "outputs": [leaf.to_json() for leaf in self.leaves]}


def _jsonable(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    f = float(v)
    if np.isnan(f) or np.isinf(f):
        return str(f)
    return f


def _num(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def _fmt(v: Any) -> str:
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    return f"{float(v):.6g}"


def _leaves(value: Any, index: tuple[int, ...] = ()) -> list[tuple[tuple[int, ...], Any]]:
    if isinstance(value, tuple):
        out = []
        for i, v in enumerate(value):
            out.extend(_leaves(v, index + (i,)))
        return out
    return [(index, value)]


def compare_arrays(a: np.ndarray, b: np.ndarray, element_type: str, index=(),
                   rtol: float | None = None, atol: float | None = None,
                   tolerance_type: str | None = None, terms: int = 1) -> LeafDiff:
    """Compare ``b`` against the reference ``a``; the default tolerances are
    those of ``tolerance_type`` (default: ``element_type``), the relative
    one widened for ``terms`` (see :func:`reduction_rtol`)."""
    if a is None and b is None:
        return LeafDiff(index, element_type, (), True)
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return LeafDiff(index, element_type, tuple(a.shape), False,
                        message=f"shapes differ: {list(a.shape)} vs {list(b.shape)}")
    r, t = tolerance_for(tolerance_type or element_type, rtol, atol)
    if tolerance_type and tolerance_type != element_type:
        r0, t0 = tolerance_for(element_type, rtol, atol)
        r, t = max(r, r0), max(t, t0)
    if rtol is None:
        r = max(r, reduction_rtol(tolerance_type or element_type, terms))
    leaf = LeafDiff(index, element_type, tuple(a.shape), True, r, t, terms=terms)
    if a.size == 0:
        return leaf
    if a.dtype.kind == "c" or b.dtype.kind == "c":
        fa, fb = a.astype(np.complex128), b.astype(np.complex128)
        mag_a, mag_b = np.abs(fa), np.abs(fb)
        nan_a, nan_b = np.isnan(fa), np.isnan(fb)
    elif is_float_dtype(a.dtype) or is_float_dtype(b.dtype):
        fa, fb = a.astype(np.float64), b.astype(np.float64)
        mag_a, mag_b = np.abs(fa), np.abs(fb)
        nan_a, nan_b = np.isnan(fa), np.isnan(fb)
    else:
        fa = a.astype(np.int64) if a.dtype != np.uint64 else a.astype(np.float64)
        fb = b.astype(np.int64) if b.dtype != np.uint64 else b.astype(np.float64)
        diff = np.abs(fa - fb).astype(np.float64)
        bad = diff > 0
        leaf.mismatches = int(bad.sum())
        leaf.ok = leaf.mismatches == 0
        if not leaf.ok:
            i = int(np.argmax(diff))
            leaf.worst_index = tuple(int(x) for x in np.unravel_index(i, a.shape))
            leaf.worst_a, leaf.worst_b = a.reshape(-1)[i], b.reshape(-1)[i]
            leaf.max_abs_error = float(diff.reshape(-1)[i])
            leaf.worst_ratio = float("inf")
            denom = abs(float(fa.reshape(-1)[i]))
            leaf.max_rel_error = leaf.max_abs_error / denom if denom else float("inf")
        return leaf
    with np.errstate(all="ignore"):
        finite = np.isfinite(fa) & np.isfinite(fb)
        ref = fa[np.isfinite(fa)]
        scale = max(1.0, float(np.sqrt(np.mean(np.abs(ref) ** 2)))) if ref.size else 1.0
        diff = np.where(finite, np.abs(fa - fb), 0.0)
        tol = t * scale + r * np.maximum(mag_a, mag_b)
        ratio = np.where(finite, diff / np.where(tol > 0, tol, 1e-300), 0.0)
        # non-finite: NaN must meet NaN, inf the same inf
        special = ~finite
        same_special = (nan_a & nan_b) | (~nan_a & ~nan_b & (fa == fb))
        ratio = np.where(special & ~same_special, np.inf, ratio)
        rel = np.where(finite, diff / np.where(mag_a > 0, mag_a, np.inf), 0.0)
    bad = ratio > 1.0
    leaf.mismatches = int(bad.sum())
    leaf.ok = leaf.mismatches == 0
    leaf.max_abs_error = float(np.max(diff)) if diff.size else 0.0
    leaf.max_rel_error = float(np.max(np.where(np.isfinite(rel), rel, 0.0)))
    i = int(np.argmax(ratio))
    if ratio.reshape(-1)[i] > 0:
        leaf.worst_index = tuple(int(x) for x in np.unravel_index(i, a.shape))
        leaf.worst_a, leaf.worst_b = fa.reshape(-1)[i], fb.reshape(-1)[i]
        leaf.worst_ratio = float(ratio.reshape(-1)[i])
        if a.dtype.kind == "c":
            leaf.worst_a, leaf.worst_b = abs(leaf.worst_a), abs(leaf.worst_b)
    return leaf


def compare_values(a: Any, b: Any, types: list[str] | None = None,
                   rtol: float | None = None, atol: float | None = None,
                   tolerance_types: list[str] | None = None,
                   identical: list[bool] | None = None,
                   terms: list[int] | None = None) -> Comparison:
    """Compare two evaluation results (arrays or nested tuples) leaf by leaf.
    ``types`` are the HLO element types of the leaves of ``a``;
    ``tolerance_types`` (see :func:`tolerance_types`) the types whose
    tolerance applies to each leaf; ``identical`` marks leaves already known
    to be bitwise equal (content digests), which are not scanned."""
    la, lb = _leaves(a), _leaves(b)
    cmp = Comparison()
    if len(la) != len(lb):
        cmp.leaves.append(LeafDiff((), "", (), False,
                                   message=f"{len(la)} outputs vs {len(lb)} outputs"))
        return cmp
    for k, ((ia, va), (_, vb)) in enumerate(zip(la, lb)):
        t = types[k] if types and k < len(types) else _type_of(va)
        tt = tolerance_types[k] if tolerance_types and k < len(tolerance_types) else None
        if identical and k < len(identical) and identical[k]:
            r, at = tolerance_for(tt or t, rtol, atol)
            cmp.leaves.append(LeafDiff(ia, t, tuple(np.shape(va)), True, r, at))
            continue
        n = terms[k] if terms and k < len(terms) else 1
        cmp.leaves.append(compare_arrays(va, vb, t, ia, rtol, atol, tt, n))
    return cmp


def _type_of(v: Any) -> str:
    if v is None:
        return "token"
    dt = np.asarray(v).dtype
    names = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16",
             "float8_e4m3fn": "f8e4m3fn", "float8_e5m2": "f8e5m2", "bool": "pred",
             "complex64": "c64", "complex128": "c128"}
    if dt.name in names:
        return names[dt.name]
    if dt.kind == "i":
        return f"s{dt.itemsize * 8}"
    if dt.kind == "u":
        return f"u{dt.itemsize * 8}"
    return dt.name


#: mantissa bits of the floating types (fewer bits: looser tolerance)
_MANTISSA = {"f64": 52, "c128": 52, "f32": 23, "c64": 23, "f16": 10, "bf16": 7,
             "f8e3m4": 4, "f8e4m3": 3, "f8e4m3fn": 3, "f8e4m3fnuz": 3, "f8e4m3b11fnuz": 3,
             "f8e5m2": 2, "f8e5m2fnuz": 2}


#: types whose rounding error grows visibly with the length of a sum
_LOW_PRECISION_BITS = 10


def reduction_rtol(element_type: str, terms: int) -> float:
    """Relative tolerance for a result that summed ``terms`` values in
    ``element_type`` (bf16, f16, fp8): each addition rounds, so two valid
    orders of the same sum differ by up to the error bound of tree-shaped
    (pairwise) summation, which GPU reductions are: ``u * log2(terms)``
    (``u`` the unit roundoff, 2^-(mantissa bits + 1)); a 16384-term bf16
    sum gets 5.5% instead of the flat 3%.  0 for wider types or short
    sums."""
    bits = _MANTISSA.get(element_type)
    if bits is None or bits > _LOW_PRECISION_BITS or terms <= 1:
        return 0.0
    return 2.0 ** -(bits + 1) * float(np.log2(terms))


def reduction_lengths(module) -> list[int]:
    """Per output leaf of the entry: the most elements any reduce (or
    reduce-window) in its cone sums in a low-precision type (bf16, f16,
    fp8; dots accumulate in f32 and do not count), through called
    computations; 1 if none."""
    from ..ir.module import Computation
    comp_cache: dict[Computation, int] = {}

    def own(ins) -> int:
        n = 1
        if ins.opcode in ("reduce", "reduce-window") and ins.operands:
            src = ins.operands[0].shape
            if src.is_array and _MANTISSA.get(src.element_type, 99) <= _LOW_PRECISION_BITS:
                if ins.opcode == "reduce":
                    for d in ins.int_list("dimensions"):
                        if d < len(src.dimensions):
                            n *= src.dimensions[d]
                else:
                    n = max(1, src.element_count // max(1, ins.shape.element_count)
                            if ins.shape.is_array else 1)
        if ins.attrs:
            for c in ins.called_computations():
                n = max(n, in_comp(c))
        return n

    def in_comp(comp) -> int:
        if comp in comp_cache:
            return comp_cache[comp]
        comp_cache[comp] = 1
        comp_cache[comp] = max((own(i) for i in comp.instructions), default=1)
        return comp_cache[comp]

    entry = module.entry
    cone: dict = {}
    for ins in entry.post_order():
        n = own(ins)
        for o in ins.operands:
            n = max(n, cone.get(o, 1))
        cone[ins] = n
    root = entry.root
    out = []
    for idx, _ in (root.shape.leaves() if root.shape.is_tuple else [((), root.shape)]):
        src = root
        while idx and src.opcode == "tuple":
            src, idx = src.operands[idx[0]], idx[1:]
        out.append(cone.get(src, 1))
    return out


#: dot algorithm -> the type whose tolerance its result gets (TF32 has
#: f16's 10 mantissa bits; the 3-pass splits keep about 16 bits)
_ALGORITHM_TOLERANCE = {
    "dot_bf16_bf16_f32": "bf16", "dot_bf16_bf16_f32_x3": "f16",
    "dot_tf32_tf32_f32": "f16", "dot_f16_f16_f32": "f16",
    "dot_any_f8_any_f8_f32": "f8e4m3fn", "dot_any_f8_any_f8_f32_fast_accum": "f8e4m3fn",
}


def _narrowest(a: str | None, b: str | None) -> str | None:
    if a is None:
        return b
    if b is None:
        return a
    return a if _MANTISSA.get(a, 99) <= _MANTISSA.get(b, 99) else b


def tolerance_types(module) -> list[str]:
    """Per output leaf of the entry: the least precise floating type in the
    computation that produces it (an f32 loss computed through bf16 logits
    cannot be compared more tightly than bf16), or the leaf's own type."""
    from ..ir.module import Computation
    comp_cache: dict[Computation, str | None] = {}

    def in_comp(comp: Computation) -> str | None:
        if comp in comp_cache:
            return comp_cache[comp]
        comp_cache[comp] = None  # recursion guard
        best = None
        for ins in comp.instructions:
            best = _narrowest(best, own(ins))
        comp_cache[comp] = best
        return best

    def own(ins) -> str | None:
        best = None
        alg = ins.attrs.get("algorithm") if ins.opcode == "dot" and ins.attrs else None
        if alg:  # the operand precision of a dot algorithm bounds its result
            best = _ALGORITHM_TOLERANCE.get(str(alg).lower())
        for _, s in (ins.shape.leaves() if ins.shape.is_tuple else [((), ins.shape)]):
            if s.is_array and s.element_type in _MANTISSA:
                best = _narrowest(best, s.element_type)
        if ins.attrs:
            for c in ins.called_computations():
                best = _narrowest(best, in_comp(c))
        return best

    entry = module.entry
    cone: dict = {}
    for ins in entry.post_order():
        best = own(ins)
        for o in ins.operands:
            best = _narrowest(best, cone.get(o))
        cone[ins] = best
    root = entry.root
    out = []
    leaves = root.shape.leaves() if root.shape.is_tuple else [((), root.shape)]
    for k, (idx, s) in enumerate(leaves):
        src = root
        # a tuple root: follow the operand that produced the leaf
        while idx and src.opcode == "tuple":
            src, idx = src.operands[idx[0]], idx[1:]
        narrow = cone.get(src)
        t = s.element_type
        out.append(_narrowest(t, narrow) if t in _MANTISSA else t)
    return out
