"""Mutation fuzzing of the parser, printer, verifier and a short pipeline.

    python bench/fuzz.py [-n COUNT | --seconds S] [--seed N] [-j WORKERS]
                         [--timeout 5] [--wall-timeout 60] [--json OUT] [--crash-dir DIR]

Seeds are the XLA corpus modules (``../shared/corpus``), the testdata
modules and XLA's before-optimization dumps (each at most ``--max-seed-kb``).
Case ``i`` of seed ``N`` is a pure function of (N, i): a random seed module
with one to three mutations (``bench/fuzz_mutators.py``).  Every case runs
in a worker process (``fork``; address space capped by ``--max-mem``) under
a CPU-time limit (see "Hangs" below):

1. ``parse_module``: an ``HloParseError`` with a line and column is the
   expected failure; anything else is *unexpected*;
2. if it parsed: ``print_module``, then parse of the printed text and print
   again, which must give the same text (*roundtrip* otherwise);
3. the verifier: a "verifier crashed" finding is *unexpected*;
4. if the verifier is clean and the module is small: the short pipeline
   (``--passes``) with the verifier as checker; a ``PassError`` is expected,
   another exception or a crashed checker is *unexpected*, verifier findings
   after a pass are counted as *pass_broke_module*.

Hangs are measured in CPU time, not wall time, so that a loaded machine
(other jobs sharing the cores) does not turn a slow-but-finite case into a
"hang": a case whose worker process spends more than ``--timeout`` seconds
of CPU (user + system, ``time.process_time``) is a *hang*.  Three guards:

* ``setitimer(ITIMER_PROF, timeout)``: a SIGPROF after ``--timeout`` CPU
  seconds interrupts a case running Python code;
* ``RLIMIT_CPU`` set before each case to the CPU used so far plus
  2 x ``--timeout`` + 2 s: the kernel kills (SIGXCPU) a worker stuck in C
  code, which the parent counts as a hang;
* a wall-clock safety kill: a worker silent for ``--wall-timeout`` seconds
  (default 60; sleeping, blocked, or starved) is killed and counted as a
  hang, labelled as a wall-clock kill.

Each case's CPU and wall seconds are recorded; the JSON has the slowest by
CPU and by wall.  At the end one minimized input per distinct failure is written to
``--crash-dir`` (line, then character-span deletion keeping the same
failure signature), and a summary line and JSON counts are printed.  Exit 1
if there were unexpected exceptions or hangs.
"""

from __future__ import annotations

import argparse
import collections
import json
import multiprocessing as mp
import os
import random
import resource
import signal
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

from fuzz_mutators import mutate  # noqa: E402

DEFAULT_PASSES = "call-inliner,algsimp,dce,cse,tuple-simplifier,dot_decomposer,reshape-decomposer"
SHARED = Path(os.environ.get("HLORUN_SHARED", REPO.parent / "shared"))


def load_seeds(max_kb: int = 48) -> list[tuple[str, str]]:
    """(name, text) of every seed module, sorted by name (deterministic)."""
    files: list[Path] = []
    for root in (SHARED / "corpus", REPO / "testdata"):
        if root.exists():
            files += [p for p in root.rglob("*") if p.suffix in (".hlo", ".txt")]
    dumps = SHARED / "xla-dumps"
    if dumps.exists():
        files += list(dumps.glob("*/*before_optimizations.txt"))
    out = []
    for p in sorted(set(files)):
        try:
            if p.stat().st_size > max_kb * 1024:
                continue
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if "HloModule" in text or "ENTRY" in text:
            out.append((str(p.relative_to(p.parents[2])), text))
    return out


def make_case(seeds, base_seed: int, i: int) -> tuple[str, str, list[str]]:
    rng = random.Random(base_seed * 1_000_003 + i)
    name, text = seeds[rng.randrange(len(seeds))]
    text, muts = mutate(rng, text)
    return name, text, muts


class _Timeout(BaseException):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def _arm(timeout: float) -> None:
    """Interrupt the running Python code after ``timeout`` s of CPU time."""
    signal.signal(signal.SIGPROF, _alarm)
    signal.setitimer(signal.ITIMER_PROF, max(timeout, 0.001))


def _disarm() -> None:
    signal.setitimer(signal.ITIMER_PROF, 0)


def _cpu_backstop(limit_s: float) -> None:
    """The kernel kills this process (SIGXCPU) once its total CPU time passes
    ``limit_s``: the guard for a case stuck in C code, where SIGPROF's Python
    handler cannot run."""
    try:
        _, hard = resource.getrlimit(resource.RLIMIT_CPU)
        soft = int(limit_s) + 1
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    except (ValueError, OSError):
        pass


