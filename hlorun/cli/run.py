"""``hlorun run`` and ``hlorun compare``: evaluate modules with the numpy
evaluator on seeded or given inputs."""

from __future__ import annotations

import json
import sys
import time

import click

_INPUT_HELP = ("Use a file for a parameter: NAME=FILE.npy (NAME: parameter name or number), "
               "or FILE.npz with arrays named after the parameters. Repeatable; the other "
               "parameters get seeded random values.")
_MAX_BYTES_HELP = ("Refuse (before allocating) when the estimated peak memory of the evaluation "
                   "exceeds this (e.g. 4G, 512M; 'none' for no limit).")


def _load(path: str):
    from ..text.fileio import read_text
    from ..text.parser import parse_module
    return parse_module(read_text(path), path)


def _fmt_num(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return v
    return f"{v:.6g}"


def _print_summary(rows: list[dict]) -> None:
    from ..report import console as report
    table_rows = []
    for r in rows:
        where = "{" + ",".join(map(str, r["output"])) + "}" if r["output"] else "-"
        vals = ", ".join(_fmt_num(v) for v in r.get("values", []))
        extra = []
        if r.get("nan"):
            extra.append(f"{r['nan']} nan")
        if r.get("inf"):
            extra.append(f"{r['inf']} inf")
        table_rows.append([where, f"{r['type']}[{','.join(map(str, r['shape']))}]",
                           _fmt_num(r.get("min")), _fmt_num(r.get("max")), _fmt_num(r.get("mean")),
                           (vals + (" ..." if vals else "")) + ("  (" + ", ".join(extra) + ")" if extra else "")])
    report.table(None, ["output", "shape", "min", "max", "mean", "first values"], table_rows,
                 justify=["left", "left", "right", "right", "right", "left"])


@click.command()
@click.argument("model", type=click.Path())
@click.option("--input", "inputs", multiple=True, metavar="NAME=FILE.npy", help=_INPUT_HELP)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random inputs.")
@click.option("-o", "--output", type=click.Path(), default=None,
              help="Save the outputs to this .npz file (bf16/fp8 stored as f32).")
@click.option("--save-inputs", type=click.Path(), default=None,
              help="Save the arguments used to this .npz file (reusable with --input).")
@click.option("--max-bytes", default="4G", show_default=True, help=_MAX_BYTES_HELP)
@click.option("--format", "fmt_", type=click.Choice(["text", "json"]), default="text", show_default=True)
def run(model, inputs, seed, output, save_inputs, max_bytes, fmt_):
    """Evaluate MODEL's entry computation with the numpy evaluator and print
    a summary of each output (shape, min/max/mean, first values)."""
    from ..report import console as report
    from ..evaluate import Evaluator, output_types
    from ..evaluate.memory import check_memory, estimate_peak_bytes, format_bytes
    from ..evaluate.session import build_inputs, npz_bytes, parse_bytes, savable, summarize
    from ..text.fileio import refuse_overwrite, write_atomic
    srcs = [model] + [i.split("=", 1)[-1] for i in inputs]
    refuse_overwrite(output, srcs)
    refuse_overwrite(save_inputs, srcs, "--save-inputs")
    module = _load(model)
    limit = parse_bytes(max_bytes)
    if limit is not None:  # before making inputs: parameters can be gigabytes
        check_memory(module, None, limit)
    args = build_inputs(module, inputs, seed)
    t0 = time.perf_counter()
    result = Evaluator(module, max_bytes=limit).evaluate(args)
    dt = time.perf_counter() - t0
    rows = summarize(result, output_types(module))
    peak, _ = estimate_peak_bytes(module)
    if save_inputs:
        import io

        import numpy as np
        buf = io.BytesIO()
        np.savez(buf, **{p.name: savable(a) for p, a in zip(module.entry.parameters, args)})
        write_atomic(save_inputs, buf.getvalue())
    if output:
        write_atomic(output, npz_bytes(result))
    if fmt_ == "json":
        report.write_stdout(json.dumps({"module": module.name, "seconds": dt,
                                        "estimated_peak_bytes": peak, "outputs": rows}, indent=2) + "\n")
        return
    _print_summary(rows)
    report.info(f"{module.name}: evaluated {module.instruction_count} instructions in {dt:.3f} s "
                f"(estimated peak {format_bytes(peak)}, seed {seed})"
                + (f"; outputs saved to {output}" if output else ""))


@click.command()
@click.argument("a", type=click.Path())
@click.argument("b", type=click.Path())
@click.option("--input", "inputs", multiple=True, metavar="NAME=FILE.npy", help=_INPUT_HELP)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random inputs.")
@click.option("--rtol", type=float, default=None, help="Relative tolerance (default: per element type).")
@click.option("--atol", type=float, default=None,
              help="Absolute tolerance, scaled by max(1, rms of A's output) (default: per type).")
@click.option("--max-bytes", default="4G", show_default=True, help=_MAX_BYTES_HELP)
@click.option("--format", "fmt_", type=click.Choice(["text", "json"]), default="text", show_default=True)
def compare(a, b, inputs, seed, rtol, atol, max_bytes, fmt_):
    """Evaluate modules A and B on the same inputs and compare their outputs
    element by element. Exit 0 if they agree within tolerance, 2 if not."""
    from ..report import console as report
    from ..evaluate import Evaluator, compare_values, output_types, tolerance_types
    from ..evaluate.memory import check_memory
    from ..evaluate.session import build_inputs, check_same_signature, parse_bytes
    ma, mb = _load(a), _load(b)
    check_same_signature(ma, mb)
    limit = parse_bytes(max_bytes)
    if limit is not None:
        check_memory(ma, None, limit)
        check_memory(mb, None, limit)
    from ..evaluate.compare import reduction_lengths
    from ..evaluate.inputs import describe_inputs
    from ..evaluate.reference import f64_reference, referee
    from ..evaluate.registry import EvaluationError
    args = build_inputs(ma, inputs, seed)
    ra = Evaluator(ma, max_bytes=limit).evaluate(args)
    rb = Evaluator(mb, max_bytes=limit).evaluate(args)
    cmp = compare_values(ra, rb, output_types(ma), rtol=rtol, atol=atol,
                         tolerance_types=tolerance_types(ma), terms=reduction_lengths(ma))
    note = ""
    if not cmp.ok and rtol is None and atol is None:
        try:  # is B as close to the exact answer as A? (reference.py)
            note = referee(cmp, ra, rb, f64_reference(ma, args, limit))
        except EvaluationError as e:
            note = f"no f64 reference: {e.message}"
    from ..evaluate.session import _param_index
    given = {_param_index(ma, s.split("=", 1)[0].strip()) for s in inputs if "=" in s}
    params = [p for p in ma.entry.parameters if p is not None]
    scheme = [ln for p, ln in zip(params, describe_inputs(ma)) if p.parameter_number not in given] \
        if not any("=" not in s for s in inputs) else []
    if fmt_ == "json":
        report.write_stdout(json.dumps({"a": a, "b": b, "seed": seed, "inputs": scheme,
                                        "f64_reference": note or None, **cmp.to_json()},
                                       indent=2) + "\n")
    else:
        if scheme:
            shown = scheme if len(scheme) <= 12 else scheme[:12] + [
                f"... {len(scheme) - 12} more (--format json lists all)"]
            report.info(f"inputs (seed {seed}):\n" + "\n".join("  " + ln for ln in shown))
        for leaf in cmp.leaves:
            report.status(leaf.ok, leaf.describe())
        if note:
            report.info(note)
        report.info(f"{'agree' if cmp.ok else 'DIFFER'}: {a} vs {b} (seed {seed})")
    if not cmp.ok:
        sys.exit(2)
