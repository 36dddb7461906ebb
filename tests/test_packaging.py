"""The wheel works as a new user gets it: built, installed outside the
checkout, run from an empty directory (and zipped: run straight from the
.whl on PYTHONPATH, which only importlib.resources APIs survive)."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from .conftest import REPO

#: S0 with its transposing consumer: compiles clean with the default pipeline,
#: reproduces the incident with the historical ROCm one and hipBLASLt.
S0 = REPO / "testdata" / "s0" / "jit_dot_general_consumer.hlo"


def test_every_source_directory_is_a_regular_package():
    """Zip imports (a zipped wheel) need __init__.py in every package."""
    missing = sorted(str(d.relative_to(REPO)) for d in (REPO / "hlorun").rglob("*")
                     if d.is_dir() and d.name != "__pycache__" and any(d.glob("*.py"))
                     and not (d / "__init__.py").exists())
    assert not missing, f"add __init__.py to {missing}"


def test_grammar_and_pipelines_are_package_resources():
    from hlorun.text.parser import grammar_bytes
    from hlorun.pipeline.loader import bundled_pipelines
    assert b"HloModule" in grammar_bytes() or b"module" in grammar_bytes()
    assert {"gpu-cuda", "gpu-rocm", "gpu-rocm-41481"} <= set(bundled_pipelines())


def _run(argv, cwd, env):
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """Built from a clean copy of the sources: setuptools packs whatever a
    checkout's build/lib holds, including modules deleted since."""
    import shutil
    src = tmp_path_factory.mktemp("src")
    shutil.copytree(REPO / "hlorun", src / "hlorun",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    out = tmp_path_factory.mktemp("wheel")
    r = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
              "-q", "-w", str(out), str(src)], cwd=out, env=dict(os.environ))
    assert r.returncode == 0, r.stdout + r.stderr
    (whl,) = out.glob("hlorun-*.whl")
    return whl


def _clean_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HLORUN_TRACEBACK")}
    env.update(extra)
    return env


def _smoke(python_argv, env, cwd, hlo):
    """`hlorun pipelines` lists the bundled pipelines; compile of a bundled
    example exits 0 (clean) or 2 (a violation), never 1 or a traceback."""
    r = _run(python_argv + ["pipelines"], cwd, env)
    assert r.returncode == 0, r.stderr
    listed = r.stdout + r.stderr
    for name in ("gpu-cuda", "gpu-rocm", "gpu-rocm-41481"):
        assert name in listed, listed
    r = _run(python_argv + ["compile", str(hlo), "--no-table", "--diff", "none"], cwd, env)
    assert r.returncode in (0, 2), r.stderr
    assert r.stdout.startswith("HloModule "), r.stdout[:200]
    assert "Traceback" not in r.stderr
    r = _run(python_argv + ["compile", str(hlo), "-p", "gpu-rocm-41481", "--force-backend",
                            "hipblaslt", "--no-table", "--diff", "none"], cwd, env)
    assert r.returncode == 2 and "reshape-is-bitcast" in r.stderr, r.stderr
    # the bundled examples, by name, from a directory that has no such file
    r = _run(python_argv + ["examples"], cwd, env)
    assert r.returncode == 0 and "jit_dot_general_consumer.hlo" in r.stdout + r.stderr, r.stderr
    r = _run(python_argv + ["compile", "s0", "--no-table", "--diff", "none"], cwd, env)
    assert r.returncode == 0 and r.stdout == _run(
        python_argv + ["compile", str(hlo), "--no-table", "--diff", "none"], cwd, env).stdout, r.stderr


