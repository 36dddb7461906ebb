"""The pipeline runner on real modules: events, fixed points, checkers,
violations attributed to the pass that introduced them, failures,
--check-changed, disable/enable selection, --pass-limit."""

from __future__ import annotations

from pathlib import Path

import pytest

from hlorun.text.parser import load_module
from hlorun.pipeline.run import Listener, RunOptions, run_pipeline
from hlorun.pipeline.loader import load_pipeline, parse_pipeline
from hlorun.errors import UsageError

from .conftest import shared_path
from .pipeline_testkit import testkit  # noqa: F401  (fixture)

CNN = ("xla-dumps", "cnn_fp16",
       "module_14585.jit_model.0011.simplification.after_reshape-mover.before_constant_folding.txt")


def cnn():
    return load_module(shared_path(*CNN))


def spec(text, name="t.yaml"):
    return parse_pipeline(text, name)


class Recorder(Listener):
    def __init__(self):
        self.log = []

    def on_run_start(self, run, module):
        self.log.append(("run-start",))

    def on_pipeline_start(self, ev, module):
        self.log.append(("pipeline-start", ev.name, ev.iteration, ev.first_name))

    def on_before_pass(self, ev, module):
        self.log.append(("before", ev.index, ev.path))

    def on_after_pass(self, ev, module):
        self.log.append(("after", ev.index, ev.path, ev.changed, ev.next_name))

    def on_pipeline_end(self, ev, module):
        self.log.append(("pipeline-end", ev.name, ev.changed, ev.next_name))

    def on_violation(self, v, module):
        self.log.append(("violation", v.rule, v.after_pass))

    def on_pass_failure(self, f, module):
        self.log.append(("failure", f.name))

    def on_run_end(self, result, module):
        self.log.append(("run-end", result.status))


def test_default_pipeline_on_real_module_events_and_fixed_point():
    rec = Recorder()
    machinery = Path(__file__).resolve().parent.parent / "testdata" / "pipelines" / "machinery.yaml"
    res = run_pipeline(cnn(), load_pipeline(str(machinery)), RunOptions(listeners=[rec]))
    assert res.status == "ok" and res.exit_code == 0
    simp = [e for e in res.events if e.pipeline == "simplification"]
    # cse changes in iteration 1, iteration 2 changes nothing: fixed point
    assert [(e.name, e.iteration, e.changed) for e in simp] == [
        ("tuple-simplifier", 1, False), ("cse", 1, True), ("dce", 1, False),
        ("tuple-simplifier", 2, False), ("cse", 2, False), ("dce", 2, False)]
    assert [e.index for e in res.events] == list(range(1, len(res.events) + 1))
    assert res.events[1].instructions_before == 111 and res.events[1].instructions_after == 97
    assert len(res.events[1].remarks) == 14
    assert rec.log[0] == ("run-start",) and rec.log[-1] == ("run-end", "ok")
    assert ("pipeline-start", "simplification", 2, "tuple-simplifier") in rec.log
    assert ("pipeline-end", "simplification", True, "pipeline-end") in rec.log
    assert ("after", 2, "optimization/simplification/cse", True, "dce") in rec.log
    assert ("after", 3, "optimization/simplification/dce", False, "pipeline-end") in rec.log


def test_fixed_point_iteration_limit_is_reported(testkit):
    s = spec("""
name: t
steps:
  - pipeline: loop
    fixed_point: true
    max_iterations: 3
    steps: [test-negate-root]
""")
    res = run_pipeline(cnn(), s)
    assert [e.iteration for e in res.events] == [1, 2, 3]
    assert "still changing after 3 iterations" in res.notes[0]


