"""The reducer end to end: S0 hidden in a corpus transformer, each
condition kind, determinism, flakiness, budget, files on disk."""

from __future__ import annotations

import json
import shlex
import sys
import time

import pytest
from click.testing import CliRunner

from hlorun.cli import cli
from hlorun.text.fileio import read_text
from hlorun.text.parser import load_module
from hlorun.text.printer import print_module
from hlorun.cli.compile_options import compile_config
from hlorun.reduce import ReduceOptions, Reducer, parse_condition
from hlorun.errors import UsageError
from hlorun.testing.embed import embed

from ..conftest import TESTDATA, shared_path

LLAMA = ("corpus", "xla", "files", "xla__tools__benchmarks__hlo__hlo_llama31_70b_bf16_16x8.hlo")
ATTENTION = TESTDATA / "reduce" / "s0_attention_block.hlo"
S0 = TESTDATA / "s0" / "jit_dot_general_consumer.hlo"
#: gpu-rocm-41481's BLAS-rewriter path (XLA: --xla_gpu_enable_triton_gemm=false)
S0_PIPELINE = ["--pipeline", "gpu-rocm-41481", "--disable-passes", "triton-gemm-rewriter"]
#: gpu-rocm-41481 with GEMM fusion and the autotuner; BLAS forced for every GEMM
S0_FORCED_BLAS = ["--pipeline", str(TESTDATA / "reduce" / "s0_autotune_41481_blas.yaml")]
S0_AUTOTUNE = ["--pipeline", str(TESTDATA / "reduce" / "s0_autotune_41481.yaml")]


def reduce_file(path, condition, *flags, cmd=None, **opts):
    cfg = compile_config([str(path), *map(str, flags)])
    cond = parse_condition(condition, cmd)
    cond.prepare(cfg)
    try:
        return Reducer(read_text(path), str(path), cond, ReduceOptions(**opts)).run()
    finally:
        close = getattr(cond, "close", None)
        if close:
            close()


@pytest.fixture(scope="module")
def s0_in_llama(tmp_path_factory):
    """The S0 attention block embedded as one more output of a Llama 3.1 70B
    training step from XLA's benchmarks (1,875 instructions)."""
    host = load_module(shared_path(*LLAMA))
    m = embed(host, load_module(ATTENTION))
    p = tmp_path_factory.mktemp("s0") / "llama_s0.hlo"
    p.write_text(print_module(m))
    return p


@pytest.mark.parametrize("pipeline,culprit", [
    (S0_FORCED_BLAS, "autotuner"),        # the autotuner fissions to hipBLASLt
    (S0_PIPELINE, "cublas-gemm-rewriter"),  # no GEMM fusion: the BLAS rewriter
], ids=["forced-blas-autotuner", "gemm-rewriter"])
def test_s0_reduces_from_a_transformer_to_the_gqa_dot(s0_in_llama, tmp_path, capsys, pipeline, culprit):
    out = tmp_path / "small.hlo"
    t = time.perf_counter()
    res = reduce_file(s0_in_llama, "violation:reshape-is-bitcast", *pipeline, output=str(out))
    seconds = time.perf_counter() - t
    with capsys.disabled():
        print(f"\n[S0 reduce, {culprit}] {res.start_instructions} -> {res.end_instructions} "
              f"instructions, {res.start_bytes} -> {res.end_bytes} bytes, {res.tests} tests, "
              f"{seconds:.1f} s")
    assert res.start_instructions > 1900
    assert res.end_instructions <= 5
    assert not res.flaky and res.flaky_passes == 3
    assert res.signature == ("reshape-is-bitcast", culprit)
    small = load_module(out)
    ops = sorted(i.opcode for i in small.entry.instructions)
    assert ops.count("parameter") == 2 and "dot" in ops
    dot = next(i for i in small.entry.instructions if i.opcode == "dot")
    # still the grouped-query attention dot_general: two batch, two contracting dims
    assert dot.attrs["lhs_batch_dims"] == "{0,1}" and dot.attrs["rhs_contracting_dims"] == "{0,3}"
    # and it still crashes the historical pipeline, but not the fixed one
    r = CliRunner().invoke(cli, ["compile", str(out), *pipeline, "--diff", "none"])
    assert r.exit_code == 2 and "reshape-is-bitcast" in r.stderr
    r = CliRunner().invoke(cli, ["compile", str(out), "--pipeline", "gpu-rocm", "--diff", "none"])
    assert r.exit_code == 0


def test_backend_condition_reduces_while_the_autotuner_still_flips_to_blas():
    res = reduce_file(ATTENTION, "backend:gemm_fusion_dot=BLAS", *S0_AUTOTUNE)
    assert res.end_instructions <= 6
    assert "autotuner chose hipblaslt for gemm_fusion_dot" in res.final_detail
    assert " dot(" in res.text and not res.flaky


def test_reduction_is_deterministic():
    a = reduce_file(ATTENTION, "violation:reshape-is-bitcast", *S0_PIPELINE)
    b = reduce_file(ATTENTION, "violation:reshape-is-bitcast", *S0_PIPELINE)
    assert a.text == b.text and a.tests == b.tests
    assert a.end_instructions < a.start_instructions // 5


