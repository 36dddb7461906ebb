"""``hlorun compile``: run a YAML pipeline on a module and show what each
pass did (pass table, per-pass diffs, violations), write the result, dumps
and reproducers.  The command only wires things together: the pipeline
emits events, listeners (diffs, dumps, repro) react, report.py renders."""

from __future__ import annotations

import sys

import click

from ._autotune import autotune_options, autotune_section
from ._common import handle_errors, target_options
from .numerics_options import make_numerics_listener, numerics_options


def selection_options(fn):
    """--disable-passes/--enable-passes-only and XLA's spellings."""
    opts = [
        click.option("--disable-passes", multiple=True, metavar="LIST",
                     help="Passes/pipelines not to run: name, pipeline/name, name:N (Nth "
                          "occurrence); a pipeline name disables the whole sub-pipeline."),
        click.option("--enable-passes-only", multiple=True, metavar="LIST",
                     help="Run only these passes/pipelines (same patterns)."),
        click.option("--xla_disable_hlo_passes", "xla_disable", multiple=True, metavar="LIST",
                     help="XLA's spelling of --disable-passes."),
        click.option("--xla_enable_hlo_passes_only", "xla_enable", multiple=True, metavar="LIST",
                     help="XLA's spelling of --enable-passes-only."),
        click.option("--xla_disable_all_hlo_passes", "xla_disable_all", is_flag=True,
                     help="Run no pass at all (XLA's flag)."),
        click.option("--xla-flags", "xla_flags", default=None, metavar="STRING",
                     help="An XLA_FLAGS string (e.g. \"$XLA_FLAGS\"); its pass-selection and dump "
                          "flags apply, others are ignored with a note."),
    ]
    for o in reversed(opts):
        fn = o(fn)
    return fn


def resolve_selection(disable_passes, enable_passes_only, xla_disable, xla_enable,
                      xla_disable_all, xla_flags):
    """(disable, enable_only, disable_all, dump_to, dump_pass_re, notes)."""
    from ..pipeline_select import parse_xla_flags, split_names
    disable = split_names(disable_passes) + split_names(xla_disable)
    enable = split_names(enable_passes_only) + split_names(xla_enable)
    disable_all = xla_disable_all
    dump_to = dump_re = None
    notes = []
    if xla_flags:
        f = parse_xla_flags(xla_flags)
        disable += f["disable"]
        enable += f["enable_only"]
        disable_all = disable_all or bool(f["disable_all"])
        dump_to, dump_re = f["dump_to"], f["dump_pass_re"]
        if f["ignored"]:
            notes.append("--xla-flags: ignored " + " ".join(f["ignored"]))
    return disable, enable, disable_all, dump_to, dump_re, notes


def _argv() -> list[str]:
    """This command's arguments, rebuilt from the parsed parameters (exact
    also under CliRunner, where sys.argv is the test runner's)."""
    from ..bugreport import argv_from_params
    ctx = click.get_current_context()
    return argv_from_params(ctx.command, ctx.params)


def _print_schema(ctx, param, value):
    if not value or ctx.resilient_parsing:
        return
    import json

    from ..report_schema import SCHEMA
    click.echo(json.dumps(SCHEMA, indent=2))
    ctx.exit(0)


@click.command()
@click.argument("file", type=click.Path(allow_dash=True))
@click.option("--print-json-schema", is_flag=True, expose_value=False, is_eager=True,
              callback=_print_schema, help="Print the JSON Schema of --format json and exit.")
@click.option("-p", "--pipeline", "pipeline_name", default=None, metavar="NAME|PATH",
              help="A bundled pipeline name (`hlorun pipelines`) or a YAML file. Default: gpu-cuda.")
@click.option("-o", "--output", type=click.Path(), default=None,
              help="Write the optimized module here (atomically) instead of stdout.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="text: table/diffs on stderr, module on stdout. json: one JSON report on stdout "
                   "(schema in README); the module only goes to -o.")
@click.option("--diff", "diff_mode", type=click.Choice(["changed", "all", "none"]), default="changed",
              show_default=True, help="Which passes get a unified diff.")
@click.option("--diff-filter", default=None, metavar="REGEX",
              help="Only diff passes whose pipeline/name path matches REGEX.")
@click.option("--diff-form", type=click.Choice(["diff", "canonical", "full"]), default="diff",
              show_default=True, help="Print form the diffs compare (diff: no metadata).")
@click.option("--verify-each/--no-verify-each", default=True, show_default=True,
              help="Run the pipeline's checkers after every changed pass (else only at start and end).")
@click.option("--check-changed", is_flag=True,
              help="Fingerprint the canonical print around each pass; flag passes whose 'changed' lies.")
@click.option("--keep-going", is_flag=True, help="Do not stop at the first violation.")
@selection_options
@click.option("--pass-limit", type=click.IntRange(min=0), default=None, metavar="N",
              help="Run only the first N passes (numbered in the table), like LLVM's -opt-bisect-limit.")
