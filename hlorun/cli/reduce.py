"""``hlorun reduce``: shrink a module while a condition still holds.

    hlorun reduce MODEL.hlo --until violation:reshape-is-bitcast -o small.hlo
    hlorun reduce --until backend:dot.1=BLAS -o small.hlo -- \\
        compile --pipeline gpu-rocm-41481 --force-backend cublaslt MODEL.hlo
    hlorun reduce MODEL.hlo --until-cmd './still_crashes.sh {}'

Everything after ``--`` is a compile command (the word ``compile`` is
optional): its pipeline, target and flags judge every candidate.
"""

from __future__ import annotations

import sys

import click

from ._common import handle_errors
from .condition_options import build_condition, condition_options, split_compile_args


def _list_strategies(ctx, param, value):
    if not value or ctx.resilient_parsing:
        return
    from ..reduce.strategies import STRATEGIES
    for name, cls in STRATEGIES.items():
        click.echo(f"{name:12} {cls.description}" + ("  [keeps semantics]" if cls.preserves_semantics else ""))
    ctx.exit(0)


@click.command("reduce")
@click.argument("args", nargs=-1, type=click.UNPROCESSED, metavar="MODEL.hlo | -- compile [FLAGS] MODEL.hlo")
@condition_options
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Where the best module so far is kept (atomically rewritten on every "
                   "improvement). Default: MODEL.reduced.hlo in the current directory.")
@click.option("--timeout", type=click.FloatRange(min=0), default=None, metavar="SECONDS",
              help="Stop looking after this long (the best result so far is kept).")
@click.option("--max-tests", type=click.IntRange(min=1), default=None, help="Stop after N condition tests.")
@click.option("--flaky-runs", type=click.IntRange(min=0), default=3, show_default=True,
              help="Re-test the final result N times; a condition that fails any is reported flaky.")
@click.option("--strategies", default=None, metavar="LIST",
              help="Comma-separated strategies to use, in this order (default: all).")
@click.option("--list-strategies", is_flag=True, expose_value=False, is_eager=True,
              callback=_list_strategies, help="List the strategies and exit.")
@click.option("--allow-slippage", is_flag=True,
              help="Accept candidates showing the condition differently (another pass, another "
                   "exception) than the input did.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--progress/--no-progress", default=True, help="Show the progress bar on stderr.")
@click.option("--traceback", is_flag=True, hidden=True)
@handle_errors
def reduce_cmd(args, until, until_cmd, cmd_timeout, output, timeout, max_tests, flaky_runs,
               strategies, allow_slippage, fmt, progress, traceback):
    """Shrink MODEL.hlo while CONDITION still holds; the result goes to -o.

    Exit codes: 0 reduced, 1 bad input (or the input does not satisfy the
    condition), 3 the condition is flaky on the result."""
    from pathlib import Path

    from ..report import console as report
    from ..text.fileio import read_text
    from ..reduce import ReduceOptions, Reducer
    from ..errors import UsageError
    argv = split_compile_args(args)
    cond, cfg, model = build_condition(until, until_cmd, cmd_timeout, argv)
    if output is None:
        output = Path(model).name.split(".")[0] + ".reduced.hlo"
    from ..text.fileio import refuse_overwrite
    refuse_overwrite(output, model)
    for n in (cfg.notes if cfg else ()):
        report.warn(n)
    text = read_text(model)
    names = [s.strip() for s in strategies.split(",") if s.strip()] if strategies else None
    bar = None

    def on_progress(ev):
        nonlocal bar
        if bar is None:
            bar = report.ShrinkProgress(f"reduce {Path(model).name}", ev["start_instructions"],
                                        ev["start_bytes"], enabled=progress)
        bar.update(ev["instructions"], ev["bytes"], ev["tests"], ev["strategy"])

    reducer = Reducer(text, model, cond, ReduceOptions(
        output=output, timeout=timeout, max_tests=max_tests, flaky_runs=flaky_runs,
        strategies=names, allow_slippage=allow_slippage, progress=on_progress))
    try:
        res = reducer.run()
    finally:
        if bar is not None:
            bar.close()
        close = getattr(cond, "close", None)
        if close:
            close()
    doc = dict(res.to_json(), input=model, output=output, condition=cond.describe(),
               command=cfg.command_line(output) if cfg is not None else None)
    if fmt == "json":
        import json
        report.write_stdout(json.dumps(doc, indent=2) + "\n")
    else:
        _render(report, res, doc)
    sys.exit(3 if res.flaky else 0)


def _render(report, res, doc) -> None:
    rate = f"{res.tests_per_second:.1f}/s"
    report.table("reduce", ["", "instructions", "bytes"], [
        ("start", res.start_instructions, res.start_bytes),
        ("end", res.end_instructions, res.end_bytes)], justify=["left", "right", "right"])
    report.info(f"{res.tests} tests ({rate}, {res.interesting} accepted, {res.invalid} invalid, "
                f"{res.cache_hits} cached), {res.rounds} rounds, {res.seconds:.2f} s"
                + ("" if res.stopped == "done" else f"; stopped: {res.stopped}"))
    report.info(f"condition: {doc['condition']}")
    report.info(f"  {res.final_detail}")
    if res.flaky:
        report.warn(f"FLAKY: the result was interesting in {res.flaky_passes} of {res.flaky_runs} "
                    f"re-tests")
    report.info(f"written: {doc['output']}")
    if doc.get("command"):
        report.info(f"reproduce: {doc['command']}")
