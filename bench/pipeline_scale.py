"""Benchmark: does the default pipeline scale linearly with the model?

    python bench/pipeline_scale.py [--layers 1,16,64,128,256] [--dir DIR]
                                   [--mixtral] [--profile L]

Generates (JAX on CPU, ``pip install '.[bench]'``; cached in ``--dir``) a
bf16 transformer training step with L unrolled layers (B=4, S=256,
d_model=512, 8 heads, FFN 2048, vocab 4096, LayerNorm, ``value_and_grad``
+ SGD; the pre-optimization HLO JAX hands to XLA, ``jax.jit(step).lower(
...).as_text(dialect="hlo")``) and runs the default pipeline (gpu-cuda,
hlo-verifier after every changed pass) on each, each model in a fresh
subprocess so its peak RSS is its own.  Prints one row per model: file,
instructions, hlorun parse seconds, pipeline seconds, the top 5 passes,
peak RSS, and the ratios to XLA's C++ parser
(``jaxlib._hlo.hlo_module_from_text``) reading the same file in the same
run -- the unit, because absolute times on shared machines are noisy.
"cost/instr" is the pipeline's seconds per instruction relative to the
first model's.

``--mixtral`` also times priority-fusion alone on the Mixtral 8x7B
pre-fusion module (the corpus's hlo_mixtral_8x7b_bf16_2x8 run through
gpu-cuda up to the fusion pipeline).  ``--profile L`` prints a cProfile
summary (top functions by own time) of the L-layer run.

Times are CPU seconds of the measuring process (``time.process_time``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

B, S, D, HEADS, FFN, VOCAB = 4, 256, 512, 8, 2048, 4096
MIXTRAL = "xla__tools__benchmarks__hlo__hlo_mixtral_8x7b_bf16_2x8.hlo.gz"


# -- model generation (JAX) -------------------------------------------------------------
def transformer_step_hlo(layers: int) -> str:
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    import jax.numpy as jnp
    dt = jnp.bfloat16

    def dense(k, shape):
        return (jax.random.normal(k, shape, jnp.float32) * 0.02).astype(dt)

    def layer_params(i):
        ks = jax.random.split(jax.random.PRNGKey(i), 6)
        return dict(wq=dense(ks[0], (D, D)), wk=dense(ks[1], (D, D)), wv=dense(ks[2], (D, D)),
                    wo=dense(ks[3], (D, D)), w1=dense(ks[4], (D, FFN)), w2=dense(ks[5], (FFN, D)),
                    b1=jnp.zeros((FFN,), dt), g1=jnp.ones((D,), dt), g2=jnp.ones((D,), dt))
    params = dict(emb=jnp.zeros((VOCAB, D), dt), layers=[layer_params(i) for i in range(layers)],
                  gf=jnp.ones((D,), dt), out=jnp.zeros((D, VOCAB), dt))

    def norm(x, g):
        x32 = x.astype(jnp.float32)
        c = x32 - jnp.mean(x32, -1, keepdims=True)
        return (c * jax.lax.rsqrt(jnp.mean(c * c, -1, keepdims=True) + 1e-6)).astype(dt) * g + g

    def loss(p, tok, tgt):
        x = p["emb"][tok]
        mask = jnp.tril(jnp.ones((S, S), bool))
        hd = D // HEADS
        for lp in p["layers"]:
            h = norm(x, lp["g1"])
            q, k, v = ((h @ lp[w]).reshape(B, S, HEADS, hd) for w in ("wq", "wk", "wv"))
            s = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(jnp.float32) / jnp.sqrt(hd)
            a = jax.nn.softmax(jnp.where(mask, s, -1e9), -1).astype(dt)
            x = x + jnp.einsum("bhqk,bkhd->bqhd", a, v).reshape(B, S, D) @ lp["wo"] + lp["g1"]
            h = norm(x, lp["g2"])
            x = x + jax.nn.gelu(h @ lp["w1"] + lp["b1"]) @ lp["w2"] + lp["g2"]
        logits = (norm(x, p["gf"]) @ p["out"]).astype(jnp.float32)
        logp = jax.nn.log_softmax(logits)
        return -jnp.mean(jnp.take_along_axis(logp, tgt[..., None], -1))

    def step(p, tok, tgt):
        val, g = jax.value_and_grad(loss)(p, tok, tgt)
        upd = jax.tree_util.tree_map(lambda a, b: a - (0.01 * b.astype(jnp.float32)).astype(a.dtype),
                                     p, g)
        return upd, val

    tok = jnp.zeros((B, S), jnp.int32)
    return jax.jit(step).lower(params, tok, tok).as_text(dialect="hlo")


def model_file(directory: Path, layers: int) -> Path:
    path = directory / f"transformer_L{layers}_bf16_train_step.hlo"
    if not path.exists():
        text = transformer_step_hlo(layers)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(path)
    return path


def xla_parse_seconds(path: Path, repeat: int = 3) -> float:
    """Best of ``repeat`` CPU seconds of XLA's C++ HLO parser on ``path``."""
    from jaxlib import _hlo
    text = path.read_text()
    best = float("inf")
    for _ in range(repeat):
        t = time.process_time()
        _hlo.hlo_module_from_text(text)
        best = min(best, time.process_time() - t)
    return best


