"""``hlorun pipelines [NAME]``: list the bundled pipelines, or print one as
a tree (with the steps that --disable-passes/--enable-passes-only would
skip marked)."""

from __future__ import annotations

import click

from ._common import handle_errors
from .compile_options import options_from_params, selection_options


@click.command("pipelines")
@click.argument("name", required=False)
@selection_options
@click.option("--yaml", "as_yaml", is_flag=True, help="Print the effective pipeline as YAML (includes resolved).")
@handle_errors
def pipelines_cmd(name, as_yaml, **selection):
    """List bundled pipelines, or show pipeline NAME (a name or a YAML path)."""
    from ..report import console as report
    from ..pipeline.select import select
    from ..pipeline.spec import CheckStep, PassStep, PipelineStep
    from ..pipeline.loader import bundled_pipelines, load_pipeline
    if not name:
        for n in bundled_pipelines():
            spec = load_pipeline(n)
            report.info(f"{n:24} {len(spec.passes()):3} passes  {spec.description}")
        return
    spec = load_pipeline(name)
    if as_yaml:
        report.write_stdout(spec.dump_yaml())
        return
    options, notes = options_from_params(selection)
    chosen = options.selection
    sel = select(spec, chosen.disable_passes, chosen.enable_passes_only, chosen.disable_all)
    t = spec.target
    report.info(f"{spec.name}  ({spec.path})")
    if spec.description:
        report.info(f"  {spec.description}")
    report.info(f"  target: {t.platform} {t.device} (compute capability {t.compute_capability})")
    if spec.checkers:
        report.info("  checkers: " + ", ".join(c.name + (f" {c.options}" if c.options else "")
                                                for c in spec.checkers))
    for sec in spec.sections:
        report.info(f"  section: {sec}")
    counts: dict[str, int] = {}

    def line(depth: int, text: str, off: bool) -> None:
        report.info("  " * depth + ("- " if not off else "x ") + text
                    + ("   [disabled]" if off else ""))

    def rec(steps, depth: int, off: bool) -> None:
        for s in steps:
            if isinstance(s, CheckStep):
                line(depth, f"check: {s.name}", off)
                continue
            counts[s.name] = counts.get(s.name, 0) + 1
            o = off or sel.is_disabled(s)
            n = f"{s.name}:{counts[s.name]}" if counts[s.name] > 1 else s.name
            if isinstance(s, PipelineStep):
                extra = []
                if s.fixed_point:
                    extra.append(f"fixed point, max {s.max_iterations}")
                if s.checkers:
                    extra.append("checkers: " + ", ".join(c.name for c in s.checkers))
                if s.checkers_at_end:
                    extra.append("checkers at its end only")
                line(depth, f"pipeline {n}" + (f" ({'; '.join(extra)})" if extra else ""), o)
                rec(s.steps, depth + 1, o)
            else:
                assert isinstance(s, PassStep)
                label = s.label().replace(s.name, n, 1)
                if s.fixed_point:
                    label += f"  (fixed point, max {s.max_iterations})"
                line(depth, label, o)

    top_passes = [s for s in spec.steps if not isinstance(s, PipelineStep)]
    if top_passes and len(top_passes) == len(spec.steps):
        report.info(f"- pipeline {spec.name}")
        rec(spec.steps, 1, False)
    else:
        rec(spec.steps, 0, False)
    for n in notes:
        report.warn(n)
