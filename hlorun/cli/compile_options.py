"""``hlorun compile``'s flags, and their translation into
:class:`hlorun.options.CompileOptions`.

:func:`compile_flags` declares every flag of ``compile``;
:func:`options_from_params` turns parsed flags into options (and leaves
the presentation flags, like ``--format`` and ``-o``, to the command);
:func:`parse_compile_argv` parses a compile command line without running
anything (``hlorun reduce -- compile FLAGS MODEL``, ``bisect``,
``diff-pipelines``), so every compile flag means the same thing there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import click

from ._autotune import autotune_options
from ..report.textout import DIFF_HELP, DIFF_MODES
from ._common import ModuleFile, parse_json_include, target_options
from .numerics_options import numerics_options


def _print_schema(ctx, param, value):
    if not value or ctx.resilient_parsing:
        return
    import json

    from ..report.schema import SCHEMA
    click.echo(json.dumps(SCHEMA, indent=2))
    ctx.exit(0)


def selection_options(fn):
    """--disable-passes/--enable-passes-only and XLA's spellings."""
    opts = [
        click.option("--disable-passes", multiple=True, metavar="LIST",
                     help="Passes/pipelines not to run: name, pipeline/name, name:N (Nth "
                          "occurrence); a pipeline name disables the whole sub-pipeline."),
        click.option("--enable-passes-only", multiple=True, metavar="LIST",
                     help="Run only these passes/pipelines (same patterns)."),
        click.option("--xla_disable_hlo_passes", "xla_disable_hlo_passes", multiple=True,
                     metavar="LIST", help="XLA's spelling of --disable-passes."),
        click.option("--xla_enable_hlo_passes_only", "xla_enable_hlo_passes_only", multiple=True,
                     metavar="LIST", help="XLA's spelling of --enable-passes-only."),
        click.option("--xla_disable_all_hlo_passes", "xla_disable_all_hlo_passes", is_flag=True,
                     help="Run no pass at all (XLA's flag)."),
        click.option("--xla-flags", "xla_flags", default=None, metavar="STRING",
                     help="An XLA_FLAGS string (e.g. \"$XLA_FLAGS\"); its pass-selection and dump "
                          "flags apply, others are ignored with a note."),
    ]
    for o in reversed(opts):
        fn = o(fn)
    return fn