def _sig(where: str, e: BaseException) -> str:
    tb = traceback.extract_tb(e.__traceback__)
    frames = [f for f in tb if "hlorun" in f.filename] or tb
    last = frames[-1] if frames else None
    at = f"{Path(last.filename).name}:{last.name}" if last else "?"
    return f"{where}:{type(e).__name__}@{at}"


def check_case(text: str, passes: str = DEFAULT_PASSES, pipeline_max_chars: int = 20000
               ) -> tuple[str, str]:
    """(outcome, detail).  Outcomes starting with ``unexpected`` or
    ``roundtrip`` are bugs; the others are the project's expected answers."""
    from hlorun.text.parser import parse_module
    from hlorun.text.printer import print_module
    from hlorun.errors import HloParseError
    from hlorun.verifier.checkers import verify
    where = "parse"
    try:
        try:
            m = parse_module(text, "fuzz.hlo")
        except HloParseError as e:
            if e.line <= 0 or e.column <= 0:
                return "unexpected", f"parse:unlocated HloParseError: {e.message[:80]}"
            return "parse_error", ""
        where = "print"
        printed = print_module(m)
        where = "reparse"
        try:
            m2 = parse_module(printed, "printed.hlo")
        except HloParseError as e:
            return "roundtrip", f"printed text does not parse: {e.message[:100]}"
        where = "print"
        if print_module(m2) != printed:
            return "roundtrip", "print(parse(print(m))) != print(m)"
        where = "verify"
        diags = verify(m)
        crashed = [d for d in diags if "crashed" in d.message]
        if crashed:
            return "unexpected", f"verify:{crashed[0].message[:120]}"
        if diags:
            return "verify_findings", ""
        if not passes or len(text) > pipeline_max_chars:
            return "verified_clean", ""
        where = "pipeline"
        from hlorun.pipeline.run import RunOptions, run_pipeline
        from hlorun.pipeline.spec import pipeline_from_passes
        spec = pipeline_from_passes(passes, checkers=["hlo-verifier"])
        res = run_pipeline(m, spec, RunOptions())
        if res.failure is not None:
            if res.failure.exception != "PassError":
                last = res.failure.traceback.strip().splitlines()
                return "unexpected", (f"pipeline:{res.failure.exception}@{res.failure.name}: "
                                      f"{res.failure.message[:80]} | {last[-3][:100] if len(last) > 2 else ''}")
            return "pass_error", ""
        bad = [v for v in res.violations if "crashed" in v.message]
        if bad:
            return "unexpected", f"pipeline:{bad[0].rule} crashed after {bad[0].after_pass}: " \
                f"{bad[0].message[:100]}"
        if res.violations:
            v = res.violations[0]
            return "pass_broke_module", f"after {v.after_pass}: {v.message[:120]}"
        where = "print"
        print_module(m)
        return "pipeline_ok", ""
    except _Timeout:
        return "hang", where
    except RecursionError as e:
        return "unexpected", _sig(where, e)
    except Exception as e:  # noqa: BLE001 - the point of the fuzzer
        return "unexpected", _sig(where, e)


def _worker(conn, seeds, base_seed, start, stop, timeout, passes, max_mem):
    if max_mem:
        try:
            resource.setrlimit(resource.RLIMIT_AS, (max_mem, max_mem))
        except (ValueError, OSError):
            pass
    try:  # a SIGXCPU kill must not leave core files behind
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ValueError, OSError):
        pass
    import hlorun.text.parser  # noqa: F401  (warm the grammar before timing cases)
    for i in range(start, stop):
        _, text, muts = make_case(seeds, base_seed, i)
        t0, c0 = time.perf_counter(), time.process_time()
        _cpu_backstop(c0 + 2 * timeout + 2)
        _arm(timeout)
        try:
            outcome, detail = check_case(text, passes)
        except _Timeout:
            outcome, detail = "hang", "?"
        except MemoryError:
            outcome, detail = "unexpected", "MemoryError (outside the checks)"
        finally:
            _disarm()
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
        if cpu > timeout and outcome != "hang":
            outcome, detail = "hang", f"{outcome} after {cpu:.1f}s CPU"
        conn.send((i, outcome, detail, "+".join(muts), cpu, wall))
    conn.send(None)


