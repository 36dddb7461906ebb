"""``hlorun sweep`` and ``hlorun check -j``: many modules on Dask.

The fixture directory testdata/sweep/modules holds a module of every
status, under the S0 pipeline (gpu-rocm-41481 with triton-gemm-rewriter
off: the GQA dot's consumer violates reshape-is-bitcast after
cublas-gemm-rewriter) with tests/sweep_plugin.py's hook in front (modules
named crash_*, hang_*, kill_worker_*, fail_* crash the task process, hang,
kill their Dask worker, raise a PassError), plus a module that does not
parse, compressed modules and an XLA dump directory.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from hlorun.cli import cli
from hlorun.passes import REGISTRY
from hlorun.sweep.inputs import discover
from hlorun.sweep.results import read_records

from .conftest import REPO, TESTDATA

pytest.importorskip("distributed")

FIXTURES = TESTDATA / "sweep" / "modules"
PIPELINE = TESTDATA / "sweep" / "pipeline.yaml"
S0_FLAGS = ["-p", str(PIPELINE), "--disable-passes", "triton-gemm-rewriter",
            "--plugin", "tests.sweep_plugin"]


@pytest.fixture(autouse=True)
def _hook_registered(monkeypatch):
    """The plugin registers its pass when imported; undo that afterwards."""
    monkeypatch.setitem(REGISTRY, "sweep-test-hook", "tests.sweep_plugin:SweepTestHook")


def sweep(*args, out: Path):
    r = CliRunner().invoke(cli, ["sweep", *[str(a) for a in args], "-o", str(out),
                                 "--format", "json", "--no-progress"])
    doc = json.loads(r.stdout) if r.stdout.strip().startswith("{") else None
    return r, doc


def records(path: Path) -> dict[str, dict]:
    header, recs, _ = read_records(str(path))
    assert header is not None and header["schema"] == "hlorun.sweep/1"
    return {Path(r["path"]).name: r for r in recs}


# -- inputs ------------------------------------------------------------------------------

def test_inputs_recursive_compressed_and_dump_directories(tmp_path):
    names = [Path(p).name for p in discover([str(FIXTURES)])]
    assert "ok_add.hlo.xz" in names and "ok_dot.hlo.gz" in names
    # the dump directory gives its module's before_optimizations file only
    assert "module_2651.jit_f.before_optimizations.txt" in names
    assert not any("after_optimizations" in n for n in names)
    assert "README.md" not in names
    assert len(names) == len(set(names)) == 11
    # an explicit file is taken whatever its name; a directory twice counts once
    (tmp_path / "model.pb.txt.bak").write_text("HloModule m\n")
    again = discover([str(FIXTURES), str(FIXTURES / "ok_dot_general.hlo"),
                      str(tmp_path / "model.pb.txt.bak")])
    assert len(again) == 12


def test_missing_input_is_a_usage_error(tmp_path):
    r, _ = sweep(tmp_path / "nope", out=tmp_path / "r.jsonl")
    assert r.exit_code == 1 and "no such file or directory" in r.stderr


# -- every status ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def every_status(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "results.jsonl"
    REGISTRY.setdefault("sweep-test-hook", "tests.sweep_plugin:SweepTestHook")
    try:
        r, doc = sweep(FIXTURES, *S0_FLAGS, "-j", "2", "--time-limit", "10", out=out)
    finally:
        REGISTRY.pop("sweep-test-hook", None)
    return r, doc, out


def test_sweep_reports_a_module_of_every_status(every_status):
    r, doc, out = every_status
    assert r.exit_code == 2, r.output
    assert doc["counts"] == {"ok": 4, "violation": 1, "pass-failure": 2, "bad-input": 1,
                             "timeout": 1, "crashed": 2}
    recs = records(out)
    assert len(recs) == 11 and doc["modules"] == doc["ran"] == 11
    assert {n: r["status"] for n, r in recs.items()} == {
        "ok_dot_general.hlo": "ok", "ok_add.hlo.xz": "ok", "ok_dot.hlo.gz": "ok",
        "module_2651.jit_f.before_optimizations.txt": "ok",
        "violation_dot_general_consumer.hlo": "violation",
        "fail_mean_axis.hlo": "pass-failure", "fail_sum_axis.hlo": "pass-failure",
        "bad_input_dot_general.hlo": "bad-input", "hang_dot.hlo": "timeout",
        "crash_layer_norm.hlo": "crashed", "kill_worker_dot.hlo": "crashed"}
    # the S0 violation, named by rule and by the pass after which it appeared
    (v,) = recs["violation_dot_general_consumer.hlo"]["violations"]
    assert v["rule"] == "reshape-is-bitcast"
    assert v["after_pass"] == "hlo_normalization/cublas-gemm-rewriter"
    assert recs["violation_dot_general_consumer.hlo"]["exit_code"] == 2
    # ok modules: kernels by kind, the autotuner's decisions, time and memory
    ok = recs["ok_dot_general.hlo"]
    assert ok["exit_code"] == 0
    # triton-gemm-rewriter off: the GEMM is a BLAS call, picked by the autotuner
    assert ok["kernels"]["custom-call:__cublas$lt$matmul"] == 1
    assert ok["autotune"]["gemms"] == 1 and ok["autotune"]["rejected"] >= 0
    assert ok["seconds"] > 0 and ok["peak_rss_mb"] > 10 and ok["worker"].startswith("tcp://")
    dump = recs["module_2651.jit_f.before_optimizations.txt"]
    assert dump["module"] == "jit_f" and dump["autotune"]["gemms"] >= 1
    assert sum(dump["autotune"]["backends"].values()) == dump["autotune"]["gemms"]
    # bad input: the located parse error
    bad = recs["bad_input_dot_general.hlo"]
    assert bad["exit_code"] == 1 and "args_1_.9" in bad["error"] and bad["line"] == 6
    # totals over the modules
    t = doc["totals"]
    assert t["autotune"]["gemms"] == sum((r.get("autotune") or {}).get("gemms", 0)
                                         for r in recs.values()) >= 2
    assert t["kernels"]["custom-call:__cublas$lt$matmul"] >= 2


def test_timeout_and_crashes_lose_only_their_module(every_status):
    _, doc, out = every_status
    recs = records(out)
    hang = recs["hang_dot.hlo"]
    assert hang["error"] == "over the time limit of 10 s" and hang["seconds"] >= 10
    crash = recs["crash_layer_norm.hlo"]
    assert "task process exited with code 70" in crash["error"]
    assert "simulated native crash" in crash["error"]  # the task process's stderr
    killed = recs["kill_worker_dot.hlo"]
    assert killed["error"].startswith("KilledWorker:") and "tcp://127.0.0.1:" in killed["error"]
    # every other module finished normally (the ok ones among them)
    assert sum(1 for r in recs.values() if r["status"] == "ok") == 4


def test_identical_failures_are_grouped_with_the_next_command(every_status):
    _, doc, _ = every_status
    groups = {(g["status"], g["count"]): g for g in doc["failures"]}
    g = groups[("pass-failure", 2)]
    assert g["key"][1:] == ["sweep-test/sweep-test-hook", "PassError",
                            g["key"][3]] and g["key"][3].startswith("sweep_plugin.py:")
    assert sorted(Path(m).name for m in g["modules"]) == ["fail_mean_axis.hlo",
                                                          "fail_sum_axis.hlo"]
    assert g["next"].startswith("hlorun reduce --until pass-fails:sweep-test-hook -- compile ")
    assert "--disable-passes triton-gemm-rewriter" in g["next"]
    v = groups[("violation", 1)]
    assert v["next"].startswith("hlorun reduce --until violation:reshape-is-bitcast -- compile ")
    assert v["next"].endswith("--disable-passes triton-gemm-rewriter")
    assert str(PIPELINE) in v["next"]
    # the two crashes differ (a dead task process, a dead worker): two groups
    assert sorted(g["count"] for g in doc["failures"] if g["status"] == "crashed") == [1, 1]
    assert doc["slowest"][0]["path"].endswith("hang_dot.hlo")


def test_small_modules_share_a_task_and_a_killed_worker_costs_one(tmp_path):
    from hlorun.sweep.run import batches
    src = (FIXTURES / "ok_dot_general.hlo").read_text()
    for i in range(23):
        (tmp_path / f"m{i:02d}.hlo").write_text(src.replace("jit_dot_general", f"m{i:02d}"))
    (tmp_path / "m11_kill.hlo").write_text((FIXTURES / "kill_worker_dot.hlo").read_text())
    files = discover([str(tmp_path)])
    groups = batches(files, threads=1)
    assert [len(b) for b in groups] == [6, 6, 6, 6]  # 4 tasks per worker thread at least
    assert sorted(f for b in groups for f in b) == sorted(files)
    # the biggest modules go first, alone: they set the sweep's tail
    big = str(FIXTURES / "crash_layer_norm.hlo")
    assert batches([*files, big], threads=1)[0][0] == big
    # one task would carry the module that kills its worker: that batch is
    # run again module by module, and only that module is lost
    out = tmp_path / "r.jsonl"
    r, doc = sweep(tmp_path, *S0_FLAGS, "-j", "1", out=out)
    assert doc["counts"] == {"ok": 23, "crashed": 1}, r.output
    (g,) = doc["failures"]
    assert g["modules"] == [str(tmp_path / "m11_kill.hlo")]


def test_memory_limit_kills_the_task_process_only(tmp_path):
    # a task process alone (Python, hlorun, the pipeline) is resident ~50 MiB
    out = tmp_path / "r.jsonl"
    r, doc = sweep(FIXTURES / "ok_dot_general.hlo", "--memory-limit", "20", "-j", "1", out=out)
    assert r.exit_code == 2 and doc["counts"] == {"crashed": 1}, r.output
    (rec,) = records(out).values()
    assert rec["error"].startswith("over the memory limit of 20 MiB (resident ")
    # with room, the same module compiles, and its peak is recorded
    r, doc = sweep(FIXTURES / "ok_dot_general.hlo", "--memory-limit", "4000", "-j", "1",
                   "--restart", out=out)
    assert doc["counts"] == {"ok": 1}
    (rec,) = records(out).values()
    assert 20 < rec["peak_rss_mb"] < 4000


@pytest.fixture
def terminal(monkeypatch):
    """hlorun.report.console's console as a terminal writing into a buffer."""
    import io

    from rich.console import Console

    from hlorun.report import console as report
    buf = io.StringIO()
    monkeypatch.setattr(report, "_console", Console(file=buf, force_terminal=True, width=200,
                                                    markup=False, highlight=False))
    return buf


