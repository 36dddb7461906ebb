"""Does hlorun's autotuner pick the GEMM backend XLA picked, on real programs?

For each real XLA:GPU dump (``*before_optimizations`` + ``*after_optimizations``
+ ``info.json``), compile the before_optimizations module with the default
pipeline (the dump's own XLA_FLAGS applied, the autotuner on the dump's
device: H100 or H200), take every GEMM of our result (a BLAS custom call or
a Triton GEMM fusion) and of XLA's after_optimizations, pair them by
problem (batch, m, n, k and operand types; m/n order-free, since the BLAS
rewriter may swap operands), then by order, and count how many of XLA's
GEMMs got the same backend *class*: ``blas`` (``__cublas$gemm``,
``__cublas$lt$matmul``...) or ``triton`` (``__triton_gemm``,
``__triton_nested_gemm_fusion``).

Each miss is printed with its shape, types, layout (K-majorness of the
operands), epilogue, the model's best Triton and best BLAS estimates (from
the autotuner's record) and XLA's choice.

    python bench/backend_agreement.py [--json] [--extra DIR ...] [DUMP ...]

DUMP is a dump folder (a path or a name under ``../shared/xla-dumps`` or
``testdata/xla-dumps``); default: all of them, plus every dump folder under
each ``--extra`` DIR (e.g. ``/work/holdout``).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from kernel_lists import _flag_disables, all_dumps, dump_files, resolve  # noqa: E402


def device_of(d: Path) -> str:
    """The autotuner device of a dump (info.json's ``device``); H100 when unknown."""
    info = d / "info.json"
    name = json.loads(info.read_text()).get("device", "") if info.is_file() else ""
    return "H200" if "H200" in name else "H100"


def backend_class(instr) -> str | None:
    from hlorun.autotune.problem import is_blas_call, is_triton_gemm_fusion
    if is_blas_call(instr):
        return "blas"
    if is_triton_gemm_fusion(instr):
        return "triton"
    return None


@dataclass
class Gemm:
    name: str
    backend: str            # blas | triton
    target: str             # custom-call target or fusion kind
    key: tuple
    problem: object = None
    record: dict | None = None


def _gemms(module) -> list[Gemm]:
    from hlorun.analysis.kernels import kernel_list  # noqa: F401  (same walk order as kernel lists)
    from hlorun.autotune.problem import gemm_problem
    out = []
    for comp in module.computation_post_order():
        for i in comp.post_order():
            cls = backend_class(i)
            if cls is None:
                continue
            try:
                p = gemm_problem(i)
            except Exception:  # noqa: BLE001 -- a GEMM the model cannot describe: pair by order
                p = None
            key = ((p.batch, min(p.m, p.n), max(p.m, p.n), p.k, p.lhs_type, p.rhs_type)
                   if p is not None else ("?",))
            tgt = i.custom_call_target if cls == "blas" else \
                i.backend_config.get("fusion_backend_config", {}).get("kind")
            out.append(Gemm(i.name, cls, tgt, key, p))
    return out


def pair(ours: list[Gemm], theirs: list[Gemm]) -> list[tuple[Gemm | None, Gemm]]:
    """Pair every XLA GEMM with one of ours: same problem key first (in order),
    then the rest in order."""
    free = list(ours)
    pairs: list[tuple[Gemm | None, Gemm]] = []
    rest = []
    for t in theirs:
        hit = next((o for o in free if o.key == t.key), None)
        if hit is None:
            rest.append(t)
            continue
        free.remove(hit)
        pairs.append((hit, t))
    for t in rest:
        pairs.append((free.pop(0) if free else None, t))
    return pairs


def _best(record: dict, backend: str) -> dict | None:
    cands = [c for c in record.get("candidates", []) if c.get("feasible") and c.get("estimate")
             and ((c["backend"] == "triton") == (backend == "triton"))]
    return min(cands, key=lambda c: c["estimate"]["ns"]) if cands else None


@dataclass
class Result:
    program: str
    device: str
    pairs: list = field(default_factory=list)
    failure: str | None = None

    @property
    def gemms(self) -> int:
        return len(self.pairs)

    @property
    def agree(self) -> int:
        return sum(1 for o, t in self.pairs if o is not None and o.backend == t.backend)

    def counts(self) -> tuple[int, int]:
        """(our BLAS GEMMs, XLA's BLAS GEMMs)."""
        return (sum(1 for o, _ in self.pairs if o is not None and o.backend == "blas"),
                sum(1 for _, t in self.pairs if t.backend == "blas"))

    def misses(self) -> list[dict]:
        out = []
        for o, t in self.pairs:
            if o is not None and o.backend == t.backend:
                continue
            m = {"xla": t.name, "xla_choice": t.target, "ours": o.name if o else None,
                 "our_choice": o.target if o else None}
            p = (o.problem if o is not None else None) or t.problem
            if p is not None:
                m.update(shape=p.shape_text, types=p.types_text,
                         layout=f"lhs {'K' if p.lhs_k_major else 'M'}-major, "
                                f"rhs {'K' if p.rhs_k_major else 'N'}-major"
                                + ("" if p.output_canonical else ", output not canonical"),
                         epilogue=f"{p.epilogue_ops} ops"
                                  + "".join(f", {e.kind} {e.shape}" for e in p.epilogue_operands),
                         prologue_ops=p.prologue_ops)
            rec = o.record if o is not None else None
            if rec is not None:
                best = {b: _best(rec, b) for b in ("triton", "blas")}
                for b, c in best.items():
                    m[f"best_{b}"] = (f"{c['label']} {c['estimate']['ns'] / 1e3:.2f} us"
                                      if c else "none feasible")
                if best["triton"] and best["blas"]:
                    # XLA's rule: BLAS (32 MiB workspace) wins only when more
                    # than 2 us faster than the best Triton config
                    m["triton_minus_blas_us"] = round((best["triton"]["estimate"]["ns"]
                                                       - best["blas"]["estimate"]["ns"]) / 1e3, 2)
                m["winner"] = rec["winner"]["label"] if rec.get("winner") else None
                m["source"] = rec.get("source")
            out.append(m)
        return out

    def to_json(self) -> dict:
        ours_blas, xla_blas = self.counts()
        return {"program": self.program, "device": self.device, "failure": self.failure,
                "gemms": self.gemms, "agree": self.agree, "blas_ours": ours_blas,
                "blas_xla": xla_blas, "misses": self.misses()}


def agreement(dump: str | Path, pipeline: str = "gpu-cuda") -> Result:
    import hlorun
    from hlorun.passes.base import Target
    from hlorun.pipeline.loader import load_pipeline
    from hlorun.pipeline.run import RunOptions, run_pipeline
    d = resolve(str(dump)) if not isinstance(dump, Path) else dump
    files = dump_files(d)
    if files is None:
        raise SystemExit(f"{d}: no before/after_optimizations modules")
    before, after = files
    dev = device_of(d)
    spec = load_pipeline(pipeline)
    target = Target(spec.target.platform, dev, spec.target.compute_capability)
    module = hlorun.load_module(before)
    res = run_pipeline(module, spec, RunOptions(disable=_flag_disables(d), target=target))
    theirs = _gemms(hlorun.load_module(after))
    r = Result(d.name, dev)
    if res.exit_code:
        f = res.failure
        r.failure = f"{f.path}: {f.message}" if f is not None else str(res.violations)[:200]
        r.pairs = [(None, t) for t in theirs]
        return r
    records = {}
    for ev in res.events:
        for section, data in getattr(ev, "records", None) or ():
            if section == "autotune":
                records[data["instruction"]] = data
    ours = _gemms(module)
    for g in ours:
        g.record = records.get(g.name)
    # a fissioned GEMM changed its name: find its record by problem key
    by_key: dict[tuple, list[dict]] = {}
    for rec in records.values():
        p = rec.get("problem") or {}
        if p:
            k = (p["batch"], min(p["m"], p["n"]), max(p["m"], p["n"]), p["k"], p["lhs_type"],
                 p["rhs_type"])
            by_key.setdefault(k, []).append(rec)
    used = {id(g.record) for g in ours if g.record is not None}
    for g in ours:
        if g.record is not None:
            continue
        for rec in by_key.get(g.key, ()):
            w = (rec.get("winner") or {}).get("backend")
            if id(rec) not in used and (w == "triton") == (g.backend == "triton"):
                g.record = rec
                used.add(id(rec))
                break
    r.pairs = pair(ours, theirs)
    return r


def extra_dumps(dirs: list[str]) -> list[Path]:
    out = []
    for x in dirs:
        p = Path(x)
        if dump_files(p):
            out.append(p)
        elif p.is_dir():
            out += [d for d in sorted(p.iterdir()) if d.is_dir() and dump_files(d)]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pipeline", default="gpu-cuda")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--extra", action="append", default=[],
                    help="a folder of dump folders (e.g. /work/holdout), or one dump folder")
    ap.add_argument("dumps", nargs="*")
    args = ap.parse_args(argv)
    dumps = [resolve(x) for x in args.dumps] if args.dumps else all_dumps() + extra_dumps(args.extra)
    if args.dumps and args.extra:
        dumps += extra_dumps(args.extra)
    rows = []
    for d in dumps:
        r = agreement(d, args.pipeline)
        rows.append(r)
        if not args.json:
            ob, xb = r.counts()
            status = f"FAILED: {r.failure}" if r.failure else ""
            print(f"{r.program:32s} {r.device}  GEMMs {r.gemms:3d}  agree {r.agree:3d}/{r.gemms:<3d} "
                  f"BLAS ours/XLA {ob}/{xb} {status}", flush=True)
            for m in r.misses():
                print("   miss: " + "; ".join(f"{k}={v}" for k, v in m.items()), flush=True)
    total = sum(r.gemms for r in rows)
    agree = sum(r.agree for r in rows)
    if args.json:
        print(json.dumps({"programs": [r.to_json() for r in rows], "gemms": total,
                          "agree": agree}, indent=1))
    else:
        print(f"\nall programs: {agree}/{total} GEMMs on XLA's backend class "
              f"({100 * agree / max(1, total):.1f}%); "
              f"{sum(1 for r in rows if r.gemms and r.agree == r.gemms)}/{sum(1 for r in rows if r.gemms)} "
              "programs with GEMMs fully agree")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
