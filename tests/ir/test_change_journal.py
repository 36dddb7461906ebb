"""The ModuleTracker's change journal: a scan re-reads only computations
stamped since the previous one (``hlorun.ir.changes``), so every way a
pass can change an instruction must stamp its computation.

* each kind of edit (methods, direct slot writes, in-place edits of
  ``attrs``, ``operands``, ``_users`` and the control lists) is reported
  by ``changes_since`` and agrees with a full re-read (``verify``);
* an edit that bypasses the hooks is caught by ``verify`` (the check can
  fail) and missed without it (why the hooks exist);
* whole gpu-cuda runs on real modules with ``verify`` on: the journal
  never missed a change;
* an invariant a pass breaks deep in the module, by any of those edits,
  is reported by the incremental verifier with that pass, as with full
  checks.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from hlorun.ir.changes import ModuleTracker
from hlorun.ir.module import NO_LINKS, Instruction
from hlorun.passes.base import Pass
from hlorun.pipeline.loader import load_pipeline, parse_pipeline
from hlorun.pipeline.run import RunOptions, run_pipeline
from hlorun.text.parser import load_module

from ..conftest import TESTDATA, shared_path
from ..pipeline_testkit import testkit  # noqa: F401  (fixture)

CNN = ("xla-dumps", "cnn_fp16",
       "module_14585.jit_model.0011.simplification.after_reshape-mover.before_constant_folding.txt")


def cnn():
    return load_module(shared_path(*CNN))


def _reducer_add(m):
    """The add of a reducer computation (not the entry)."""
    comp = next(c for c in m.computations if c.name == "scalar_add_computation.1")
    return next(i for i in comp._instructions if i.opcode == "add")


def _entry(m, opcode):
    return next(i for i in m.entry._instructions if i.opcode == opcode)


def _other_param(i):
    return next(p for p in i.parent.parameters if p is not i.operands[0])


EDITS = {
    "shape slot": lambda m, i: setattr(i, "shape", _entry(m, "convolution").shape),
    "opcode slot": lambda m, i: setattr(i, "opcode", "multiply"),
    "name slot": lambda m, i: setattr(i, "name", "renamed"),
    "attrs setitem": lambda m, i: i.attrs.__setitem__("metadata", '{op_name="x"}'),
    "attrs update": lambda m, i: i.attrs.update(metadata='{op_name="y"}'),
    "attrs assigned": lambda m, i: setattr(i, "attrs", {"metadata": '{op_name="z"}'}),
    "operands in place": lambda m, i: i.operands.__setitem__(0, _other_param(i)),
    "operands reversed": lambda m, i: i.operands.reverse(),
    "users replaced": lambda m, i: setattr(i.operands[0], "_users", tuple(
        u for u in i.operands[0]._users if u is not i)),
    "control in place": lambda m, i: i.control_predecessors.remove(i.operands[1]),
    "control assigned": lambda m, i: setattr(i, "control_predecessors", [i.operands[0]]),
    "control added": lambda m, i: i.operands[0].add_control_dependency_to(i),
    "set_operand": lambda m, i: i.set_operand(0, _other_param(i)),
    "new user": lambda m, i: i.parent.add_instruction(Instruction("negate", i.shape, [i])),
    "dangling user": lambda m, i: Instruction("negate", i.shape, [i]),
    "removed": lambda m, i: (setattr(i.parent, "root", i.operands[0]),
                             i.parent.remove_instruction(i)),
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_every_kind_of_edit_is_seen(edit):
    m = cnn()
    i = _reducer_add(m)
    i.operands[1].add_control_dependency_to(i)
    tracker = ModuleTracker(verify=True)
    tracker.scan(m)
    g = tracker.gen
    comp = i.parent
    EDITS[edit](m, i)
    tracker.scan(m)  # verify: the journal's rows equal a full re-read
    ch = tracker.changes_since(g)
    assert ch.instructions | ch.removed, edit
    assert tracker.touched(ch) == {comp}
    # and the next scan, with nothing changed, re-reads nothing
    g = tracker.gen
    tracker.scan(m)
    assert tracker.gen == g


def test_empty_control_lists_are_shared_and_read_only():
    m = cnn()
    ModuleTracker().scan(m)
    i = _reducer_add(m)
    assert i.control_predecessors is NO_LINKS and i.control_successors is NO_LINKS
    with pytest.raises(TypeError, match="add_control_dependency_to"):
        i.control_predecessors.append(i.operands[0])
    i.operands[0].add_control_dependency_to(i)
    assert i.control_predecessors == [i.operands[0]] and NO_LINKS == []


def test_a_change_that_bypasses_the_hooks_is_caught_by_verify():
    m = cnn()
    i = _reducer_add(m)
    tracker = ModuleTracker()
    tracker.scan(m)
    g = tracker.gen
    list.__setitem__(i.operands, 0, _other_param(i))  # no hook: nothing stamped
    tracker.scan(m)
    assert tracker.gen == g  # missed: only stamped computations are re-read
    m = cnn()
    i = _reducer_add(m)
    tracker = ModuleTracker(verify=True)  # keeps every row to compare with
    tracker.scan(m)
    list.__setitem__(i.operands, 0, _other_param(i))
    with pytest.raises(AssertionError, match="missed 1 changed"):
        tracker.scan(m)


@pytest.mark.parametrize("path", [
    TESTDATA / "transformer" / "jax_4layer_train_step.hlo.gz",
    shared_path("xla-dumps", "cnn_fp16", "module_14585.jit_model.before_optimizations.txt"),
    TESTDATA / "xla-dumps" / "cond_while" / "module_0000.jit_cond_while.before_optimizations.txt",
])
def test_gpu_cuda_runs_never_bypass_the_journal(path, monkeypatch):
    monkeypatch.setattr(ModuleTracker, "verify_default", True)
    res = run_pipeline(load_module(str(path)), load_pipeline("gpu-cuda"))
    assert res.failure is None and not res.violations and res.checker_seconds > 0


BREAKS = {
    "shape": ("reshape", lambda i: setattr(i, "shape", i.operands[0].shape)),
    "attrs": ("transpose", lambda i: i.attrs.__setitem__("dimensions", "{0,1,2,3}")),
    "operands": ("reshape", lambda i: i.operands.__setitem__(0, i.parent.parameters[0])),
    "users": ("convert", lambda i: setattr(i.operands[0], "_users", tuple(
        u for u in i.operands[0]._users if u is not i))),
}


@dataclass(frozen=True)
class Break(Pass):
    """Break an invariant of the first entry instruction with ``opcode``
    by one edit of kind ``kind`` (BREAKS)."""

    name = "test-break"
    kind: str = "shape"

    def run(self, module) -> bool:
        opcode, edit = BREAKS[self.kind]
        edit(_entry(module, opcode))
        return True


@pytest.mark.parametrize("kind", list(BREAKS))
def test_invariant_broken_by_a_pass_is_reported_with_that_pass(kind, testkit, monkeypatch):
    from hlorun import passes
    monkeypatch.setitem(passes.REGISTRY, "test-break", "tests.ir.test_change_journal:Break")
    spec = parse_pipeline(f"""