def test_violation_names_the_pass_that_introduced_it(testkit):
    s = spec("""
name: t
checkers: [hlo-verifier, no-negate]
steps:
  - pipeline: a
    steps: [dce, cse, test-negate-root, tuple-simplifier]
""")
    rec = Recorder()
    m = cnn()
    res = run_pipeline(m, s, RunOptions(listeners=[rec]))
    assert res.exit_code == 2 and res.status == "violation"
    v = res.violations[0]
    assert (v.rule, v.after_pass, v.pass_index) == ("no-negate", "a/test-negate-root", 3)
    assert v.instruction == "negate" and v.computation == m.entry.name
    assert [e.name for e in res.events] == ["dce", "cse", "test-negate-root"]  # stopped
    # --keep-going runs on
    res = run_pipeline(cnn(), s, RunOptions(keep_going=True))
    assert [e.name for e in res.events][-1] == "tuple-simplifier"
    # --no-verify-each: found only at the end, attributed to the last pass
    res = run_pipeline(cnn(), s, RunOptions(verify_each=False))
    assert res.violations[0].after_pass == "a/tuple-simplifier"


def test_precondition_check_step_points_at_first_appearance(testkit):
    s = spec("""
name: t
steps:
  - pipeline: a
    steps: [test-negate-root, dce]
  - pipeline: b
    steps:
      - cse
      - check: no-negate
      - tuple-simplifier
""")
    res = run_pipeline(cnn(), s)
    v = res.violations[0]
    assert v.after_pass == "a/test-negate-root" and v.pass_index == 1
    assert v.precondition_of == "b/tuple-simplifier" and v.checked_at == "b"


def test_violation_at_pipeline_start(testkit):
    m = cnn()
    run_pipeline(m, spec("name: t\nsteps: [test-negate-root]\n"))
    res = run_pipeline(m, spec("name: t\ncheckers: [no-negate]\nsteps: [dce]\n"))
    assert res.violations[0].after_pass == "pipeline-start" and not res.events


@pytest.mark.parametrize("name,exc", [("test-fail", "PassError"), ("test-crash", "ZeroDivisionError")])
def test_pass_failure_stops_with_exit_2(testkit, name, exc):
    s = spec(f"name: t\nsteps:\n  - pipeline: p\n    steps: [dce, {name}, cse]\n")
    rec = Recorder()
    res = run_pipeline(cnn(), s, RunOptions(listeners=[rec]))
    f = res.failure
    assert res.exit_code == 2 and f.name == name and f.index == 2 and f.exception == exc
    assert f.path == f"p/{name}"
    if exc == "PassError":
        assert f.instruction and f.message == "cannot handle this root"
    else:
        assert "ZeroDivisionError" in f.traceback
    assert ("failure", name) in rec.log and [e.name for e in res.events] == ["dce", name]


def test_check_changed_catches_lying_passes(testkit):
    for name, text in [("test-silent", "reported changed=False but the module changed"),
                       ("test-noop-liar", "reported changed=True but the module is unchanged")]:
        s = spec(f"name: t\nsteps: [dce, {name}]\n")
        assert run_pipeline(cnn(), s).exit_code == 0
        res = run_pipeline(cnn(), s, RunOptions(check_changed=True))
        assert res.exit_code == 2
        assert res.events[-1].changed_mismatch == text
        assert res.violations[0].rule == "pass-changed-report"


SEL = """
name: t
steps:
  - pipeline: optimization
    steps:
      - pipeline: simplification
        steps: [tuple-simplifier, cse, dce]
      - cse
  - pipeline: post
    steps: [dce, cse]
"""


def paths(**kw):
    res = run_pipeline(cnn(), spec(SEL), RunOptions(**kw))
    return [e.path for e in res.events]


