"""``hlorun buffers``: XLA's buffer assignment for a module, as XLA dumps
it, plus a memory summary, a live-range chart and an SVG timeline."""

from __future__ import annotations

import sys

import click

from ._common import ModuleFile, handle_errors

PRINTABLE = ("assignment", "values", "live-range", "memory-usage", "none")


@click.command()
@click.argument("file", type=ModuleFile(allow_dash=True))
@click.option("-p", "--pipeline", "pipeline_name", default=None, metavar="NAME|PATH",
              help="Run this pipeline on the module first, and take its custom_call_targets "
                   "and target platform.")
@click.option("--platform", type=click.Choice(["cuda", "rocm", "sycl", "cpu"]), default=None,
              help="Alias rules of this backend (default: the pipeline's, else cuda).")
@click.option("--in-place", "in_place", multiple=True, metavar="TARGET",
              help="Declare a custom-call target (or glob) safe to run in place. Repeatable.")
@click.option("--no-alias", "no_alias", multiple=True, metavar="TARGET",
              help="Declare a custom-call target (or glob) that must never alias an operand; "
                   "'*' gives XLA:GPU's strict rule for every undeclared target. Repeatable.")
@click.option("--print", "to_print", multiple=True, type=click.Choice(PRINTABLE),
              default=("assignment",), show_default=True,
              help="XLA dump texts to write to stdout (repeatable).")
@click.option("--dump-to", default=None, type=click.Path(file_okay=False),
              help="Write XLA's four files (*-buffer-assignment.txt, -values, -live-range, "
                   "-memory-usage-report) to this directory.")
@click.option("--plot", default=None, type=click.Path(dir_okay=False),
              help="Write a timeline picture: live memory by kind, and every allocation's "
                   "values over time (.svg; .png without labels).")
@click.option("--top", default=20, show_default=True, type=click.IntRange(min=0),
              help="Values in the live-range chart (0: no chart).")
@click.option("--check", is_flag=True,
              help="Run the buffer-aliasing invariant; exit 2 on a finding.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="json: one document on stdout (schema hlorun.buffers/1).")
@handle_errors
def buffers(file, pipeline_name, platform, in_place, no_alias, to_print, dump_to, plot, top,
            check, fmt):
    """Assign buffers for FILE like XLA:GPU and show where every value lives.

    stdout: XLA's buffer-assignment dump (--print selects which of XLA's
    texts).  stderr: memory by allocation kind, the peak, and a chart of the
    largest values' live ranges.  Exit 2 with --check when a custom call's
    output shares memory with one of its operands (scenario S1).
    """
    import json
    import os

    from ..report import console as report
    from ..buffers import AssignOptions, assign_buffers, dump, timeline
    from ..text.fileio import read_text, write_atomic
    from ..text.parser import parse_module
    from ..errors import UsageError

    text = sys.stdin.read() if file == "-" else read_text(file)
    name = "<stdin>" if file == "-" else file
    module = parse_module(text, name)
    targets: dict = {}
    spec = None
    if pipeline_name:
        from .. import api
        from ..buffers.targets import validate_targets
        options = api.CompileOptions.from_kwargs(platform=platform, verify_each=False,
                                                 keep_going=True, lineage=False)
        spec = api.resolve_spec(pipeline_name, options)
        targets.update(validate_targets(spec.section("custom_call_targets") or {}))
        result = api.compile(module, spec, options=options, copy=False).run
        if result.failure is not None:
            f = result.failure
            raise UsageError(f"pipeline {spec.name}: pass #{f.index} {f.path} failed: {f.message}")
        for v in result.violations:
            if v.rule != "buffer-aliasing":
                report.warn(f"[{v.rule}] {v.message}")
        platform = platform or spec.target.platform
    for t in in_place:
        targets.setdefault(t, {})["in_place"] = True
    for t in no_alias:
        targets.setdefault(t, {})["in_place"] = False
    opts = AssignOptions(platform=platform or "cuda", custom_call_targets=targets)
    try:
        asg = assign_buffers(module, opts)
    except ValueError as e:
        raise UsageError(f"{name}: {e}") from None

    diags = None
    if check:
        from ..buffers.checker import BufferAliasingChecker
        diags = BufferAliasingChecker(custom_call_targets=targets, platform=opts.platform).check(module)

    if dump_to:
        os.makedirs(dump_to, exist_ok=True)
        base = os.path.join(dump_to, module.name)
        for suffix, fn in (("-buffer-assignment.txt", dump.assignment_text),
                           ("-buffer-assignment-values.txt", dump.values_text),
                           ("-live-range.txt", dump.live_range_text),
                           ("-memory-usage-report.txt", dump.memory_usage_text)):
            path = base + suffix
            if os.path.abspath(path) == os.path.abspath(file):
                raise UsageError(f"refusing to overwrite input {path}")
            write_atomic(path, fn(asg))
    if plot:
        if file != "-" and os.path.abspath(plot) == os.path.abspath(file):
            raise UsageError(f"refusing to overwrite input {plot}")
        if plot.lower().endswith(".png"):
            write_atomic(plot, timeline.png(asg))
        else:
            write_atomic(plot, timeline.svg(asg))

    if fmt == "json":
        report.write_stdout(json.dumps(timeline.to_json(asg, diags, name), indent=2) + "\n")
        sys.exit(2 if diags else 0)

    texts = {"assignment": dump.assignment_text, "values": dump.values_text,
             "live-range": dump.live_range_text, "memory-usage": dump.memory_usage_text}
    out = [texts[p](asg) for p in to_print if p != "none"]
    if out:
        report.write_stdout("".join(out))
    _render_summary(report, asg, timeline, top)
    if dump_to:
        report.info(f"dumps: 4 files in {dump_to}")
    if plot:
        report.info(f"timeline: {plot}")
    if diags is not None:
        for d in diags:
            report.error(d.render(text))
        report.summary(f"buffer-aliasing: {len(diags)} finding(s)" if diags
                       else "buffer-aliasing: ok", not diags)
        if diags:
            sys.exit(2)


def _render_summary(report, asg, timeline, top: int) -> None:
    from ..buffers.dump import human_bytes
    s = timeline.summary(asg)
    rows = []
    for kind in timeline.KINDS:
        n = s["allocations_by_kind"][kind]
        if n:
            rows.append((kind, n, human_bytes(s["bytes_by_kind"][kind]),
                         human_bytes(s["peak"]["bytes_by_kind"][kind])))
    rows.append(("total", s["allocations"], human_bytes(s["total_bytes"]),
                 human_bytes(s["peak"]["bytes"])))
    report.table(f"memory of {asg.module.name} ({asg.options.platform})",
                 ["kind", "allocations", "allocated", "live at peak"], rows,
                 justify=["left", "right", "right", "right"])
    p = s["peak"]
    report.info(f"peak live memory {human_bytes(p['bytes'])} at t={p['time']} "
                f"({p['instruction']}), schedule of {s['schedule_length']} instructions, "
                f"{s['values']} values")
    if top and asg.live_range.end_time:
        curve, _ = timeline.memory_curve(asg)
        report.timeline(f"live ranges of the {top} largest values", timeline.chart_rows(asg, top),
                        asg.live_range.end_time, curve)
