"""Every case of every fixture file under testdata/passes/<pass>/ and
testdata/checkers/<checker>/ (see hlorun.testing.passcases for the format)."""

from __future__ import annotations

import pytest

from hlorun.testing.fixtures import fixture_files, load_fixture_file, run_fixture_case

from ..conftest import TESTDATA

CASES = [c for f in fixture_files(TESTDATA) for c in load_fixture_file(f)]


def test_fixtures_found():
    assert len(CASES) >= 5


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_fixture_case(case):
    r = run_fixture_case(case)
    assert r.status == "passed", f"{r.reason}\n{r.output}"