def test_installed_wheel_runs_from_outside_the_checkout(wheel, tmp_path):
    site = tmp_path / "site"
    r = _run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site),
              str(wheel)], tmp_path, _clean_env())
    assert r.returncode == 0, r.stdout + r.stderr
    work = tmp_path / "empty"
    work.mkdir()
    hlo = work / "model.hlo"
    hlo.write_text(S0.read_text())
    env = _clean_env(PYTHONPATH=str(site))
    r = _run([sys.executable, "-c", "import hlorun; print(hlorun.__file__)"], work, env)
    assert r.stdout.startswith(str(site)), r.stdout + r.stderr
    script = site / "bin" / "hlorun"
    assert script.exists(), "the wheel declares the hlorun console script"
    _smoke([str(script)], env, work, hlo)
    # the README's first line, after `pip install .`: the installed console
    # script (its own directory first on sys.path, not the checkout) in an
    # empty directory outside the checkout (the example is bundled)
    import shlex
    first = (REPO / "README.md").read_text().split("```sh\n", 1)[1].splitlines()[0]
    job = shlex.split(first.split(" && ", 1)[1])
    assert job[0] == "hlorun"
    bare = tmp_path / "bare"
    bare.mkdir()
    r = _run([str(script)] + job[1:], bare, env)
    assert r.returncode == 0 and r.stdout.startswith("HloModule "), r.stderr


def test_zipped_wheel_runs_from_outside_the_checkout(wheel, tmp_path):
    """PYTHONPATH=the .whl itself: resources are zip members, not files."""
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    assert {"hlorun/grammars/hlo.lark", "hlorun/pipelines/gpu-cuda.yaml"} <= names
    sources = {str(p.relative_to(REPO)) for p in (REPO / "hlorun").rglob("*.py")
               if "__pycache__" not in p.parts}
    assert sources == {n for n in names if n.endswith(".py")}, "the wheel's modules differ from the checkout's"
    hlo = tmp_path / "model.hlo"
    hlo.write_text(S0.read_text())
    env = _clean_env(PYTHONPATH=str(wheel), XDG_CACHE_HOME=str(tmp_path / "cache"))
    _smoke([sys.executable, "-m", "hlorun"], env, tmp_path, hlo)
    # package data beyond pipelines and grammar: the autotuner's fitted cost
    # constants and measured noise must be the checkout's, not a fallback
    probe = ("from hlorun.autotune.cost import params_for; from hlorun.autotune import noise, neighbours; "
             "print(params_for('H100').source, bool(noise._table()), len(neighbours.table('H100')))")
    zipped = _run([sys.executable, "-c", probe], tmp_path, env)
    here = _run([sys.executable, "-c", probe], REPO, _clean_env(PYTHONPATH=str(REPO)))
    assert zipped.returncode == 0 and zipped.stdout == here.stdout, (zipped.stdout, here.stdout,
                                                                     zipped.stderr)


def test_editable_install_runs_from_outside_the_checkout(tmp_path):
    """pip install -e (PEP 660) into a fresh environment: resources are
    found through the editable finder, not the working directory."""
    venv = tmp_path / "venv"
    r = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path, _clean_env())
    assert r.returncode == 0, r.stderr
    py = venv / "bin" / "python"
    purelib = _run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                   tmp_path, _clean_env()).stdout.strip()
    site = _run([sys.executable, "-c", "import click, os; print(os.path.dirname(os.path.dirname("
                 "click.__file__)))"], tmp_path, _clean_env()).stdout.strip()
    # click, lark, ... from this environment, but not an hlorun installed there
    # (CI installs the wheel): it would shadow the editable finder
    deps = tmp_path / "deps"
    deps.mkdir()
    for entry in os.listdir(site):
        if not entry.startswith(("hlorun", "__editable__")) and not entry.endswith(".pth"):
            (deps / entry).symlink_to(Path(site) / entry)
    (Path(purelib) / "deps.pth").write_text(f"{deps}\n")
    r = _run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps",
              "--no-build-isolation", "-e", str(REPO)], tmp_path, _clean_env())
    assert r.returncode == 0, r.stdout + r.stderr
    work = tmp_path / "empty"
    work.mkdir()
    hlo = work / "model.hlo"
    hlo.write_text(S0.read_text())
    env = _clean_env()
    r = _run([str(py), "-c", "import hlorun; print(hlorun.__file__)"], work, env)
    assert r.stdout.startswith(str(REPO)), r.stdout + r.stderr
    _smoke([str(venv / "bin" / "hlorun")], env, work, hlo)