name: t
checkers: [hlo-verifier]
steps:
  - pipeline: a
    steps: [dce, cse, test-negate-root, {{test-break: {{kind: {kind}}}}}, tuple-simplifier]
""", "t.yaml")
    got = []
    for incremental in (True, False):
        res = run_pipeline(cnn(), spec, RunOptions(incremental_checks=incremental))
        got.append([(v.rule, v.after_pass, v.instruction, v.message) for v in res.violations])
    assert got[0] and got[0] == got[1], got
    assert {v[1] for v in got[0]} == {"a/test-break"}


class _Consumer:
    def __init__(self, gen):
        self.gen = gen


def test_change_log_is_kept_only_for_consumers_behind():
    m = cnn()
    i = _reducer_add(m)
    tracker = ModuleTracker()
    g0 = tracker.scan(m)
    tracker.cache["slow"] = _Consumer(g0)
    for k in range(3):
        i.attrs["metadata"] = f'{{op_name="{k}"}}'
        tracker.scan(m)
    ch = tracker.changes_since(g0)  # kept for the consumer at g0
    assert not ch.full and ch.instructions == {i}
    tracker.cache["slow"].gen = tracker.gen  # it caught up
    i.shape = _entry(m, "convolution").shape
    tracker.scan(m)
    assert tracker.changes_since(g0).full  # dropped: nobody needs it
    assert tracker.changes_since(tracker.gen - 1).instructions == {i}
    assert len(tracker._log) == 1


def test_pipeline_run_keeps_no_old_log_steps():
    from hlorun.pipeline.run import PipelineRunner
    runner = PipelineRunner(load_pipeline("gpu-cuda"))
    res = runner.run(cnn())
    assert res.exit_code == 0 and runner.tracker.scans > 10
    # the checkers are up to date: the last step (it holds the rows of the
    # instructions its pass removed) went as soon as they had seen it
    assert len(runner.tracker._log) == 0


def test_merged_changes_give_no_old_row_to_an_instruction_added_since():
    """Over several steps the earliest row wins, and an instruction added
    in an earlier step stays added (no old row): consumers treat it as
    new, e.g. check its name for duplicates."""
    m = cnn()
    i = _reducer_add(m)
    tracker = ModuleTracker(verify=True)
    g0 = tracker.scan(m)
    neg = i.parent.add_instruction(Instruction("negate", i.shape, [i]))
    tracker.scan(m)
    i.shape = neg.shape = _entry(m, "convolution").shape  # both change again
    tracker.scan(m)
    ch = tracker.changes_since(g0)
    assert {neg, i} <= ch.instructions
    assert neg not in ch.old_rows
    assert ch.old_rows[i][2] is not i.shape  # the row before both steps
    assert tracker.changes_since(tracker.gen - 1).old_rows[neg] is not None


def test_an_instruction_added_and_removed_since_is_not_removed():
    """An instruction added after the consumer's generation and removed
    again was never in the module the consumer saw: it is neither changed
    nor removed (it has no old row), and the incremental verifier updates
    (it used to fail on it and fall back to two full runs, as after a
    ``checkers_at_end`` sub-pipeline)."""
    from hlorun.verifier.checkers import HloVerifier
    from hlorun.verifier.incremental import run_changes
    m = cnn()
    i = _reducer_add(m)
    tracker = ModuleTracker(verify=True)
    opts = HloVerifier()
    tracker.scan(m)
    assert run_changes(m, opts, tracker) == []
    g0 = tracker.gen
    neg = i.parent.add_instruction(Instruction("negate", i.shape, [i]))
    tracker.scan(m)
    neg.parent.remove_instruction(neg)
    tracker.scan(m)
    ch = tracker.changes_since(g0)
    assert neg not in ch.removed and neg not in ch.instructions
    assert i in ch.instructions  # its users list changed and changed back
    st = tracker.cache[("hlo-verifier", opts)]
    assert run_changes(m, opts, tracker) == []
    assert tracker.cache[("hlo-verifier", opts)] is st  # updated, not rebuilt


def test_changes_since_is_shared_until_the_next_scan():
    """Consumers asking for the same generation after one scan (the
    verifier and reshape-is-bitcast) get one answer, equal to a fresh one;
    a scan that finds a change gives a new one."""
    m = cnn()
    tracker = ModuleTracker()
    g0 = tracker.scan(m)
    i = _reducer_add(m)
    i.replace_operand_with(i.operands[0], _other_param(i))
    tracker.scan(m)
    a = tracker.changes_since(g0)
    assert tracker.changes_since(g0) is a
    fresh = tracker._changes_since(g0)
    assert (a.instructions, a.removed, a.computations, a.calls) == \
        (fresh.instructions, fresh.removed, fresh.computations, fresh.calls)
    assert i in a.instructions
    g1 = tracker.gen
    i.attrs["metadata"] = '{op_name="x"}'
    tracker.scan(m)
    b = tracker.changes_since(g0)
    assert b is not a and i in b.instructions
    assert tracker.changes_since(g1) is not b
