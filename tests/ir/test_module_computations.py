"""Module.computations with O(1) insert-before / remove (applied lazily):
the order equals what the plain list operations would give."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from hlorun.text.parser import load_module
from hlorun.ir.module import Computation

REPO = Path(__file__).resolve().parents[2]
MODEL = REPO / "testdata" / "transformer" / "jax_4layer_train_step.hlo.gz"


@pytest.mark.parametrize("seed", range(5))
def test_lazy_edits_match_list_semantics(seed):
    rnd = random.Random(seed)
    m = load_module(str(MODEL))
    expect = list(m.computations)
    fresh = 0
    for step in range(300):
        what = rnd.random()
        if what < 0.5:
            body = Computation(f"new.{fresh}")
            fresh += 1
            caller = rnd.choice(expect + [None])
            m.insert_computation_before(body, caller)
            expect.insert(expect.index(caller) if caller is not None else len(expect), body)
        elif what < 0.9 and len(expect) > 1:
            c = rnd.choice([c for c in expect if c is not m.entry])
            m.remove_computation(c)
            expect.remove(c)
            assert not m.has_computation(c) and c.module is None
        else:
            assert m.computations == expect  # reading applies the pending edits
    assert m.computations == expect
    assert all(m.has_computation(c) and c.module is m for c in expect)
    with pytest.raises(ValueError, match="not in module"):
        m.remove_computation(Computation("stranger"))
    # a removed computation can come back
    c = expect[0]
    m.remove_computation(c)
    m.add_computation(c)
    assert m.computations == expect[1:] + [c]


def test_computations_put_in_the_list_directly_can_be_removed():
    m = load_module(str(MODEL))
    c = Computation("direct")
    m.computations.insert(0, c)  # as some passes do
    assert m.has_computation(c)
    m.remove_computation(c)
    assert not m.has_computation(c) and c not in m.computations
    d = Computation("direct2")
    m.computations.append(d)
    m.insert_computation_before(Computation("pending"), m.entry)
    assert m.computations[-1] is d and m.has_computation(d)
