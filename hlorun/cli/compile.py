"""``hlorun compile``: run a YAML pipeline on a module and show what each
pass did (pass table, per-pass diffs, violations), write the result, dumps,
reproducers and bug reports.  The command parses flags into
:class:`hlorun.options.CompileOptions` (:mod:`.compile_options`), calls
:func:`hlorun.compile` and presents the :class:`hlorun.CompileResult`
(:mod:`.compile_view`)."""

from __future__ import annotations

import sys
from dataclasses import replace

import click

from ._common import handle_errors
from .compile_options import compile_flags, options_from_params


def _argv() -> list[str]:
    """This command's arguments, rebuilt from the parsed parameters (exact
    also under CliRunner, where sys.argv is the test runner's)."""
    from .compile_options import argv_from_params
    ctx = click.get_current_context()
    return argv_from_params(ctx.command, ctx.params)


@click.command()
@compile_flags
@click.option("--html", "html", default=None, type=click.Path(dir_okay=False), metavar="PATH",
              help="Also write a self-contained HTML report (pass timeline with diffs, "
                   "kernel graph, autotuner decisions, buffers with --buffers).")
@click.option("--model-explorer-data", "me_data", default=None, type=click.Path(file_okay=False),
              metavar="DIR", help="Write Model Explorer node-data overlays of the final module "
                                  "(created_by, final_kernel, autotuner_backend, buffer_bytes .json).")
@handle_errors
def compile_cmd(file, output, fmt, bug_report, bug_reduce, reduce_timeout, table, show_remarks,
                traceback, overwrite_dump, full_tables, json_include, html, me_data, **params):
    """Run a pipeline (default: gpu-cuda) on FILE; show a pass table and a diff
    per changed pass on stderr; print the optimized module.

    Exit codes: 0 ok, 1 bad input (HLO, YAML, command line), 2 a checker
    violation or a pass failure."""
    import time

    from .. import api
    from ..report import console as report
    from ..errors import UsageError
    from ..report.textout import DiffCollector, PassProgress
    from .compile_view import module_to_stdout, proportionate_json, render_text
    diff_mode = params.get("diffs") or "short"
    if bug_reduce and not bug_report:
        raise UsageError("--reduce needs --bug-report PATH")
    if bug_report and file == "-":
        raise UsageError("--bug-report needs the module in a file, not on stdin")
    from ..text.fileio import check_dump_dir, refuse_overwrite
    refuse_overwrite(output, file)
    refuse_overwrite(html, file, "--html")
    refuse_overwrite(bug_report, file, "--bug-report")
    options, notes = options_from_params(params)
    if options.output.dump_to:
        check_dump_dir(options.output.dump_to, overwrite_dump)
    text_mode = fmt == "text"
    show_diffs = (text_mode and options.diagnostics.diffs != "none") or "diffs" in json_include
    if html or me_data:
        # the report shows every changed pass's diff, whatever the terminal
        # shows, and kernels with their lineage
        options = replace(options, diagnostics=replace(
            options.diagnostics, lineage=True,
            diffs="changed" if options.diagnostics.diffs == "none" else options.diagnostics.diffs))
    elif not text_mode:
        options = replace(options, diagnostics=replace(
            options.diagnostics, diffs="changed" if "diffs" in json_include else "none"))
    staging = None
    if bug_report:
        from ..bugreport import staging_dir
        staging = staging_dir(bug_report)
        if not options.output.repro_dir:
            options = replace(options, output=replace(options.output,
                                                      repro_dir=str(staging / "repro")))
    argv = _argv()
    for n in notes:
        report.warn(n)
    source = file
    parse_seconds = None
    if file == "-":
        t = time.perf_counter()
        from ..text.fileio import read_text  # gzip/xz on stdin too
        source = api.load(read_text("-"), name="<stdin>")
        parse_seconds = time.perf_counter() - t
    import shlex
    diffs = DiffCollector()  # shown after the summary (text) or put in the JSON report
    from ..report.textout import JsonLines
    stream = JsonLines(report.write_stdout) if fmt == "jsonl" else None
    bar = PassProgress()
    try:
        result = api.compile(source, options=options, copy=False,
                             listeners=[bar] + ([stream] if stream else []),
                             diff_sink=diffs if show_diffs else (lambda h, lines: None),
                             keep_diffs=bool(html or me_data),
                             command_line=shlex.join(["hlorun", "compile"] + argv))
    finally:  # also on Ctrl-C or a crash: give the terminal its cursor back
        bar.close()
    if parse_seconds is not None:
        result.parse_seconds = parse_seconds
    if file == "-":
        result.input_name = "-"
    module_text = None
    stop = result.run.exit_code != 0 and not options.diagnostics.keep_going
    if not stop and (output or text_mode or "module" in json_include):
        module_text = result.text()
        if output and output != "-":
            from ..text.fileio import write_atomic
            write_atomic(output, module_text)
    if text_mode:
        render_text(result, table=table, remarks=show_remarks, traceback=traceback,
                    repro_in_bundle=staging is not None and not params.get("repro_dir"),
                    full_tables=full_tables, diffs=diffs, diff_mode=diff_mode)
        if module_text is not None and (not output or output == "-"):
            module_to_stdout(module_text)
    else:
        import json
        doc = proportionate_json(result.to_json(input=file, output=output), json_include,
                                 show_remarks, diffs, module_text)
        if stream is not None:
            stream.summary(doc)
        else:
            report.write_stdout(json.dumps(doc, indent=2) + "\n")
    if html:
        from ..report.html import write_html
        write_html(result, html, input_name=file)
        report.info(f"HTML report: {html}")
    if me_data:
        from ..model_explorer.node_data import write_overlays
        written = write_overlays(result, me_data)
        report.info(f"Model Explorer node data: {len(written)} files in {me_data}")
    if options.output.dump_to and text_mode:
        report.info(f"dumps: {len(result.dump_files)} files in {options.output.dump_to}")
    if staging is not None:
        from ..bugreport import Compiled, write_bundle
        write_bundle(bug_report, staging, Compiled(file, argv, result, output), bug_reduce,
                     reduce_timeout)
        report.info(f"bug report: {bug_report}")
    sys.exit(result.exit_code)
