"""``hlorun fmt`` and ``hlorun check``."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import click

from ._common import handle_errors

FORMS = ("full", "long", "short", "diff", "canonical")


def _inputs(files: tuple[str, ...], split: bool):
    """(label, text) for each input (each ``// -----`` chunk with --split-input-file)."""
    from ..text.fileio import read_text
    from ..text.parser import split_input_file
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
    from ..report import console as report
    from ..text.fileio import refuse_overwrite, write_atomic
    from ..text.parser import parse_module
    from ..text.printer import print_module
    from ..errors import HloParseError
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
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=1, show_default=True,
              help="Check files in parallel on this many worker processes (hlorun sweep's Dask "
                   "engine; needs hlorun[sweep]).")
@handle_errors
def check(files, split_input_file, fmt_, jobs):
    """Parse and verify HLO FILES (hlo-verifier); exit 1 on a parse error,
    2 on a verifier finding."""
    import json

    from ..report import console as report
    from ..report.textout import Stepper
    results = []
    bar = Stepper(len(files), "check")
    for r in (_check_parallel(files, split_input_file, jobs) if jobs > 1
              else _check_sequential(files, split_input_file)):
        rendered = r.pop("rendered", [])
        results.append(r)
        bar.step(str(r.get("input", "")))
        if fmt_ != "text":
            continue
        if not r["parsed"] or r.get("failed"):
            report.status(False, r["input"])
            report.error(r["error"])
            continue
        diags = r["diagnostics"]
        report.status(not diags, r["input"], f"{r['instructions']} instructions"
                      + (f", {len(diags)} findings" if diags else ""))
        for d in rendered:
            report.error(d)
    bar.__exit__(None, None, None)
    parse_failures = sum(1 for r in results if not r["parsed"])
    findings = sum(len(r["diagnostics"]) + (1 if r.get("failed") else 0) for r in results)
    if fmt_ == "json":
        report.write_stdout(json.dumps({"results": results}, indent=2) + "\n")
    if parse_failures:
        sys.exit(1)
    if findings:
        sys.exit(2)


def _check_sequential(files, split_input_file):
    """Each input's result as soon as it is checked."""
    from ..text.parser import parse_module
    from ..errors import HloParseError
    from ..verifier.checkers import verify
    for label, path, text in _inputs(files, split_input_file):
        try:
            module = parse_module(text, path)
        except HloParseError as e:
            yield {"input": label, "parsed": False, "error": e.render(),
                   "line": e.line, "column": e.column, "diagnostics": []}
            continue
        diags = verify(module)
        yield {"input": label, "parsed": True, "instructions": module.instruction_count,
               "diagnostics": [d.to_json() for d in diags],
               "rendered": [d.render(text) for d in diags]}


def _check_parallel(files, split_input_file, jobs) -> list[dict]:
    """``check -j N``: one sweep task per file on a local Dask cluster;
    results in the order of FILES."""
    from ..report import console as report
    from ..errors import UsageError
    from ..sweep import Progress, SweepOptions
    from ..sweep.engine import import_distributed
    from ..sweep.inputs import split_chunks
    from ..sweep.run import run_unordered
    if "-" in files:
        raise UsageError("-j needs files, not stdin")
    for f in files:
        if not os.path.isfile(f):
            raise UsageError(f"{f}: no such file")
    import_distributed()
    labels = split_chunks(list(files)) if split_input_file else list(files)
    by_path = {}
    progress = Progress(enabled=report.console().is_terminal, label="check")
    options = SweepOptions(mode="check", split_input_file=split_input_file)
    for rec in run_unordered(labels, options, workers=jobs, progress=progress):
        by_path[rec["path"]] = rec
    results = []
    for f in labels:
        rec = by_path[f]
        st = rec["status"]
        if st == "bad-input":
            results.append({"input": f, "parsed": False, "error": rec.get("error", ""),
                            "line": rec.get("line"), "column": rec.get("column"),
                            "diagnostics": []})
        elif st in ("ok", "violation"):
            diags = rec.get("diagnostics", [])
            results.append({"input": f, "parsed": True, "instructions": rec["instructions"][0],
                            "diagnostics": [{k: v for k, v in d.items() if k != "rendered"}
                                            for d in diags],
                            "rendered": [d["rendered"] for d in diags]})
        else:  # timeout, crashed
            results.append({"input": f, "parsed": True, "failed": st,
                            "error": f"{f}: {st}: {rec.get('error', '')}", "diagnostics": []})
    return results
