"""The ``--check-numerics`` options of ``hlorun compile`` (they become
:class:`hlorun.options.Numerics`).

``--check-numerics`` alone means ``each`` (check after every changed
pass); ``--check-numerics=final`` compares only the start and the end.  A
bare ``--check-numerics`` never swallows the FILE argument that follows it.
"""

from __future__ import annotations

import click

MODES = ("each", "final")


class _OptionalValueOption(click.Option):
    """An option whose value is optional and only given with ``=``:
    ``--check-numerics`` -> flag_value, ``--check-numerics=final`` -> final.
    (click's own optional values would take the next argument, the input
    file, as the value.)"""

    def add_to_parser(self, parser, ctx) -> None:
        super().add_to_parser(parser, ctx)
        match = getattr(parser, "_match_long_opt", None)
        table = getattr(parser, "_long_opt", None)
        if match is None or table is None:  # another click: plain optional value
            return
        names = set(self.opts)
        flag_value = self.flag_value

        def match_long(opt, explicit_value, state, _match=match):
            if opt in names and explicit_value is None:
                table[opt].process(flag_value, state)
                return
            return _match(opt, explicit_value, state)
        parser._match_long_opt = match_long


def numerics_options(fn):
    opts = [
        click.option("--check-numerics", "check_numerics", cls=_OptionalValueOption, is_flag=False,
                     flag_value="each", default=None, type=click.Choice(MODES),
                     help="Evaluate the module (numpy evaluator) before the pipeline and after every "
                          "changed pass on the same inputs; name the first pass whose outputs differ "
                          "beyond tolerance (exit 2). --check-numerics=final compares only start and end."),
        click.option("--rtol", type=float, default=None,
                     help="--check-numerics: relative tolerance (default per element type)."),
        click.option("--atol", type=float, default=None,
                     help="--check-numerics: absolute tolerance, scaled by max(1, rms of the reference) "
                          "(default per element type)."),
        click.option("--seed", type=int, default=0, show_default=True,
                     help="Seed of --check-numerics' random inputs and of --autotune=noisy measurements."),
        click.option("--input", "numerics_inputs", multiple=True, metavar="NAME=FILE.npy",
                     help="--check-numerics: a parameter's value from a file (or FILE.npz)."),
        click.option("--max-bytes", default="4G", show_default=True,
                     help="--check-numerics: refuse evaluations whose estimated peak memory exceeds this."),
    ]
    for o in reversed(opts):
        fn = o(fn)
    return fn
