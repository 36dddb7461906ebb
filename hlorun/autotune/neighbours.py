"""The measured neighbour correction: what the roofline terms miss for one
candidate, read off the nearest calibrated GEMMs that timed the same kernel.

The roofline model (``cost.terms``) is fitted per device with a few dozen
constants; its per-candidate error is not random: a given Triton config on a
given shape range is consistently slower or faster than the terms say
(register pressure, instruction mix, layout conversions, how the compiler
pipelines that tile).  The calibration set measures it directly, in two
levels.  With ``r = log(measured / roofline estimate)`` of every candidate
XLA timed on a train-split GEMM, and ``a`` the median ``r`` of that GEMM's
Triton configs,

* the *level* of a shape: ``a`` on the nearest calibrated GEMMs of the same
  compute class (whatever configs they timed);
* the *config* term: ``r - a`` -- how much slower or faster this config (or
  the BLAS library's best algorithm) ran than that GEMM's median config --
  on the nearest calibrated GEMMs of the class that timed the same config.

Each is a shrunken weighted mean over the ``k`` nearest,

    exp( sum_i w_i x_i / (sum_i w_i + shrink) ),   w_i = exp(-d_i / scale),

and the correction is their product.  ``d_i`` is the distance in (log2 m,
log2 n, log2 k, log2 batch, 16-byte alignment of m, n, k rows, K-majorness
of each operand; for a Triton config also whether its K loop is masked,
K not a multiple of block_k x split_k: on the H200, 128x128x64/s3/w4/tma
took 11.1 us on 1280^3 f16 and 31.5 us on 1296^3, far more than the terms'
one masked-K factor, so a masked run must not stand in for an unmasked
one).  Far or few neighbours shrink a factor towards 1.  Keeping the level
apart means a config's factor does not mix the shape-level error
of whichever GEMMs happened to time it (XLA prunes its config list by
shape), which is what the ranking of one GEMM's candidates depends on.  The
table (``data/residuals_<device>.csv``: ``level`` rows, one per GEMM, and
``triton``/``blas`` rows holding ``r - a``) is written by the fit from the
train split only, so held-out shapes are never looked up; devices without
measurements get no correction.  ``--explain`` prints both factors and the
nearest calibrated shape.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterable

import numpy as np

from .bundled import DATA_DIR, data_file
FIELDS = ["kind", "label", "cls", "batch", "m", "n", "k", "lhs_k_major", "rhs_k_major", "residual"]


@dataclass(frozen=True)
class Settings:
    """Chosen by cross-validation on the train split (folds by GEMM shape)."""

    k: int = 8             # neighbours per Triton config
    scale: float = 1.5     # distance (octaves) at which a neighbour weighs 1/e
    shrink: float = 0.1    # pull towards no correction (in units of weight)
    blas_k: int = 5
    blas_shrink: float = 0.5
    #: distance between a dimension whose rows are 16-byte aligned and one
    #: whose rows are not (unaligned rows change how operands can be loaded)
    align_weight: float = 3.0
    #: distance between operand layouts (each operand K-major or not)
    layout_weight: float = 1.5
    #: the shape level (median residual of a GEMM's configs)
    level_k: int = 8
    level_shrink: float = 0.3
    #: distance between a Triton config whose K loop is masked on one GEMM
    #: (K not a multiple of block_k x split_k) and unmasked on the other
    mask_weight: float = 2.0


SETTINGS = Settings()


#: operand bytes per element of a compute class
CLASS_BYTES = {"f16": 2, "tf32": 4, "f32": 4, "fp8": 1, "int8": 1, "f64": 8}


def position(batch: int, m: int, n: int, k: int, cls: str = "f16", layout: tuple[int, int] = (1, 1),
             settings: "Settings | None" = None) -> tuple[float, ...]:
    s = settings or SETTINGS
    b = CLASS_BYTES.get(cls, 2)
    return (math.log2(max(1, m)), math.log2(max(1, n)), math.log2(max(1, k)), math.log2(max(1, batch)),
            *(s.align_weight * bool(x * b % 16) for x in (m, n, k)),
            *(s.layout_weight * int(x) for x in layout))


@dataclass
class Correction:
    factor: float          # level x config
    neighbours: int        # calibrated GEMMs that timed this config
    nearest: str           # the nearest of them, "m x n x k [batch b]"
    distance: float
    level: float = 1.0     # the shape level: the nearest GEMMs' median config vs the terms
    config: float = 1.0    # this config vs those GEMMs' median config
    #: a Triton config: how many of the neighbours ran its K loop masked as
    #: this GEMM would (None: BLAS, or no masked coordinate)
    same_masking: int | None = None
    masked_here: bool = False

    def describe(self) -> str:
        s = (f"measured correction x{self.factor:.2f} (shape level x{self.level:.2f}, this config "
             f"x{self.config:.2f} on {self.neighbours} nearest calibrated GEMM(s), nearest {self.nearest}")
        if self.same_masking is not None:
            s += f"; K loop {'masked' if self.masked_here else 'not masked'} here and in {self.same_masking} of them"
        return s + ")"


class Table:
    def __init__(self, rows: Iterable[dict], settings: Settings = SETTINGS):
        self.settings = settings
        groups: dict[tuple[str, str, str], list[tuple]] = {}
        for r in rows:
            key = (r["kind"], r["label"], r["cls"])
            groups.setdefault(key, []).append((int(r["batch"]), int(r["m"]), int(r["n"]), int(r["k"]),
                                               float(r["residual"]),
                                               (int(r.get("lhs_k_major", 1)), int(r.get("rhs_k_major", 1)))))
        self.groups = {}
        self.levels: dict[str, tuple] = {}
        for key, rs in groups.items():
            shapes = np.array([r[:4] for r in rs], dtype=float)
            pos = np.array([position(*r[:4], key[2], r[5], settings) + _masked(key, r[3], settings)
                            for r in rs])
            if key[0] == "level":
                self.levels[key[2]] = (pos, np.array([r[4] for r in rs]))
                continue
            self.groups[key] = (pos, np.array([r[4] for r in rs]), shapes)
        self._memo: dict[tuple, Correction | None] = {}

    def __len__(self) -> int:
        return sum(len(v[1]) for v in self.groups.values())

    def lookup(self, kind: str, label: str, cls: str, batch: int, m: int, n: int, k: int,
               layout: tuple[int, int] = (1, 1)) -> Correction | None:
        """``layout``: (lhs K-major, rhs K-major)."""
        key = (kind, label, cls, batch, m, n, k, layout)
        if key in self._memo:
            return self._memo[key]
        out = None
        g = self.groups.get((kind, label if kind == "triton" else "", cls))
        if g is not None:
            s = self.settings
            kk, shrink = (s.k, s.shrink) if kind == "triton" else (s.blas_k, s.blas_shrink)
            pos, res, shapes = g
            here = position(batch, m, n, k, cls, layout, s)
            cfg, o, d = _shrunk_mean(pos, res, np.array(here + _masked((kind, label, cls), k, s)), kk,
                                     s.scale, shrink)
            lvl = 0.0
            if cls in self.levels:
                lvl = _shrunk_mean(*self.levels[cls], np.array(here), s.level_k, s.scale, s.level_shrink)[0]
            b0, m0, n0, k0 = (int(x) for x in shapes[o[0]])
            near = f"{m0}x{n0}x{k0}" + (f" batch {b0}" if b0 > 1 else "")
            extra = _masked((kind, label, cls), k, s)
            same = int(sum(pos[i][-1] == extra[0] for i in o)) if extra else None
            out = Correction(math.exp(lvl + cfg), len(o), near, float(d[o[0]]), math.exp(lvl), math.exp(cfg), same,
                             bool(extra and extra[0]))
        if len(self._memo) > 65536:
            self._memo.clear()
        self._memo[key] = out
        return out


def _masked(key: tuple, k: int, s: Settings) -> tuple[float, ...]:
    """A Triton config row's coordinate beyond its shape (none for BLAS and
    level rows): whether its K loop is masked, ``k`` not a multiple of the
    label's block_k x split_k (``cost``'s ``masked_k``)."""
    if key[0] != "triton" or not s.mask_weight:
        return ()
    parts = key[1].split("/")
    bk = int(parts[0].split("x")[2])
    sk = next((int(x[2:]) for x in parts[1:] if x.startswith("sk")), 1)
    return (s.mask_weight * bool(k % (bk * sk)),)


def _shrunk_mean(pos, values, here, k: int, scale: float, shrink: float):
    """The distance-weighted mean of ``values`` at the ``k`` rows of ``pos``
    nearest ``here``, shrunk towards 0; and those rows and all distances."""
    d = np.linalg.norm(pos - here, axis=1)
    o = np.argsort(d, kind="stable")[:k]
    w = np.exp(-d[o] / scale)
    return float((w * values[o]).sum() / (w.sum() + shrink)), o, d


def write_table(path: Path, rows: Iterable[dict]) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS, lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({**r, "residual": f"{float(r['residual']):.4f}"})


@lru_cache(maxsize=8)
def _load(name: str, data_dir: str) -> Table | None:
    p = data_file(data_dir, f"residuals_{name}.csv")
    if not p.is_file():
        return None
    with p.open(newline="") as fh:
        return Table(csv.DictReader(fh))  # (rows one at a time: a list of 40k dicts was ~20 MB)


#: tables registered in memory (cross-validation folds): name -> Table
REGISTERED: dict[str, Table] = {}


def table(device: str) -> Table | None:
    """The residual table of a measured device (``H200``, ``H100``), or one
    registered under that name, or None."""
    if not device:
        return None
    if device in REGISTERED:
        return REGISTERED[device]
    return _load(device.upper(), str(DATA_DIR))


def clear_cache() -> None:
    _load.cache_clear()