# -- the measuring child -------------------------------------------------------------------
def _peak_rss_mb() -> float:
    """This process's peak RSS (VmHWM: unlike ru_maxrss it does not carry
    the parent's peak over a fork+exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def measure(path: str, mode: str, profile: bool) -> dict:
    import gc
    from hlorun.text.parser import load_module
    from hlorun.pipeline.run import RunOptions, run_pipeline
    from hlorun.pipeline.loader import load_pipeline
    spec = load_pipeline("gpu-cuda")
    gc.collect()
    rss0 = _rss_mb()
    t = time.process_time()
    module = load_module(path)
    parse = time.process_time() - t
    out = {"instructions": module.instruction_count, "parse": parse}
    if mode == "mixtral":
        return _mixtral(module, spec, out)
    gc.collect()
    rss_parsed = _rss_mb()
    prof = None
    if profile:
        import cProfile
        prof = cProfile.Profile()
        prof.enable()
    t = time.process_time()
    res = run_pipeline(module, spec, RunOptions(clock=time.process_time))
    out["pipeline"] = time.process_time() - t
    if prof is not None:
        prof.disable()
        import io
        import pstats
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(25)
        out["profile"] = buf.getvalue()
    per_pass: dict[str, float] = {}
    for e in res.events:
        per_pass[e.name] = per_pass.get(e.name, 0.0) + e.seconds
    per_pass["(checkers)"] = res.checker_seconds
    out["top"] = sorted(per_pass.items(), key=lambda kv: -kv[1])[:6]
    out["failure"] = res.failure.message if res.failure else None
    out["violations"] = len(res.violations)
    out["after"] = module.instruction_count
    gc.collect()
    out["rss_start_mb"] = rss0
    out["rss_parsed_mb"] = rss_parsed
    out["rss_end_mb"] = _rss_mb()
    out["rss_peak_mb"] = _peak_rss_mb()
    return out


class _Stop(Exception):
    pass


def _mixtral(module, spec, out: dict) -> dict:
    from hlorun.passes.priority_fusion import PriorityFusion
    from hlorun.pipeline.run import Listener, RunOptions, run_pipeline

    class Before(Listener):
        def on_before_pass(self, ev, m):
            if ev.name == "priority-fusion":
                raise _Stop()
    try:
        run_pipeline(module, spec, RunOptions(verify_each=False, listeners=[Before()]))
        out["failure"] = "priority-fusion not reached"
        return out
    except _Stop:
        pass
    out["pre_fusion_instructions"] = module.instruction_count
    from hlorun.pipeline.gc_policy import pipeline_gc
    t = time.process_time()
    with pipeline_gc():  # as inside a pipeline run
        PriorityFusion(target=spec.target).run(module)
    out["priority_fusion"] = time.process_time() - t
    out["after"] = module.instruction_count
    return out


def run_child(path: Path, mode: str = "pipeline", profile: bool = False) -> dict:
    cmd = [sys.executable, __file__, "--child", str(path), "--mode", mode]
    if profile:
        cmd.append("--child-profile")
    got = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    if got.returncode != 0:
        raise SystemExit(f"measuring {path.name} failed:\n{got.stderr[-3000:]}")
    return json.loads(got.stdout.splitlines()[-1])


# -- main ------------------------------------------------------------------------------------
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", default="1,16,64,128,256",
                    help="comma-separated layer counts (default: %(default)s)")
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "hlorun-pipeline-scale"),
                    help="where generated models are cached (default: %(default)s)")
    ap.add_argument("--mixtral", action="store_true",
                    help="also time priority-fusion on the Mixtral 8x7B pre-fusion module")
    ap.add_argument("--profile", type=int, default=None, metavar="L",
                    help="print a cProfile summary of the L-layer run")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--mode", default="pipeline", help=argparse.SUPPRESS)
    ap.add_argument("--child-profile", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(measure(a.child, a.mode, a.child_profile)))
        return 0

    directory = Path(a.dir)
    directory.mkdir(parents=True, exist_ok=True)
    layers = [int(x) for x in a.layers.split(",") if x]
    rows = []
    print("| file | instructions | parse s (x XLA) | pipeline s (x XLA parse) | cost/instr vs first "
          "| peak RSS MB (start / parsed / end) | top 5 (s) |")
    print("|---|---|---|---|---|---|---|")
    for n in layers:
        path = model_file(directory, n)
        xla = xla_parse_seconds(path)
        r = run_child(path, profile=(a.profile == n))
        r["xla_parse"] = xla
        rows.append(r)
        per = r["pipeline"] / r["instructions"]
        base = rows[0]["pipeline"] / rows[0]["instructions"]
        top = ", ".join(f"{k} {v:.1f}" for k, v in r["top"][:5])
        status = "" if not r["failure"] and not r["violations"] else \
            f" FAILED: {r['failure'] or str(r['violations']) + ' violations'}"
        print(f"| {path.name} | {r['instructions']:,} | {r['parse']:.2f} ({r['parse'] / xla:.1f}x) "
              f"| {r['pipeline']:.1f} ({r['pipeline'] / xla:.0f}x) | {per / base:.2f} "
              f"| {r['rss_peak_mb']:.0f} ({r['rss_start_mb']:.0f} / {r['rss_parsed_mb']:.0f} / "
              f"{r['rss_end_mb']:.0f}) | {top}{status} |", flush=True)
        if "profile" in r:
            print(r["profile"])
    for a_, b_ in zip(rows, rows[1:]):
        g = (b_["pipeline"] / b_["instructions"]) / (a_["pipeline"] / a_["instructions"])
        print(f"per-instruction cost growth {a_['instructions']:,} -> {b_['instructions']:,} "
              f"instructions: {g:.2f}")
    if a.mixtral:
        shared = Path(os.environ.get("HLORUN_SHARED", REPO.parent / "shared"))
        if not shared.is_dir():
            shared = Path("/work/shared")
        path = shared / "corpus" / "xla" / "files" / MIXTRAL
        r = run_child(path, "mixtral")
        if r.get("failure"):
            print(f"mixtral: {r['failure']}")
        else:
            print(f"Mixtral 8x7B pre-fusion module: {r['pre_fusion_instructions']:,} instructions, "
                  f"priority-fusion {r['priority_fusion']:.1f} s -> {r['after']:,} instructions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
