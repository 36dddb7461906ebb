"""``hlorun explore``: rerun the rest of a pipeline once per autotuning choice
(one GEMM varied at a time) and report the choices that lead to a violation
or a pass failure."""

from __future__ import annotations

import json
import sys

import click

from ._common import ModuleFile, handle_errors, target_options


@click.command()
@click.argument("file", type=ModuleFile(allow_dash=True))
@click.option("-p", "--pipeline", "pipeline_name", default=None, metavar="NAME|PATH",
              help="A bundled pipeline name or a YAML file (default: gpu-cuda).")
@click.option("--max-runs", type=click.IntRange(min=1), default=64, show_default=True,
              help="At most this many forks (one GEMM, one choice each).")
@click.option("--all-configs", is_flag=True,
              help="Every feasible candidate, not just each backend's best.")
@click.option("--disable-passes", multiple=True, metavar="LIST",
              help="Passes/pipelines not to run (as for compile).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--traceback", is_flag=True, help="Show Python tracebacks.")
@target_options
@handle_errors
def explore(file, pipeline_name, max_runs, all_configs, disable_passes, fmt, traceback, platform,
            device, compute_capability):
    """For each GEMM the autotuner decides in FILE, run the rest of the
    pipeline with every feasible backend (Triton, each BLAS library) and
    name the choices that break it.  Deterministic (the cost model decides
    every other GEMM).

    Exit codes: 0 no choice breaks, 1 bad input, 2 some choice leads to a
    violation or a pass failure."""
    from ..report import console as report
    from ..autotune.explore import explore as run_explore
    from ..text.fileio import read_text
    from ..api import resolve_spec
    from ..options import CompileOptions
    options = CompileOptions.from_kwargs(pipeline=pipeline_name, disable_passes=disable_passes,
                                         platform=platform, device=device,
                                         compute_capability=compute_capability)
    spec = resolve_spec(None, options)
    if device:
        from dataclasses import replace
        spec = replace(spec, sections=dict(spec.sections, autotune=dict(spec.section("autotune") or {},
                                                                        device=device)))
    text = sys.stdin.read() if file == "-" else read_text(file)
    from ..report.textout import Stepper
    with Stepper(0, "explore") as bar:
        def progress(total: int, label: str) -> None:
            bar.p.total = max(1, total)
            bar.step(label)
        ex = run_explore(text, "<stdin>" if file == "-" else file, spec, max_runs=max_runs,
                         all_configs=all_configs, disable=options.selection.disable_passes,
                         progress=progress)
    if fmt == "json":
        report.write_stdout(json.dumps(ex.to_json(), indent=2) + "\n")
    else:
        rows = [(f.gemm, f.label + (" (model's choice)" if f.baseline else ""),
                 "-" if f.estimate_ns is None else f"{f.estimate_ns / 1e3:.2f}us",
                 f.status.upper() if f.status != "ok" else "ok", f.where or "-") for f in ex.forks]
        report.table(f"explore: pipeline {ex.pipeline} on {ex.device}, {len(ex.forks)} fork(s)",
                     ("GEMM", "choice", "est", "result", "where"), rows)
        for f in ex.breaking:
            report.info(f"{f.gemm} = {f.choice}: {f.status} {f.where}")
            report.info(f"  {f.detail}")
        for n in ex.notes:
            report.warn(n)
        n = len(ex.breaking)
        report.summary(f"{n} of {len(ex.forks)} choice(s) break the pipeline" if n else
                       f"no choice breaks the pipeline ({len(ex.forks)} fork(s))", n == 0)
    sys.exit(2 if ex.breaking else 0)