def test_summary_text_and_progress_counts(every_status, terminal):
    from hlorun.sweep import Progress, render_summary
    _, doc, out = every_status
    render_summary(doc, str(out), interrupted=False)
    text = terminal.getvalue()
    assert "2 x pass sweep-test/sweep-test-hook raised PassError at sweep_plugin.py:" in text
    assert "next: hlorun reduce --until pass-fails:sweep-test-hook -- compile " in text
    assert "1 x violation reshape-is-bitcast after hlo_normalization/cublas-gemm-rewriter" in text
    assert "4/11 modules ok" in text and f"results: {out}" in text
    assert "autotuned GEMMs: " in text and "final kernels: " in text
    terminal.truncate(0)
    p = Progress(enabled=True)
    from collections import Counter
    p.start(3, Counter({"ok": 1}), "1 workers")
    p.advance({"status": "crashed"})
    p.advance({"status": "ok"})
    p.close()
    text = terminal.getvalue()
    assert "resuming: 1 modules already in the results file (ok 1)" in text
    assert "3/3" in text and "ok 2  crashed 1" in text


def test_split_input_file_runs_each_module_of_a_file(tmp_path):
    parts = [(FIXTURES / n).read_text() for n in ("ok_dot_general.hlo",
                                                  "bad_input_dot_general.hlo",
                                                  "violation_dot_general_consumer.hlo")]
    many = tmp_path / "three.hlo"
    many.write_text("\n// -----\n".join(parts))
    starts = [1, 1 + parts[0].count("\n") + 2]
    starts.append(starts[1] + parts[1].count("\n") + 2)
    out = tmp_path / "r.jsonl"
    r, doc = sweep(many, "--split-input-file", *S0_FLAGS, "-j", "2", out=out)
    recs = {r["path"]: r for r in read_records(str(out))[1]}
    assert sorted(recs) == sorted(f"{many}:{n}" for n in starts), r.output
    assert [recs[f"{many}:{n}"]["status"] for n in starts] == ["ok", "bad-input", "violation"]
    # the parse error's line is the file's, not the chunk's
    assert recs[f"{many}:{starts[1]}"]["line"] == starts[1] + 5
    (v,) = [g for g in doc["failures"] if g["status"] == "violation"]
    assert v["next"].endswith(f"# the module at line {starts[2]} of the file (// ----- separated)")
    # check -j --split-input-file == check --split-input-file
    runner = CliRunner()
    seq = runner.invoke(cli, ["check", "--split-input-file", str(many), "--format", "json"])
    par = runner.invoke(cli, ["check", "-j", "2", "--split-input-file", str(many), "--format", "json"])
    assert seq.exit_code == par.exit_code == 1
    assert json.loads(par.stdout) == json.loads(seq.stdout)