@click.option("--dump-to", default=None, type=click.Path(file_okay=False),
              help="Write XLA-style dumps (module_NNNN.NAME.*.txt) to this directory (new or "
                   "empty; see --overwrite-dump).")
@click.option("--overwrite-dump", is_flag=True,
              help="Let --dump-to write into a non-empty directory (same-named files replaced).")
@click.option("--dump-pass-re", default=None, metavar="REGEX",
              help="Dump after every pass (changed or not) whose name matches (XLA's "
                   "--xla_dump_hlo_pass_re); default: changed passes only.")
@click.option("--xla_dump_to", "xla_dump_to", default=None, hidden=True)
@click.option("--xla_dump_hlo_pass_re", "xla_dump_re", default=None, hidden=True)
@click.option("--repro-dir", default=None, type=click.Path(file_okay=False),
              help="On a violation or pass failure, write a reproducer bundle here.")
@click.option("--bug-report", default=None, type=click.Path(), metavar="PATH",
              help="Write a bug report bundle for XLA maintainers: PATH.tar.gz (or .tgz) or a "
                   "directory (input, pipeline, command, failure, XLA flags, versions, README).")
@click.option("--reduce", "bug_reduce", is_flag=True,
              help="With --bug-report: also reduce the module while it fails the same way.")
@click.option("--reduce-timeout", type=click.FloatRange(min=0), default=300.0, show_default=True,
              metavar="SECONDS", help="Time budget of --reduce.")
@click.option("--table/--no-table", default=True, help="Show the pass table (text format).")
@click.option("--explain", "explain", default=None, is_flag=False, flag_value=".*",
              metavar="[INSTR|REGEX]",
              help="For each final kernel (fusion or library call): the original instructions it "
                   "came from and the pass decisions that shaped it, in words; optionally only "
                   "kernels matching a kernel/instruction name or regex (also matched against "
                   "metadata op_name).  JSON: a 'kernels' array.  Also lists every candidate the "
                   "autotuner rejected (with its reason) for the matching GEMMs.")
@click.option("--remarks", "show_remarks", is_flag=True,
              help="List the passes' remarks (what each pass did or declined to do, per instruction).")
@click.option("--traceback", is_flag=True, help="Show Python tracebacks of pass failures.")
@numerics_options
@autotune_options
@target_options
@handle_errors
def compile_cmd(file, pipeline_name, output, fmt, diff_mode, diff_filter, diff_form, verify_each,
                check_changed, keep_going, disable_passes, enable_passes_only, xla_disable,
                xla_enable, xla_disable_all, xla_flags, pass_limit, dump_to, dump_pass_re,
                xla_dump_to, xla_dump_re, overwrite_dump, repro_dir, bug_report, bug_reduce, reduce_timeout, table, explain,
                show_remarks, traceback, platform, device, compute_capability, check_numerics, rtol,
                atol, seed, numerics_inputs, max_bytes, **autotune_kw):
    """Run a pipeline (default: gpu-cuda) on FILE; show a pass table and a diff
    per changed pass on stderr; print the optimized module.

    Exit codes: 0 ok, 1 bad input (HLO, YAML, command line), 2 a checker
    violation or a pass failure."""
    from .. import report
    from ..compile_session import CompileSession
    from ..source import UsageError
    disable, enable, disable_all, fdump, fdump_re, notes = resolve_selection(
        disable_passes, enable_passes_only, xla_disable, xla_enable, xla_disable_all, xla_flags)
    dump_to = dump_to or xla_dump_to or fdump
    dump_pass_re = dump_pass_re or xla_dump_re or fdump_re
    if dump_pass_re and not dump_to:
        raise UsageError("--dump-pass-re needs --dump-to")
    if bug_reduce and not bug_report:
        raise UsageError("--reduce needs --bug-report PATH")
    if bug_report and file == "-":
        raise UsageError("--bug-report needs the module in a file, not on stdin")
    from ..fileio import check_dump_dir, refuse_overwrite
    refuse_overwrite(output, file)
    if dump_to:
        check_dump_dir(dump_to, overwrite_dump)
    numerics = make_numerics_listener(check_numerics, rtol, atol, seed, numerics_inputs, max_bytes)
    session = CompileSession(
        file=file, pipeline=pipeline_name, output=output, fmt=fmt, diff_mode=diff_mode,
        diff_filter=diff_filter, diff_form=diff_form, verify_each=verify_each,
        check_changed=check_changed, keep_going=keep_going, disable=disable, enable_only=enable,
        disable_all=disable_all, pass_limit=pass_limit, dump_to=dump_to, dump_pass_re=dump_pass_re,
        repro_dir=repro_dir, table=table, remarks=show_remarks, traceback=traceback,
        explain=explain,
        target_overrides={"platform": platform, "device": device,
                          "compute_capability": compute_capability},
        autotune=autotune_section(autotune_kw, seed),
        argv=["compile"] + _argv(), bug_report=bug_report, bug_report_reduce=bug_reduce,
        bug_report_timeout=reduce_timeout,
        extra_listeners=[numerics] if numerics is not None else [])
    for n in notes:
        report.warn(n)
    sys.exit(session.run())
