"""Device-side GEMM calibration sweep (issue 20).

Runs on the GPU machine (JAX with CUDA).  Compiles many GEMMs (12 per
module, each under its own ``jax.named_scope`` so XLA's logs name the case)
with XLA's autotuner logging every candidate it profiles
(``--xla_gpu_dump_autotune_logs_to``), its choice
(``--xla_gpu_dump_autotune_results_to``) and the HLO it saw
(``before_config_assignment``).  ``bench/autotune_ingest.py`` turns the
output into ``hlorun/autotune/data/*.csv``.  Usage:
    python autotune_collect.py WORK PHASE DEADLINE_S [START_GROUP [x EVERY]]
PHASE 'main': all cases in priority order until the deadline;
PHASE 'rep':  cases of every Nth module of the main phase, in a new process
              (no in-process autotune cache), for run-to-run spread.
With ``H20_SMALL=SEED`` in the environment the cases are small GEMMs (mostly
under 1 GFLOP; the H100 run ingested with ``--tag s_`` used seed 7).
With ``H20_MIX=SEED`` they are a mix of small GEMMs and the 0.2-8 GFLOP range
(square-ish, LLM projections, batched; session 4's H200 runs used seeds 11 and
12, session 6's seed 13 with a rep phase of EVERY=1: see the watchdog).
With ``H20_CASES=FILE`` the cases are read from FILE (the same list in both
phases), e.g. shapes near the train split's CV misses from
``bench/autotune_near_cases.py``.
"""
import json
import os
import random
import shutil
import sys
import time
import traceback

WORK, PHASE, DEADLINE = sys.argv[1], sys.argv[2], float(sys.argv[3])
START = int(sys.argv[4]) if len(sys.argv) > 4 else 0
EVERY = int(sys.argv[5]) if len(sys.argv) > 5 else 3
T0 = time.time()
TMP = f"/tmp/i20_{PHASE}"
os.makedirs(TMP, exist_ok=True)
os.environ["XLA_FLAGS"] = " ".join([
    f"--xla_gpu_dump_autotune_logs_to={TMP}/logs.textproto",
    f"--xla_gpu_dump_autotune_results_to={TMP}/results.textproto",
    f"--xla_dump_to={TMP}/dump", "--xla_dump_hlo_as_text",
    "--xla_dump_hlo_pass_re=conv-fp8-fallback",
])
os.environ.setdefault("JAX_ENABLE_COMPILATION_CACHE", "false")   # rep: nothing carried between processes
import numpy as np  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

OUT = os.path.join(WORK, PHASE)
for sub in ("logs", "results", "hlo"):
    os.makedirs(os.path.join(OUT, sub), exist_ok=True)

DT = {"bf16": jnp.bfloat16, "f16": jnp.float16, "tf32": jnp.float32, "f32": jnp.float32,
      "fp8": jnp.float8_e4m3fn, "int8": jnp.int8}


def make_cases(seed=20):
    if os.environ.get("H20_CASES"):   # a case list, e.g. bench/autotune_near_cases.py's
        with open(os.environ["H20_CASES"]) as fh:
            return json.load(fh)
    if os.environ.get("H20_SMALL"):
        return make_small_cases(int(os.environ["H20_SMALL"]))
    if os.environ.get("H20_MIX"):
        return make_mix_cases(int(os.environ["H20_MIX"]))
    return _make_cases(seed)


