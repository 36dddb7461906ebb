"""The wheel must contain every subpackage and the grammar/pipeline data."""

from __future__ import annotations

import sys

from .conftest import REPO

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = None


def _packages() -> list[str]:
    text = (REPO / "pyproject.toml").read_text()
    if tomllib is not None:
        return tomllib.loads(text)["tool"]["setuptools"]["packages"]
    import re
    return re.findall(r'"(hlorun[\w.]*)"', text.split("packages =")[1].split("]")[0])


def test_every_subpackage_is_listed_in_pyproject():
    listed = set(_packages())
    found = {".".join(p.parent.relative_to(REPO).parts)
             for p in (REPO / "hlorun").rglob("__init__.py")}
    assert found <= listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}"
    assert {"hlorun.grammars", "hlorun.pipelines"} <= listed


def test_grammar_is_found():
    from hlorun.parser import grammar_path
    assert grammar_path().name == "hlo.lark" and grammar_path().exists()


def test_readme_main_job_runs_on_the_bundled_testdata(monkeypatch):
    """The README's first command (install, then the main job) must stay true:
    its hlorun part runs from the checkout on bundled testdata and exits 0."""
    import shlex

    from click.testing import CliRunner

    from hlorun.cli import cli

    lines = (REPO / "README.md").read_text().split("```sh\n", 1)[1].splitlines()
    install, job = lines[0].split(" && ", 1)
    assert install == "pip install ." and lines[1] == "pip install '.[test]' && pytest"
    argv = shlex.split(job)
    assert argv[0] == "hlorun" and argv[1] == "compile"
    monkeypatch.chdir(REPO)
    r = CliRunner().invoke(cli, argv[1:])
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("HloModule ")
