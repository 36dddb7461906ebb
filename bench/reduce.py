"""Benchmark: ``hlorun reduce`` on a ~10k-instruction module.

    python bench/reduce.py [--host FILE] [--pipeline NAME] [--strategies LIST] [--timeout S]

The input is a real model from XLA's benchmarks (default: Gemma 3 1B,
``gemma3_1b_flax_call``, 9,738 instructions) with the S0 attention block
(testdata/reduce/s0_attention_block.hlo) embedded as one more output; the
condition is the S0 violation under the historical ROCm pipeline
(``violation:reshape-is-bitcast``, ``--pipeline gpu-rocm-41481``).  It
reports start and end sizes, condition tests (compiles), candidates
generated (tests plus cache hits and candidates rejected as not smaller),
rates per second and total time, wall and CPU, and the time per strategy.
``--strategies`` without ``outputs`` makes the reducer cut through the
graph instead of dropping whole outputs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SHARED = Path(os.environ.get("HLORUN_SHARED", REPO.parent / "shared"))
if not SHARED.is_dir():
    SHARED = Path("/work/shared")
DEFAULT = SHARED / "corpus/xla/files/xla__backends__cpu__benchmarks__hlo__gemma3_1b_flax_call.hlo.gz"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default=str(DEFAULT))
    ap.add_argument("--guest", default=str(REPO / "testdata/reduce/s0_attention_block.hlo"))
    ap.add_argument("--pipeline", default="gpu-rocm-41481")
    ap.add_argument("--until", default="violation:reshape-is-bitcast")
    ap.add_argument("--strategies", default=None)
    ap.add_argument("--timeout", type=float, default=None)
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args()

    import tempfile

    from hlorun.text.parser import load_module, write_atomic
    from hlorun.text.printer import print_module
    from hlorun.cli.compile_options import compile_config
    from hlorun.reduce import ReduceOptions, Reducer, parse_condition
    from hlorun.testing.embed import embed

    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "model.hlo")
        m = embed(load_module(args.host), load_module(args.guest))
        text = print_module(m)
        write_atomic(model, text)
        cfg = compile_config([model, "--pipeline", args.pipeline])
        cond = parse_condition(args.until)
        cond.prepare(cfg)
        names = args.strategies.split(",") if args.strategies else None
        wall, cpu = time.perf_counter(), time.process_time()
        res = Reducer(text, model, cond, ReduceOptions(
            output=os.path.join(tmp, "small.hlo"), timeout=args.timeout, strategies=names)).run()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    generated = res.tests + res.cache_hits + res.not_smaller
    doc = {
        "host": Path(args.host).name, "pipeline": args.pipeline, "condition": args.until,
        "strategies": args.strategies or "all",
        "start": {"instructions": res.start_instructions, "bytes": res.start_bytes},
        "end": {"instructions": res.end_instructions, "bytes": res.end_bytes},
        "tests": res.tests, "candidates": generated,
        "tests_per_s": round(res.tests / wall, 3), "candidates_per_s": round(generated / wall, 3),
        "wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "test_s": round(res.test_seconds, 2),
        "stopped": res.stopped, "flaky": res.flaky,
        "per_strategy": {k: {"tests": v.tests, "accepted": v.accepted, "s": round(v.seconds, 2)}
                         for k, v in res.strategies.items()},
        "reduced": res.text,
    }
    if args.json:
        print(json.dumps(doc, indent=2))
        return
    print(f"{doc['host']} + S0 block, {args.pipeline}, --until {args.until}, strategies {doc['strategies']}")
    print(f"  start  {res.start_instructions:>6} instructions {res.start_bytes:>9} bytes")
    print(f"  end    {res.end_instructions:>6} instructions {res.end_bytes:>9} bytes")
    print(f"  {res.tests} condition tests ({doc['tests_per_s']}/s), {generated} candidates "
          f"({doc['candidates_per_s']}/s), wall {wall:.1f} s, CPU {cpu:.1f} s, in tests {res.test_seconds:.1f} s")
    for k, v in doc["per_strategy"].items():
        print(f"    {k:12} {v['tests']:4} tests {v['accepted']:4} accepted {v['s']:7.2f} s")
    print(res.text)


if __name__ == "__main__":
    main()
