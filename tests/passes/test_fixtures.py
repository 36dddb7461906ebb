"""Pass fixtures: testdata/passes/<pass-name>/*.hlo.

Cases are separated by ``// -----``.  A case runs the folder's pass (or the
``// PASS: name{opt=v}`` line of the case) and matches the printed result (full form) against its
``// CHECK...`` lines; a case without CHECK lines must come out unchanged
with ``changed=False``.  Every result must verify, and print -> parse ->
print must be a fixed point.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hlorun.parser import parse_module, split_input_file
from hlorun.passes import REGISTRY, Target
from hlorun.pipeline_spec import parse_pass_list
from hlorun.printer import print_module
from hlorun.verify import verify

from ..conftest import TESTDATA
from ..filecheck import filecheck, parse_checks

FIXTURES = TESTDATA / "passes"
_PASS_LINE = re.compile(r"^\s*//\s*PASS:\s*(\S+)\s*$", re.M)


def _cases():
    for d in sorted(FIXTURES.iterdir()) if FIXTURES.is_dir() else ():
        if not d.is_dir():
            continue
        for f in sorted(d.glob("*.hlo")):
            text = f.read_text()
            for line, chunk in split_input_file(text):
                m = _PASS_LINE.search(chunk)
                yield pytest.param(d.name, f, line, chunk, m.group(1) if m else d.name,
                                   id=f"{d.name}/{f.name}:{line}")


@pytest.mark.parametrize("pass_dir,path,line,chunk,spec", list(_cases()))
def test_fixture(pass_dir, path: Path, line, chunk, spec):
    steps = parse_pass_list(spec)
    assert any(s.name == pass_dir for s in steps), f"{path}:{line}: PASS line runs no {pass_dir}"
    module = parse_module("\n" * (line - 1) + chunk, str(path))
    before = print_module(module)
    changed = False
    for s in steps:
        changed |= bool(s.instantiate(Target()).run(module))
    after = print_module(module)
    checks = parse_checks(chunk, line)
    where = f"{path}:{line}"
    if not checks:
        assert not changed, f"{where}: no CHECK lines, but the pass reported a change:\n{after}"
        assert after == before, f"{where}: no CHECK lines, but the module changed:\n{after}"
    else:
        assert changed, f"{where}: CHECK lines, but the pass reported no change"
        try:
            filecheck(after, checks)
        except AssertionError as e:
            raise AssertionError(f"{where}: {e}\n--- output ---\n{after}") from None
    diags = verify(module)
    assert not diags, f"{where}: result does not verify: {[d.message for d in diags]}"
    again = print_module(parse_module(after, "<reparse>"))
    assert again == after, f"{where}: result does not round-trip through parse/print"


def test_every_registered_pass_has_fixtures():
    missing = [n for n in REGISTRY if not list((FIXTURES / n).glob("*.hlo"))]
    assert not missing, f"passes without fixtures in testdata/passes/<name>/: {missing}"


def test_registry_names_match_classes():
    from hlorun.passes import pass_class
    for name in REGISTRY:
        assert pass_class(name).name == name
    assert list(REGISTRY) == sorted(REGISTRY), "REGISTRY must stay alphabetical"
