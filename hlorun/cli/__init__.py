"""The ``hlorun`` command line: a click group whose subcommands live in their
own modules and are imported only when used (``hlorun --help`` stays fast).

To add a command: write ``hlorun/cli/<name>.py`` with a click command and add
one line to ``COMMANDS`` (kept alphabetical).
"""

from __future__ import annotations

import sys
from importlib import import_module

import click

from .. import __version__

#: command -> ("module:attribute", one-line help shown by ``hlorun --help``)
COMMANDS: dict[str, tuple[str, str]] = {
    "bisect": ("hlorun.cli.bisect:bisect_cmd", "First pass after which a condition holds (--pass-limit search), or where two pipelines differ."),
    "buffers": ("hlorun.cli.buffers:buffers", "Assign buffers like XLA:GPU: allocations, memory report, live ranges, aliasing hazards."),
    "check": ("hlorun.cli.fmt:check", "Parse and verify HLO files; report diagnostics."),
    "compare": ("hlorun.cli.run:compare", "Evaluate two HLO modules on the same inputs and compare outputs."),
    "compile": ("hlorun.cli.compile:compile_cmd", "Run a YAML pipeline on a module: pass table, diffs, violations, dumps."),
    "diff-pipelines": ("hlorun.cli.diff_pipelines:diff_pipelines_cmd", "Where two pipeline versions diverge on one module, and how their final kernels differ (S3)."),
    "examples": ("hlorun.cli.examples:examples_cmd", "List the bundled example modules (usable by name: `hlorun compile s0`)."),
    "explain": ("hlorun.cli.explain:explain_cmd", "Which kernels compute an instruction after the pipeline, and why (S2)."),
    "explore": ("hlorun.cli.explore:explore", "Rerun a pipeline once per autotuning choice; name the GEMM choices that break it."),
    "fmt": ("hlorun.cli.fmt:fmt", "Parse and print HLO files (full, long, short or canonical form)."),
    "opt": ("hlorun.cli.opt:opt", "Run just the listed passes (--passes=a,b{opt=v}) and print the module."),
    "passes": ("hlorun.cli.opt:passes_cmd", "List registered passes with their docs and options."),
    "pipelines": ("hlorun.cli.pipelines:pipelines_cmd", "List pipelines, or show one as a tree (disabled steps marked)."),
    "reduce": ("hlorun.cli.reduce:reduce_cmd", "Shrink a module while a condition (violation, pass failure, backend, numerics, script) holds."),
    "replay": ("hlorun.cli.replay:replay_cmd", "Show an XLA dump directory as a pass table with per-pass diffs."),
    "report": ("hlorun.cli.report:report_cmd", "Render a saved compile report (--format json) as a self-contained HTML page."),
    "run": ("hlorun.cli.run:run", "Evaluate an HLO module with the numpy evaluator; summarize outputs."),
    "sweep": ("hlorun.cli.sweep:sweep_cmd", "Run a pipeline over many modules in parallel (Dask); JSON Lines results, failures grouped."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str):
        spec = COMMANDS.get(name)
        if spec is None:
            return None
        module, attr = spec[0].split(":")
        return getattr(import_module(module), attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][1]) for name in sorted(COMMANDS)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="hlorun")
def cli() -> None:
    """hlorun: run XLA HLO pass pipelines on a laptop, and see what they did.

    Exit codes: 0 ok, 1 bad input (HLO, YAML, command line), 2 a violation
    or a pass failure.
    """


def main(argv: list[str] | None = None) -> None:
    """Console entry point: HloErrors become one-screen messages, never a
    traceback (unless HLORUN_TRACEBACK=1)."""
    import os

    from ..errors import HloError
    try:
        cli.main(args=argv, prog_name="hlorun", standalone_mode=False)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.ClickException as e:
        e.show()
        sys.exit(1 if e.exit_code == 2 else e.exit_code)
    except click.exceptions.Abort as e:
        if isinstance(e.__cause__, KeyboardInterrupt):  # click turns Ctrl-C into Abort
            _interrupted()
        sys.stderr.write("Aborted!\n")
        sys.exit(1)
    except HloError as e:
        if os.environ.get("HLORUN_TRACEBACK"):
            raise
        from ..report.console import error
        error(e.render())
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        _interrupted()
    except BrokenPipeError:
        sys.exit(0)


def _interrupted() -> None:
    """Ctrl-C: one line, no traceback, exit 130 (128 + SIGINT).  Outputs are
    written atomically at the end, so nothing partial is left behind."""
    sys.stderr.write("hlorun: interrupted\n")
    sys.exit(130)
