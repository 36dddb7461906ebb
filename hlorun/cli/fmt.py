"""``hlorun fmt`` and ``hlorun check``."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import click

FORMS = ("full", "long", "short", "diff", "canonical")


def _inputs(files: tuple[str, ...], split: bool):
    """(label, text) for each input (each ``// -----`` chunk with --split-input-file)."""
    from ..fileio import read_text
    from ..parser import split_input_file
    for f in files:
        text = sys.stdin.read() if f == "-" else read_text(f)
        label = "<stdin>" if f == "-" else f
        if split:
            for line, chunk in split_input_file(text):
                yield f"{label}:{line}", label, "\n" * (line - 1) + chunk
        else:
            yield label, label, text


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(allow_dash=True))
@click.option("-o", "--output", type=click.Path(), default=None,
              help="Output file (one input) or directory (several inputs). Default: stdout for one input.")
@click.option("--form", type=click.Choice(FORMS), default="full", show_default=True,
              help="Print form: full (XLA's ToString), long (with operand shapes), short "
                   "(ShortParsable), diff (no metadata/backend_config), canonical (renumbered).")
@click.option("--canonical", is_flag=True, help="Same as --form canonical.")
@click.option("--check", "check_only", is_flag=True,
              help="Only parse; print a status line per file and exit 1 if any fails.")
@click.option("--split-input-file", is_flag=True, help="Treat '// -----' separated chunks as separate modules.")
def fmt(files, output, form, canonical, check_only, split_input_file):
    """Parse HLO FILES and print them back (a fixed point: fmt(fmt(x)) == fmt(x))."""
    from .. import report
    from ..fileio import refuse_overwrite, write_atomic
    from ..parser import parse_module
    from ..printer import print_module
    from ..source import HloParseError
    if canonical:
        form = "canonical"
    if output and len(files) == 1:
        refuse_overwrite(output, files)
    inputs = list(_inputs(files, split_input_file))
    many = len(inputs) > 1
    if output and many:
        if os.path.exists(output) and not os.path.isdir(output):
            raise click.UsageError("-o must be a directory when formatting several inputs")
    failures = 0
    outputs: list[str] = []
    for label, path, text in inputs:
        t0 = time.perf_counter()
        try:
            module = parse_module(text, path)
        except HloParseError as e:
            failures += 1
            report.status(False, label)
            report.error(e.render())
            continue
        dt = (time.perf_counter() - t0) * 1000
        if many or check_only:
            report.status(True, label, f"{module.instruction_count} instructions, {dt:.0f} ms")
        if check_only:
            continue
        text_out = print_module(module, form=form)
        if many and output:
            name = Path(label.replace(":", "_")).name
            if name.endswith(".gz"):
                name = name[:-3]
            target = Path(output) / name
            refuse_overwrite(target, files)
            write_atomic(target, text_out)
        else:
            outputs.append(text_out)
    if many:
        ok = len(inputs) - failures
        report.info(f"{ok}/{len(inputs)} parsed" + (f", {failures} failed" if failures else ""))
    if not check_only and outputs:
        if output and not many:
            write_atomic(output, outputs[0])
        elif not output:
            report.write_stdout("".join(outputs))
    if failures:
        sys.exit(1)


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(allow_dash=True))
@click.option("--split-input-file", is_flag=True, help="Treat '// -----' separated chunks as separate modules.")
@click.option("--format", "fmt_", type=click.Choice(["text", "json"]), default="text", show_default=True)
def check(files, split_input_file, fmt_):
    """Parse and verify HLO FILES (hlo-verifier); exit 1 on a parse error,
    2 on a verifier finding."""
    import json

    from .. import report
    from ..parser import parse_module
    from ..source import HloParseError
    from ..verify import verify
    parse_failures = 0
    findings = 0
    results = []
    for label, path, text in _inputs(files, split_input_file):
        try:
            module = parse_module(text, path)
        except HloParseError as e:
            parse_failures += 1
            results.append({"input": label, "parsed": False, "error": e.render(),
                            "line": e.line, "column": e.column, "diagnostics": []})
            if fmt_ == "text":
                report.status(False, label)
                report.error(e.render())
            continue
        diags = verify(module)
        findings += len(diags)
        results.append({"input": label, "parsed": True, "instructions": module.instruction_count,
                        "diagnostics": [d.to_json() for d in diags]})
        if fmt_ == "text":
            report.status(not diags, label, f"{module.instruction_count} instructions"
                          + (f", {len(diags)} findings" if diags else ""))
            for d in diags:
                report.error(d.render(text))
    if fmt_ == "json":
        report.write_stdout(json.dumps({"results": results}, indent=2) + "\n")
    if parse_failures:
        sys.exit(1)
    if findings:
        sys.exit(2)
