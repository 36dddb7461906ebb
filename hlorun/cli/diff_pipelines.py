"""``hlorun diff-pipelines MODEL.hlo --a PIPE_A --b PIPE_B``: where two
pipeline versions part ways on the same module, and how their final
kernels differ (scenario S3).

    hlorun diff-pipelines testdata/s3/fp8_matmul_scaled.hlo \\
        --a testdata/s3/xla-old.yaml --b testdata/s3/xla-new.yaml

The first diverging step is ``hlorun bisect --between``'s
(:func:`hlorun.reduce.bisect.first_difference`, same alignment and text);
both runs are also followed by a lineage tracker so the final kernels can
be compared and explained (:mod:`hlorun.analysis.kernel_diff`).
"""

from __future__ import annotations

import click

from ._common import ModuleFile, diff_option, handle_errors, target_options


@click.command("diff-pipelines")
@click.argument("file", type=ModuleFile(exists=True, dir_okay=False), metavar="MODEL.hlo")
@click.option("--a", "pipe_a", required=True, metavar="NAME|PATH",
              help="The first pipeline (bundled name or YAML file), e.g. the old version.")
@click.option("--b", "pipe_b", required=True, metavar="NAME|PATH",
              help="The second pipeline, e.g. the new version.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="text: report on stderr; json: one document on stdout.")
@diff_option("none")
@click.option("--traceback", is_flag=True, hidden=True)
@target_options
@handle_errors
def diff_pipelines_cmd(file, pipe_a, pipe_b, fmt, diff_mode, traceback, platform, device,
                       compute_capability):
    """Run two pipelines on FILE: the first pass whose output differs and
    how the final kernels differ (custom calls, GEMM fusions, loop/input
    fusions; the dots computed by different kernels, with the decisions
    that shaped them).

    Exit codes: 0 compared (same or different), 1 bad input."""
    import json
    show_diff = diff_mode != "none"  # the module diff right after the diverging step

    from ..report import console as report
    from ..text.fileio import read_text
    from ..analysis.kernel_diff import compare_kernels, render_text
    from ..analysis.lineage import LineageTracker
    from .compile_options import compile_config
    from ..reduce.bisect import first_difference
    from .bisect_view import render_between
    extra: list[str] = []
    for flag, value in (("--platform", platform), ("--device", device),
                        ("--compute-capability", compute_capability)):
        if value is not None:
            extra += [flag, value]
    cfg_a = compile_config([file, "--pipeline", pipe_a, *extra])
    cfg_b = compile_config([file, "--pipeline", pipe_b, *extra])
    tracker_a, tracker_b = LineageTracker(), LineageTracker()
    d = first_difference(read_text(file), file, cfg_a, cfg_b, [tracker_a], [tracker_b])
    assert d.module_a is not None and d.module_b is not None
    kd = compare_kernels(d.module_a, tracker_a, d.module_b, tracker_b)
    if fmt == "json":
        doc = d.to_json()
        if not show_diff:
            doc.pop("diff")
        doc["kernels"] = kd.to_json()
        report.write_stdout(json.dumps(doc, indent=2) + "\n")
        return
    render_between(report, d, show_diff)
    for line in render_text(kd, d.pipeline_a, d.pipeline_b):
        report.info(line)
