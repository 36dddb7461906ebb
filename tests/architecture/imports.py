"""The import graph of the ``hlorun`` package, from its source (an AST walk,
nothing is imported): module -> the hlorun modules it imports, at module
level or inside functions (a lazy import is still a dependency), except
under ``if TYPE_CHECKING:``.  ``from . import x`` depends on the submodule
``x``, not on the package's ``__init__``."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "hlorun"


def modules(root: Path = PACKAGE) -> dict[str, Path]:
    out = {}
    for p in sorted(root.rglob("*.py")):
        parts = p.relative_to(root.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def _typing_only(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test):
            skip.update(id(x) for b in n.body for x in ast.walk(b))
    return skip


def _targets(name: str, is_pkg: bool, node: ast.AST, known: dict[str, Path]) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name in known]
    assert isinstance(node, ast.ImportFrom)
    if node.level:
        base = name.split(".") if is_pkg else name.split(".")[:-1]
        base = base[:len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    subs = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in known]
    out = list(subs)
    if len(subs) < len(node.names) and target in known:
        out.append(target)
    return out


@functools.lru_cache(maxsize=None)
def graph(root: Path = PACKAGE) -> dict[str, dict[str, int]]:
    """module -> {imported module: line of the first such import}."""
    known = modules(root)
    out: dict[str, dict[str, int]] = {}
    for name, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        skip = _typing_only(tree)
        deps: dict[str, int] = {}
        for n in ast.walk(tree):
            if isinstance(n, (ast.Import, ast.ImportFrom)) and id(n) not in skip:
                for t in _targets(name, path.name == "__init__.py", n, known):
                    if t != name:
                        deps.setdefault(t, n.lineno)
        out[name] = deps
    return out


def cycles(g: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components with more than one module
    (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for start in g:
        if start in index:
            continue
        work = [(start, iter(g[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(g[w])))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def longest_chain(g: dict[str, dict[str, int]]) -> list[str]:
    """The longest import chain (the graph must be acyclic)."""
    memo: dict[str, list[str]] = {}

    def walk(v: str) -> list[str]:
        got = memo.get(v)
        if got is None:
            best: list[str] = []
            for w in g[v]:
                c = walk(w)
                if len(c) > len(best):
                    best = c
            got = memo[v] = [v] + best
        return got
    import sys
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 10 * len(g) + 100))
    try:
        return max((walk(v) for v in g), key=len, default=[])
    finally:
        sys.setrecursionlimit(old)
