"""``hlorun explain MODEL.hlo --op NAME``: what one instruction of the input
became after the pipeline (which kernels compute it) and why, in one screen:
every pass decision that shaped those kernels, in plain words."""

from __future__ import annotations

import click

from ._common import ModuleFile, handle_errors, target_options


@click.command("explain")
@click.argument("file", type=ModuleFile(exists=True, dir_okay=False))
@click.option("--op", "op", required=True, metavar="NAME|REGEX",
              help="An instruction of the input module (e.g. dot.89), or a regex over metadata "
                   "op_name (e.g. 'dot_general') selecting its dots and convolutions.")
@click.option("-p", "--pipeline", "pipeline_name", default=None, metavar="NAME|PATH",
              help="A bundled pipeline name or a YAML file. Default: gpu-cuda.")
@click.option("--disable-passes", multiple=True, metavar="LIST",
              help="Passes/pipelines not to run (see hlorun compile).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@click.option("--traceback", is_flag=True, hidden=True)
@target_options
@handle_errors
def explain_cmd(file, op, pipeline_name, disable_passes, fmt, traceback, platform, device,
                compute_capability):
    """Explain which kernels compute OP of FILE after the pipeline, and why."""
    import difflib
    import json

    from .. import api
    from ..report import console as report
    from ..analysis.explain import explain_kernels, op_matches, render_op
    from ..errors import UsageError
    compiled = api.compile(file, pipeline_name, disable_passes=disable_passes, platform=platform,
                           device=device, compute_capability=compute_capability, lineage=True,
                           verify_each=True, copy=False)
    module, result, tracker = compiled.module, compiled.run, compiled.lineage
    if result.exit_code != 0:
        report.warn(f"the pipeline stopped early ({result.status}); explaining the module as it is")
    names = op_matches(tracker, op)
    if not names:
        near = difflib.get_close_matches(op, list(tracker.originals), n=3)
        raise UsageError(f"no instruction '{op}' in {file}"
                         + (f"; did you mean {', '.join(near)}?" if near else ""))
    docs = []
    for name in names:
        exps = explain_kernels(module, tracker, op=name)
        if fmt == "json":
            docs.append({"op": tracker.originals[name].to_json(),
                         "kernels": [e.to_json() for e in exps]})
        else:
            report.write_stdout(render_op(name, tracker.originals[name], exps) + "\n")
    if fmt == "json":
        report.write_stdout(json.dumps(docs, indent=2) + "\n")
