"""``hlorun replay DUMP_DIR``: XLA's real pipeline from its dump files, as
a pass table with per-pass diffs (the same view ``compile`` gives)."""

from __future__ import annotations

import json
import re
import sys

import click

from ._common import diff_option, handle_errors


@click.command("replay")
@click.argument("dump_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--module", "module_re", default=None, metavar="REGEX",
              help="Only modules whose 'module_NNNN.NAME' matches REGEX.")
@diff_option("short")
@click.option("--diff-filter", default=None, metavar="REGEX",
              help="Only diff steps whose pipeline/pass matches REGEX.")
@click.option("--diff-form", type=click.Choice(["diff", "canonical", "full"]), default="diff",
              show_default=True)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--changed-only", is_flag=True, help="List only steps that changed the module.")
@click.option("--table/--no-table", default=True, help="Show the step table (as in compile).")
@handle_errors
def replay_cmd(dump_dir, module_re, diff_mode, diff_filter, diff_form, fmt, changed_only, table):
    """Replay the XLA dump directory DUMP_DIR (or each dump directory in it)."""
    from ..report import console as report
    from ..pipeline.replay import dump_dirs, replay_module, scan
    from ..report.textout import render_short
    from ..errors import UsageError
    try:
        mre = re.compile(module_re) if module_re else None
        dre = re.compile(diff_filter) if diff_filter else None
    except re.error as e:
        raise UsageError(f"bad regex: {e}") from None
    dirs = dump_dirs(dump_dir)
    if not dirs:
        raise UsageError(f"{dump_dir}: no XLA dump files (module_NNNN.NAME.*.txt) here or in "
                         f"its subdirectories")
    docs = []
    text = fmt == "text"
    for d in dirs:
        mods = [m for m in scan(d) if mre is None or mre.search(m.label)]
        for mod in mods:
            steps = []
            for st in replay_module(mod, diffs=text and diff_mode != "none", form=diff_form,
                                    diff_filter=dre, all_steps=diff_mode == "all"):
                steps.append(st)
            shown = [s for s in steps if s.changed or not changed_only]
            if text:
                title = f"{d}: {mod.label} ({len(mod.steps)} dumped steps)"
                report.info(title)
            if text and table:
                report.pass_table(
                    [(s.index, s.path + (f" -> {s.next_name}" if s.next_name else ""),
                      "yes" if s.changed else "-",
                      f"{s.instructions_before} -> {s.instructions_after}", s.seq if s.seq is not None else "-")
                     for s in shown],
                    columns=("#", "pipeline/pass -> next", "changed", "instructions", "step"))
            if text:
                diffs = [(f"--- before #{s.index} {s.path}\n+++ after  #{s.index} {s.path}  "
                          f"({s.file})" + ("" if s.changed else "  (unchanged)"), s.diff)
                         for s in steps
                         if s.diff or (diff_mode == "all" and (dre is None or dre.search(s.path)))]
                if diff_mode == "short":
                    render_short(diffs, hint="the dump files themselves are in " + str(d))
                else:
                    for header, lines in diffs:
                        report.diff_block(header, lines)
                n = sum(1 for s in steps if s.changed)
                report.summary(f"{mod.label}: {len(steps)} steps, {n} changed the module", True)
            docs.append({"dir": str(d), "module": mod.label, "name": mod.name,
                         "steps": [s.to_json() for s in steps]})
        if not mods and text:
            report.warn(f"{d}: no module matches --module {module_re}")
    if not docs:
        raise UsageError("no module matched" + (f" --module {module_re}" if module_re else ""))
    if not text:
        report.write_stdout(json.dumps({"schema": "hlorun.pipeline.replay/1", "modules": docs}, indent=2) + "\n")
    sys.exit(0)
