"""Make the XLA:GPU oracle set testdata/xla-dumps/ (run on a GPU machine with
jax[cuda]; the programs are in bench/xla_oracle_programs.py).

    python3 bench/xla_oracle_dumps.py OUT_DIR [PROGRAM ...]    # on the GPU
    python bench/xla_oracle_dumps.py --unpack OUT_DIR/xla_oracle_dumps.tar.gz testdata/xla-dumps

Each program is lowered from ``ShapeDtypeStruct`` arguments and compiled
(never run) in its own process under ``XLA_FLAGS=--xla_dump_to=DIR
--xla_dump_hlo_as_text --xla_gpu_dump_autotune_results_to=...``. Per program
only the main module's ``before_optimizations.txt``, its
``gpu_after_optimizations.txt``, ``autotune_results.textproto`` and an
``info.json`` (JAX version, device, flags, compile time) are kept, packed into
OUT_DIR/xla_oracle_dumps.tar.gz (with a log, OUT_DIR/xla_oracle_dumps.log).
``--unpack`` puts them into testdata, gzipping HLO .txt files over 32 KiB
(hlorun's loaders read ``.gz``).

``dot_algorithms`` first compiles one dot per ``DotAlgorithmPreset`` and
keeps in the module only those this GPU compiles (the others are listed in
its info.json). ``autotune_results.textproto`` is XLA's whole autotune cache
at the end of the process, so for ``dot_algorithms`` it also holds the probes'
entries.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BIG = 32 * 1024


def child(name: str, dump: str) -> int:
    """Compile one program (in a process whose XLA_FLAGS dump to ``dump``)."""
    sys.path.insert(0, str(HERE))
    import jax
    from jax import lax

    import xla_oracle_programs as progs
    info = {"name": name, "jax": jax.__version__, "jaxlib": __import__("jaxlib").__version__,
            "device": jax.devices()[0].device_kind, "xla_flags": os.environ.get("XLA_FLAGS", "")}
    if name.startswith("dot_algorithms"):
        ok, failed = [], {}
        for key in progs.DOT_ALGORITHMS:
            fn, args = progs._algo_dot(key)
            fn.__name__ = "probe_" + key.replace("@", "_on_")
            try:
                jax.jit(fn).lower(*args).compile()
                ok.append(key)
            except Exception as e:  # noqa: BLE001 - recorded, the preset is left out
                failed[key] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
        info["algorithms"], info["algorithms_refused"] = ok, failed
        fn, args = progs.dot_algorithms(ok)
    else:
        fn, args = progs.PROGRAMS[name]()
    fn.__name__ = name
    jitted = jax.jit(fn, donate_argnums=progs.DONATE.get(name, ()))
    t0 = time.perf_counter()
    lowered = jitted.lower(*args)
    compiled = lowered.compile()
    info["compile_s"] = round(time.perf_counter() - t0, 3)
    info["module"] = f"jit_{name}"
    del compiled, lax
    Path(dump, "info.json").write_text(json.dumps(info, indent=1) + "\n")
    return 0


def keep(name: str, dump: Path) -> list[Path]:
    """The files kept of one program's dump directory."""
    main = f".jit_{name}."
    files = [f for f in dump.iterdir() if main in f.name and (
        f.name.endswith(".before_optimizations.txt") or f.name.endswith("gpu_after_optimizations.txt"))]
    files += [f for f in (dump / "autotune_results.textproto", dump / "info.json") if f.exists()]
    return sorted(files)


def driver(out: str, names: list[str], budget_s: float) -> int:
    sys.path.insert(0, str(HERE))
    import xla_oracle_programs as progs
    out_dir = Path(out)
    work = Path(os.environ.get("ORACLE_WORK", "/tmp/xla_oracle_work"))  # outside OUT_DIR: many files
    work.mkdir(parents=True, exist_ok=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    log = open(out_dir / "xla_oracle_dumps.log", "w")
    t_start = time.monotonic()
    done = []
    for name in names:
        left = budget_s - (time.monotonic() - t_start)
        if left < 20:
            print(f"{name}: skipped (budget spent)", file=log, flush=True)
            continue
        d = work / name
        d.mkdir(exist_ok=True)
        flags = (f"--xla_dump_to={d} --xla_dump_hlo_as_text "
                 f"--xla_gpu_dump_autotune_results_to={d}/autotune_results.textproto "
                 + progs.EXTRA_FLAGS.get(name, "")).strip()
        env = dict(os.environ, XLA_FLAGS=flags, XLA_PYTHON_CLIENT_PREALLOCATE="false")
        t0 = time.monotonic()
        try:
            r = subprocess.run([sys.executable, __file__, "--child", name, str(d)], env=env,
                               capture_output=True, text=True, timeout=min(150, left))
            rc, tail = r.returncode, (r.stdout + r.stderr)[-1500:]
        except subprocess.TimeoutExpired:
            rc, tail = "timeout", ""
        kept = keep(name, d)
        print(f"{name}: rc={rc} {time.monotonic() - t0:.1f}s kept={[f.name for f in kept]}", file=log, flush=True)
        if rc != 0:
            print(tail, file=log, flush=True)
        if rc == 0 and kept:
            done.append((name, kept))
        print(name, rc, flush=True)
    with tarfile.open(out_dir / "xla_oracle_dumps.tar.gz", "w:gz") as tar:
        for name, kept in done:
            for f in kept:
                tar.add(f, arcname=f"{name}/{f.name}")
    log.close()
    return 0


def unpack(tar_path: str, dest: str) -> int:
    """Unpack into ``dest``/<program>/, gzipping .txt files over BIG bytes."""
    dest_dir = Path(dest)
    with tarfile.open(tar_path) as tar:
        for m in tar.getmembers():
            if not m.isfile():
                continue
            parts = Path(m.name).parts
            if len(parts) != 2 or ".." in parts:
                raise SystemExit(f"unexpected member {m.name!r}")
            data = tar.extractfile(m).read()
            target = dest_dir / parts[0] / parts[1]
            target.parent.mkdir(parents=True, exist_ok=True)
            if len(data) > BIG and target.suffix == ".txt":
                target = target.with_name(target.name + ".gz")
                data = gzip.compress(data, mtime=0)
            target.write_bytes(data)
            print(target, len(data))
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["--child"]:
        return child(argv[1], argv[2])
    if argv[:1] == ["--unpack"]:
        return unpack(argv[1], argv[2])
    sys.path.insert(0, str(HERE))
    import xla_oracle_programs as progs
    budget = float(os.environ.get("ORACLE_BUDGET_S", "480"))
    return driver(argv[0], argv[1:] or list(progs.PROGRAMS), budget)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
