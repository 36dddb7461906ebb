"""The incremental verifier's call graph (``hlorun.verifier.incremental_calls``):
after every update its context is the one ``context_from`` builds from the
call lists (the same callers in the same order, the same fusion and
asynchronous computations), and the callees it reports as changed are
exactly those whose callers or role differ from before.

Random edits (``test_incremental``'s, weighted towards the call graph:
fusions added, removed, moved and reordered, computations reordered and
removed) on a fused module and on XLA's verifier cases."""

from __future__ import annotations

import random

import pytest

import hlorun.verifier.incremental as inc
from hlorun.ir.changes import ModuleTracker
from hlorun.ir.module import Instruction
from hlorun.text.parser import load_module, parse_module
from hlorun.text.fileio import read_text
from hlorun.verifier.checkers import HloVerifier
from hlorun.verifier.incremental_calls import _differs
from hlorun.verifier.module import Context, context_from

from ..conftest import shared_path
from .test_incremental import EDITS, MODULES, _computation, _key, _move, _pick, _verifier_cases


def _snapshot(ctx: Context) -> Context:
    return Context({c: list(v) for c, v in ctx.callers.items()}, set(ctx.fusion_computations),
                   set(ctx.async_computations))


def _checked(monkeypatch) -> list[int]:
    """Wrap ``update_calls``: compare each result with a full rebuild."""
    real = inc.update_calls
    seen: list[int] = []

    def check(st, module, *args):
        before = _snapshot(st.ctx)
        old_of, flipped = real(st, module, *args)
        full = context_from(module, st.calls)
        assert st.ctx.callers == full.callers
        assert st.ctx.fusion_computations == full.fusion_computations
        assert st.ctx.async_computations == full.async_computations
        keys = set(before.callers) | set(full.callers) | before.fusion_computations \
            | full.fusion_computations | before.async_computations | full.async_computations
        assert flipped == {c for c in keys if _differs(before, full, c)}
        for c in flipped:
            assert old_of[c] == before.callers.get(c, [])
        seen.append(len(flipped))
        return old_of, flipped
    monkeypatch.setattr(inc, "update_calls", check)
    return seen


def _clone_fusion(rng, m):
    """Another fusion calling the same computation (a second caller)."""
    f = _pick(rng, [i for i in m.entry._instructions if i.opcode == "fusion"])
    if f is not None:
        m.entry.add_instruction(Instruction("fusion", f.shape, list(f.operands),
                                            attrs=dict(f.attrs)))


def _drop_fusion(rng, m):
    f = _pick(rng, [i for c in m.computations for i in c._instructions
                    if i.called_computations() and not i._users and not i.is_root()])
    if f is not None:
        f.parent.remove_instruction(f)


def _clone_elsewhere(rng, m):
    """A copy (without operands) of a calling instruction in another
    computation: callers in several computations."""
    f = _pick(rng, [i for c in m.computations for i in c._instructions
                    if i.called_computations()])
    c = rng.choice(m.computations)
    if f is not None and c is not f.parent:
        c.add_instruction(Instruction(f.opcode, f.shape, [], attrs=dict(f.attrs)))


def _readd(rng, m):
    """A calling instruction out and back in, unchanged: now last (one
    whose callee has other callers in that computation when there is)."""
    comps = [c for c in m.computations if c.module is m]
    c = rng.choice(comps) if rng.random() < 0.3 else m.entry
    calling = [i for i in c._instructions if i.called_computations()]
    count: dict = {}
    for i in calling:
        for x in i.called_computations():
            count[x] = count.get(x, 0) + 1
    shared = [i for i in calling if any(count[x] > 1 for x in i.called_computations())]
    f = _pick(rng, shared or calling)
    if f is not None:
        del c._instructions[f]
        f.parent = None
        c._instructions[f] = None
        f.parent = c


