"""Shared pieces of the pipeline commands: error handling, target options,
reading modules."""

from __future__ import annotations

import functools
import sys

import click


def handle_errors(fn):
    """HloErrors become one-screen messages and their exit code (also under
    CliRunner, which bypasses ``hlorun.cli.main``)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from ..errors import HloError
        try:
            return fn(*args, **kwargs)
        except HloError as e:
            if kwargs.get("traceback"):
                raise
            from ..report.console import error
            error(e.render())
            sys.exit(e.exit_code)
    return wrapper


class ModuleFile(click.Path):
    """A module file, ``-`` (stdin) where allowed, or the name of a bundled
    example (``hlorun examples``) when no file of that name exists."""

    def convert(self, value, param, ctx):
        import os
        if isinstance(value, str) and value != "-" and not os.path.exists(value):
            from ..examples import path as example_path
            found = example_path(value)
            if found is not None:
                return found
            if self.exists:
                from ..examples import names
                self.fail(f"{value!r}: no such file (nor a bundled example: {', '.join(names())})",
                          param, ctx)
        return super().convert(value, param, ctx)


def target_options(fn):
    fn = click.option("--compute-capability", default=None,
                      help="Override the pipeline target's compute capability (e.g. 9.0, gfx942).")(fn)
    fn = click.option("--device", default=None,
                      help="Override the pipeline target's device (e.g. H100, MI300X).")(fn)
    fn = click.option("--platform", type=click.Choice(["cuda", "rocm", "sycl", "cpu"]), default=None,
                      help="Override the pipeline target's platform.")(fn)
    return fn


def read_inputs(path: str, split: bool) -> list[tuple[str, str, str]]:
    """[(label, filename, text)] for a file (or '-'), split on '// -----'
    if asked (chunks keep their line numbers)."""
    from ..text.fileio import read_text
    from ..text.parser import split_input_file
    text = sys.stdin.read() if path == "-" else read_text(path)
    name = "<stdin>" if path == "-" else path
    if not split:
        return [(name, name, text)]
    return [(f"{name}:{line}", name, "\n" * (line - 1) + chunk)
            for line, chunk in split_input_file(text)]


def diff_option(default: str):
    """``--diff short|changed|all|none``: one meaning in every command that
    shows module diffs (compile, opt, replay, diff-pipelines)."""
    from ..report.textout import DIFF_HELP, DIFF_MODES
    return click.option("--diff", "diff_mode", type=click.Choice(DIFF_MODES), default=default,
                        show_default=True, help=DIFF_HELP)


JSON_PARTS = ("remarks", "candidates", "diffs", "module")


def parse_json_include(value: str) -> tuple[str, ...]:
    parts = [p.strip() for p in (value or "").split(",") if p.strip()]
    if "all" in parts:
        return JSON_PARTS
    bad = [p for p in parts if p not in JSON_PARTS]
    if bad:
        raise click.BadParameter(f"unknown part(s) {', '.join(bad)}; choose from "
                                 f"{', '.join(JSON_PARTS)}, all", param_hint="--json-include")
    return tuple(parts)