def run_campaign(count: int | None, seconds: float | None, seed: int, workers: int,
                 timeout: float, passes: str, max_seed_kb: int, max_mem: int,
                 progress: bool = True, start: int = 0, wall_timeout: float = 60.0) -> dict:
    seeds = load_seeds(max_seed_kb)
    ctx = mp.get_context("fork")
    counts: collections.Counter = collections.Counter()
    failures: dict[str, dict] = {}
    slowest = (0.0, -1)       # by CPU seconds
    slowest_wall = (0.0, -1)
    deadline = time.monotonic() + seconds if seconds else None
    total = start + count if count is not None else 10**9
    chunk = 200
    next_case = start
    running: dict = {}  # conn -> [proc, next expected case, stop, last message time]
    t_start = time.monotonic()

    def launch(start, stop):
        a, b = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_worker, args=(b, seeds, seed, start, stop, timeout, passes,
                                              max_mem), daemon=True)
        p.start()
        b.close()
        running[a] = [p, start, stop, time.monotonic()]

    def more() -> bool:
        return next_case < total and (deadline is None or time.monotonic() < deadline)

    done = 0
    while True:
        while len(running) < workers and more():
            stop = min(total, next_case + chunk)
            launch(next_case, stop)
            next_case = stop
        if not running:
            break
        ready = mp.connection.wait(list(running), timeout=0.5)
        now = time.monotonic()
        for conn in ready:
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                msg = None
                p, cur, stop, _ = running[conn]
                p.join(1)
                if cur < stop:  # the worker died in a case (e.g. killed by the OS)
                    if p.exitcode == -signal.SIGXCPU:  # the RLIMIT_CPU backstop
                        kind = "hang"
                        sig = f"hang: killed by RLIMIT_CPU after {2 * timeout + 2:g}s CPU " \
                            "(stuck outside Python)"
                    else:
                        kind = "unexpected"
                        sig = f"worker died (exit {p.exitcode})"
                    counts[kind] += 1
                    failures.setdefault(sig, {"case": cur, "outcome": kind, "count": 0})
                    failures[sig]["count"] += 1
                    if progress and failures[sig]["count"] == 1:
                        print(f"  case {cur}: {sig}", file=sys.stderr, flush=True)
                    done += 1
                    if cur + 1 < stop:
                        launch(cur + 1, stop)
                del running[conn]
                continue
            if msg is None:
                running[conn][0].join(1)
                del running[conn]
                continue
            i, outcome, detail, muts, dt, wall = msg
            running[conn][1] = i + 1
            running[conn][3] = now
            counts[outcome] += 1
            done += 1
            if dt > slowest[0]:
                slowest = (dt, i)
            if wall > slowest_wall[0]:
                slowest_wall = (wall, i)
            if outcome in ("unexpected", "roundtrip", "hang"):
                sig = f"{outcome}: {detail}"
                f = failures.setdefault(sig, {"case": i, "outcome": outcome, "mutators": muts,
                                              "count": 0})
                f["count"] += 1
                if progress and f["count"] == 1:  # new failure kinds as they appear
                    print(f"  case {i} ({muts}, {dt:.1f}s CPU, {wall:.1f}s wall): {sig}",
                          file=sys.stderr, flush=True)
        for conn, (p, cur, stop, last) in list(running.items()):
            if now - last > wall_timeout:  # wall-clock safety kill (blocked or starved)
                p.kill()
                p.join(1)
                del running[conn]
                counts["hang"] += 1
                done += 1
                sig = f"hang: killed at the wall-clock safety limit ({wall_timeout:g}s)"
                failures.setdefault(sig, {"case": cur, "outcome": "hang", "count": 0})
                failures[sig]["count"] += 1
                if progress:
                    print(f"  case {cur}: {sig}", file=sys.stderr, flush=True)
                if cur + 1 < stop:
                    launch(cur + 1, stop)
        if progress and done and done % 5000 < workers * 2:
            print(f"  {done} cases, {time.monotonic() - t_start:.0f}s: {dict(counts)}",
                  file=sys.stderr, flush=True)
    elapsed = time.monotonic() - t_start
    return {"cases": done, "seconds": round(elapsed, 1), "seed": seed, "seeds": len(seeds),
            "counts": dict(counts), "failures": failures,
            "unexpected": counts["unexpected"], "roundtrip": counts["roundtrip"],
            "hangs": counts["hang"], "slowest_case_s": round(slowest[0], 3),
            "slowest_case": slowest[1], "slowest_wall_s": round(slowest_wall[0], 3),
            "slowest_wall_case": slowest_wall[1], "timeout_s": timeout,
            "timeout_clock": "cpu", "wall_timeout_s": wall_timeout, "passes": passes}