def test_disable_semantics():
    all_ = paths()
    assert len(all_) == 6
    assert "optimization/simplification/cse" not in paths(disable=["cse"])
    assert not any("cse" in p for p in paths(disable=["cse"]))
    assert paths(disable=["simplification"]) == ["optimization/cse", "post/dce", "post/cse"]
    assert paths(disable=["simplification/cse"]) == [p for p in all_ if p != "optimization/simplification/cse"]
    assert paths(disable=["optimization/cse"]) == [p for p in all_ if p != "optimization/cse"]
    # name:N is the Nth step of that name in document order
    assert paths(disable=["cse:2"]) == [p for p in all_ if p != "optimization/cse"]
    assert paths(disable=["cse:3"]) == [p for p in all_ if p != "post/cse"]
    assert paths(disable=["dce,cse:1"]) == ["optimization/simplification/tuple-simplifier",
                                            "optimization/cse", "post/cse"]
    assert paths(disable_all=True) == []


def test_enable_only_semantics():
    assert paths(enable_only=["dce"]) == ["optimization/simplification/dce", "post/dce"]
    assert paths(enable_only=["post"]) == ["post/dce", "post/cse"]
    assert paths(enable_only=["simplification/cse", "post/dce"]) == [
        "optimization/simplification/cse", "post/dce"]


def test_selection_typos_are_errors_with_near_matches():
    with pytest.raises(UsageError, match=r"'simplifcation' matches no pass.*did you mean simplification"):
        paths(disable=["simplifcation"])
    with pytest.raises(UsageError, match="only 3 step"):
        paths(disable=["cse:4"])
    with pytest.raises(UsageError, match="cannot be combined"):
        paths(disable=["cse"], enable_only=["dce"])
    with pytest.raises(UsageError, match="matches no pass"):
        paths(enable_only=["post/tuple-simplifier"])


def test_pass_limit_runs_the_first_n():
    res = run_pipeline(cnn(), spec(SEL), RunOptions(pass_limit=2))
    assert [e.index for e in res.events] == [1, 2] and res.stopped_by_limit
    assert res.exit_code == 0
    m = cnn()
    res = run_pipeline(m, spec(SEL), RunOptions(pass_limit=1))
    assert m.instruction_count == 111  # tuple-simplifier changed nothing


def test_records_and_remarks_are_collected(testkit):
    res = run_pipeline(cnn(), spec("name: t\nsteps: [{test-negate-root: {times: 2}}]\n"))
    assert [r.message for _, r in res.remarks] == ["wrapped the root"] * 2


def test_checkers_at_end_defer_the_checkers_to_the_end_of_the_sub_pipeline(testkit):
    """XLA's RunLayoutNormalizationPasses pipeline has no invariant checker:
    with ``checkers_at_end`` the pipeline's checkers skip its passes and run
    once when it ends (where XLA's next pipeline checks at its start)."""
    s = spec("""
name: t
checkers: [no-negate]
steps:
  - pipeline: a
    checkers_at_end: true
    steps: [test-negate-root, dce, tuple-simplifier]
  - pipeline: b
    steps: [cse]
""")
    assert s.steps[0].checkers_at_end and not s.steps[1].checkers_at_end
    assert "checkers_at_end: true" in s.dump_yaml()
    rec = Recorder()
    res = run_pipeline(cnn(), s, RunOptions(listeners=[rec]))
    assert res.exit_code == 2
    # every pass of 'a' ran; the finding is reported at its end, attributed
    # to its last pass; 'b' never starts
    assert [e.path for e in res.events] == ["a/test-negate-root", "a/dce", "a/tuple-simplifier"]
    assert res.violations[0].after_pass == "a/tuple-simplifier"
    assert ("pipeline-start", "b", None, "cse") not in rec.log
    # an unchanged deferred sub-pipeline checks nothing
    clean = spec("name: t\ncheckers: [no-negate]\nsteps:\n  - pipeline: a\n"
                 "    checkers_at_end: true\n    steps: [dce]\n")
    assert run_pipeline(cnn(), clean).exit_code == 0


def test_checkers_at_end_must_be_a_boolean():
    with pytest.raises(UsageError, match="'checkers_at_end' must be true or false"):
        spec("name: t\nsteps:\n  - pipeline: a\n    checkers_at_end: 1\n    steps: [dce]\n")
