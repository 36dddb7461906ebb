"""Benchmark: parse and print speed, parse memory, and XLA's C++ parser on
the same text.

    python bench/parse.py FILE... [-n N] [--clock cpu|wall] [--no-xla] [--json OUT]

For each file (``.gz`` read directly): MB/s and instructions/s of
``hlorun.parse_module`` and of ``hlorun.print_module`` (MB of the printed
text), the peak Python memory of one parse per instruction (tracemalloc,
measured in a separate run because tracing slows parsing down), and, when
jaxlib is importable (``pip install '.[bench]'``), the time of XLA's C++
parser (``jaxlib._hlo.hlo_module_from_text``, an unverified parse) on the
same text and our/XLA time ratio.  Times are minima over ``-n`` repetitions
(default 5) that interleave ours and XLA's runs, so that load on the machine
hits both alike.  They are CPU seconds of this process by default (both
parsers run single-threaded in it; other processes on a shared machine then
distort little), or wall seconds with ``--clock wall``.  A summary line
follows the table.

Without FILE arguments the 12 gzip'd model dumps of the XLA corpus are used.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
import tracemalloc
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SHARED = Path(os.environ.get("HLORUN_SHARED", REPO.parent / "shared"))


def default_files() -> list[Path]:
    return sorted((SHARED / "corpus/xla/files").glob("*.hlo.gz"),
                  key=lambda p: p.stat().st_size, reverse=True)


def xla_parser():
    """XLA's C++ parser from jaxlib, or None (never imported by hlorun)."""
    try:
        from jaxlib import _hlo
    except Exception:  # noqa: BLE001 - any import problem means "not available"
        return None
    return _hlo.hlo_module_from_text


CLOCK = time.process_time


def timed(fn, *args):
    t0 = CLOCK()
    out = fn(*args)
    return CLOCK() - t0, out


def peak_bytes(text: str, name: str) -> int:
    from hlorun import parse_module
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    module = parse_module(text, name)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    del module
    gc.collect()
    return peak


def bench_file(path: Path, reps: int, xla) -> dict:
    from hlorun import parse_module, print_module
    from hlorun.text.fileio import read_text
    text = read_text(path)
    mb = len(text.encode()) / 1e6
    best = {"parse": float("inf"), "print": float("inf"), "xla": float("inf")}
    module = printed = None
    for _ in range(reps):
        dt, module = timed(parse_module, text, path.name)
        best["parse"] = min(best["parse"], dt)
        dt, printed = timed(print_module, module)
        best["print"] = min(best["print"], dt)
        if xla is not None:
            dt, xm = timed(xla, text)
            best["xla"] = min(best["xla"], dt)
            del xm
        gc.collect()
    n = module.instruction_count
    out_mb = len(printed.encode()) / 1e6
    del module, printed
    peak = peak_bytes(text, path.name)
    row = {
        "file": path.name, "mb": mb, "instructions": n,
        "parse_s": best["parse"], "parse_mb_s": mb / best["parse"],
        "parse_instr_s": n / best["parse"],
        "print_s": best["print"], "print_mb_s": out_mb / best["print"],
        "print_instr_s": n / best["print"],
        "peak_bytes_per_instr": peak / max(n, 1),
    }
    if xla is not None:
        row.update({"xla_parse_s": best["xla"], "xla_mb_s": mb / best["xla"],
                    "ratio": best["parse"] / best["xla"]})
    return row


def render(rows: list[dict], has_xla: bool) -> str:
    head = (f"{'file':<52} {'MB':>6} {'instrs':>7}  {'parse s':>7} {'MB/s':>6} {'kinstr/s':>8}"
            f"  {'print s':>7} {'MB/s':>6} {'kinstr/s':>8}  {'B/instr':>7}")
    if has_xla:
        head += f"  {'XLA s':>6} {'MB/s':>6} {'ours/XLA':>8}"
    lines = [head]
    for r in rows:
        name = r["file"] if len(r["file"]) <= 52 else r["file"][:23] + "..." + r["file"][-26:]
        line = (f"{name:<52} {r['mb']:6.1f} {r['instructions']:7d}  {r['parse_s']:7.2f} "
                f"{r['parse_mb_s']:6.1f} {r['parse_instr_s'] / 1e3:8.1f}  {r['print_s']:7.2f} "
                f"{r['print_mb_s']:6.1f} {r['print_instr_s'] / 1e3:8.1f}  "
                f"{r['peak_bytes_per_instr']:7.0f}")
        if has_xla:
            line += f"  {r['xla_parse_s']:6.2f} {r['xla_mb_s']:6.1f} {r['ratio']:7.2f}x"
        lines.append(line)
    return "\n".join(lines)


def summary(rows: list[dict], has_xla: bool) -> dict:
    mb = sum(r["mb"] for r in rows)
    n = sum(r["instructions"] for r in rows)
    parse = sum(r["parse_s"] for r in rows)
    prnt = sum(r["print_s"] for r in rows)
    out = {"files": len(rows), "mb": mb, "instructions": n, "parse_mb_s": mb / parse,
           "parse_instr_s": n / parse, "print_instr_s": n / prnt,
           "print_over_parse_speed": parse / prnt,
           "max_peak_bytes_per_instr": max(r["peak_bytes_per_instr"] for r in rows)}
    if has_xla:
        ratios = [r["ratio"] for r in rows]
        out.update({"xla_mb_s": mb / sum(r["xla_parse_s"] for r in rows),
                    "ratio_total": parse / sum(r["xla_parse_s"] for r in rows),
                    "ratio_min": min(ratios), "ratio_max": max(ratios)})
    return out


def render_summary(s: dict, has_xla: bool) -> str:
    text = (f"summary: {s['files']} files, {s['mb']:.1f} MB, {s['instructions']} instructions; "
            f"parse {s['parse_mb_s']:.1f} MB/s ({s['parse_instr_s'] / 1e3:.0f}k instr/s), "
            f"print {s['print_instr_s'] / 1e3:.0f}k instr/s ({s['print_over_parse_speed']:.1f}x "
            f"parse speed), peak <= {s['max_peak_bytes_per_instr']:.0f} B/instr")
    if has_xla:
        text += (f"; XLA {s['xla_mb_s']:.1f} MB/s, ours/XLA {s['ratio_total']:.2f}x overall "
                 f"({s['ratio_min']:.2f}x-{s['ratio_max']:.2f}x)")
    else:
        text += "; XLA's parser not measured (jaxlib not importable)"
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("-n", "--repeat", type=int, default=5)
    ap.add_argument("--clock", choices=["cpu", "wall"], default="cpu",
                    help="CPU seconds of this process (default) or wall seconds")
    ap.add_argument("--no-xla", action="store_true", help="do not time XLA's parser")
    ap.add_argument("--json", type=Path, help="also write the rows and summary as JSON")
    args = ap.parse_args(argv)
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    files = args.files or default_files()
    if not files:
        ap.error(f"no files given and no corpus at {SHARED}")
    xla = None if args.no_xla else xla_parser()
    rows = []
    for f in files:
        rows.append(bench_file(f, max(1, args.repeat), xla))
        print(render(rows[-1:], xla is not None).split("\n")[-1], file=sys.stderr, flush=True)
    print(render(rows, xla is not None))
    s = summary(rows, xla is not None)
    s["clock"] = args.clock
    print(render_summary(s, xla is not None) + f" [{args.clock} time, best of {args.repeat}]")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "summary": s}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