def minimize(text: str, signature, budget_s: float = 60.0, timeout: float = 5.0) -> str:
    """Delete lines, then character spans, while ``signature(text)`` holds."""
    t_end = time.monotonic() + budget_s

    def holds(t: str) -> bool:
        _arm(timeout)
        try:
            return signature(t)
        except _Timeout:
            return False
        finally:
            _disarm()

    for unit in ("\n", None):
        parts = text.split("\n") if unit else list(text)
        n = max(1, len(parts) // 2)
        while n >= 1 and time.monotonic() < t_end:
            i = 0
            changed = False
            while i < len(parts) and time.monotonic() < t_end:
                cand = parts[:i] + parts[i + n:]
                joined = (unit or "").join(cand)
                if cand and holds(joined):
                    parts = cand
                    changed = True
                else:
                    i += n
            if not changed:
                n //= 2
        text = (unit or "").join(parts)
    return text


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", "--count", type=int, default=None, help="number of cases")
    ap.add_argument("--seconds", type=float, default=None, help="stop after this long")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start", type=int, default=0, help="first case number (cases are (seed, i))")
    ap.add_argument("-j", "--workers", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=5.0,
                    help="per-case hang limit in CPU seconds of the worker (user + system; "
                         "machine load does not count); a worker stuck in C code is killed by "
                         "RLIMIT_CPU at 2x this + 2 s")
    ap.add_argument("--wall-timeout", type=float, default=60.0,
                    help="wall-clock safety kill: a worker silent this long (blocked, sleeping "
                         "or starved) is killed and its case counted as a hang")
    ap.add_argument("--passes", default=DEFAULT_PASSES, help="short pipeline ('' for none)")
    ap.add_argument("--max-seed-kb", type=int, default=48)
    ap.add_argument("--max-mem", type=int, default=3 << 30, help="worker address-space cap")
    ap.add_argument("--json", help="write the counts here")
    ap.add_argument("--crash-dir", help="write one minimized input per failure here")
    ap.add_argument("--minimize-s", type=float, default=60.0)
    ap.add_argument("-q", "--quiet", action="store_true")
    a = ap.parse_args(argv)
    if a.count is None and a.seconds is None:
        a.count = 1000
    r = run_campaign(a.count, a.seconds, a.seed, a.workers, a.timeout, a.passes,
                     a.max_seed_kb, a.max_mem, progress=not a.quiet, start=a.start,
                     wall_timeout=a.wall_timeout)
    if a.crash_dir and r["failures"]:
        seeds = load_seeds(a.max_seed_kb)
        os.makedirs(a.crash_dir, exist_ok=True)
        for k, (sig, f) in enumerate(sorted(r["failures"].items())):
            _, text, _ = make_case(seeds, a.seed, f["case"])
            if f["outcome"] == "hang":  # never re-run a hang here (it may be stuck in C)
                small = text
            else:
                want = check_case(text, a.passes)
                small = minimize(text, lambda t, w=want: check_case(t, a.passes) == w,
                                 a.minimize_s, a.timeout)
            path = Path(a.crash_dir) / f"crash_{k:03d}.hlo"
            path.write_text(small, encoding="utf-8", errors="surrogatepass")
            f["minimized"] = str(path)
    for sig, f in sorted(r["failures"].items(), key=lambda kv: -kv[1]["count"]):
        print(f"{f['count']:6d}  {sig}  (case {f['case']})")
    c = r["counts"]
    print(f"summary: {r['cases']} cases in {r['seconds']} s (seed {a.seed}, {r['seeds']} seed "
          f"modules): {r['unexpected']} unexpected, {r['hangs']} hangs, {r['roundtrip']} "
          f"round-trip failures; parse errors {c.get('parse_error', 0)}, verifier findings "
          f"{c.get('verify_findings', 0)}, clean {c.get('verified_clean', 0)}, pipeline ok "
          f"{c.get('pipeline_ok', 0)}, pass errors {c.get('pass_error', 0)}, pass broke module "
          f"{c.get('pass_broke_module', 0)}; slowest case {r['slowest_case_s']} s CPU "
          f"(case {r['slowest_case']}), {r['slowest_wall_s']} s wall "
          f"(case {r['slowest_wall_case']})")
    if a.json:
        Path(a.json).write_text(json.dumps(r, indent=1, default=str))
    return 1 if (r["unexpected"] or r["hangs"]) else 0


if __name__ == "__main__":
    sys.exit(main())
