"""``hlorun bisect``: the first pass after which a condition holds, or the
first step where two pipeline versions differ.

    hlorun bisect MODEL.hlo --until violation:reshape-is-bitcast --pipeline gpu-rocm-41481
    hlorun bisect MODEL.hlo --until-cmd 'grep -q cublas {}'
    hlorun bisect MODEL.hlo --between old.yaml new.yaml
    hlorun bisect --until numerics -- compile --pipeline P --disable-passes cse MODEL.hlo
"""

from __future__ import annotations

import sys

import click

from ._common import handle_errors
from .bisect_view import render_between, render_bisect
from .condition_options import build_condition, condition_options, split_compile_args


@click.command("bisect")
@click.argument("args", nargs=-1, type=click.UNPROCESSED, metavar="MODEL.hlo | -- compile [FLAGS] MODEL.hlo")
@condition_options
@click.option("-p", "--pipeline", "pipeline_name", default=None, metavar="NAME|PATH",
              help="The pipeline to bisect (same as compile's --pipeline).")
@click.option("--between", nargs=2, default=None, metavar="PIPE_A PIPE_B",
              help="Find the first step where two pipeline versions produce different modules.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--diff/--no-diff", "show_diff", default=True, help="Show the module diff at the culprit.")
@click.option("--traceback", is_flag=True, hidden=True)
@handle_errors
def bisect_cmd(args, until, until_cmd, cmd_timeout, pipeline_name, between, fmt, show_diff, traceback):
    """Binary-search --pass-limit for the first pass after which CONDITION
    holds (LLVM's -opt-bisect-limit workflow), or with --between find where
    two pipelines part ways.

    Exit codes: 0 found, 1 bad input (or nothing to bisect)."""
    from ..report import console as report
    from ..text.fileio import read_text
    from .compile_options import compile_config
    from ..reduce.bisect import CompiledOutput, bisect_passes, first_difference
    from ..errors import UsageError
    argv = split_compile_args(args)
    if not argv:
        raise UsageError("missing MODEL.hlo (or `-- compile [FLAGS] MODEL.hlo`)")
    has_pipeline = any(a in ("-p", "--pipeline") or a.startswith("--pipeline=") for a in argv)
    if between:
        if until or until_cmd:
            raise UsageError("--between compares two pipelines; it takes no --until/--until-cmd")
        if pipeline_name or has_pipeline:
            raise UsageError("--between names both pipelines; drop --pipeline")
        cfg_a = compile_config(argv + ["--pipeline", between[0]])
        cfg_b = compile_config(argv + ["--pipeline", between[1]])
        text = read_text(cfg_a.file)
        d = first_difference(text, cfg_a.file, cfg_a, cfg_b)
        if fmt == "json":
            import json
            report.write_stdout(json.dumps(d.to_json(), indent=2) + "\n")
        else:
            render_between(report, d, show_diff)
        sys.exit(0)
    if pipeline_name:
        if has_pipeline:
            raise UsageError("--pipeline given twice (bisect and compile)")
        argv = argv + ["--pipeline", pipeline_name]
    cond, cfg, model = build_condition(until, until_cmd, cmd_timeout, argv)
    if not cond.needs_compile:
        cond = CompiledOutput(cond)
        cond.prepare(cfg)
    try:
        res = bisect_passes(read_text(model), model, cond, cfg)
    finally:
        close = getattr(cond, "close", None)
        if close:
            close()
    if fmt == "json":
        import json
        report.write_stdout(json.dumps(res.to_json(), indent=2) + "\n")
    else:
        render_bisect(report, res, show_diff)
    sys.exit(0)
