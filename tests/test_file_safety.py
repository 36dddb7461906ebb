"""The user's files are safe: outputs that are not regular files are written
through (a FIFO or a device node stays what it was), inputs are never
overwritten, written files get umask permissions, unwritable locations and
corrupt archives are one-line errors, --dump-to never mixes two runs,
compressed inputs and stdin work, Ctrl-C leaves no partial output."""

from __future__ import annotations

import gzip
import lzma
import os
import signal
import stat
import subprocess
import sys
import threading
import time

import pytest

from .conftest import REPO, TESTDATA

S0 = TESTDATA / "s0" / "jit_dot_general.hlo"
BIG = TESTDATA / "transformer" / "jax_4layer_train_step.hlo.gz"


def hlorun(*args, cwd=None, input=None, timeout=300):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("HLORUN_TRACEBACK", None)
    return subprocess.run([sys.executable, "-m", "hlorun", *map(str, args)], cwd=cwd or REPO,
                          env=env, input=input, capture_output=True, text=True, timeout=timeout)


def _one_line_error(r, *needles):
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    for n in needles:
        assert n in r.stderr, r.stderr


# -- outputs that are not regular files --------------------------------------------
def test_output_onto_a_fifo_writes_through_and_keeps_the_fifo(tmp_path):
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()))
    reader.start()
    r = hlorun("fmt", S0, "-o", fifo)
    reader.join(timeout=60)
    assert r.returncode == 0, r.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode), "the FIFO was replaced"
    assert got and got[0].startswith(b"HloModule jit_dot_general")


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")
def test_output_onto_a_device_node_keeps_the_node(tmp_path):
    """A private char device (1,3 = null) in tmp: the same node type as
    /dev/null, which the old rename-over destroyed."""
    node = tmp_path / "null"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except OSError as e:  # a container without CAP_MKNOD
        pytest.skip(f"mknod: {e}")
    r = hlorun("opt", S0, "--passes", "dce", "-o", node)
    assert r.returncode == 0, r.stderr
    st = os.stat(node)
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)


def test_output_onto_dev_null_keeps_it_a_char_device():
    before = os.stat("/dev/null")
    if not stat.S_ISCHR(before.st_mode):
        pytest.skip("/dev/null on this machine is already not a device (an older hlorun replaced it)")
    r = hlorun("compile", S0, "--no-table", "--diff", "none", "-o", "/dev/null")
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev
    assert after.st_ino == before.st_ino and stat.S_IMODE(after.st_mode) == stat.S_IMODE(before.st_mode)
    assert r.returncode == 0, r.stderr


def test_dash_writes_stdout_and_reads_stdin():
    r = hlorun("fmt", "-", "-o", "-", input=S0.read_text())
    assert r.returncode == 0 and r.stdout.startswith("HloModule jit_dot_general"), r.stderr
    r = hlorun("compile", "-", "--no-table", "--diff", "none", "-o", "-", input=S0.read_text())
    assert r.returncode == 0 and r.stdout.startswith("HloModule "), r.stderr


# -- unwritable locations ----------------------------------------------------------
def test_unwritable_output_is_a_clear_error(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    r = hlorun("opt", S0, "--passes", "dce", "-o", blocker / "out.hlo")
    _one_line_error(r, "cannot", str(blocker))
    r = hlorun("fmt", S0, "-o", tmp_path)
    _one_line_error(r, "is a directory")


# -- inputs are never overwritten ----------------------------------------------------
@pytest.mark.parametrize("argv", [
    ("opt", "{in}", "--passes", "dce", "-o", "{out}"),
    ("fmt", "{in}", "-o", "{out}"),
    ("compile", "{in}", "--diff", "none", "-o", "{out}"),
    ("run", "{in}", "-o", "{out}"),
    ("compile", "{in}", "--diff", "none", "--html", "{out}"),
    ("compile", "{in}", "--diff", "none", "--bug-report", "{out}"),
])
@pytest.mark.parametrize("via_link", [False, True])
def test_no_command_overwrites_its_input(tmp_path, argv, via_link):
    src = tmp_path / "m.hlo"
    src.write_text(S0.read_text())
    out = src
    if via_link:
        out = tmp_path / "link.hlo"
        out.symlink_to(src)
    r = hlorun(*[a.format(**{"in": src, "out": out}) for a in argv])
    _one_line_error(r, "refusing to overwrite the input")
    assert src.read_text() == S0.read_text()


# -- permissions -------------------------------------------------------------------
def test_written_files_follow_the_umask(tmp_path):
    from hlorun.text.fileio import write_atomic
    old = os.umask(0o027)
    try:
        write_atomic(tmp_path / "new.txt", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "new.txt").st_mode) == 0o640
    kept = tmp_path / "kept.txt"
    kept.write_text("old")
    os.chmod(kept, 0o604)
    write_atomic(kept, "new")
    assert kept.read_text() == "new" and stat.S_IMODE(os.stat(kept).st_mode) == 0o604
    r = hlorun("fmt", S0, "-o", tmp_path / "cli.hlo")
    assert r.returncode == 0
    assert stat.S_IMODE(os.stat(tmp_path / "cli.hlo").st_mode) == 0o666 & ~old