# -- resume and Ctrl-C -------------------------------------------------------------------

def test_resume_skips_done_modules_and_drops_a_cut_line(tmp_path):
    out = tmp_path / "r.jsonl"
    files = [FIXTURES / n for n in ("ok_dot_general.hlo", "fail_mean_axis.hlo",
                                    "bad_input_dot_general.hlo")]
    r, doc = sweep(*files[:2], *S0_FLAGS, "-j", "1", out=out)
    assert r.exit_code == 2 and doc["ran"] == 2
    # a crash while writing the third record leaves half a line
    with open(out, "a") as f:
        f.write('{"path": "' + str(files[2]) + '", "sta')
    r, doc = sweep(*files, *S0_FLAGS, "-j", "1", out=out)
    assert r.exit_code == 2, r.output
    assert doc["ran"] == 1 and doc["modules"] == 3
    assert doc["counts"] == {"ok": 1, "pass-failure": 1, "bad-input": 1}
    lines = out.read_text().splitlines()
    assert len(lines) == 4 and all(json.loads(ln) for ln in lines)
    # nothing left: no cluster is started, the summary covers the file
    r, doc = sweep(*files, *S0_FLAGS, out=out)
    assert doc["ran"] == 0 and doc["modules"] == 3 and "nothing left to run" in r.stderr
    # --retry runs a status again; the newer record wins
    r, doc = sweep(*files, *S0_FLAGS, "-j", "1", "--retry", "bad-input", out=out)
    assert doc["ran"] == 1 and len(out.read_text().splitlines()) == 5
    # other options: refused, not mixed in
    r, _ = sweep(*files, out=out)
    assert r.exit_code == 1 and "other options" in r.stderr and "pipeline" in r.stderr
    # a file that is not a results file: refused, left alone
    other = tmp_path / "notes.jsonl"
    other.write_text("garbage\n{}\n")
    r, _ = sweep(*files, out=other)
    assert r.exit_code == 1 and "not a JSON line" in r.stderr
    assert other.read_text() == "garbage\n{}\n"
    # a results file under directories that do not exist yet
    r, doc = sweep(files[0], out=tmp_path / "new" / "dir" / "r.jsonl")
    assert r.exit_code == 0 and doc["counts"] == {"ok": 1}