def make_small_cases(seed):
    """Small GEMMs (mostly under 1 GFLOP): launch/latency-bound ranking data."""
    rng = random.Random(seed)
    def lu(lo, hi):
        return int(round(2 ** rng.uniform(np.log2(lo), np.log2(hi))))
    shapes = []
    for _ in range(400):
        cat = rng.choices(["square", "llm", "skinny", "batched", "random"], [1.5, 3, 2, 2.5, 3])[0]
        b = 1
        if cat == "square":
            m = n = k = rng.choice([16, 32, 48, 64, 96, 128, 192, 256, 320, 384, 512, 640, 768])
        elif cat == "llm":
            n, k = rng.choice([(768, 768), (1024, 1024), (2048, 512), (3072, 768), (768, 3072), (4096, 1024),
                               (1536, 1536), (512, 2048), (4096, 4096), (11008, 256), (32000, 256)])
            m = rng.choice([2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 200])
        elif cat == "skinny":
            m = rng.choice([2, 4, 8, 16, 24, 32, 48, 64])
            n, k = lu(64, 8192), lu(32, 4096)
            if rng.random() < 0.5:
                m, n = n, m
        elif cat == "batched":
            b = rng.choice([2, 4, 8, 16, 32, 64])
            m, n, k = lu(8, 512), lu(8, 512), lu(16, 1024)
        else:
            m, n, k = lu(8, 4096), lu(8, 4096), lu(8, 4096)
            if rng.random() < 0.5:
                m, n, k = [max(16, x // 16 * 16) for x in (m, n, k)]
        if 2 * b * m * n * k > 2e9:
            continue
        shapes.append((cat, b, m, n, k))
    return _expand(rng, shapes)


def make_mix_cases(seed):
    """Half small GEMMs (as make_small_cases), half 0.2-8 GFLOP ones."""
    rng = random.Random(seed)
    small = make_small_cases(seed + 1000)
    def lu(lo, hi):
        return int(round(2 ** rng.uniform(np.log2(lo), np.log2(hi))))
    shapes = []
    while len(shapes) < 300:
        cat = rng.choices(["square", "llm", "batched", "random"], [1.5, 3, 2, 3])[0]
        b = 1
        if cat == "square":
            m = n = k = lu(384, 2048) // 16 * 16
        elif cat == "llm":
            n, k = rng.choice([(768, 768), (1024, 1024), (2048, 512), (3072, 768), (768, 3072), (4096, 1024),
                               (1536, 1536), (512, 2048), (4096, 4096), (4096, 512), (512, 4096),
                               (2048, 2048), (11008, 4096), (4096, 11008), (14336, 4096)])
            m = rng.choice([100, 128, 200, 256, 384, 512, 1000, 1024, 2048, 4096])
        elif cat == "batched":
            b = rng.choice([2, 4, 8, 16, 32])
            m, n, k = lu(64, 2048), lu(64, 2048), lu(64, 2048)
        else:
            m, n, k = lu(64, 8192), lu(64, 8192), lu(64, 8192)
            if rng.random() < 0.6:
                m, n, k = [max(16, x // 16 * 16) for x in (m, n, k)]
        if not 2e8 <= 2 * b * m * n * k <= 8e9:
            continue
        shapes.append((cat, b, m, n, k))
    mid = _expand(rng, shapes)
    cases = [c for pair in zip(small, mid) for c in pair]   # interleaved: a cut run keeps both
    cases += small[len(mid):] + mid[len(small):]
    for i, c in enumerate(cases):
        c["id"] = f"c{i:04d}"
    return cases


def _make_cases(seed=20):
    rng = random.Random(seed)
    pw = [16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]
    odd = [24, 48, 100, 200, 384, 640, 768, 1000, 1536, 3072, 5120, 6144, 12288, 14336]
    llm_nk = [(4096, 4096), (14336, 4096), (4096, 14336), (12288, 4096), (50304, 768), (32000, 4096),
              (3072, 768), (768, 3072), (1024, 4096), (11008, 4096), (4096, 11008), (2048, 8192),
              (128256, 2048), (5120, 5120), (1536, 1536)]
    shapes = []

    def lu(lo, hi):
        return int(round(2 ** rng.uniform(np.log2(lo), np.log2(hi))))
    for _ in range(230):
        cat = rng.choices(["square", "llm", "skinny", "kheavy", "batched", "random", "wide"],
                          [2, 3, 2, 1.5, 2, 3, 1])[0]
        b = 1
        if cat == "square":
            s = rng.choice(pw[2:] + odd[2:])
            m = n = k = s
        elif cat == "llm":
            n, k = rng.choice(llm_nk)
            m = rng.choice([2, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 100, 1000, 3000])
        elif cat == "skinny":
            m = rng.choice([2, 4, 8, 16, 24, 32, 48, 64])
            n, k = rng.choice(pw[6:] + odd[8:]), rng.choice(pw[6:] + odd[8:])
            if rng.random() < 0.5:
                m, n = n, m
        elif cat == "kheavy":
            m, n = rng.choice(pw[1:6] + odd[:5]), rng.choice(pw[1:6] + odd[:5])
            k = rng.choice([4096, 8192, 16384, 32768, 65536, 100000])
        elif cat == "batched":
            b = rng.choice([2, 4, 8, 16, 32, 64, 128])
            m, n = rng.choice(pw[:7] + odd[:6]), rng.choice(pw[:7] + odd[:6])
            k = rng.choice([32, 64, 128, 256, 512, 1024, 100])
        elif cat == "wide":
            m = rng.choice([64, 256, 1024, 4096])
            n = rng.choice([32000, 50304, 65536, 128256])
            k = rng.choice([256, 768, 1024, 2048])
        else:
            m, n, k = lu(16, 16384), lu(16, 16384), lu(16, 16384)
            if rng.random() < 0.5:
                m, n, k = [max(16, x // 16 * 16) for x in (m, n, k)]
        shapes.append((cat, b, m, n, k))
    return _expand(rng, shapes)


def _expand(rng, shapes):
    cases = []
    seen = set()
    for (cat, b, m, n, k) in shapes:
        for _ in range(rng.choice([3, 4, 5])):
            dt = rng.choices(list(DT), [4, 2.5, 3, 1, 2, 1])[0]
            if dt == "fp8":
                epi = rng.choice(["scale", "scale", "scale_relu", "amax", "none"])
            elif dt == "int8":
                epi = rng.choice(["none", "none", "relu"])
            else:
                epi = rng.choices(["none", "bias", "relu", "gelu", "add", "bias_gelu"], [4, 2, 1.5, 1.5, 2, 1])[0]
            lay = rng.choices(["NN", "TN", "NT"], [5, 1.5, 1.5])[0]
            if dt in ("fp8",):
                lay = "NT"     # cuBLASLt FP8 wants TN in column-major terms; keep the common one
            flops = 2 * b * m * n * k
            cap = {"f32": 0.25e12, "tf32": 1.1e12}.get(dt, 2.2e12)
            ob = 4 if dt in ("f32", "tf32") else (1 if dt in ("fp8", "int8") else 2)
            if flops > cap or b * max(m * k, k * n, m * n) * max(ob, 2) > 2 ** 30:
                continue
            key = (b, m, n, k, dt, epi, lay)
            if key in seen:
                continue
            seen.add(key)
            cases.append(dict(cat=cat, b=b, m=m, n=n, k=k, dt=dt, epi=epi, lay=lay))
    rng.shuffle(cases)
    for i, c in enumerate(cases):
        c["id"] = f"c{i:04d}"
    return cases


def build(c):
    """(arg specs, fn) of one case."""
    b, m, n, k, dt, epi, lay = c["b"], c["m"], c["n"], c["k"], c["dt"], c["epi"], c["lay"]
    t = DT[dt]
    bd = (b,) if b > 1 else ()
    a_shape = bd + ((k, m) if lay == "TN" else (m, k))
    b_shape = bd + ((n, k) if lay == "NT" else (k, n))
    nb = len(bd)
    lc = nb if lay == "TN" else nb + 1
    rc = nb + 1 if lay == "NT" else nb
    dims = (((lc,), (rc,)), ((tuple(range(nb)), tuple(range(nb)))))
    specs = [jax.ShapeDtypeStruct(a_shape, t), jax.ShapeDtypeStruct(b_shape, t)]
    out_t = {"fp8": jnp.bfloat16, "int8": jnp.int32}.get(dt, t)
    extra = []
    if epi in ("bias", "bias_gelu"):
        extra.append(jax.ShapeDtypeStruct((n,), out_t))
    if epi == "add":
        extra.append(jax.ShapeDtypeStruct(bd + (m, n), out_t))
    if epi.startswith("scale") or epi == "amax":
        extra += [jax.ShapeDtypeStruct((), jnp.float32), jax.ShapeDtypeStruct((), jnp.float32)]
    prec = jax.lax.Precision.HIGHEST if dt == "f32" else None

    def fn(x, w, *e):
        if dt == "fp8":
            y = jax.lax.dot_general(x, w, dims, preferred_element_type=jnp.float32)
            if e:
                y = y * (e[0] * e[1])
            if epi == "scale_relu":
                y = jnp.maximum(y, 0.0)
            if epi == "amax":
                return y.astype(jnp.bfloat16), jnp.max(jnp.abs(y))
            return y.astype(jnp.bfloat16)
        if dt == "int8":
            y = jax.lax.dot_general(x, w, dims, preferred_element_type=jnp.int32)
            return jnp.maximum(y, 0) if epi == "relu" else y
        y = jax.lax.dot_general(x, w, dims, precision=prec)
        if epi in ("bias", "bias_gelu"):
            y = y + e[0]
        if epi == "add":
            y = y + e[0]
        if epi == "relu":
            y = jnp.maximum(y, 0)
        if epi in ("gelu", "bias_gelu"):
            y = jax.nn.gelu(y, approximate=True)
        return y
    return specs + extra, fn


def compile_group(name, group):
    specs, fns, arity = [], [], []
    for c in group:
        s, f = build(c)
        specs += s
        fns.append(f)
        arity.append(len(s))

    def f(*args):
        outs, i = [], 0
        for c, fn, a in zip(group, fns, arity):
            with jax.named_scope(c["id"]):
                outs.append(fn(*args[i:i + a]))
            i += a
        return tuple(outs)
    f.__name__ = name
    for p in ("logs.textproto", "results.textproto"):
        if os.path.exists(f"{TMP}/{p}"):
            os.remove(f"{TMP}/{p}")
    t = time.time()
    jax.jit(f).lower(*specs).compile()
    dt = time.time() - t
    for p, sub in (("logs.textproto", "logs"), ("results.textproto", "results")):
        if os.path.exists(f"{TMP}/{p}"):
            shutil.move(f"{TMP}/{p}", os.path.join(OUT, sub, f"{name}.textproto"))
    d = f"{TMP}/dump"
    if os.path.isdir(d):
        for fn_ in os.listdir(d):
            if f".jit_{name}." not in fn_:
                continue
            if fn_.endswith("after_optimizations.txt") or "before_config_assignment" in fn_ \
                    or "config-assigner.after_pipeline-start" in fn_:
                shutil.copy(os.path.join(d, fn_), os.path.join(OUT, "hlo", fn_))
        shutil.rmtree(d, ignore_errors=True)
    return dt


def run_groups(groups, prefix):
    status = []
    for gi, group in groups:
        if time.time() - T0 > DEADLINE:
            break
        name = f"{prefix}{gi:04d}"
        try:
            dt = compile_group(name, group)
            status.append({"module": name, "cases": [c["id"] for c in group], "ok": True, "s": round(dt, 2)})
        except Exception as e:  # noqa: BLE001
            status.append({"module": name, "cases": [c["id"] for c in group], "ok": False,
                           "error": str(e)[:2000]})
            # retry one by one so a bad case does not lose its neighbours
            for c in group:
                if time.time() - T0 > DEADLINE:
                    break
                n1 = f"{name}s{c['id']}"
                try:
                    dt = compile_group(n1, [c])
                    status.append({"module": n1, "cases": [c["id"]], "ok": True, "s": round(dt, 2)})
                except Exception as e1:  # noqa: BLE001
                    status.append({"module": n1, "cases": [c["id"]], "ok": False, "error": str(e1)[:1500]})
        with open(os.path.join(OUT, f"status_{START:04d}.json"), "w") as fh:
            json.dump({"elapsed": time.time() - T0, "modules": status}, fh)
        print(f"[{PHASE}] {name} {len(group)} cases ok={status[-1]['ok']} t={time.time() - T0:.0f}s", flush=True)


def main():
    cases = make_cases()
    with open(os.path.join(WORK, "cases.json"), "w") as fh:
        json.dump(cases, fh)
    G = 12
    groups = [cases[i:i + G] for i in range(0, len(cases), G)]
    print(f"{len(cases)} cases, {len(groups)} groups; devices {jax.devices()}", flush=True)
    if PHASE == "main":
        run_groups([(gi, g) for gi, g in enumerate(groups) if gi >= START], "m")
    else:
        import glob
        ok = set()
        for sf in glob.glob(os.path.join(WORK, "main", "status_*.json")):
            ok |= {m["module"] for m in json.load(open(sf))["modules"] if m["ok"]}
        sel = [(gi, g) for gi, g in enumerate(groups) if gi % EVERY == 0 and f"m{gi:04d}" in ok and gi >= START]
        run_groups(sel, "r")


if __name__ == "__main__":
    try:
        main()
    except Exception:
        traceback.print_exc()
        sys.exit(1)