def test_symlinked_output_stays_a_link(tmp_path):
    real = tmp_path / "real.hlo"
    real.write_text("old")
    link = tmp_path / "link.hlo"
    link.symlink_to(real)
    r = hlorun("fmt", S0, "-o", link)
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and real.read_text().startswith("HloModule jit_dot_general")


# -- --dump-to -------------------------------------------------------------------------
def test_dump_to_refuses_a_non_empty_directory_unless_asked(tmp_path):
    d = tmp_path / "dump"
    r = hlorun("compile", S0, "--no-table", "--diff", "none", "--dump-to", d, "-o", tmp_path / "o")
    assert r.returncode == 0, r.stderr
    first = sorted(os.listdir(d))
    assert any(n.endswith("before_optimizations.txt") for n in first)
    r = hlorun("compile", S0, "--no-table", "--diff", "none", "--dump-to", d, "-o", tmp_path / "o")
    _one_line_error(r, "--dump-to", "not empty", "--overwrite-dump")
    assert sorted(os.listdir(d)) == first
    r = hlorun("compile", S0, "--no-table", "--diff", "none", "--dump-to", d, "--overwrite-dump",
               "-o", tmp_path / "o")
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(d)) == first  # same names replaced, nothing mixed in
    (tmp_path / "f").write_text("x")
    _one_line_error(hlorun("compile", S0, "--dump-to", tmp_path / "f"), "is a file")


# -- compressed inputs ----------------------------------------------------------------
@pytest.mark.parametrize("suffix,compress", [(".gz", gzip.compress), (".xz", lzma.compress),
                                             ("", gzip.compress)])
def test_compressed_inputs_are_read_transparently(tmp_path, suffix, compress):
    """By magic bytes: a gzip file without .gz is read too."""
    p = tmp_path / ("m.hlo" + suffix)
    p.write_bytes(compress(S0.read_bytes()))
    r = hlorun("fmt", p)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("HloModule jit_dot_general")
    r = hlorun("compile", p, "--no-table", "--diff", "none")
    assert r.returncode == 0 and r.stdout.startswith("HloModule "), r.stderr


@pytest.mark.parametrize("name,data,needle", [
    ("trunc.hlo.gz", gzip.compress(b"HloModule m\n" * 1000)[:60], "corrupt gzip"),
    ("crc.hlo.gz", gzip.compress(b"HloModule m\n")[:-8] + b"\0" * 8, "corrupt gzip"),
    ("bad.hlo.gz", b"\x1f\x8b\x08\x00garbage-garbage", "corrupt gzip"),
    ("trunc.hlo.xz", lzma.compress(b"HloModule m\n" * 1000)[:40], "corrupt xz"),
    ("bad.hlo.xz", b"\xfd7zXZ\x00garbage-garbage-garbage", "corrupt xz"),
])
def test_corrupt_archives_are_one_line_errors(tmp_path, name, data, needle):
    p = tmp_path / name
    p.write_bytes(data)
    for argv in (("fmt", p), ("compile", p), ("check", p)):
        r = hlorun(*argv)
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
        assert needle in r.stderr and str(p) in r.stderr, r.stderr


# -- Ctrl-C ---------------------------------------------------------------------------
def test_ctrl_c_exits_130_with_one_line_and_no_partial_output(tmp_path):
    out = tmp_path / "out.hlo"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    # the 12-layer training step: its pipeline runs for many seconds, also on a fast idle machine
    big = TESTDATA / "xla-dumps" / "transformer_12l_bf16" / \
        "module_0000.jit_transformer_12l_bf16.before_optimizations.txt.gz"
    p = subprocess.Popen([sys.executable, "-m", "hlorun", "compile", str(big), "--diff", "none",
                          "-o", str(out)], cwd=tmp_path, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(3.0)  # imports done, the pipeline is running passes
    assert p.poll() is None, "the compile finished before the interrupt: use a bigger module"
    p.send_signal(signal.SIGINT)
    stdout, stderr = p.communicate(timeout=60)
    assert p.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1] == "hlorun: interrupted", stderr
    assert not out.exists()
    assert not [f for f in os.listdir(tmp_path) if f != "__pycache__"]  # no temp files either
