"""Conformance of the evaluator on XLA's own HLO files (shared/corpus/xla/files)
against XLA:CPU (through jaxlib).

    python bench/evaluate_corpus.py [--max-bytes 1G] [--timeout 60] [--json out.json]

For every module XLA's parser accepts whose reachable opcodes the evaluator
supports: evaluate it on seeded inputs (refusing estimates over --max-bytes,
giving up after --timeout seconds), run it on XLA:CPU on the same inputs
and compare with the per-dtype tolerances.  Prints counts per outcome and
the modules that differ.
"""

from __future__ import annotations

import argparse
import collections
import json
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "evaluate"))

from hlorun.evaluate import (EvaluationError, Evaluator, compare_values, output_types,  # noqa: E402
                             random_inputs, tolerance_types, unsupported_ops)
from hlorun.evaluate.memory import check_memory  # noqa: E402
from hlorun.evaluate.session import leaves, parse_bytes  # noqa: E402
from hlorun.text.fileio import read_text  # noqa: E402
from hlorun.text.parser import parse_module, split_input_file  # noqa: E402

CORPUS = ROOT.parent / "shared" / "corpus" / "xla" / "files"


class _Timeout(Exception):
    pass


def _xla_worker(text, args):
    import xla_oracle
    return xla_oracle.run_on_xla_cpu(text, args)


class _XlaRunner:
    """XLA:CPU in a child process: an XLA CHECK failure (abort) or a hang
    costs that module, not the run."""

    def __init__(self):
        self.pool = None

    def run(self, text, args, timeout):
        import concurrent.futures as cf
        if self.pool is None:
            import multiprocessing
            self.pool = cf.ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                                               initializer=_init_worker)
        fut = self.pool.submit(_xla_worker, text, args)
        try:
            return fut.result(timeout=timeout)
        except (cf.TimeoutError, cf.process.BrokenProcessPool) as e:
            self._kill()
            raise _Timeout() if isinstance(e, cf.TimeoutError) else RuntimeError("XLA:CPU crashed") from None

    def _kill(self):
        if self.pool is not None:
            for p in list(getattr(self.pool, "_processes", {}).values()):
                p.kill()
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.pool = None


def _init_worker():
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "tests" / "evaluate"))


def _alarm(signum, frame):
    raise _Timeout()


def modules():
    man = json.loads((CORPUS / "manifest.json").read_text())
    for e in man["files"]:
        if not e.get("stored") or e.get("format") != "hlo_text" or not e.get("xla_parse", {}).get("parses"):
            continue
        path = CORPUS / e["stored"]
        text = read_text(path)
        chunks = split_input_file(text) if e.get("split_input_file_chunks") else [(1, text)]
        for line, chunk in chunks:
            yield f"{e['stored']}:{line}", chunk


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-bytes", default="1G")
    ap.add_argument("--timeout", type=int, default=60)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--no-xla", action="store_true", help="only evaluate (no XLA:CPU comparison)")
    ap.add_argument("-v", "--verbose", action="store_true", help="a line per module as it goes")
    a = ap.parse_args(argv)
    limit = parse_bytes(a.max_bytes)
    import xla_oracle
    use_xla = not a.no_xla and xla_oracle.available()
    signal.signal(signal.SIGALRM, _alarm)
    xla = _XlaRunner()
    counts: collections.Counter = collections.Counter()
    rows = []
    t0 = time.perf_counter()
    for label, text in modules():
        try:
            m = parse_module(text, label)
        except Exception:
            counts["our parser rejects"] += 1
            continue
        missing = unsupported_ops(m)
        if missing:
            counts["unsupported ops"] += 1
            continue
        row = {"module": label, "instructions": m.instruction_count}
        signal.alarm(a.timeout)
        try:
            if limit is not None:  # before making inputs: parameters can be gigabytes
                check_memory(m, None, limit)
            args = random_inputs(m, 0)
            t = time.perf_counter()
            ours = Evaluator(m, max_bytes=limit, max_while_iterations=10000).evaluate(args)
            row["seconds"] = round(time.perf_counter() - t, 4)
            signal.alarm(0)
        except _Timeout:
            row["status"] = "timeout"
        except EvaluationError as e:
            signal.alarm(0)
            msg = e.message
            row["status"] = ("too big" if "max-bytes" in msg else "elided constant" if "elided" in msg
                             else "no entry arguments" if "argument" in msg and "expected" in msg
                             else "evaluator error")
            row["message"] = msg[:200]
        else:
            row["status"] = "evaluated"
            if use_xla:
                try:
                    theirs = xla.run(text, args, a.timeout)
                    mine = tuple(v for _, v in leaves(ours))
                    cmp = compare_values(tuple(theirs), mine, output_types(m),
                                         tolerance_types=tolerance_types(m))
                    row["status"] = "agrees with XLA:CPU" if cmp.ok else "differs from XLA:CPU"
                    if not cmp.ok:
                        row["message"] = "; ".join(leaf.describe() for leaf in cmp.leaves if not leaf.ok)[:300]
                except _Timeout:
                    row["status"] = "evaluated (XLA:CPU timed out)"
                except Exception as e:  # XLA cannot import/compile it (e.g. GPU-only ops)
                    row["status"] = "evaluated (XLA:CPU cannot run it)"
                    row["message"] = str(e).splitlines()[0][:200]
        finally:
            signal.alarm(0)
        counts[row["status"]] += 1
        rows.append(row)
        if a.verbose:
            print(f"{row['status']:35s} {row['module']} {row.get('message', '')[:120]}", flush=True)
    for k, v in counts.most_common():
        print(f"{v:5d}  {k}")
    for r in rows:
        if r["status"] in ("differs from XLA:CPU", "evaluator error", "timeout"):
            print(f"  {r['status']}: {r['module']}: {r.get('message', '')}")
    xla._kill()
    print(f"{time.perf_counter() - t0:.0f} s")
    if a.json:
        a.json.write_text(json.dumps({"counts": dict(counts), "modules": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