def test_ctrl_c_leaves_a_valid_file_and_the_rerun_finishes(tmp_path):
    out = tmp_path / "r.jsonl"
    files = [str(FIXTURES / n) for n in ("ok_dot_general.hlo", "fail_mean_axis.hlo",
                                         "hang_dot.hlo", "fail_sum_axis.hlo")]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    cmd = [sys.executable, "-m", "hlorun", "sweep", *files, *S0_FLAGS, "-j", "1",
           "--time-limit", "60", "-o", str(out), "--no-progress"]
    p = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # wait for the modules before the hang
            if out.exists() and len(out.read_text().splitlines()) >= 3:
                break
            time.sleep(0.2)
        else:
            pytest.fail("the sweep wrote nothing")
        os.killpg(p.pid, signal.SIGINT)  # Ctrl-C: the whole process group
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130, err.decode()
    assert b"interrupted" in err
    header, recs, good = read_records(str(out))
    assert good == out.stat().st_size  # every line complete
    done = {Path(r["path"]).name for r in recs}
    assert len(done) >= 2 and "hang_dot.hlo" not in done
    assert not any(r["status"] == "crashed" for r in recs)  # Ctrl-C killed no task
    # the rerun does the rest (hang_dot now times out quickly)
    r, doc = sweep(*files, *S0_FLAGS, "-j", "1", "--time-limit", "3", out=out)
    assert doc["ran"] == 4 - len(done)
    assert doc["counts"] == {"ok": 1, "pass-failure": 2, "timeout": 1}


