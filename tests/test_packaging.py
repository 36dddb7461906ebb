"""The wheel works as a new user gets it: built, installed outside the
checkout, run from an empty directory (and zipped: run straight from the
.whl on PYTHONPATH, which only importlib.resources APIs survive)."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile

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
    from hlorun.parser import grammar_bytes
    from hlorun.pipeline_loader import bundled_pipelines
    assert b"HloModule" in grammar_bytes() or b"module" in grammar_bytes()
    assert {"gpu-cuda", "gpu-rocm", "gpu-rocm-41481"} <= set(bundled_pipelines())


def _run(argv, cwd, env):
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    r = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
              "-q", "-w", str(out), str(REPO)], cwd=out, env=dict(os.environ))
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


def test_zipped_wheel_runs_from_outside_the_checkout(wheel, tmp_path):
    """PYTHONPATH=the .whl itself: resources are zip members, not files."""
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    assert {"hlorun/grammars/hlo.lark", "hlorun/pipelines/gpu-cuda.yaml"} <= names
    hlo = tmp_path / "model.hlo"
    hlo.write_text(S0.read_text())
    env = _clean_env(PYTHONPATH=str(wheel), XDG_CACHE_HOME=str(tmp_path / "cache"))
    _smoke([sys.executable, "-m", "hlorun"], env, tmp_path, hlo)