def test_pass_fails_condition_reduces_the_crash():
    res = reduce_file(ATTENTION, "pass-fails:layout_normalization", *S0_PIPELINE, "--keep-going")
    assert res.end_instructions <= 5
    assert res.signature == ("layout_normalization", "PassError")
    assert "RET_CHECK" in res.final_detail


def test_until_cmd_reduces_with_an_external_script(tmp_path):
    script = tmp_path / "has_exp.py"
    script.write_text("import sys\nt = open(sys.argv[1]).read()\n"
                      "sys.exit(0 if ' exponential(' in t and ' reduce(' in t else 1)\n")
    res = reduce_file(ATTENTION, None, cmd=f"{shlex.quote(sys.executable)} {script} {{}}")
    text = res.text
    assert " exponential(" in text and " reduce(" in text
    assert res.end_instructions <= 8, text


def test_flaky_condition_is_detected_not_looped_on(tmp_path):
    counter = tmp_path / "n"
    counter.write_text("0")
    # interesting on odd calls only: a coin the reducer must not trust
    script = tmp_path / "flaky.py"
    script.write_text(f"import sys\np = {str(counter)!r}\nn = int(open(p).read()) + 1\n"
                      "open(p, 'w').write(str(n))\nsys.exit(0 if n % 2 else 1)\n")
    res = reduce_file(S0, None, cmd=f"{shlex.quote(sys.executable)} {script}", flaky_runs=4)
    assert res.flaky and 0 < res.flaky_passes < 4
    calls = int(counter.read_text())
    assert calls == res.tests + 4  # every test ran once; nothing was retried in a loop


def test_timeout_keeps_the_best_so_far_on_disk(s0_in_llama, tmp_path):
    """A reduction that takes ~2.4 s on an idle machine (48 tests), stopped at 0.5 s."""
    out = tmp_path / "best.hlo"
    res = reduce_file(s0_in_llama, "violation:reshape-is-bitcast", *S0_PIPELINE,
                      output=str(out), timeout=0.5, flaky_runs=1)
    assert res.stopped == "timeout"
    assert read_text(out) == res.text  # the input is on disk from the start, then each best
    assert load_module(out).instruction_count == res.end_instructions <= res.start_instructions


def test_max_tests_bounds_the_work(s0_in_llama, tmp_path):
    out = tmp_path / "best.hlo"
    res = reduce_file(s0_in_llama, "violation:reshape-is-bitcast", *S0_PIPELINE,
                      output=str(out), max_tests=4, flaky_runs=1)
    assert res.stopped == "max-tests" and res.tests == 4  # the input, then 3 candidates
    assert read_text(out) == res.text
    assert load_module(out).instruction_count == res.end_instructions < res.start_instructions


def test_input_that_is_not_interesting_is_an_error():
    with pytest.raises(UsageError, match="not interesting"):
        reduce_file(S0, "violation:reshape-is-bitcast", "--pipeline", "gpu-rocm")


def test_cli_reduce_with_compile_argv_json_and_never_overwrites_input(tmp_path):
    out = tmp_path / "small.hlo"
    r = CliRunner().invoke(cli, ["reduce", "--until", "violation:reshape-is-bitcast", "-o", str(out),
                                 "--format", "json", "--no-progress", "--",
                                 "compile", "--pipeline", "gpu-rocm-41481", "--disable-passes",
                                 "triton-gemm-rewriter", str(S0)])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["end"]["instructions"] <= 4 and doc["start"]["instructions"] == 4
    assert doc["end"]["bytes"] < doc["start"]["bytes"]
    assert doc["flaky"]["flaky"] is False and doc["condition"] == "violation:reshape-is-bitcast"
    assert doc["command"].startswith("hlorun compile --pipeline gpu-rocm-41481 ")
    assert out.exists()
    r = CliRunner().invoke(cli, ["reduce", str(S0), "--until", "violation:reshape-is-bitcast",
                                 "-o", str(S0), "--", "compile", "--pipeline", "gpu-rocm-41481"])
    assert r.exit_code == 1 and "refusing to overwrite" in r.stderr
    r = CliRunner().invoke(cli, ["reduce", str(S0), "--until", "violation:reshape-is-bitcast",
                                 "-o", str(out), "--", "compile", "--pipeline", "no-such-pipe"])
    assert r.exit_code == 1 and "no-such-pipe" in r.stderr and "Traceback" not in r.output


def test_cli_text_output_shows_sizes_and_strategies(tmp_path):
    r = CliRunner().invoke(cli, ["reduce", str(ATTENTION), "--until", "violation:reshape-is-bitcast",
                                 "-o", str(tmp_path / "s.hlo"), "--strategies", "outputs,parameters",
                                 "--", "compile", "--pipeline", "gpu-rocm-41481",
                                 "--disable-passes", "triton-gemm-rewriter"])
    assert r.exit_code == 0, r.output
    assert "instructions" in r.stderr and "start" in r.stderr and "written:" in r.stderr
    r = CliRunner().invoke(cli, ["reduce", "--list-strategies"])
    assert r.exit_code == 0 and "dims-halve" in r.output and "rename" in r.output