def _fuzz(m, seed: int, steps: int, opts, findings: bool = True) -> None:
    rng = random.Random(seed)
    fns = [f for f, w in EDITS + [(_clone_fusion, 8), (_drop_fusion, 6), (_readd, 8),
                                  (_clone_elsewhere, 6),
                                  (_computation, 6), (_move, 2)] for _ in range(w)]
    tracker = ModuleTracker()
    tracker.scan(m)
    opts.check_changes(m, tracker)
    for step in range(steps):
        for _ in range(rng.choice((1, 2, 3))):
            rng.choice(fns)(rng, m)
        tracker.scan(m)
        got = opts.check_changes(m, tracker)
        if findings:
            assert _key(got) == _key(opts.check(m)), f"seed {seed} step {step}"


def test_call_graph_updates_equal_a_rebuild_under_random_edits(monkeypatch):
    seen = _checked(monkeypatch)
    for seed in range(4):
        _fuzz(load_module(shared_path(*MODULES[0])), seed, 40, HloVerifier())
    assert len(seen) > 60 and sum(seen) > 0  # updated often, and callees did change


@pytest.mark.parametrize("part", range(2))
def test_call_graph_updates_on_xla_verifier_cases(monkeypatch, part):
    seen = _checked(monkeypatch)
    cases = _verifier_cases()[part::2]
    for k, path in enumerate(cases):
        try:
            m = parse_module(read_text(str(path)), str(path))
        except Exception:
            continue
        # (the findings are not compared here: with these edits some
        # asynchronous cases show a stale finding that main had before
        # this module existed, e.g. AsyncOps_StartBindNone_UpdateBindAll_Ok
        # seed 8 step 3: an async-update's consumer changed opcode)
        _fuzz(m, k, 5, HloVerifier(), findings=False)
    assert len(seen) > 50


SHARED = """HloModule m

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(f32[] %a, f32[] %b)
}

%c1 (p: f32[4]) -> f32[] {
  %p = f32[4]{0} parameter(0)
  %z = f32[] constant(0)
  ROOT %r1 = f32[] reduce(f32[4]{0} %p, f32[] %z), dimensions={0}, to_apply=%add
}

%c2 (p: f32[4]) -> f32[] {
  %p = f32[4]{0} parameter(0)
  %z = f32[] constant(0)
  ROOT %r2 = f32[] reduce(f32[4]{0} %p, f32[] %z), dimensions={0}, to_apply=%add
}

ENTRY %e (x: f32[4]) -> (f32[], f32[]) {
  %x = f32[4]{0} parameter(0)
  %k1 = f32[] call(f32[4]{0} %x), to_apply=%c1
  %k2 = f32[] call(f32[4]{0} %x), to_apply=%c2
  ROOT %t = (f32[], f32[]) tuple(%k1, %k2)
}
"""


def test_a_caller_in_another_computation_joins_in_module_order(monkeypatch):
    """A reducer called from two computations gets a third caller in a
    third one (the entry, last in module order), then loses the first."""
    seen = _checked(monkeypatch)
    m = parse_module(SHARED)
    v = HloVerifier()
    tracker = ModuleTracker()
    tracker.scan(m)
    assert v.check_changes(m, tracker) == []
    add = next(c for c in m.computations if c.name == "add")
    r1 = next(i for c in m.computations for i in c._instructions if i.name == "r1")
    x = m.entry.parameters[0]
    z = m.entry.add_instruction(Instruction("constant", r1.operands[1].shape, []))
    z.literal = r1.operands[1].literal
    r3 = m.entry.add_instruction(Instruction("reduce", r1.shape, [x, z], attrs=dict(r1.attrs)))
    tracker.scan(m)
    assert _key(v.check_changes(m, tracker)) == _key(v.check(m))
    callers = inc_state(v, tracker).ctx.callers[add]
    assert [i.name for i in callers] == ["r1", "r2", r3.name]
    c1 = r1.parent
    c1.root = r1.operands[0]
    c1.remove_instruction(r1)
    tracker.scan(m)
    assert _key(v.check_changes(m, tracker)) == _key(v.check(m))
    assert [i.name for i in inc_state(v, tracker).ctx.callers[add]] == ["r2", r3.name]
    assert len(seen) == 2


def inc_state(v, tracker):
    return tracker.cache[("hlo-verifier", v)]