def compile_flags(fn):
    """Every flag of ``hlorun compile`` (FILE argument included)."""
    opts = [
        click.argument("file", type=ModuleFile(allow_dash=True)),
        click.option("--print-json-schema", is_flag=True, expose_value=False, is_eager=True,
                     callback=_print_schema, help="Print the JSON Schema of --format json and exit."),
        click.option("-p", "--pipeline", "pipeline", default=None, metavar="NAME|PATH",
                     help="A bundled pipeline name (`hlorun pipelines`) or a YAML file. Default: gpu-cuda."),
        click.option("-o", "--output", type=click.Path(), default=None,
                     help="Write the optimized module here (atomically) instead of stdout."),
        click.option("--format", "fmt", type=click.Choice(["text", "json", "jsonl"]), default="text",
                     show_default=True,
                     help="text: table/diffs on stderr, module on stdout. json: one JSON report on "
                          "stdout (--print-json-schema); the module only goes to -o. jsonl: JSON "
                          "Lines streamed as the pipeline runs (one 'pass' object per pass, "
                          "'violation'/'failure' objects, then the report without 'passes')."),
        click.option("--diff", "diffs", type=click.Choice(DIFF_MODES), default="short",
                     show_default=True, help=DIFF_HELP),
        click.option("--diff-filter", default=None, metavar="REGEX",
                     help="Only diff passes whose pipeline/name path matches REGEX."),
        click.option("--diff-form", type=click.Choice(["diff", "canonical", "full"]), default="diff",
                     show_default=True, help="Print form the diffs compare (diff: no metadata)."),
        click.option("--verify-each/--no-verify-each", default=True, show_default=True,
                     help="Run the pipeline's checkers after every changed pass (else only at "
                          "start and end)."),
        click.option("--incremental-checks/--full-checks", "incremental_checks", default=True,
                     show_default=True,
                     help="Checkers re-examine only what changed since their last run "
                          "(--full-checks: the whole module every time)."),
        click.option("--check-changed", is_flag=True,
                     help="Fingerprint the canonical print around each pass; flag passes whose "
                          "'changed' lies."),
        click.option("--keep-going", is_flag=True, help="Do not stop at the first violation."),
        selection_options,
        click.option("--pass-limit", type=click.IntRange(min=0), default=None, metavar="N",
                     help="Run only the first N passes (numbered in the table), like LLVM's "
                          "-opt-bisect-limit."),
        click.option("--dump-to", default=None, type=click.Path(file_okay=False),
                     help="Write XLA-style dumps (module_NNNN.NAME.*.txt) to this directory (new "
                          "or empty; see --overwrite-dump)."),
        click.option("--overwrite-dump", is_flag=True,
                     help="Let --dump-to write into a non-empty directory (same-named files "
                          "replaced)."),
        click.option("--dump-pass-re", default=None, metavar="REGEX",
                     help="Dump after every pass (changed or not) whose name matches (XLA's "
                          "--xla_dump_hlo_pass_re); default: changed passes only."),
        click.option("--xla_dump_to", "xla_dump_to", default=None, hidden=True),
        click.option("--xla_dump_hlo_pass_re", "xla_dump_hlo_pass_re", default=None, hidden=True),
        click.option("--repro-dir", default=None, type=click.Path(file_okay=False),
                     help="On a violation or pass failure, write a reproducer bundle here."),
        click.option("--bug-report", default=None, type=click.Path(), metavar="PATH",
                     help="Write a bug report bundle for XLA maintainers: PATH.tar.gz (or .tgz) or "
                          "a directory (input, pipeline, command, failure, XLA flags, versions, "
                          "README)."),
        click.option("--reduce", "bug_reduce", is_flag=True,
                     help="With --bug-report: also reduce the module while it fails the same way."),
        click.option("--reduce-timeout", type=click.FloatRange(min=0), default=300.0,
                     show_default=True, metavar="SECONDS", help="Time budget of --reduce."),
        click.option("--table/--no-table", default=True,
                     help="Show the tables (passes, autotuner); --no-table hides every table."),
        click.option("--full-tables", is_flag=True,
                     help="Every row of the pass and autotuner tables (default: a summary, the "
                          "slowest/closest rows and counts)."),
        click.option("--json-include", "json_include", default="", metavar="LIST",
                     callback=lambda c, p, v: parse_json_include(v),
                     help="--format json: also include these heavy parts, comma-separated: "
                          "remarks, candidates (every autotuner candidate), diffs, module, or all."),
        click.option("--explain", "explain_all", is_flag=True,
                     help="For each final kernel (fusion or library call): the original "
                          "instructions it came from and the pass decisions that shaped it, in "
                          "words.  JSON: a 'kernels' array.  Also lists every candidate the "
                          "autotuner rejected (with its reason)."),
        click.option("--explain-op", "explain_op", default=None, metavar="INSTR|REGEX",
                     help="--explain only the kernels matching a kernel/instruction name or regex "
                          "(also matched against metadata op_name); implies --explain."),
        click.option("--remarks", "show_remarks", is_flag=True,
                     help="List the passes' remarks (what each pass did or declined to do, per "
                          "instruction)."),
        click.option("--traceback", is_flag=True, help="Show Python tracebacks of pass failures."),
        numerics_options,
        autotune_options,
        target_options,
    ]
    for o in reversed(opts):
        fn = o(fn)
    return fn


#: compile's presentation flags: the command's business, not the compile's
PRESENTATION = ("file", "output", "fmt", "bug_report", "bug_reduce", "reduce_timeout", "table",
                "show_remarks", "traceback", "overwrite_dump", "full_tables", "json_include",
                "explain_all", "explain_op")

#: flag (parameter name) -> CompileOptions flat keyword where they differ
_RENAMES = {"check_numerics": "check_numerics", "numerics_inputs": "numerics_inputs",
            "autotune_mode": "autotune", "autotune_contention": "contention",
            "autotune_sampling": "sampling", "autotune_flip_seeds": "flip_seeds",
            "autotune_cache": "autotune_cache", "autotune_results": "autotune_results",
            "autotune_force": "force_backend", "autotune_force_strict": "force_backend_strict"}


