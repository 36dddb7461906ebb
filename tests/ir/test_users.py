"""Use lists (``Instruction._users``): a tuple up to ``USERS_TUPLE_MAX``
users (the shared ``()`` when none), an insertion-ordered dict above.  The
order is the one a dict gave (a user that leaves and comes back is last),
across the switch both ways, and the change journal sees every change of
either form on a scanned instruction."""

from __future__ import annotations

import random

from hlorun.ir.changes import ModuleTracker
from hlorun.ir.module import USERS_TUPLE_MAX, Instruction, add_user, drop_user
from hlorun.text.parser import load_module

from ..conftest import TESTDATA

JAX4 = TESTDATA / "transformer" / "jax_4layer_train_step.hlo.gz"


def _param(m):
    """An entry parameter of the 4-layer transformer (a weight)."""
    return next(p for p in m.entry.parameters if p is not None and p.user_count >= 1)


def test_a_parsed_module_keeps_small_user_lists_in_tuples():
    m = load_module(str(JAX4))
    kinds = {}
    for i in m.instructions():
        us = i._users
        kinds[type(us).__name__, len(us) > USERS_TUPLE_MAX] = True
        if not us:
            assert us is ()
    assert set(kinds) <= {("tuple", False), ("dict", True)}
    assert ("tuple", False) in kinds


def test_users_keep_dict_order_across_the_switch():
    m = load_module(str(JAX4))
    p = _param(m)
    ref = dict.fromkeys(p._users)
    rng = random.Random(15)
    made: list[Instruction] = []
    seen = set()
    for step in range(400):
        if made and rng.random() < (0.3 if len(ref) < USERS_TUPLE_MAX else 0.7):
            u = made.pop(rng.randrange(len(made)))
            u.drop_all_operands()
            ref.pop(u, None)
        else:
            u = Instruction("negate", p.shape, [p] * rng.choice((1, 1, 2)), f"neg.{step}")
            made.append(u)
            ref[u] = None
        assert list(p._users) == list(ref) == p.users
        seen.add(type(p._users))
        if len(ref) > USERS_TUPLE_MAX:
            assert type(p._users) is dict
        elif len(ref) <= USERS_TUPLE_MAX // 2:  # a dict turns back into a tuple at half
            assert type(p._users) is tuple
    assert seen == {tuple, dict}
    for u in made:
        u.drop_all_operands()
    assert list(p._users) == list(dict.fromkeys(_param(m)._users))


def test_add_user_and_drop_user_are_idempotent():
    m = load_module(str(JAX4))
    p = _param(m)
    before = p._users
    u = Instruction("negate", p.shape, [p, p], "neg")  # one user, listed once
    assert list(p._users) == [*before, u]
    add_user(p, u)
    assert list(p._users).count(u) == 1
    u.set_operand(0, u)  # still uses p through operand 1
    assert u in p._users
    drop_user(p, u)
    drop_user(p, u)
    assert list(p._users) == list(before)


def test_the_journal_sees_users_changes_in_both_forms():
    m = load_module(str(JAX4))
    p = _param(m)
    tracker = ModuleTracker(verify=True)  # every scan checked against a full re-read
    many = [p.parent.add_instruction(Instruction("negate", p.shape, [p], f"neg.{k}"))
            for k in range(USERS_TUPLE_MAX + 3)]
    tracker.scan(m)
    assert type(p._users) is dict
    for edit in (lambda: many[0].replace_operands([many[1]]),  # dict: drop
                 lambda: p.parent.add_instruction(Instruction("negate", p.shape, [p], "n2")),
                 lambda: [u.replace_operands([many[-1]]) for u in many[1:-1]],  # to a tuple
                 lambda: many[0].replace_operands([p])):  # tuple: add
        g = tracker.gen
        old = tuple(p._users)
        edit()
        tracker.scan(m)  # raises if a change was missed
        ch = tracker.changes_since(g)
        assert p in ch.instructions and ch.old_rows[p][-2] == old
    assert type(p._users) is tuple
