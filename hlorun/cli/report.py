"""``hlorun report RESULT.json -o report.html``: the HTML report of a saved
``hlorun compile --format json`` report (``compile --html`` writes it
straight from the compile, with diffs and kernel bodies)."""

from __future__ import annotations

import click

from ._common import handle_errors


@click.command()
@click.argument("result", type=click.Path(allow_dash=True))
@click.option("-o", "--output", required=True, type=click.Path(allow_dash=True),
              help="The HTML file to write ('-' for stdout).")
@handle_errors
def report_cmd(result, output):
    """Render a saved compile report (``hlorun compile --format json``) as one
    self-contained HTML file: pass timeline, violations, kernels, autotuner
    decisions (diffs and kernel graph when the report holds them)."""
    import json

    from ..text.fileio import read_text, refuse_overwrite, write_atomic
    from ..report.html import html_from_json
    from ..errors import UsageError
    refuse_overwrite(output, [result])
    text = read_text(result) if result != "-" else click.get_text_stream("stdin").read()
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"{result}:{e.lineno}:{e.colno}: not JSON: {e.msg}") from None
    html = html_from_json(doc)
    if output == "-":
        click.echo(html, nl=False)
    else:
        write_atomic(output, html)
        from ..report.console import info
        info(f"report: {output} ({len(html) / 1e6:.1f} MB)")
