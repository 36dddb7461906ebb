"""``hlorun examples``: the example modules bundled with hlorun (usable by
name wherever a command takes a module file)."""

from __future__ import annotations

import click

from ._common import handle_errors


@click.command("examples")
@click.argument("name", required=False)
@click.option("--path", "show_path", is_flag=True, help="Print the example's file path only.")
@handle_errors
def examples_cmd(name, show_path):
    """List the bundled example modules, or print example NAME's text (its
    path with --path). Any command that takes a module accepts an example's
    name: `hlorun compile s0`."""
    from ..errors import UsageError
    from ..examples import EXAMPLES, names, path
    from ..report import console as report
    if not name:
        for n in names():
            report.info(f"{n:4} {EXAMPLES[n][0]:30} {EXAMPLES[n][1]}")
        return
    p = path(name)
    if p is None:
        raise UsageError(f"no bundled example {name!r} (there are: {', '.join(names())})")
    if show_path:
        report.write_stdout(p + "\n")
    else:
        with open(p, encoding="utf-8") as f:
            report.write_stdout(f.read())
