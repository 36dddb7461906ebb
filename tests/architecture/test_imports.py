"""The package's architecture, enforced: only the API at the top of
``hlorun/``, no import cycles anywhere (lazy imports included), and no
library module imports the command line (``hlorun.cli``)."""

from __future__ import annotations

import textwrap

from .imports import PACKAGE, cycles, graph, longest_chain, modules


def _describe(comp: list[str], g) -> str:
    members = set(comp)
    lines = []
    for v in comp:
        for w, line in sorted(g[v].items()):
            if w in members:
                lines.append(f"{modules()[v].relative_to(PACKAGE.parent)}:{line}: {v} -> {w}")
    return "\n".join(lines)


#: the only modules at the top of the package: the public API (docs/ARCHITECTURE.md)
API_MODULES = {"__init__", "__main__", "api", "errors", "options", "result"}


def test_top_level_holds_only_the_api_and_packages():
    loose = sorted(p.name for p in PACKAGE.glob("*.py") if p.stem not in API_MODULES)
    assert not loose, (f"modules at the top of hlorun/: {loose}; put them in the package of "
                       f"their concern (docs/ARCHITECTURE.md)")


def test_no_import_cycles():
    g = graph()
    found = cycles(g)
    assert not found, "import cycles:\n" + "\n\n".join(_describe(c, g) for c in found)


def test_library_never_imports_the_cli():
    g = graph()
    bad = [f"{v} -> {w} (line {line})" for v, deps in g.items() for w, line in deps.items()
           if (w == "hlorun.cli" or w.startswith("hlorun.cli."))
           and not (v.startswith("hlorun.cli") or v == "hlorun.__main__")]
    assert not bad, "library modules importing hlorun.cli:\n" + "\n".join(bad)


def test_the_checker_finds_cycles_and_cli_imports(tmp_path):
    """The walk itself: a planted cycle (also through a lazy import and a
    relative package import) and a library->cli import are found."""
    pkg = tmp_path / "hlorun"
    (pkg / "cli").mkdir(parents=True)
    (pkg / "sub").mkdir()
    files = {
        "__init__.py": "",
        "a.py": "from .b import x\n",
        "b.py": "def f():\n    from . import a\n",
        "cli/__init__.py": "",
        "lib.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import c\n"
                  "from .cli import main\n",
        "c.py": "from . import lib\n",
        "sub/__init__.py": "from .m import y\n",
        "sub/m.py": "from . import n\n",
        "sub/n.py": "from .. import sub\n",
    }
    for name, text in files.items():
        (pkg / name).write_text(textwrap.dedent(text))
    g = graph(pkg)
    assert sorted(cycles(g)) == [["hlorun.a", "hlorun.b"],
                                 ["hlorun.sub", "hlorun.sub.m", "hlorun.sub.n"]]
    assert "hlorun.cli" in g["hlorun.lib"] and "hlorun.c" not in g["hlorun.lib"]
    assert longest_chain({"x": {"y": 1}, "y": {"z": 1}, "z": {}}) == ["x", "y", "z"]
