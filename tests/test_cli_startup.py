"""``hlorun --help`` starts fast: the CLI imports click and its own small
modules only (no lark, numpy, rich, ml_dtypes, yaml), and one run costs
well under 0.3 s of CPU."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

from .conftest import REPO

HEAVY = ("lark", "numpy", "rich", "ml_dtypes", "yaml", "jax", "jaxlib")

PROBE = """
import sys
from hlorun.cli import main
try:
    main(["--help"])
except SystemExit as e:
    assert e.code in (0, None), e.code
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(%r))
print("HEAVY=" + ",".join(heavy))
""" % (HEAVY,)


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def test_help_imports_no_heavy_module():
    r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                       env=_env(), cwd=REPO, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "Commands:" in r.stdout and "check" in r.stdout
    assert r.stdout.strip().endswith("HEAVY="), r.stdout.splitlines()[-1]


def _cpu_seconds(args: list[str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run(args, capture_output=True, env=_env(), cwd=REPO, timeout=60)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert r.returncode == 0, r.stderr
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def test_help_takes_under_0_3_seconds():
    """CPU time of the whole ``python -m hlorun --help`` process (the
    interpreter's own start included), best of 5: wall time on a loaded CI
    machine would measure the machine, not the command."""
    best = min(_cpu_seconds([sys.executable, "-m", "hlorun", "--help"]) for _ in range(5))
    assert best < 0.3, f"hlorun --help took {best:.3f} s of CPU"
