"""How well the autotuner's cost model predicts the real XLA autotuner, on
GEMMs the fit never saw.

    python bench/autotune_calibration.py                 # report, fitted constants
    python bench/autotune_calibration.py --json
    python bench/autotune_calibration.py --fit           # refit on the train split (needs scipy),
                                                         # write hlorun/autotune/data/params_<dev>.json
                                                         # and residuals_<dev>.csv
    python bench/autotune_calibration.py --fit-some unaligned_fma.blas,unaligned_fma.triton
                                                         # refit only those constants (the rest held), then
                                                         # rewrite params_<dev>.json and residuals_<dev>.csv
    python bench/autotune_calibration.py --residuals     # only rewrite residuals_<dev>.csv (train split)
    python bench/autotune_calibration.py --cv            # also 5-fold CV by shape within the train split
    python bench/autotune_calibration.py --misses        # backend misses by class (CV folds of the
                                                         # train split, and the held-out split)

Data: ``hlorun/autotune/data`` (XLA's own autotune logs: every Triton
config and cuBLASLt algorithm it timed, per GEMM; split by GEMM shape into
train and test), plus ``shared/xla-dumps/gemm_sweep`` (26 H200 programs of
another session, all unseen).  Per device, on the held-out split:

* backend agreement: XLA's PickBestConfig rule on our estimates vs XLA's choice;
* Spearman of predicted vs measured candidate times per GEMM (XLA-timed
  Triton configs + the best BLAS algorithm): median, median under 1 GFLOP,
  worst decile (10th percentile);
* the chosen config: |estimate / measured - 1| <= 25 %, fraction of GEMMs;
* S4: the predicted throughput of 256x256x32/s3/w32 with the add-matrix
  epilogue on PVC (the incident measured about 130 TFLOP/s; 64x128x32 ran at 55).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hlorun.autotune import dataset as D  # noqa: E402
from hlorun.autotune.calibrate import evaluate  # noqa: E402
from hlorun.autotune.cost import params_for  # noqa: E402
from hlorun.autotune.devices import get_device  # noqa: E402

KEYS = ("gemms", "backend_agreement", "backend_agreement_pct", "median_spearman", "median_spearman_under_1_gflop",
        "worst_decile_spearman", "chosen_config_within_25pct", "median_abs_error_all_candidates")


def s4_prediction() -> dict:
    from hlorun.autotune.candidates import triton_candidate
    from hlorun.autotune.problem import gemm_problem
    from hlorun.autotune.triton import TritonConfig
    from hlorun.text.parser import load_module
    from hlorun.passes import pass_class
    from hlorun.passes.base import Target
    m = load_module(Path(__file__).resolve().parent.parent / "testdata/s4/gemm_add_bf16.hlo")
    pass_class("triton-gemm-rewriter")(target=Target()).run(m)
    fusion = next(i for i in m.entry.instructions if i.opcode == "fusion")
    p = gemm_problem(fusion)
    pvc = get_device("PVC")
    out = {"problem": p.shape_text, "params": params_for(pvc).source}
    for cfg, measured in ((TritonConfig(256, 256, 32, 1, 3, 32), 130.0), (TritonConfig(64, 128, 32, 1, 3, 32), 55.0)):
        c = triton_candidate(cfg, p, pvc)
        e = c.estimate or c.hypothetical
        tf = p.flops / e.ns / 1e3
        out[cfg.label] = {"predicted_tflops": round(tf, 1), "incident_tflops": measured,
                          "ratio": round(tf / measured, 2), "feasible": c.feasible, "bound": e.bound}
    return out


def write_residuals(dev: str) -> None:
    """The neighbour-correction table of the current constants, from the train split only."""
    from hlorun.autotune import neighbours
    from hlorun.autotune.cost import DATA_DIR, _load_params
    from hlorun.autotune.fit import residual_rows
    _load_params.cache_clear()
    P = params_for(get_device(dev))
    rows = residual_rows(D.load(dev, "train"), get_device(dev), replace(P, measured_device=""))
    neighbours.write_table(DATA_DIR / f"residuals_{dev}.csv", rows)
    neighbours.clear_cache()
    print(f"{dev}: {len(rows)} residuals -> residuals_{dev}.csv", file=sys.stderr)


def cross_validate(dev: str, folds: int = 5, settings=None) -> dict:
    """The train split only: each fold (by GEMM shape) evaluated with a
    neighbour table built from the other folds -- how the correction's
    structure and settings were chosen without looking at the test split."""
    import hashlib
    from hlorun.autotune import neighbours
    from hlorun.autotune.calibrate import Summary, evaluate
    from hlorun.autotune.fit import residual_rows
    device = get_device(dev)
    base = replace(params_for(device), measured_device="")
    train = D.load(dev, "train")

    def fold(g):
        p = g.problem
        return hashlib.sha256(f"{p.batch}x{p.m}x{p.n}x{p.k}".encode()).digest()[1] % folds
    cases = []
    for f in range(folds):
        rest = [g for g in train if fold(g) != f]
        name = f"{dev}/cv{f}"
        neighbours.REGISTERED[name] = neighbours.Table(residual_rows(rest, device, base),
                                                       settings or neighbours.SETTINGS)
        cases += evaluate([g for g in train if fold(g) == f], device,
                          replace(base, measured_device=name)).cases
        del neighbours.REGISTERED[name]
    j = Summary(cases).to_json()
    return {k: j[k] for k in KEYS}


def tile_alignment(m: int, n: int, k: int) -> str:
    """Whether a GEMM's dimensions are whole multiples of the common tile
    sizes: real programs' GEMMs mostly are, the random calibration shapes
    mostly not (session 9, H200 train-split CV: 27 misses of the 208 GEMMs
    whose m, n and k are multiples of 128, 13%, against 49 of the 1063 whose
    k is not a multiple of 64, 4.6%)."""
    if all(x % 128 == 0 for x in (m, n, k)):
        return "m, n, k multiples of 128"
    if all(x % 64 == 0 for x in (m, n, k)):
        return "m, n, k multiples of 64"
    return "k multiple of 64" if k % 64 == 0 else "other"


def _classes(g) -> dict:
    p = g.problem
    gf = 2.0 * p.batch * p.m * p.n * p.k / 1e9
    margin = "one backend"
    if g.triton and g.blas:
        r = abs(math.log(min(c.ns for c in g.blas) / min(c.ns for c in g.triton)))
        margin = "<5%" if r < 0.05 else "5-10%" if r < 0.1 else "10-25%" if r < 0.25 else ">25%"
    return {"dtype": g.case.get("dtype", ""), "epilogue": g.case.get("epilogue", ""),
            "shape": g.case.get("category", ""), "batch": "batched" if p.batch > 1 else "single",
            "layout": f"lhs {'K' if p.lhs_k_major else 'M'}-major, rhs {'K' if p.rhs_k_major else 'N'}-major",
            "size": "<0.1 GFLOP" if gf < 0.1 else "0.1-1 GFLOP" if gf < 1 else "1-10 GFLOP" if gf < 10 else ">=10 GFLOP",
            "tile alignment": tile_alignment(p.m, p.n, p.k),
            "split_k": "split-K timed" if any(c.triton and c.triton.split_k > 1 for c in g.triton) else "no split-K",
            "measured margin": margin}


def run_to_run(dev: str) -> dict:
    """XLA against itself: GEMMs whose every candidate was timed in two
    independent autotuning runs.  How often its own rule picks the other
    backend on the second run's times, and the Spearman of the two runs'
    candidate times -- the ceiling a model of the expected times can reach."""
    from hlorun.autotune.calibrate import pick_best, spearman
    out: dict = {}
    for g in D.load(dev):
        if not g.triton or not g.blas or not all(c.ns_repeat for c in g.candidates):
            continue
        p = g.problem
        size = "under 1 GFLOP" if 2.0 * p.batch * p.m * p.n * p.k < 1e9 else "1 GFLOP or more"
        first = pick_best(g.candidates, lambda c: c.ns, lambda c: c.scratch_bytes).backend
        second = pick_best(g.candidates, lambda c: c.ns_repeat, lambda c: c.scratch_bytes).backend
        a = [c.ns for c in g.triton] + [min(c.ns for c in g.blas)]
        b = [c.ns_repeat for c in g.triton] + [min(c.ns_repeat for c in g.blas)]
        for key in (size, "all"):
            t = out.setdefault(key, {"gemms": 0, "backend_flips": 0, "rho": []})
            t["gemms"] += 1
            t["backend_flips"] += first != second
            t["rho"].append(spearman(a, b))
    for t in out.values():
        rs = sorted(r for r in t.pop("rho") if not math.isnan(r))
        t["run_vs_run_median_spearman"] = round(rs[len(rs) // 2], 3) if rs else None
        t["agreement_pct"] = round(100.0 * (1 - t["backend_flips"] / t["gemms"]), 1)
    return out


def misses(dev: str, folds: int = 5) -> dict:
    """Backend misses per class: the train split's CV folds (each evaluated
    with a neighbour table from the other folds) and the held-out split."""
    import hashlib
    from hlorun.autotune import neighbours
    from hlorun.autotune.fit import residual_rows
    device = get_device(dev)
    base = replace(params_for(device), measured_device="")
    train = D.load(dev, "train")
    fold = lambda g: hashlib.sha256(f"{g.problem.batch}x{g.problem.m}x{g.problem.n}x{g.problem.k}".encode()).digest()[1] % folds  # noqa: E731
    out = {}
    pairs = []
    for f in range(folds):
        name = f"{dev}/cv{f}"
        neighbours.REGISTERED[name] = neighbours.Table(residual_rows([g for g in train if fold(g) != f], device, base))
        part = [g for g in train if fold(g) == f]
        pairs += list(zip(part, evaluate(part, device, replace(base, measured_device=name)).cases))
        del neighbours.REGISTERED[name]
    test = D.load(dev, "test")
    for split, ps in (("train_cv", pairs), ("test", list(zip(test, evaluate(test, device).cases)))):
        tab: dict = {}
        for g, c in ps:
            for key, val in _classes(g).items():
                t = tab.setdefault(key, {}).setdefault(val, {"gemms": 0, "misses": 0, "xla_triton_model_blas": 0})
                t["gemms"] += 1
                t["misses"] += not c.agrees
                t["xla_triton_model_blas"] += (not c.agrees) and c.xla_backend == "triton"
        out[split] = tab
    return out


def report(device: str, split: str | None, run: str | None = None) -> dict:
    """``run``: "first" -- the GEMMs of the first collection runs (ids without
    a tag), "small" -- the small-GEMM runs (ids ``s_*``), "mix" -- the
    small + 0.2-8 GFLOP runs (ids ``x<seed>_*``); None: all."""
    gemms = D.load(device, split)
    tag = lambda g: g.gemm.split("_", 1)[0] if "_" in g.gemm else ""  # noqa: E731
    if run == "first":
        gemms = [g for g in gemms if tag(g) == ""]
    elif run == "small":
        gemms = [g for g in gemms if tag(g).startswith("s")]
    elif run == "mix":
        gemms = [g for g in gemms if tag(g).startswith("x")]
    if not gemms:
        return {}
    s = evaluate(gemms, get_device(device))
    j = s.to_json()
    return {k: j[k] for k in KEYS}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", action="append", help="H200, H100 (default: every measured device)")
    ap.add_argument("--fit", action="store_true")
    ap.add_argument("--fit-some", default="", help="comma-separated constants to refit on the train split, "
                    "the others held (fit.fit_some)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--cv", action="store_true", help="also 5-fold cross-validation (by shape) within the train split")
    ap.add_argument("--residuals", action="store_true",
                    help="rewrite data/residuals_<dev>.csv (the neighbour correction) from the train split")
    ap.add_argument("--sweep", default=str(Path(__file__).resolve().parents[2] / "shared/xla-dumps/gemm_sweep"))
    ap.add_argument("--misses", action="store_true", help="backend misses by class (train CV folds and test)")
    a = ap.parse_args()
    if a.misses:
        for dev in [d.upper() for d in a.device] if a.device else D.available_devices():
            for split, tab in misses(dev).items():
                print(f"== {dev} {split}: backend misses by class (misses/GEMMs; of them XLA Triton, model BLAS)")
                for key, vals in tab.items():
                    print(f"  {key}: " + "; ".join(f"{v} {t['misses']}/{t['gemms']} ({t['xla_triton_model_blas']})"
                                                  for v, t in sorted(vals.items(), key=lambda kv: -kv[1]['misses'])))
        return 0
    devices = [d.upper() for d in a.device] if a.device else D.available_devices()
    doc: dict = {"devices": {}}
    for dev in devices:
        if a.fit:
            from hlorun.autotune.cost import DATA_DIR, _load_params
            from hlorun.autotune.fit import fit
            t = time.time()
            P, info = fit(D.load(dev, "train"), get_device(dev))
            (DATA_DIR / f"params_{dev}.json").write_text(json.dumps({"params": P.to_json(), "fit": info}, indent=1) + "\n")
            _load_params.cache_clear()
            print(f"{dev}: fitted in {time.time() - t:.0f} s: {info}", file=sys.stderr)
        if a.fit_some:
            from hlorun.autotune.cost import DATA_DIR, _load_params
            from hlorun.autotune.fit import fit_some
            path = DATA_DIR / f"params_{dev}.json"
            old = json.loads(path.read_text())
            P, info = fit_some(D.load(dev, "train"), get_device(dev), replace(params_for(get_device(dev)),
                                                                              measured_device=""),
                               a.fit_some.split(","))
            info = {**old.get("fit", {}), "refits": old.get("fit", {}).get("refits", []) + [info]}
            path.write_text(json.dumps({"params": P.to_json(), "fit": info}, indent=1) + "\n")
            _load_params.cache_clear()
            print(f"{dev}: refitted {a.fit_some}: {info['refits'][-1]}", file=sys.stderr)
        if a.fit or a.fit_some or a.residuals:
            write_residuals(dev)
        env = D.environment(dev)
        doc["devices"][dev] = {"environment": {k: env.get(k) for k in ("gpu", "driver", "cuda_driver_api", "jax")},
                               "cublaslt": env.get("xla_backend_versions", {}).get("CUBLASLT"),
                               "params": params_for(get_device(dev)).source,
                               "test": report(dev, "test"), "test_first_runs": report(dev, "test", "first"),
                               "test_small_run": report(dev, "test", "small"),
                               "test_mix_runs": report(dev, "test", "mix"), "train": report(dev, "train"),
                               "xla_run_to_run": run_to_run(dev)}
        if a.cv:
            doc["devices"][dev]["train_cv"] = cross_validate(dev)
    sweep = Path(a.sweep)
    if not sweep.exists():
        sweep = Path("/work/shared/xla-dumps/gemm_sweep")
    if sweep.exists():
        from hlorun.autotune.sweep import load_sweep
        cases = load_sweep(sweep)
        j = evaluate(cases, get_device("H200")).to_json()
        doc["gemm_sweep_H200_unseen"] = {k: j[k] for k in KEYS}
        # 6 of its GEMMs share a shape with the calibration set's H200 train split
        # (other dtypes/epilogues), which the neighbour correction may look up
        train = {(g.problem.batch, g.problem.m, g.problem.n, g.problem.k) for g in D.load("H200", "train")}
        new = [c for c in cases if (lambda p: (p.batch, p.m, p.n, p.k))(c.as_measured().problem) not in train]
        j = evaluate(new, get_device("H200")).to_json()
        doc["gemm_sweep_H200_shapes_not_in_train"] = {k: j[k] for k in KEYS}
    doc["s4_pvc"] = s4_prediction()
    if a.json:
        print(json.dumps(doc, indent=1))
        return 0
    for dev, r in doc["devices"].items():
        print(f"== {dev} ({r['environment'].get('gpu')}, driver {r['environment'].get('driver')}, "
              f"cuBLASLt {r['cublaslt']}, JAX {r['environment'].get('jax')}); constants: {r['params']}")
        for split in ("test", "test_first_runs", "test_small_run", "test_mix_runs", "train", "train_cv"):
            x = r.get(split)
            if not x:
                continue
            print(f"  {split:15s} {x['gemms']:4d} GEMMs: backend agreement {x['backend_agreement']} "
                  f"({x['backend_agreement_pct']}%), Spearman median {x['median_spearman']:.2f} "
                  f"(<1 GFLOP {x['median_spearman_under_1_gflop']:.2f}), worst decile {x['worst_decile_spearman']:.2f}, "
                  f"chosen config within 25%: {x['chosen_config_within_25pct']:.0%}")
        for size, t in r["xla_run_to_run"].items():
            print(f"  XLA vs itself ({size}, {t['gemms']} GEMMs timed twice): same backend "
                  f"{t['agreement_pct']}%, run-vs-run Spearman median {t['run_vs_run_median_spearman']}")
    if "gemm_sweep_H200_unseen" in doc:
        x = doc["gemm_sweep_H200_unseen"]
        print(f"== gemm_sweep (H200, unseen): backend agreement {x['backend_agreement']}, Spearman median "
              f"{x['median_spearman']:.2f} (<1 GFLOP {x['median_spearman_under_1_gflop']:.2f}), "
              f"chosen within 25%: {x['chosen_config_within_25pct']:.0%}")
        x = doc["gemm_sweep_H200_shapes_not_in_train"]
        print(f"   of which {x['gemms']} with shapes not in the train split: backend agreement {x['backend_agreement']}, "
              f"Spearman median {x['median_spearman']:.2f} (<1 GFLOP {x['median_spearman_under_1_gflop']:.2f}), "
              f"chosen within 25%: {x['chosen_config_within_25pct']:.0%}")
    s4 = doc["s4_pvc"]
    print(f"== S4 on PVC ({s4['problem']}; {s4['params']})")
    for k, v in s4.items():
        if isinstance(v, dict):
            print(f"  {k}: predicted {v['predicted_tflops']} TFLOP/s, incident {v['incident_tflops']} "
                  f"(x{v['ratio']}), {v['bound']}-bound")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
