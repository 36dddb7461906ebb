"""Autotune the GEMMs of large transformer modules and time it.

    python bench/autotune.py [FILE.hlo[.gz] ...] [--device H100] [--noisy]

Default inputs: the Llama 3.1 8B and Mixtral 8x7B training steps of the
XLA corpus (677 and 1221 dots).  Per module: parse, ``triton-gemm-rewriter``
(dots -> __triton_gemm fusions), ``autotuner`` (every candidate built,
checked and estimated, XLA's selection rule, Triton configs applied, BLAS
choices fissioned), each timed in CPU seconds (time.process_time, so a busy
machine does not inflate the figures); with ``--noisy`` the autotuner also
simulates contended measurements with XLA's sampling and 20 flip seeds.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hlorun.text.parser import load_module  # noqa: E402
from hlorun.passes import pass_class  # noqa: E402
from hlorun.passes.base import Target  # noqa: E402

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "xla" / "files"
DEFAULT = ["xla__tools__benchmarks__hlo__hlo_llama31_8b_bf16_1x8.hlo.gz",
           "xla__tools__benchmarks__hlo__hlo_mixtral_8x7b_bf16_1x8.hlo.gz"]


def bench(path: Path, device: str, noisy: bool) -> dict:
    clock = time.process_time
    t0 = clock()
    m = load_module(path)
    gc.freeze()
    t1 = clock()
    dots = sum(1 for i in m.instructions() if i.opcode == "dot")
    gf = pass_class("triton-gemm-rewriter")(target=Target("cuda", device, "9.0"))
    gf.run(m)
    t2 = clock()
    opts = dict(device=device)
    if noisy:
        opts.update(mode="noisy", contention="high", sampling="xla", flip_seeds=20)
    at = pass_class("autotuner")(target=Target("cuda", device, "9.0"), **opts)
    at.run(m)
    t3 = clock()
    gc.unfreeze()
    decs = at.decisions
    cands = sum(len(d.candidates) for d in decs)
    return {"file": path.name, "instructions": m.instruction_count, "dots": dots,
            "gemm_fusions": len(decs), "candidates": cands,
            "rejected": sum(len(d.rejected) for d in decs),
            "backends": dict(Counter(d.winner.backend for d in decs)),
            "flipping": sum(1 for d in decs if d.flip_rate), "parse_s": t1 - t0,
            "gemm_fusion_s": t2 - t1, "autotune_s": t3 - t2}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="*")
    ap.add_argument("--device", default="H100")
    ap.add_argument("--noisy", action="store_true")
    a = ap.parse_args()
    files = [Path(f) for f in a.files] or [CORPUS / f for f in DEFAULT]
    if not a.files and not CORPUS.exists():
        files = [Path("/work/shared/corpus/xla/files") / f for f in DEFAULT]
    print(f"{'module':58s} {'instrs':>7s} {'dots':>5s} {'GEMMs':>5s} {'cands':>6s} {'rej':>5s} "
          f"{'parse s':>8s} {'fusion s':>8s} {'autotune s':>10s} {'ms/GEMM':>8s}  backends")
    for f in files:
        r = bench(f, a.device, a.noisy)
        per = 1e3 * r["autotune_s"] / max(1, r["gemm_fusions"])
        print(f"{r['file'][:58]:58s} {r['instructions']:7d} {r['dots']:5d} {r['gemm_fusions']:5d} "
              f"{r['candidates']:6d} {r['rejected']:5d} {r['parse_s']:8.2f} {r['gemm_fusion_s']:8.2f} "
              f"{r['autotune_s']:10.2f} {per:8.2f}  {r['backends']}"
              + (f", {r['flipping']} flipping" if a.noisy else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
