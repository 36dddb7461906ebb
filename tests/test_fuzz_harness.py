"""The fuzz harness's hang verdict (bench/fuzz.py) is taken in CPU time, so
that a loaded machine does not make slow-but-finite cases "hang": a case
that waits is not a hang, one that computes past the limit is, in Python
(SIGPROF) or stuck in C (RLIMIT_CPU kill), and a silent worker is still
killed by the wall-clock safety limit."""

from __future__ import annotations

import hashlib
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

import fuzz  # noqa: E402


def _campaign(monkeypatch, check, n=2, timeout=0.5, wall_timeout=60.0):
    monkeypatch.setattr(fuzz, "load_seeds", lambda max_kb=48: [("s.hlo", "HloModule m\n")])
    monkeypatch.setattr(fuzz, "check_case", check)  # the forked workers inherit it
    return fuzz.run_campaign(n, None, 0, 1, timeout, "", 48, 0, progress=False,
                             wall_timeout=wall_timeout)


def test_waiting_is_not_a_hang(monkeypatch):
    def sleepy(text, passes):
        time.sleep(1.2)  # wall time, no CPU: what a loaded machine looks like to a case
        return "parse_error", ""
    r = _campaign(monkeypatch, sleepy)
    assert r["hangs"] == 0 and r["counts"] == {"parse_error": 2}
    assert r["slowest_wall_s"] >= 1.2 and r["slowest_case_s"] < 0.5
    assert r["timeout_clock"] == "cpu"


def test_computing_past_the_cpu_limit_is_a_hang(monkeypatch):
    def busy(text, passes):
        while True:
            pass
    t = time.perf_counter()
    r = _campaign(monkeypatch, busy)
    assert r["hangs"] == 2 and r["unexpected"] == 0
    assert time.perf_counter() - t < 30


def test_a_case_stuck_in_c_is_killed_by_rlimit_cpu(monkeypatch):
    def in_c(text, passes):  # OpenSSL's loop never returns to Python's signal handler
        hashlib.pbkdf2_hmac("sha256", b"x", b"y", 2_000_000_000)
        return "parse_error", ""
    t = time.perf_counter()
    r = _campaign(monkeypatch, in_c, n=1, timeout=0.3)
    assert time.perf_counter() - t < 30
    assert r["hangs"] == 1, r
    assert any("RLIMIT_CPU" in sig for sig in r["failures"]), r["failures"]


def test_a_silent_worker_is_killed_at_the_wall_clock_limit(monkeypatch):
    def blocked(text, passes):
        time.sleep(60)
        return "parse_error", ""
    t = time.perf_counter()
    r = _campaign(monkeypatch, blocked, n=1, wall_timeout=2.0)
    assert r["hangs"] == 1 and any("wall-clock" in sig for sig in r["failures"])
    assert time.perf_counter() - t < 20


@pytest.mark.parametrize("flag", ["--timeout", "--wall-timeout"])
def test_hang_limits_are_documented_in_the_help(flag, capsys):
    with pytest.raises(SystemExit):
        fuzz.main(["--help"])
    out = capsys.readouterr().out
    assert flag in out and "CPU" in out
