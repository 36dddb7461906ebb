"""Regression tests for crashes found by fuzzing (bench/fuzz.py), the
hostile-size limits, and the fixed-seed CI slice of the fuzzer.

Each input is the minimized mutant (or the issue's reproducer).  The rule
they check: bad input gets the project's own located error, valid input
parses, prints, verifies and runs through passes, in time linear in its
size, and nothing raises RecursionError however deep shapes nest.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from hlorun.ir.shape import Shape
from hlorun.text.parser import parse_module
from hlorun.text.printer import print_module
from hlorun.errors import HloParseError
from hlorun.verifier.checkers import verify

from .conftest import REPO, shared_path

BASE = """HloModule m, entry_computation_layout={(f32[4]{0})->f32[4]{0}}

ENTRY %e (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %a = f32[4]{0} add(f32[4]{0} %p, f32[4]{0} %p)
}
"""


def _located(text: str) -> HloParseError:
    with pytest.raises(HloParseError) as ei:
        parse_module(text)
    e = ei.value
    assert e.line >= 1 and e.column >= 1, e
    return e


def _deep(d: int) -> str:
    return "(" * d + "f32[]" + ")" * d


def _deep_module(d: int) -> str:
    sh = _deep(d)
    return (f"HloModule m\n\nENTRY e {{\n  p = {sh} parameter(0)\n"
            f"  g = {_deep(d - 1)} get-tuple-element(p), index=0\n"
            f"  ROOT t = ({sh}, {_deep(d - 1)}) tuple(p, g)\n}}\n")


def test_bom_before_a_valid_module_is_whitespace():
    m = parse_module("\ufeff" + BASE)
    assert print_module(m) == print_module(parse_module(BASE))
    bad = "HloModule m\n\nENTRY e {\n  ROOT p = f32[4] parameter(0) junk\n}\n"
    e, plain = _located("\ufeff" + bad), _located(bad)
    assert (e.line, e.column) == (plain.line, plain.column) == (4, 32)


def test_output_to_operand_aliasing_with_empty_pair_is_a_located_error():
    text = ("HloModule m\n\nENTRY e {\n  p = f32[4] parameter(0)\n"
            "  ROOT a = f32[4] custom-call(p), custom_call_target=\"x\", "
            "output_to_operand_aliasing={{0}: ()}\n}\n")
    e = _located(text)
    assert e.line == 5 and "integer" in e.message


def test_huge_parameter_number_fails_fast_without_growing_a_list():
    t = time.perf_counter()
    e = _located(BASE.replace("parameter(0)", "parameter(4294967296)"))
    assert time.perf_counter() - t < 1.0
    assert e.line == 4 and "4294967296" in e.message


def test_single_instruction_with_missing_parameters_is_rejected():
    # fuzz case: a module truncated to one 'p2 = s32[8] parameter(2)' line
    # used to parse into a module that printed as unparsable text.
    e = _located("  p2 = s32[8] parameter(2)\n// RUN: hlo-opt %s --pa")
    assert "no parameter 0" in e.message


@pytest.mark.parametrize("depth", [500, 10_000])
def test_deep_tuple_nesting_parses_prints_and_verifies(depth):
    text = _deep_module(depth)
    m = parse_module(text)
    printed = print_module(m)
    assert print_module(parse_module(printed)) == printed  # layout header holds it too
    diags = verify(m)
    assert not [d for d in diags if "crashed" in d.message], diags[:1]
    assert diags == []


def test_deep_nesting_parse_time_is_linear():
    def best(d):
        text = _deep_module(d)
        ts = []
        for _ in range(3):
            t = time.perf_counter()
            parse_module(text)
            ts.append(time.perf_counter() - t)
        return min(ts)
    small, big = best(2_500), best(20_000)
    # 8x the depth: linear is ~8x; the quadratic parse was ~60x (0.4 s -> 6.1 s at 5k -> 20k)
    assert big < 20 * small + 0.05, (small, big)


def test_deep_shapes_intern_hash_format_without_recursion():
    s = Shape.array("f32", [2])
    for _ in range(50_000):
        s = Shape.tuple([s])
    t = Shape.array("f32", [2])
    for _ in range(50_000):
        t = Shape.tuple([t])
    assert s is t and hash(s) == hash(t)
    assert str(s).count("(") == 50_000
    assert len(s.leaves()) == 1 and s.leaves()[0][0] == (0,) * 50_000
    assert s.without_layout().has_layout is False and s.with_default_layout().has_layout


def test_deep_shape_in_a_short_pipeline_has_no_recursion_error():
    from hlorun.pipeline.run import RunOptions, run_pipeline
    from hlorun.pipeline.spec import pipeline_from_passes
    m = parse_module(_deep_module(3000))
    spec = pipeline_from_passes("call-inliner,algsimp,dce,cse,tuple-simplifier",
                                checkers=["hlo-verifier"])
    res = run_pipeline(m, spec, RunOptions())
    assert res.failure is None and res.violations == []


def test_hostile_sizes_get_clear_errors_or_parse_quickly():
    h = "HloModule m\n\nENTRY e {\n"
    # 2^40 elements: a valid shape (XLA allows it); nothing allocates it.
    m = parse_module(h + "  p = f32[1099511627776] parameter(0)\n"
                     "  ROOT a = f32[1099511627776] add(p, p)\n}\n")
    assert verify(m) == []
    # 10^6 operands: a clear located error.
    n = 10**6
    t = time.perf_counter()
    e = _located(h + "  p = f32[] parameter(0)\n  ROOT t = f32[] add(" + ", ".join(["p"] * n)
                 + ")\n}\n")
    assert "too many operands" in e.message and e.line == 5
    assert time.perf_counter() - t < 30  # ~3 s on an idle core
    # A 10 MB line: a dense constant parses in one vectorized sweep ...
    n = 2_500_000
    t = time.perf_counter()
    m = parse_module(h + f"  ROOT a = f32[{n}] constant({{" + ",".join(["1.5"] * n) + "})\n}\n")
    assert time.perf_counter() - t < 30
    # ... and one element too many is reported without tokenizing the rest.
    t = time.perf_counter()
    e = _located(h + "  ROOT a = f32[2] constant({" + ",".join(["1"] * n) + "})\n}\n")
    assert "sees more" in e.message and time.perf_counter() - t < 10


def test_fuzz_ci_slice_fixed_seed(tmp_path):
    """A bounded, fixed-seed slice of bench/fuzz.py: no unexpected exception,
    no hang, no print/parse round-trip failure."""
    shared_path("corpus")
    out = tmp_path / "fuzz.json"
    r = subprocess.run([sys.executable, str(REPO / "bench" / "fuzz.py"), "--seconds", "50",
                        "-n", "20000", "--seed", "19", "--json", str(out), "-q",
                        "--crash-dir", str(tmp_path / "crashes"), "--minimize-s", "5"],
                       capture_output=True, text=True, timeout=240)
    data = json.loads(out.read_text())
    assert data["cases"] >= 1000, r.stdout[-2000:]
    assert data["unexpected"] == 0 and data["hangs"] == 0 and data["roundtrip"] == 0, \
        r.stdout[-3000:]
    assert r.returncode == 0
    # the slice reaches every stage: parse errors, verifier findings, passes
    c = data["counts"]
    assert c.get("parse_error", 0) > 0 and c.get("pipeline_ok", 0) > 0


def test_tile_with_a_non_integer_is_a_located_error():
    # fuzz seed 19 case 861, minimized
    e = _located("t=f32[]{:T(])}a")
    assert "tile dimension" in e.message and (e.line, e.column) == (1, 3)


def test_malformed_metadata_is_rejected_at_parse_time():
    # fuzz seed 19 case 1941: odd unicode inside a metadata key parsed, then
    # call-inliner raised ValueError reading it
    text = BASE.replace("add(f32[4]{0} %p, f32[4]{0} %p)",
                        'add(f32[4]{0} %p, f32[4]{0} %p), metadata={op_name="x" '
                        'sta\ufeff\u202eck_frame_id=7}')
    e = _located(text)
    assert e.line == 5 and "metadata" in e.message


def test_two_dones_of_one_async_start_do_not_crash_the_verifier():
    # fuzz seed 2026 case 54293, minimized (the second done's shape was a
    # deep one-element tuple: program() indexed its second element)
    text = ("e{p0=f32[]parameter(0)async-start=((f32[]),f32[],u2[])custom-call-start(p0),"
            "custom_call_target=\"\"e=f32[]custom-call-done(async-start)"
            "e2=" + "(" * 40 + "f32[]" + ")" * 40 + "custom-call-done(async-start)}")
    diags = verify(parse_module(text))
    assert diags and not [d for d in diags if "crashed" in d.message]