# -- --against (S3) ----------------------------------------------------------------------

def test_against_finds_the_s3_divergence_and_the_kernel_diff(tmp_path):
    s3 = TESTDATA / "s3"
    out = tmp_path / "r.jsonl"
    r, doc = sweep(s3 / "fp8_matmul_scaled.hlo", s3 / "fp8_vector_scale.hlo", "-p", s3 / "xla-new.yaml",
                   "--against", s3 / "xla-old.yaml", "-j", "2", out=out)
    assert r.exit_code == 0, r.output
    recs = records(out)
    a = recs["fp8_matmul_scaled.hlo"]["against"]
    # side a is --against (the old version), side b --pipeline (the new one):
    # the new version's Triton GEMM fusion comes first (as diff-pipelines --a old --b new)
    assert a["found"] and a["pipelines"] == ["s3-xla-old", "s3-xla-new"]
    assert a["kind"] == "only-b" and a["step_b"]["path"] == "hlo_normalization/triton-gemm-rewriter"
    assert a["moved"]["path"] == "hlo_normalization/triton-gemm-rewriter"
    assert a["status"] == ["ok", "ok"]
    cats = {c["category"]: (c["a"], c["b"]) for c in a["kernels"]["categories"]}
    assert cats["custom-call:__cublas$lt$matmul$f8"] == (1, 0)
    assert cats["gemm-fusion"] == (0, 1)
    assert not a["kernels"]["same"]
    assert [k["category"] for k in a["kernels"]["only_a"]].count(
        "custom-call:__cublas$lt$matmul$f8") == 1
    # the record's own status and kernels are the --pipeline's (the new version)
    assert recs["fp8_matmul_scaled.hlo"]["kernels"].get("gemm-fusion") == 1
    # vector scales match the FP8 pattern in neither version: the passes
    # part ways at the same step, the final kernels are the same
    g = recs["fp8_vector_scale.hlo"]["against"]
    assert g["found"] and g["kernels"]["same"]
    assert doc["kernels_differ"] == 1
    (d,) = doc["divergences"]  # both modules diverge at the same step: one group
    assert "triton-gemm-rewriter runs only in s3-xla-new" in d["first_difference"]
    assert d["count"] == 2


# -- an existing cluster (--scheduler) ---------------------------------------------------

def _start(args, env, log):
    return subprocess.Popen([sys.executable, "-m", "dask", *args], cwd=REPO, env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def test_scheduler_address_runs_on_an_existing_cluster(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    sched_file = tmp_path / "scheduler.json"
    procs = []
    log = open(tmp_path / "dask.log", "wb")
    try:
        procs.append(_start(["scheduler", "--host", "127.0.0.1", "--port", "0",
                             "--no-dashboard", "--scheduler-file", str(sched_file)], env, log))
        deadline = time.monotonic() + 90
        while not sched_file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert sched_file.exists(), (tmp_path / "dask.log").read_text()
        address = json.loads(sched_file.read_text())["address"]
        assert address.startswith("tcp://127.0.0.1:")
        procs.append(_start(["worker", address, "--nthreads", "1", "--nworkers", "2",
                             "--host", "127.0.0.1", "--no-dashboard"], env, log))
        out = tmp_path / "r.jsonl"
        files = [FIXTURES / n for n in ("ok_dot_general.hlo", "fail_mean_axis.hlo",
                                        "crash_layer_norm.hlo", "violation_dot_general_consumer.hlo")]
        r, doc = sweep(*files, *S0_FLAGS, "--scheduler", address, out=out)
        assert r.exit_code == 2, r.output
        assert doc["counts"] == {"ok": 1, "violation": 1, "pass-failure": 1, "crashed": 1}
        workers = {rec["worker"] for rec in records(out).values() if "worker" in rec}
        assert workers and all(w.startswith("tcp://127.0.0.1:") for w in workers)
        # --workers makes no sense with a cluster of its own
        r, _ = sweep(*files, "--scheduler", address, "-j", "2", out=tmp_path / "x.jsonl")
        assert r.exit_code == 1 and "exclude each other" in r.stderr
        # a worker without hlorun: refused before any module is lost to it
        # (hlorun may be installed in this environment, as in CI: a package
        # named hlorun that cannot be imported stands in for its absence)
        stub = tmp_path / "no-hlorun" / "hlorun"
        stub.mkdir(parents=True)
        (stub / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'hlorun'\")\n")
        bare = dict(env, PYTHONPATH=str(stub.parent))
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "dask", "worker", address, "--nthreads", "1", "--host",
             "127.0.0.1", "--no-dashboard"], cwd=tmp_path, env=bare, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True))
        from distributed import Client
        with Client(address, timeout=30) as c:
            c.wait_for_workers(3, timeout=90)
        r, _ = sweep(*files, *S0_FLAGS, "--scheduler", address, out=tmp_path / "y.jsonl")
        assert r.exit_code == 1, r.output
        assert "1 of 3 Dask workers do not have hlorun" in r.stderr
        assert "cannot import hlorun: ModuleNotFoundError" in r.stderr
    finally:
        for p in reversed(procs):
            os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        log.close()


