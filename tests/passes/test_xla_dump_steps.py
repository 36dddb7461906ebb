"""Single pass steps of real XLA:GPU dumps: our pass on XLA's input must
give XLA's output (shared/xla-dumps, scenario S0's module).

Instruction names are compared too where the step does not create names
XLA's NameUniquer would have numbered from names that earlier passes used
and removed (a dump file does not carry that history); there the canonical
form (names renumbered) is compared."""

from __future__ import annotations

import pytest

import hlorun
from hlorun.testing.passcases import run_passes

from ..conftest import shared_path

STEPS = [
    ("dot_general_gqa_cublaslt", "0005", "0006", "dot_decomposer", True),
    # (dump dir, before file number, after file number, pass, exact names)
    ("dot_general_gqa_cublaslt", "0019", "0020", "reshape-decomposer", True),
    ("dot_general_gqa_cublaslt", "0020", "0021", "layout_normalization", False),
]


def _dump(d, number):
    base = shared_path("xla-dumps", d)
    found = sorted(base.glob(f"*.{number}.*.txt"))
    assert len(found) == 1, found
    return found[0]


@pytest.mark.parametrize("d,before,after,pass_name,exact", STEPS,
                         ids=[f"{s[0]}:{s[1]}->{s[2]}:{s[3]}" for s in STEPS])
def test_pass_step_matches_xla(d, before, after, pass_name, exact):
    module = hlorun.load_module(_dump(d, before))
    expected = hlorun.load_module(_dump(d, after))
    assert run_passes(module, [(pass_name, {})])
    if exact:
        assert hlorun.print_module(module) == hlorun.print_module(expected)
    else:
        assert hlorun.print_module(module, canonical=True) == \
            hlorun.print_module(expected, canonical=True)
