"""``hlorun opt`` (run listed passes, like XLA's ``hlo-opt --passes``) and
``hlorun passes`` (the registry)."""

from __future__ import annotations

import sys

import click

from ._common import ModuleFile, diff_option, handle_errors, read_inputs, target_options


@click.command()
@click.argument("file", type=ModuleFile(allow_dash=True))
@click.option("--passes", "passes_text", required=True,
              help="Comma-separated passes, options in braces: dce,cse{is_layout_sensitive=true}.")
@click.option("--split-input-file", is_flag=True,
              help="Run on each '// -----' separated module; outputs are joined the same way.")
@click.option("-o", "--output", type=click.Path(), default=None, help="Write the result here (atomically).")
@click.option("--form", type=click.Choice(["full", "long", "short", "diff", "canonical"]),
              default="full", show_default=True, help="Print form of the result.")
@click.option("--verify/--no-verify", default=True, show_default=True,
              help="Run hlo-verifier at the start and after each pass that changed the module.")
@click.option("--changed", "show_changed", is_flag=True,
              help="Print one 'pass: changed|unchanged' line per pass on stderr.")
@click.option("--traceback", is_flag=True, help="Show Python tracebacks of pass failures.")
@diff_option("none")
@target_options
@handle_errors
def opt(file, passes_text, split_input_file, output, form, verify, show_changed, traceback,
        diff_mode, platform, device, compute_capability):
    """Run just the listed passes on FILE and print the module."""
    from .. import api
    from ..report import console as report
    from ..text.fileio import refuse_overwrite, write_atomic
    from ..text.parser import parse_module
    from ..pipeline.spec import pipeline_from_passes
    from ..text.printer import print_module
    from ..errors import HloParseError
    refuse_overwrite(output, file)
    spec = pipeline_from_passes(passes_text, checkers=["hlo-verifier"] if verify else [])
    options = api.CompileOptions.from_kwargs(platform=platform, device=device,
                                             compute_capability=compute_capability, lineage=False)
    outputs = []
    code = 0
    for label, filename, text in read_inputs(file, split_input_file):
        try:
            module = parse_module(text, filename)
        except HloParseError as e:
            report.error(e.render())
            sys.exit(1)
        diffs = None
        listeners = []
        if diff_mode != "none":  # on stderr; the module still goes to stdout / -o
            from ..report.diffs import DiffListener
            from ..report.textout import DiffCollector
            diffs = DiffCollector()
            listeners.append(DiffListener(diffs, "all" if diff_mode == "all" else "changed",
                                          context=1 if diff_mode == "short" else 3))
        result = api.compile(module, spec, options=options, listeners=listeners, copy=False).run
        if diffs is not None:
            diffs.render(diff_mode)
        if show_changed:
            for ev in result.events:
                report.info(f"{label}: {ev.name}: {'changed' if ev.changed else 'unchanged'}")
        if result.failure:
            f = result.failure
            where = f" on {f.instruction}" if f.instruction else ""
            report.error(f"{label}: pass {f.path} (#{f.index}) failed{where}: {f.message}")
            if traceback:
                report.info(f.traceback)
            code = 2
            continue
        for v in result.violations:
            report.error(f"{label}: {v.rule} violated after {v.after_pass}: "
                         + (v.diagnostic.render(text) if v.diagnostic else v.message))
            code = 2
        outputs.append(print_module(module, form=form))
    out = "// -----\n".join(outputs)
    if output:
        write_atomic(output, out)
    else:
        report.write_stdout(out)
    sys.exit(code)


@click.command("passes")
@click.argument("name", required=False)
def passes_cmd(name):
    """List registered passes with their one-line docs and options."""
    from dataclasses import MISSING, fields

    from ..report import console as report
    from ..passes import REGISTRY, closest_passes, pass_class
    from ..pipeline.spec_types import type_hints
    names = sorted(REGISTRY)
    if name:
        if name not in REGISTRY:
            near = closest_passes(name)
            report.error(f"unknown pass '{name}'" + (f"; did you mean {', '.join(near)}?" if near else ""))
            sys.exit(1)
        names = [name]
    for n in names:
        cls = pass_class(n)
        hints = type_hints(cls)
        opts = []
        for f in fields(cls):
            if f.name == "target" or not f.init:
                continue
            default = f.default if f.default is not MISSING else (
                f.default_factory() if f.default_factory is not MISSING else "required")
            t = hints.get(f.name, f.type)
            tname = getattr(t, "__name__", str(t).replace("typing.", ""))
            opts.append(f"{f.name}: {tname} = {_yaml(default)}")
        if name:
            module_doc = (sys.modules[cls.__module__].__doc__ or cls.__doc__ or "").strip()
            report.info(f"{n}  ({cls.__module__}.{cls.__name__})\n\n{module_doc}\n")
            report.info("options:" + ("".join(f"\n  {o}" for o in opts) if opts else " none"))
        else:
            report.info(f"{n:28} {cls.doc_line()}")
            if opts:
                report.info(" " * 29 + "options: " + ", ".join(opts))


def _yaml(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    return repr(v) if isinstance(v, str) else str(v)