def test_unreachable_scheduler_is_a_usage_error(tmp_path):
    r, _ = sweep(FIXTURES / "ok_dot_general.hlo", "--scheduler", "tcp://127.0.0.1:9",
                 out=tmp_path / "r.jsonl")
    assert r.exit_code == 1 and "cannot connect" in r.stderr


# -- check -j ----------------------------------------------------------------------------

def test_check_jobs_gives_what_check_gives(tmp_path):
    verifier = TESTDATA / "xla_verifier"
    files = [str(FIXTURES / n) for n in ("ok_dot_general.hlo", "bad_input_dot_general.hlo",
                                         "ok_dot.hlo.gz")]
    files += [str(verifier / "HloVerifierTest.AllReduceStartAndDoneWrongType.hlo"),
              str(verifier / "HloVerifierTest.AllGatherStartAndDone.hlo")]
    runner = CliRunner()
    seq = runner.invoke(cli, ["check", *files, "--format", "json"])
    par = runner.invoke(cli, ["check", "-j", "2", *files, "--format", "json"])
    assert seq.exit_code == par.exit_code == 1
    doc = json.loads(par.stdout)
    assert doc == json.loads(seq.stdout)
    assert [bool(r["diagnostics"]) for r in doc["results"]] == [False, False, False, True, False]
    text = runner.invoke(cli, ["check", "-j", "2", *files])
    assert "ok   " + files[0] in text.stderr and "FAIL " + files[1] in text.stderr
    assert "FAIL " + files[3] in text.stderr and "(hlo-verifier)" in text.stderr
    # only verifier findings: exit 2, as without -j
    par = runner.invoke(cli, ["check", "-j", "2", files[0], files[3]])
    assert par.exit_code == 2


@pytest.mark.slow
def test_check_jobs_on_the_whole_corpus_matches_sequential_check(shared, tmp_path):
    """Every corpus file, checked on two workers and one at a time: the
    same verdicts, parse errors and findings."""
    files = sorted(str(p) for p in (shared / "corpus" / "xla").rglob("*.hlo"))
    assert len(files) > 700
    runner = CliRunner()
    seq = runner.invoke(cli, ["check", *files, "--format", "json"])
    par = runner.invoke(cli, ["check", "-j", "2", *files, "--format", "json"])
    assert seq.exit_code == par.exit_code == 1
    assert json.loads(par.stdout) == json.loads(seq.stdout)


def test_missing_dask_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    r, _ = sweep(FIXTURES / "ok_dot_general.hlo", out=tmp_path / "r.jsonl")
    assert r.exit_code == 1 and "pip install 'hlorun[sweep]'" in r.stderr
    r = CliRunner().invoke(cli, ["check", "-j", "2", str(FIXTURES / "ok_dot_general.hlo")])
    assert r.exit_code == 1 and "hlorun[sweep]" in r.stderr
