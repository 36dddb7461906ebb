"""GEMM cases for a targeted calibration run: shapes near the train split's
cross-validation misses (issue 20).

    python bench/autotune_near_cases.py --device H200 -o near.json [--per 4] [--seed 15]
    H20_CASES=near.json python bench/autotune_collect_watchdog.py WORK main 270 0 60   # on the GPU

The H200 backend misses that remain are shape-local: the neighbour
correction (``hlorun/autotune/neighbours.py``) is right where the train split
has measured GEMMs close by, and a random mix of new shapes rarely lands
there (session 8: the 298 train GEMMs of the ``x14_`` run changed 3 of the
642 session-7 held-out decisions).  This writes, for every train GEMM that
5-fold CV by shape gets wrong (the test split is not read), ``--per`` new
shapes of the same dtype, epilogue and layout a few percent away in m, n, k
or batch, each keeping which dimensions have 16-byte aligned rows and K's
residue mod 128 (so a Triton config's K loop is masked on both or neither),
in ``bench/autotune_collect.py``'s case format.  New shapes fall into train
or test by the usual shape hash when ingested.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

#: operand bytes per element of a case dtype (autotune_collect.py's DT)
BYTES = {"bf16": 2, "f16": 2, "tf32": 4, "f32": 4, "fp8": 1, "int8": 1}
#: the collector's limits: FLOPs per dtype, and 1 GiB per operand
FLOP_CAP = {"f32": 0.25e12, "tf32": 1.1e12}


def fits(b: int, m: int, n: int, k: int, dt: str) -> bool:
    ob = BYTES[dt]
    return (2 * b * m * n * k <= FLOP_CAP.get(dt, 2.2e12)
            and b * max(m * k, k * n, m * n) * max(ob, 2) <= 2 ** 30)


def near_shapes(b: int, m: int, n: int, k: int, dt: str, count: int, rng: random.Random,
                avoid: set | None = None) -> list[tuple[int, int, int, int]]:
    """Up to ``count`` shapes 3-15% from (b, m, n, k) in one or two of
    m, n, k: m and n move by multiples of 16 and k by multiples of 128, so
    each dimension keeps its 16-byte row alignment and K its masking for
    block_k x split_k <= 128 (a dimension where one step is over 15% stays);
    a batched shape may also change its batch by 2x."""
    avoid = set(avoid or ())
    steps = {0: 16, 1: 16, 2: 128}
    movable = [i for i, d in enumerate((m, n, k)) if steps[i] <= 0.15 * d]
    out: list[tuple[int, int, int, int]] = []
    for _ in range(50 * count):
        if len(out) == count or not (movable or b > 1):
            break
        nb, dims = b, [m, n, k]
        for i in rng.sample(movable, min(len(movable), rng.choice([1, 2]))):
            frac = rng.uniform(0.03, 0.15)
            j = max(1, min(round(dims[i] * frac / steps[i]), int(0.2 * dims[i] / steps[i])))
            dims[i] += steps[i] * j * rng.choice([-1, 1])
        if b > 1 and (not movable or rng.random() < 0.25):
            nb = b * 2 if rng.random() < 0.5 else max(2, b // 2)
        shape = (nb, *dims)
        if shape == (b, m, n, k) or shape in avoid or not fits(*shape, dt):
            continue
        avoid.add(shape)
        out.append(shape)
    return out


def cv_misses(dev: str) -> list:
    """The train GEMMs (``dataset.MeasuredGemm``) whose backend 5-fold CV
    by shape gets wrong, as ``bench/autotune_calibration.py --cv`` counts them."""
    from dataclasses import replace
    import hashlib
    from hlorun.autotune import dataset as D
    from hlorun.autotune import neighbours
    from hlorun.autotune.calibrate import evaluate
    from hlorun.autotune.cost import params_for
    from hlorun.autotune.devices import get_device
    from hlorun.autotune.fit import residual_rows
    device = get_device(dev)
    base = replace(params_for(device), measured_device="")
    train = D.load(dev, "train")

    def fold(g):
        p = g.problem
        return hashlib.sha256(f"{p.batch}x{p.m}x{p.n}x{p.k}".encode()).digest()[1] % 5
    out = []
    for f in range(5):
        name = f"{dev}/near{f}"
        neighbours.REGISTERED[name] = neighbours.Table(residual_rows([g for g in train if fold(g) != f], device, base))
        part = [g for g in train if fold(g) == f]
        out += [g for g, c in zip(part, evaluate(part, device, replace(base, measured_device=name)).cases)
                if not c.agrees]
        del neighbours.REGISTERED[name]
    return out


def main() -> int:
    from hlorun.autotune import dataset as D
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="H200")
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--per", type=int, default=4, help="new shapes per CV miss")
    ap.add_argument("--seed", type=int, default=15)
    a = ap.parse_args()
    dev = a.device.upper()
    rng = random.Random(a.seed)
    avoid = {(g.problem.batch, g.problem.m, g.problem.n, g.problem.k) for g in D.load(dev)}
    cases = []
    misses = cv_misses(dev)
    for g in misses:
        c = g.case
        dt = c.get("dtype", "")
        if dt not in BYTES:
            continue
        p = g.problem
        for s in near_shapes(p.batch, p.m, p.n, p.k, dt, a.per, rng, avoid):
            cases.append({"cat": "near", "b": s[0], "m": s[1], "n": s[2], "k": s[3], "dt": dt,
                          "epi": c.get("epilogue", "none"), "lay": c.get("layout", "NN"), "near": g.gemm})
    rng.shuffle(cases)
    for i, c in enumerate(cases):
        c["id"] = f"c{i:04d}"
    Path(a.out).write_text(json.dumps(cases) + "\n")
    print(f"{dev}: {len(misses)} CV misses -> {len(cases)} cases ({-(-len(cases) // 12)} modules of 12) -> {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
