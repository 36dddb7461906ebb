"""Benchmark of hlorun's buffer analysis (dataflow, aliasing, live ranges,
assignment with the heap simulator): instructions per second on real
corpus modules, small and large, and on generated modules of 10k-100k
instructions to show how it scales.

    /work/venv/bin/python bench/buffers.py                 # everything
    /work/venv/bin/python bench/buffers.py --corpus-only
    /work/venv/bin/python bench/buffers.py --synthetic-only --sizes 10000,50000,100000

Parsing is not timed (see the parser's own benchmark).  Each figure is the
best of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
SHARED = Path(os.environ.get("HLORUN_SHARED", REPO.parent / "shared"))
if not SHARED.exists():
    SHARED = Path("/work/shared")

from hlorun.buffers import assign_buffers  # noqa: E402
from hlorun.text.parser import load_module, parse_module  # noqa: E402

SMALL = "xla__tools__data__benchmarking__mobilenet_v2.hlo"


def largest_corpus_module() -> Path:
    """The corpus file with the most instructions (ranked by text size,
    then parsed)."""
    from hlorun.text.fileio import read_text
    files = sorted((SHARED / "corpus" / "xla" / "files").glob("*"))
    sized = []
    for f in files:
        if f.suffix not in (".hlo", ".gz", ".txt"):
            continue
        try:
            sized.append((len(read_text(f)), f))
        except Exception:
            continue
    best = None
    for _n, f in sorted(sized, reverse=True)[:6]:
        try:
            m = load_module(f)
        except Exception:
            continue
        if best is None or m.instruction_count > best[0]:
            best = (m.instruction_count, f)
    return best[1]


def time_assign(module, repeat: int) -> tuple[float, float, object]:
    """(best wall seconds, best CPU seconds of this process, assignment).
    CPU time is the figure to compare on a shared machine."""
    best = best_cpu = None
    asg = None
    for _ in range(repeat):
        gc.collect()
        t, c = time.perf_counter(), time.process_time()
        asg = assign_buffers(module)
        dt, dc = time.perf_counter() - t, time.process_time() - c
        best = dt if best is None else min(best, dt)
        best_cpu = dc if best_cpu is None else min(best_cpu, dc)
    return best, best_cpu, asg


def phases(module) -> dict[str, float]:
    """Seconds per phase of one run."""
    from hlorun.buffers.alias import AliasAnalysis
    from hlorun.buffers.assign import AssignOptions, BufferAssigner
    from hlorun.buffers.callgraph import CallGraph
    from hlorun.buffers.liverange import HloLiveRange
    from hlorun.buffers.values import Dataflow
    out = {}
    t = time.perf_counter()
    df = Dataflow(module, CallGraph(module))
    out["dataflow"] = time.perf_counter() - t
    t = time.perf_counter()
    al = AliasAnalysis(df, AssignOptions().rules())
    out["alias"] = time.perf_counter() - t
    t = time.perf_counter()
    HloLiveRange(module, al)
    out["live ranges"] = time.perf_counter() - t
    t = time.perf_counter()
    BufferAssigner().run(module)
    out["whole assignment"] = time.perf_counter() - t
    return out


def synthetic(layers: int) -> str:
    """A scheduled transformer-like stack: per layer a weight parameter, a
    GEMM custom call with workspace, elementwise ops, a reduction with a
    reducer, a KV-cache dynamic-update-slice into a donated parameter, and a
    residual kept alive for a few layers (13 instructions per layer)."""
    lines = []
    params = ["x: f32[128,256]", "cache: f32[1024,256]"]
    body = ["  %x = f32[128,256]{1,0} parameter(0)",
            "  %cache = f32[1024,256]{1,0} parameter(1)",
            "  %zero = f32[] constant(0)",
            "  %i0 = s32[] constant(0)"]
    h, c = "x", "cache"
    keep: list[str] = []
    for i in range(layers):
        params.append(f"w{i}: f32[256,256]")
        body += [
            f"  %w{i} = f32[256,256]{{1,0}} parameter({i + 2})",
            f"  %mm{i} = (f32[128,256]{{1,0}}, s8[65536]{{0}}) custom-call(%{h}, %w{i}), "
            f'custom_call_target="__cublas$gemm"',
            f"  %g{i} = f32[128,256]{{1,0}} get-tuple-element(%mm{i}), index=0",
            f"  %e{i} = f32[128,256]{{1,0}} exponential(%g{i})",
            f"  %s{i} = f32[128] reduce(%e{i}, %zero), dimensions={{1}}, to_apply=%add",
            f"  %b{i} = f32[128,256]{{1,0}} broadcast(%s{i}), dimensions={{0}}",
            f"  %n{i} = f32[128,256]{{1,0}} divide(%e{i}, %b{i})",
            f"  %r{i} = f32[128,256]{{1,0}} add(%n{i}, %{keep[-4] if len(keep) >= 4 else h})",
            f"  %k{i} = s32[] constant({(i * 128) % 896})",
            f"  %c{i} = f32[1024,256]{{1,0}} dynamic-update-slice(%{c}, %r{i}, %k{i}, %i0)",
            f"  %t{i} = f32[128,256]{{1,0}} tanh(%r{i})",
        ]
        keep.append(f"t{i}")
        h, c = f"t{i}", f"c{i}"
    body.append(f"  ROOT %out = (f32[128,256]{{1,0}}, f32[1024,256]{{1,0}}) tuple(%{h}, %{c})")
    lines.append("HloModule synthetic, is_scheduled=true, "
                 "input_output_alias={ {1}: (1, {}, may-alias) }\n")
    lines.append("%add (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n"
                 "  %b = f32[] parameter(1)\n  ROOT %s = f32[] add(%a, %b)\n}\n")
    lines.append(f"ENTRY %main ({', '.join(params)}) -> (f32[128,256], f32[1024,256]) {{")
    lines += body
    lines.append("}\n")
    return "\n".join(lines)


def report(label: str, module, repeat: int) -> float:
    n = module.instruction_count
    dt, dc, asg = time_assign(module, repeat)
    rate = n / dc
    temp = sum(a.size for a in asg.allocations if a.is_temp)
    print(f"{label:50s} {n:7d} instr  cpu {dc:6.2f} s  wall {dt:6.2f} s  {rate:7.0f} instr/s (cpu)  "
          f"{len(asg.allocations):6d} allocations  temp {temp / 2**20:9.1f} MiB", flush=True)
    return rate


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--corpus-only", action="store_true")
    ap.add_argument("--synthetic-only", action="store_true")
    ap.add_argument("--sizes", default="10000,25000,50000,100000",
                    help="instruction counts of the generated modules")
    ap.add_argument("--phases", action="store_true", help="also time each phase")
    args = ap.parse_args()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, load average {load:.1f}")
    if not args.synthetic_only:
        corpus = SHARED / "corpus" / "xla" / "files"
        small = load_module(corpus / SMALL)
        report(f"small  {SMALL[:50]}", small, args.repeat)
        big_path = largest_corpus_module()
        big = load_module(big_path)
        report(f"large  {big_path.name[:50]}", big, args.repeat)
        if args.phases:
            for k, v in phases(big).items():
                print(f"    {k:20s} {v:6.2f} s")
    if not args.corpus_only:
        for size in (int(s) for s in args.sizes.split(",")):
            layers = max(1, size // 11)
            m = parse_module(synthetic(layers), "synthetic.hlo")
            report(f"synthetic {layers} layers", m, args.repeat)


if __name__ == "__main__":
    main()
