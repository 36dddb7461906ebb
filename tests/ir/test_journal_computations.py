"""The change journal on computations' own fields: a scan compares the
row (name, ENTRY, execution thread, root, module, parameters, instruction
sequence) only of computations stamped since the previous scan, so every
way a pass can change those fields of a scanned computation must stamp it
(``hlorun.ir.journal.TrackedComputation`` and its ``Params`` list).

* each kind of edit, on a reducer computation that no instruction of it
  stamps, is reported (``ch.computations``) and agrees with a full re-read
  (``verify``), and the next scan re-reads nothing;
* writes outside the row (the name cache, the stamp) do not count;
* a write that bypasses the hook is missed without ``verify`` and caught
  with it (why the hook exists);
* copies of a scanned computation's parameter list are plain lists.
"""

from __future__ import annotations

import copy

import pytest

from hlorun.ir.changes import ModuleTracker
from hlorun.ir.journal import Params, TrackedComputation
from hlorun.ir.module import Computation, Instruction

from .test_change_journal import cnn


def _reducer(m):
    return next(c for c in m.computations if c.name == "scalar_add_computation.1")


def _swap_params(c):
    c.parameters[0], c.parameters[1] = c.parameters[1], c.parameters[0]


def _reorder(c):
    c._instructions = dict.fromkeys(reversed(list(c._instructions)))


def _new_root(c):
    neg = Instruction("negate", c.root.shape, [c.root])
    c._instructions[neg] = None  # bypasses add_instruction: the root write stamps
    neg.parent = c
    c.root = neg


def _move_to_end(m, c):
    comps = [x for x in m.computations if x is not c]
    m.computations = comps[:-1] + [c, comps[-1]]


COMP_EDITS = {
    "name": lambda m, c: setattr(c, "name", "renamed_add"),
    "root": lambda m, c: setattr(c, "root", c.parameters[0]),
    "new root": lambda m, c: _new_root(c),
    "execution thread": lambda m, c: setattr(c, "execution_thread", "host"),
    "entry flag": lambda m, c: setattr(c, "is_entry", True),
    "parameters in place": lambda m, c: _swap_params(c),
    "parameters reversed": lambda m, c: c.parameters.reverse(),
    "parameters assigned": lambda m, c: setattr(c, "parameters", list(c.parameters[:1])),
    "instructions reordered": lambda m, c: _reorder(c),
    "moved in the module": _move_to_end,
}


@pytest.mark.parametrize("edit", list(COMP_EDITS))
def test_every_kind_of_computation_edit_is_seen(edit):
    m = cnn()
    c = _reducer(m)
    tracker = ModuleTracker(verify=True)
    tracker.scan(m)
    assert type(c) is TrackedComputation and type(c.parameters) is Params
    tracker.scan(m)  # nothing changed
    g = tracker.gen
    COMP_EDITS[edit](m, c)
    tracker.scan(m)  # verify: the rows equal a full re-read
    ch = tracker.changes_since(g)
    assert c in ch.computations or ch.order, edit
    g = tracker.gen
    tracker.scan(m)  # and the next scan, with nothing changed, re-reads nothing
    assert tracker.gen == g
    assert type(c.parameters) is Params and c.parameters.owner is c  # (re)adopted


def test_writes_outside_the_row_do_not_count():
    m = cnn()
    c = _reducer(m)
    tracker = ModuleTracker(verify=True)
    g = tracker.scan(m)
    c.get_instruction("no such name")  # fills the name cache (``_names``)
    c.pos = 7
    tracker.scan(m)
    assert tracker.gen == g and c.stamp < tracker._since


def test_a_computation_edit_that_bypasses_the_hook_is_caught_by_verify():
    for verify in (False, True):
        m = cnn()
        c = _reducer(m)
        tracker = ModuleTracker(verify=verify)
        g = tracker.scan(m)
        object.__setattr__(c, "root", c.parameters[0])  # no hook: nothing stamped
        if not verify:
            tracker.scan(m)
            assert tracker.gen == g  # missed: only stamped computations are compared
        else:
            with pytest.raises(AssertionError, match="computations"):
                tracker.scan(m)


def test_copies_are_plain_and_removed_computations_are_seen():
    m = cnn()
    c = _reducer(m)
    tracker = ModuleTracker(verify=True)
    g = tracker.scan(m)
    assert type(copy.copy(c.parameters)) is list
    assert isinstance(c, Computation)
    user = next(i for x in m.computations for i in x._instructions
                if c in i.called_computations())
    # a module without c (and without its caller's computation) is verified
    m.computations = [x for x in m.computations if x is not c and x is not user.parent]
    tracker.scan(m)
    ch = tracker.changes_since(g)
    assert c in ch.removed_computations and ch.order
