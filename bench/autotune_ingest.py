"""Turn a raw calibration run (``bench/autotune_collect.py``'s output: XLA's
autotune logs and results per module, the HLO the autotuner saw, env.txt)
into the compact CSVs of ``hlorun/autotune/data/``.

    python bench/autotune_ingest.py RAW_DIR --device H200 [--env env.txt] [--out DIR]

RAW_DIR holds ``cases.json``, ``main/{logs,results,hlo}/`` and optionally
``rep/`` (a second, independent autotuning run of some modules: its times
become ``ns_repeat``).  Each GEMM fusion is identified by the case id in its
``op_name`` (``jax.named_scope``), its problem is read from the
``before_config_assignment`` module with hlorun's own parser, and XLA's
choice from ``autotune_results`` (checked against XLA's selection rule on
the logged times).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hlorun.autotune import dataset as D  # noqa: E402
from hlorun.autotune.problem import gemm_problem  # noqa: E402
from hlorun.autotune.xla_logs import read_logs, read_results  # noqa: E402
from hlorun.text.parser import load_module  # noqa: E402

OPNAME = re.compile(r'op_name=\\?"jit\((\w+)\)/(c\d+)/')
INSTR = re.compile(r"^%?([\w.\-]+) = ")


def _cand_key(cfg) -> tuple:
    if cfg.triton is not None:
        return ("triton", cfg.triton.label)
    return (cfg.backend, cfg.algorithm or 0)


def read_phase(root: Path, module_prefix: str):
    """{case id: (module, instruction name, [Profile], results config)}"""
    out = {}
    for logf in sorted((root / "logs").glob(f"{module_prefix}*.textproto")):
        mod = logf.stem
        results = {}
        rf = root / "results" / logf.name
        if rf.exists():
            results = {e.fingerprint: e.config for e in read_results(rf)}
        for ip in read_logs(logf):
            if "__triton_gemm" not in ip.hlo_text:
                continue
            m = OPNAME.search(ip.hlo_text)
            n = INSTR.match(ip.hlo_text)
            if not m or not n:
                continue
            out.setdefault(m.group(2), (mod, n.group(1), ip.profiles, results.get(ip.fingerprint)))
    return out


def find_instruction(hlo_dir: Path, module: str, name: str, cache: dict):
    if module not in cache:
        files = sorted(hlo_dir.glob(f"*.jit_{module}.before_config_assignment.txt"))
        cache[module] = load_module(files[0]) if files else None
    mod = cache[module]
    if mod is None:
        return None
    for comp in mod.computations:
        for i in comp.instructions:
            if i.name == name:
                return i
    return None


def environment(raw: Path, env_txt: Path | None, device: str) -> dict:
    env: dict = {"device": device}
    txt = env_txt.read_text() if env_txt and env_txt.exists() else ""
    for key, pat in (("gpu", r"^(NVIDIA [^,]+), (\S+), (\d+) MHz"),):
        m = re.search(pat, txt, re.M)
        if m:
            env.update({"gpu": m.group(1), "driver": m.group(2), "max_sm_clock_mhz": int(m.group(3))})
    m = re.search(r"CUDA Version: (\S+)", txt)
    if m:
        env["cuda_driver_api"] = m.group(1)
    for k in ("jax", "jaxlib"):
        m = re.search(rf"^{k}:\s+(\S+)", txt, re.M)
        if m:
            env[k] = m.group(1)
    pk = re.findall(r"^(nvidia-\S+)\s+(\S+)", txt, re.M)
    if pk:
        env["pip_nvidia"] = dict(pk)
    first = next(iter(sorted((raw / "main" / "logs").glob("*.textproto"))), None)
    if first is not None:
        head = first.read_text()[:3000]
        env["xla_backend_versions"] = dict(re.findall(r'key: "(\w+)"\s*value: "([^"]+)"', head))
    return env


def merge_repeat(raw: Path, dev: str, tag: str, out: Path, env_txt: Path | None) -> int:
    """Attach a repeat run's times (``ns_repeat``) to the GEMMs of an earlier
    run of the same modules.  A GEMM matches when its id (``tag`` + case id),
    instruction and problem are the same; a candidate when its backend and
    Triton config or algorithm are."""
    import csv
    gemms = {r["gemm"]: r for r in csv.DictReader(open(out / f"gemms_{dev}.csv", newline=""))}
    again: dict[str, dict] = {}
    hlo_cache: dict = {}
    for cid, (mod, name, profiles, _chosen) in sorted(read_phase(raw / "main", "m").items()):
        g = gemms.get(f"{tag}{cid}")
        if g is None or g["instruction"] != name:
            continue
        instr = find_instruction(raw / "main" / "hlo", mod, name, hlo_cache)
        if instr is None:
            continue
        prob = D.problem_row(gemm_problem(instr))
        if any(str(v) != g[k] for k, v in prob.items()):
            continue
        again[g["gemm"]] = {_cand_key(q.config): q.run_time_ns for q in profiles if q.run_time_ns}
    path = out / f"candidates_{dev}.csv"
    rows = list(csv.DictReader(open(path, newline="")))
    n = 0
    for r in rows:
        t = again.get(r["gemm"])
        if t is None:
            continue
        c = D._candidate_from_row(r)
        key = ("triton", c.triton.label) if c.triton else (c.backend, c.algorithm or 0)
        if key in t:
            r["ns_repeat"] = int(t[key])
            n += 1
    D.write_csv(path, D.CAND_FIELDS, rows)
    env_path = out / f"environment_{dev}.json"
    env = json.loads(env_path.read_text())
    new = environment(raw, env_txt or raw / "env.txt", dev)
    for run in env.get("runs", []):
        if run.get("tag") == tag:
            run["repeated_gemms"] = len(again)
            run["repeat"] = {"gpu": new.get("gpu"), "driver": new.get("driver"), "jax": new.get("jax"),
                             "cuda_driver_api": new.get("cuda_driver_api"),
                             "xla_backend_versions": new.get("xla_backend_versions")}
    env_path.write_text(json.dumps(env, indent=1) + "\n")
    print(f"{len(again)} GEMMs of run {tag!r} matched; {n} candidates timed twice -> {path}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("raw")
    ap.add_argument("--device", required=True)
    ap.add_argument("--env")
    ap.add_argument("--out", default=str(D.DATA_DIR))
    ap.add_argument("--tag", default="", help="prefix of gemm ids (several runs into one file)")
    ap.add_argument("--append", action="store_true")
    ap.add_argument("--repeat", action="store_true",
                    help="RAW is a second run of GEMMs already in the data (same generator and seed, ids TAG+case): "
                         "its times become ns_repeat of the matching candidates; nothing else changes")
    a = ap.parse_args()
    if a.repeat:
        return merge_repeat(Path(a.raw), a.device.upper(), a.tag, Path(a.out), Path(a.env) if a.env else None)
    raw, out = Path(a.raw), Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    cases = {c["id"]: c for c in json.loads((raw / "cases.json").read_text())}
    main_ = read_phase(raw / "main", "m")
    rep = read_phase(raw / "rep", "r") if (raw / "rep").exists() else {}
    gemm_rows, cand_rows = [], []
    hlo_cache: dict = {}
    skipped = 0
    for cid, (mod, name, profiles, chosen) in sorted(main_.items()):
        instr = find_instruction(raw / "main" / "hlo", mod, name, hlo_cache)
        measured = [p for p in profiles if p.run_time_ns]
        if instr is None or not measured or chosen is None:
            skipped += 1
            continue
        p = gemm_problem(instr)
        case = cases[cid]
        gid = f"{a.tag}{cid}"
        again = {}
        if cid in rep:
            again = {_cand_key(q.config): q.run_time_ns for q in rep[cid][2] if q.run_time_ns}
        row = {"gemm": gid, "module": mod, "instruction": name, "category": case["cat"],
               "dtype": case["dt"], "epilogue": case["epi"], "layout": case["lay"],
               **D.problem_row(p), "xla_backend": chosen.backend, "xla_config": chosen.label,
               "split": D.shape_split(p.batch, p.m, p.n, p.k)}
        gemm_rows.append(row)
        for q in measured:
            mc = D.MeasuredCandidate(q.config.backend, q.run_time_ns, again.get(_cand_key(q.config)),
                                     q.config.triton, None if q.config.triton else (q.config.algorithm or 0),
                                     q.scratch_bytes)
            cand_rows.append(D.candidate_row(gid, mc))
    dev = a.device.upper()
    mode = "a" if a.append else "w"
    for fname, fields, rows in ((f"gemms_{dev}.csv", D.GEMM_FIELDS, gemm_rows),
                                (f"candidates_{dev}.csv", D.CAND_FIELDS, cand_rows)):
        path = out / fname
        if mode == "a" and path.exists():
            import csv
            with open(path, "a", newline="") as fh:
                w = csv.DictWriter(fh, fieldnames=fields, lineterminator="\n")
                for r in rows:
                    w.writerow(r)
        else:
            D.write_csv(path, fields, rows)
    env = environment(raw, Path(a.env) if a.env else raw / "env.txt", dev)
    env_path = out / f"environment_{dev}.json"
    prev = json.loads(env_path.read_text()) if a.append and env_path.exists() else {}
    runs = prev.get("runs", [])
    for k, v in env.items():   # a raw dir without env.txt keeps what the earlier runs recorded
        if k in prev and prev[k] != v:
            print(f"warning: {k} differs from the earlier runs: {v!r} vs {prev[k]!r}", file=sys.stderr)
    env = {**{k: v for k, v in prev.items() if k != "runs"}, **env}
    env["runs"] = runs + [{"tag": a.tag, "gemms": len(gemm_rows), "candidates": len(cand_rows),
                           "repeated_gemms": sum(1 for r in gemm_rows if r["gemm"][len(a.tag):] in rep)}]
    env_path.write_text(json.dumps(env, indent=1) + "\n")
    print(f"{len(gemm_rows)} GEMMs, {len(cand_rows)} candidates "
          f"({sum(1 for r in cand_rows if r['ns_repeat'] != '')} timed twice), {skipped} skipped -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
