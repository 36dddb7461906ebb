"""``hlorun sweep PATH... -o results.jsonl``: a pipeline over many modules,
in parallel on Dask (a local cluster, or ``--scheduler`` for an existing
one), one JSON line per module, a summary grouping identical failures.
The work is done by :mod:`hlorun.sweep`; this module parses flags."""

from __future__ import annotations

import os
import sys

import click

from ._common import handle_errors

_STATUSES = ("ok", "violation", "pass-failure", "bad-input", "timeout", "crashed")


def _pipeline_arg(value: str | None) -> str | None:
    """A YAML path becomes absolute (workers may run elsewhere); a bundled
    name stays a name."""
    if value and os.path.exists(value):
        return os.path.abspath(value)
    return value


@click.command("sweep")
@click.argument("paths", nargs=-1, required=True, type=click.Path(), metavar="PATH...")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="Results file (JSON Lines, one record per module). Run again with the same "
                   "file to resume: modules already there are skipped.")
@click.option("-p", "--pipeline", default=None, metavar="NAME|PATH",
              help="Pipeline to run (bundled name or YAML file). Default: gpu-cuda.")
@click.option("--against", default=None, metavar="NAME|PATH",
              help="A second pipeline: also record where the two diverge first and how the "
                   "final kernels differ (as hlorun diff-pipelines).")
@click.option("--check", "check_only", is_flag=True,
              help="Only parse and verify each module (hlorun check), no pipeline.")
@click.option("--split-input-file", is_flag=True,
              help="Treat '// -----' separated chunks of each file as separate modules "
                   "(records are named FILE:LINE).")
@click.option("--disable-passes", multiple=True, metavar="LIST",
              help="Passes/pipelines not to run (as hlorun compile).")
@click.option("--enable-passes-only", multiple=True, metavar="LIST",
              help="Run only these passes/pipelines (as hlorun compile).")
@click.option("-j", "--workers", type=click.IntRange(min=1), default=None,
              help="Worker processes of the local Dask cluster. Default: the CPUs this process may use.")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="Use an existing Dask cluster (e.g. tcp://host:8786) instead of a local one.")
@click.option("--time-limit", type=click.FloatRange(min=0, min_open=True), default=600.0,
              show_default=True, metavar="SECONDS", help="Per module; then its status is timeout.")
@click.option("--memory-limit", type=click.FloatRange(min=0, min_open=True), default=None,
              metavar="MIB", help="Resident memory per module's task process; over it the task "
                                  "is killed (crashed). Default: local cluster: this machine's "
                                  "memory / workers; --scheduler: none.")
@click.option("--retry", multiple=True, type=click.Choice(_STATUSES), metavar="STATUS",
              help="When resuming, run modules with this status again (e.g. --retry timeout).")
@click.option("--restart", is_flag=True, help="Start the results file anew instead of resuming.")
@click.option("--plugin", "plugins", multiple=True, metavar="MODULE",
              help="Python module every task imports first (e.g. one registering custom passes); "
                   "must be importable on the workers.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="json: the summary as one JSON document on stdout.")
@click.option("--progress/--no-progress", default=None,
              help="Progress bar on stderr (default: when stderr is a terminal).")
@handle_errors
def sweep_cmd(paths, output, pipeline, against, check_only, split_input_file, disable_passes,
              enable_passes_only,
              workers, scheduler, time_limit, memory_limit, retry, restart, plugins, fmt,
              progress):
    """Run a pipeline over many HLO modules (files and directories, searched
    recursively; XLA dump directories give their before_optimizations
    modules) in parallel on Dask, appending one JSON line per module to the
    results file as it finishes.

    Exit codes: 0 all ok, 1 bad input (command line, or only bad modules),
    2 a module failed (violation, pass failure, timeout, crash)."""
    import json
    from importlib import import_module

    from ..report import console as report
    from ..pipeline.select import split_names
    from ..errors import UsageError
    from ..sweep import Limits, Progress, SweepOptions, discover, module_key, render_summary
    from ..sweep.inputs import split_chunks
    from ..sweep import run_sweep
    from ..sweep.engine import import_distributed
    if workers and scheduler:
        raise UsageError("--workers and --scheduler exclude each other (the cluster at "
                         "--scheduler has its own workers)")
    if check_only and (pipeline or against or disable_passes or enable_passes_only):
        raise UsageError("--check runs no pipeline; drop --pipeline/--against/--disable-passes")
    import_distributed()
    files = discover(paths)
    if module_key(output) in {module_key(f) for f in files}:
        raise UsageError(f"refusing to write results over the input {output}")
    if split_input_file:
        files = split_chunks(files)
    for name in plugins:
        try:
            import_module(name)
        except Exception as e:
            raise UsageError(f"--plugin {name}: cannot import: {type(e).__name__}: {e}") from None
    options = SweepOptions(mode="check" if check_only else "compile",
                           pipeline=_pipeline_arg(pipeline), against=_pipeline_arg(against),
                           disable=tuple(split_names(disable_passes)),
                           enable_only=tuple(split_names(enable_passes_only)),
                           plugins=tuple(plugins), split_input_file=split_input_file)
    if not check_only:  # a bad pipeline is the command's error, not every module's
        from ..sweep.adapter import load_spec
        load_spec(options.pipeline)
        if options.against:
            load_spec(options.against)
    if not scheduler:
        workers = workers or _cpus()
        if memory_limit is None:
            memory_limit = _default_memory_limit(workers)
    show = report.console().is_terminal if progress is None else progress
    run = run_sweep(files, options, output, workers=workers, scheduler=scheduler,
                    limits=Limits(time=time_limit, memory=memory_limit), restart=restart,
                    retry=retry, progress=Progress(enabled=show))
    doc = run.summary.to_json()
    doc["results"] = output
    doc["interrupted"] = run.interrupted
    if fmt == "json":
        report.write_stdout(json.dumps(doc, indent=2) + "\n")
    else:
        render_summary(doc, output, run.interrupted)
    sys.exit(130 if run.interrupted else doc["exit_code"])


def _cpus() -> int:
    """The CPUs this process may use."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _default_memory_limit(workers: int) -> float | None:
    """This machine's memory shared by the workers (MiB)."""
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
    return round(pages / (1024 * 1024) / workers * 0.9)
