"""Every command the README shows runs, exits as documented and prints the
lines the README shows.

Blocks, in README order, in one scratch directory (``testdata`` linked in,
``hlorun`` and ``python3`` on PATH run this checkout):

* the first ``sh`` block: the install line's hlorun command runs (exit 0,
  module on stdout); the test line is exactly the one .ci/run runs;
* ``console`` blocks: ``$ COMMAND   # exit N`` (default 0), then the lines it
  prints (stdout and stderr).  ``[...]`` stands for omitted lines; every
  other line must appear, in order; numbers with a decimal point (timings)
  and runs of spaces (column widths) may differ;
* ``python`` blocks run with this interpreter; other ``sh`` blocks run with
  bash and must exit 0.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from .conftest import REPO

README = REPO / "README.md"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```$", re.S | re.M)


def blocks() -> list[tuple[str, str]]:
    return BLOCK.findall(README.read_text())


def _pass_number(words: list[str], i: int) -> bool:
    """Pass numbering and pass counts, which move whenever a pipeline gains
    a pass: a leading row number, ``#26``, ``N passes``, ``N more passes``,
    ``lists all N``.  Everything else (instruction counts, names, messages)
    must match exactly."""
    w = words[i]
    if re.fullmatch(r"#\d+", w):
        return True
    if not w.isdigit():
        return False
    nxt = words[i + 1] if i + 1 < len(words) else ""
    prev = words[i - 1] if i else ""
    return i == 0 or nxt == "passes" or (nxt == "more" and "passes" in words[i + 2:i + 3]) \
        or prev == "all"


def _line_regex(line: str) -> re.Pattern:
    words = line.split()
    toks = []
    for i, tok in enumerate(words):
        if _pass_number(words, i):
            toks.append(r"#?\d+")
            continue
        parts = re.split(r"(\d+\.\d+)", tok)
        toks.append("".join(r"\d+(?:\.\d+)?" if i % 2 else re.escape(p)
                            for i, p in enumerate(parts)))
    return re.compile(r"\s*" + r"\s+".join(toks) + r"\s*")


def check_output(expected: list[str], actual: str) -> None:
    got = actual.splitlines()
    at = 0
    for want in expected:
        if want.strip() in ("[...]", ""):
            continue
        rx = _line_regex(want)
        for i in range(at, len(got)):
            if rx.fullmatch(got[i]):
                at = i + 1
                break
        else:
            raise AssertionError(f"README line not in the output (in order):\n  {want}\n"
                                 f"--- output ---\n{actual}")


def commands(text: str) -> list[tuple[str, int, list[str]]]:
    out: list[tuple[str, int, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("$ "):
            cmd = line[2:]
            m = re.search(r"\s+#\s*exit (\d+)\s*$", cmd)
            code = int(m.group(1)) if m else 0
            out.append((cmd[:m.start()] if m else cmd, code, []))
        else:
            assert out, f"output before any command: {line}"
            out[-1][2].append(line)
    return out


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    d = tmp_path_factory.mktemp("readme")
    (d / "testdata").symlink_to(REPO / "testdata")
    bin_dir = d / ".bin"
    bin_dir.mkdir()
    for name, argv in (("hlorun", f'"{sys.executable}" -m hlorun'),
                       ("python3", f'"{sys.executable}"'), ("python", f'"{sys.executable}"')):
        p = bin_dir / name
        p.write_text(f'#!/bin/sh\nexec {argv} "$@"\n')
        p.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "HLORUN_TRACEBACK"}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", PYTHONPATH=str(REPO),
               JAX_PLATFORMS="cpu")
    return d, env


def _bash(cmd: str, cwd, env) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


def test_readme_is_short_and_uses_repository_paths():
    text = README.read_text()
    assert len(text.encode()) <= 15_500, len(text.encode())
    code = "".join(b for _, b in blocks())
    assert not re.search(r"(^|[\s\"'(=])(\.\./)?shared/", code, re.M), "examples use testdata/"


def test_first_block_is_install_and_main_job_then_tests(scratch):
    d, env = scratch
    lang, text = blocks()[0]
    install, tests = text.splitlines()[:2]
    assert lang == "sh"
    assert tests == "pip install '.[test]' && pytest"
    assert tests in (REPO / ".ci" / "run").read_text()
    pip, job = install.split(" && ", 1)
    assert pip == "pip install ." and job.startswith("hlorun compile ")
    from hlorun.examples import names
    assert job.split()[2] in names(), "the main job runs a bundled example (works from any directory)"
    bare = d / "bare"   # no testdata here
    bare.mkdir(exist_ok=True)
    r = _bash(job, bare, env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("HloModule "), r.stdout[:200]
    assert re.search(r"^ok: \d+ passes run", r.stderr, re.M), r.stderr


def _later_blocks():
    return [(i, lang, text) for i, (lang, text) in enumerate(blocks()) if i > 0]


@pytest.mark.parametrize("index,lang,text", _later_blocks(),
                         ids=[f"block{i}-{lang}" for i, lang, _ in _later_blocks()])
def test_readme_block(scratch, index, lang, text):
    d, env = scratch
    if lang == "console":
        for cmd, code, expected in commands(text):
            assert cmd.startswith("hlorun "), cmd
            r = _bash(cmd, d, env)
            assert r.returncode == code, f"{cmd}: exit {r.returncode}\n{r.stderr}"
            assert "Traceback" not in r.stderr
            check_output(expected, r.stderr + r.stdout)
    elif lang == "python":
        r = subprocess.run([sys.executable, "-c", text], cwd=d, env=env, capture_output=True,
                           text=True, timeout=600)
        assert r.returncode == 0, r.stderr
    elif lang == "sh":
        r = _bash(text, d, env)
        assert r.returncode == 0, r.stdout + r.stderr
    else:
        pytest.fail(f"README block {index}: unknown language {lang}")


def test_check_output_catches_drift():
    """The matcher must fail on a changed line, a changed integer and a
    wrong order (a README test that cannot fail checks nothing)."""
    out = "a 1 b\nrow  12 -> 13  0.2 ms\nok: 3 passes run, 0.05 s\n"
    check_output(["row 12 -> 13 9.9 ms", "[...]", "ok: 3 passes run, 1.50 s"], out)
    check_output(["ok: 7 passes run, 0.05 s"], out)  # pass counts move with the pipelines
    for bad in (["row 12 -> 14 0.2 ms"], ["a 2 b"], ["ok: 3 passes run, 0.05 s", "a 1 b"]):
        with pytest.raises(AssertionError):
            check_output(bad, out)


def test_inline_commands_in_the_prose_run(scratch):
    """Inline `hlorun ...` spans that are complete commands (no placeholder
    like DIR or COMMAND, no /tmp path of the reader's own run) exit 0; bare
    command names must be real commands."""
    from hlorun.cli import COMMANDS
    d, env = scratch
    prose = BLOCK.sub("", README.read_text())
    spans = sorted(set(re.findall(r"`(hlorun(?: [^`]*)?)`", prose)))
    assert spans
    ran = 0
    for span in spans:
        words = span.split()[1:]
        if len(words) == 1 and not words[0].startswith("-"):
            assert words[0] in COMMANDS, span
            continue
        if any(re.fullmatch(r"[A-Z_]{2,}", w) for w in words) or "/tmp/" in span:
            continue
        r = _bash(span, d, env)
        assert r.returncode == 0, f"{span}: exit {r.returncode}\n{r.stderr}"
        ran += 1
    assert ran >= 2