def options_from_params(params: dict[str, Any]):
    """(CompileOptions, notes) from compile's parsed flags (the
    presentation flags are ignored); ``--explain`` turns lineage on."""
    from ..options import CompileOptions
    kw: dict[str, Any] = {}
    for k, v in params.items():
        if k in PRESENTATION:
            continue
        name = _RENAMES.get(k, k)
        if v is None or (isinstance(v, tuple) and not v):
            continue
        if k == "xla_disable_all_hlo_passes" and not v:
            continue
        if k == "max_bytes" and params.get("check_numerics") is None:
            continue
        kw[name] = v
    xla_flags = kw.pop("xla_flags", None)
    if kw.get("diffs") == "short":  # compact is how the CLI shows them; the library diffs changed passes
        kw["diffs"] = "changed"
    explain = explain_pattern(params)
    if explain is not None:
        kw["explain"] = explain
    kw["lineage"] = explain is not None
    opts = CompileOptions.from_kwargs(**kw)
    notes: list[str] = []
    if xla_flags:
        opts, notes = opts.with_xla_flags(xla_flags)
        notes = [n.replace("xla flags:", "--xla-flags:") for n in notes]
    return opts, notes


def explain_pattern(params: dict[str, Any]) -> str | None:
    """--explain (every kernel: ".*") / --explain-op REGEX -> the pattern."""
    if params.get("explain_op") is not None:
        return params["explain_op"]
    return ".*" if params.get("explain_all") else None


@dataclass
class ParsedCompile:
    """A compile command line, parsed: the module file, the options, the
    presentation flags and the arguments as given."""

    file: str
    options: Any  # CompileOptions
    params: dict[str, Any]
    argv: list[str]
    notes: list[str] = field(default_factory=list)


@click.command("compile")
@compile_flags
def _parser(**params):  # never invoked: only its parser is used
    raise AssertionError("not called")


#: compile flags that make no sense per candidate (reduce, bisect); ignored with a note
_PER_CANDIDATE_IGNORED = {"output": "-o", "dump_to": "--dump-to", "repro_dir": "--repro-dir",
                          "bug_report": "--bug-report"}


def compile_config(argv: Sequence[str]):
    """A :class:`hlorun.reduce.CompileConfig` from compile arguments (the
    module file among them), with notes about the flags it ignores."""
    from ..reduce import CompileConfig
    from ..errors import UsageError
    parsed = parse_compile_argv(argv)
    if parsed.file == "-":
        raise UsageError("reduce/bisect need the module in a file, not on stdin")
    notes = list(parsed.notes)
    for attr, flag in _PER_CANDIDATE_IGNORED.items():
        if parsed.params.get(attr):
            notes.append(f"compile {flag} is ignored while judging candidates")
    return CompileConfig(parsed.file, parsed.options, parsed.argv, notes)


def parse_compile_argv(argv: Sequence[str]) -> ParsedCompile:
    """Parse ``compile`` arguments (without the word ``compile``)."""
    import shlex

    from ..errors import UsageError
    argv = list(argv)
    try:
        ctx = _parser.make_context("compile", list(argv))
    except click.exceptions.Exit:
        raise
    except click.ClickException as e:
        raise UsageError(f"in the compile command `{shlex.join(['compile'] + argv)}`: "
                         f"{e.format_message()}") from None
    params = dict(ctx.params)
    options, notes = options_from_params(params)
    return ParsedCompile(params["file"], options, params, argv, notes)


def argv_from_params(command, params: dict[str, Any]) -> list[str]:
    """An argv equivalent to ``params`` for click ``command`` (defaults
    omitted), so options added to ``compile`` later are recorded too."""
    out: list[str] = []
    positional: list[str] = []
    for p in command.params:
        v = params.get(p.name)
        if isinstance(p, click.Argument):
            if v is not None:
                positional += [str(x) for x in (v if isinstance(v, (list, tuple)) else [v])]
            continue
        if not isinstance(p, click.Option) or p.hidden and v in (None, False, ()):
            continue
        if v is None or v == p.default or (isinstance(v, (list, tuple)) and not v):
            continue
        name = max(p.opts, key=len)
        if p.is_flag and p.secondary_opts:
            out.append(name if v else max(p.secondary_opts, key=len))
        elif p.is_flag:
            if v:
                out.append(name)
        elif p.multiple:
            for x in v:
                out += [name] + ([str(y) for y in x] if isinstance(x, (list, tuple)) else [str(x)])
        elif isinstance(v, (list, tuple)):
            out += [name] + [str(x) for x in v]
        else:
            out += [name, str(v)]
    return positional + out


__all__ = ["ParsedCompile", "argv_from_params", "compile_config", "compile_flags",
           "options_from_params",
           "parse_compile_argv", "selection_options"]
