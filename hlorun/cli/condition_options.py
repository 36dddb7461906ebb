"""The condition flags of ``hlorun reduce`` and ``hlorun bisect``
(``--until``, ``--until-cmd``) and the compile command line after ``--``,
turned into a condition and a :class:`hlorun.reduce.CompileConfig`."""

from __future__ import annotations

import click


def split_compile_args(args) -> list[str]:
    """The compile argv from ``MODEL``, ``-- compile FLAGS MODEL`` or
    ``MODEL -- compile FLAGS`` (the word ``compile`` is optional when
    nothing precedes the flags)."""
    args = list(args)
    if "compile" not in args:
        return args
    k = args.index("compile")
    pre, post = args[:k], args[k + 1:]
    if len(pre) > 1:
        from ..errors import UsageError
        raise UsageError(f"unexpected arguments before `compile`: {' '.join(pre)}")
    if pre and pre[0] not in post:
        post.append(pre[0])
    return post


def condition_options(fn):
    opts = [
        click.option("--until", "until", metavar="CONDITION", default=None,
                     help="violation:RULE, pass-fails[:NAME], backend:INSTR=BLAS|triton|LIB, "
                          "numerics, output-differs-from:OTHER.hlo."),
        click.option("--until-cmd", metavar="'SCRIPT {}'", default=None,
                     help="A shell command run on each candidate ({} = its path); exit 0 = "
                          "still interesting."),
        click.option("--cmd-timeout", type=float, default=300.0, show_default=True,
                     help="Seconds one --until-cmd run may take (then: not interesting)."),
    ]
    for o in reversed(opts):
        fn = o(fn)
    return fn


def build_condition(until, until_cmd, cmd_timeout, argv):
    """(condition, compile config or None, model path), prepared."""
    from ..reduce import parse_condition
    from ..errors import UsageError
    from .compile_options import compile_config
    cond = parse_condition(until, until_cmd, cmd_timeout)
    if not argv:
        raise UsageError("missing MODEL.hlo (or `-- compile [FLAGS] MODEL.hlo`)")
    cfg = compile_config(argv)
    cond.prepare(cfg)
    return cond, cfg, cfg.file
