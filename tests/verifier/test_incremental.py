"""The incremental verifier (``HloVerifier.check_changes``) returns exactly
what a full run (``check``) returns, after any edit: random edits of every
kind the IR allows (and some it should not: direct assignments, broken
use-def links) on realistic modules, checked after every step; and the
content memo of the full run changes nothing on XLA's verifier cases."""

from __future__ import annotations

import glob
import random
from pathlib import Path

import pytest

from hlorun.text.fileio import read_text
from hlorun.ir.changes import ModuleTracker
from hlorun.ir.module import Computation, Instruction, Module
from hlorun.ir.shape import Shape
from hlorun.text.parser import load_module, parse_module
from hlorun.verifier.module import run
from hlorun.verifier.checkers import HloVerifier

from ..conftest import TESTDATA, shared_path

OPTIONS = [HloVerifier(),
           HloVerifier(layout_sensitive=True, verify_layout_changes=True,
                       allow_mixed_precision=True, verify_reshape_is_bitcast=True)]


def _key(diags):
    return [(d.rule, d.computation, d.instruction, d.message, d.line) for d in diags]


# -- random edits ---------------------------------------------------------------------
def _instrs(m: Module) -> list[Instruction]:
    return [i for c in m.computations for i in c._instructions]


def _pick(rng: random.Random, xs):
    xs = list(xs)
    return rng.choice(xs) if xs else None


def _set_shape(rng, m):
    i, j = rng.choice(_instrs(m)), rng.choice(_instrs(m))
    i.shape = j.shape  # direct assignment, as passes do


def _drop_layout(rng, m):
    i = rng.choice(_instrs(m))
    if i.shape.is_array:
        i.shape = i.shape.without_layout() if rng.random() < 0.5 else \
            Shape.array(i.shape.element_type, tuple(reversed(i.shape.dimensions)))


def _edit_attr(rng, m):
    i = _pick(rng, [i for i in _instrs(m) if i.attrs])
    if i is None:
        return
    k = rng.choice(list(i.attrs))
    v = i.attrs[k]
    if isinstance(v, Computation):
        i.attrs[k] = rng.choice(m.computations)  # in-place edit of attrs
    elif isinstance(v, list):
        i.attrs[k] = [rng.choice(m.computations) for _ in v]
    elif rng.random() < 0.3:
        del i.attrs[k]
    else:
        i.attrs[k] = rng.choice(["{}", "{0}", "{1,0}", "{0,1}", "FLOAT", "SIGNED", "kLoop",
                                 "true", '"x"', "{replicated}", "{devices=[2,1]0,1}", v])


def _add_attr(rng, m):
    i = rng.choice(_instrs(m))
    k = rng.choice(["sharding", "dimensions", "result_accuracy", "origin", "type",
                    "to_apply", "metadata", "frontend_attributes", "constrain_layout",
                    "channel_id", "is_host_transfer"])
    i.attrs[k] = rng.choice(m.computations) if k == "to_apply" else \
        rng.choice(["{maximal device=0}", "{0}", "{1}", "{mode=highest}", "{{}}", "TOTALORDER",
                    '{op_name="x"}', "true", "false", "1", "2"])


def _set_operand(rng, m):
    i = _pick(rng, [i for i in _instrs(m) if i.operands])
    if i is None:
        return
    same = rng.random() < 0.85
    pool = list(i.parent._instructions) if same and i.parent else _instrs(m)
    k = rng.randrange(len(i.operands))
    new = rng.choice(pool)
    if new is i:
        return
    if rng.random() < 0.8:
        i.set_operand(k, new)
    else:
        i.operands[k] = new  # bypasses use-def (a bug the verifier must find)


def _swap_operands(rng, m):
    i = _pick(rng, [i for i in _instrs(m) if len(i.operands) >= 2])
    if i is not None:
        i.replace_operands(list(reversed(i.operands)))


def _remove(rng, m):
    i = _pick(rng, [i for i in _instrs(m) if not i._users and not i.is_root()])
    if i is not None and i.parent is not None:
        i.parent.remove_instruction(i)


def _replace_uses(rng, m):
    i = rng.choice(_instrs(m))
    comp = i.parent
    if comp is None:
        return
    other = _pick(rng, [j for j in comp._instructions if j is not i and j.shape == i.shape])
    if other is None:
        return
    if any(u is other for u in i._users) or i in _operand_closure(other):
        return
    i.replace_all_uses_with(other)
    if not i._users and comp.root is not i and rng.random() < 0.7:
        comp.remove_instruction(i)


def _operand_closure(i: Instruction) -> set:
    seen = set()
    stack = [i]
    while stack:
        x = stack.pop()
        if x in seen:
            continue
        seen.add(x)
        stack.extend(x.operands)
    return seen


def _add(rng, m):
    i = rng.choice(_instrs(m))
    comp = i.parent
    if comp is None or i.opcode == "parameter":
        return
    n = Instruction(i.opcode, i.shape, list(i.operands), attrs=dict(i.attrs))
    n.literal = i.literal
    comp.add_instruction(n, i.name)
    if rng.random() < 0.5 and i._users:
        u = rng.choice(list(i._users))
        u.replace_operand_with(i, n)


def _rename(rng, m):
    i, j = rng.choice(_instrs(m)), rng.choice(_instrs(m))
    i.name = j.name if rng.random() < 0.5 else i.name + "_r"


def _backend_config(rng, m):
    """An attribute no rule reads (the incremental verifier reruns nothing
    for it): on a calling instruction, a renamed one or any."""
    i = _pick(rng, [i for i in _instrs(m) if i.attrs and rng.random() < 0.5] or _instrs(m))
    if i is not None:
        i.attrs["backend_config"] = rng.choice(['{"x":1}', '{"x":2}', "{}"])
        if rng.random() < 0.3:
            i.name = i.name + "_b"


def _set_root(rng, m):
    c = rng.choice(m.computations)
    r = _pick(rng, c._instructions)
    if r is not None:
        c.root = r


def _opcode(rng, m):
    i = _pick(rng, [i for i in _instrs(m) if i.opcode not in ("parameter", "constant")])
    if i is not None:
        i.opcode = rng.choice(["add", "multiply", "copy", "negate", "tuple", "fusion",
                               "all-reduce-start", "all-reduce-done", "send", "recv-done",
                               "async-start", "async-done", "custom-call", "while",
                               "get-tuple-element", "bitcast", "reshape"])


def _users(rng, m):
    i = _pick(rng, [i for i in _instrs(m) if i._users])
    if i is not None:
        i._users = tuple(i._users)[1:]  # broken use-def


def _control(rng, m):
    c = rng.choice(m.computations)
    if len(c._instructions) < 2:
        return
    a, b = rng.sample(list(c._instructions), 2)
    if rng.random() < 0.7:
        a.add_control_dependency_to(b)
    else:
        b.drop_all_control_deps()


def _computation(rng, m):
    c = rng.choice(m.computations)
    r = rng.random()
    if r < 0.3:
        c.execution_thread = rng.choice([None, "main", "other"])
    elif r < 0.5:
        c.name = c.name + "_c"
    elif r < 0.7 and c is not m.entry:
        m.computations.remove(c)
        m.computations.insert(rng.randrange(len(m.computations) + 1), c)
    elif r < 0.8 and c is not m.entry and len(m.computations) > 2:
        m.remove_computation(c)
    else:
        p = _pick(rng, [p for p in c.parameters if p is not None])
        if p is not None:
            p.parameter_number = rng.randrange(3)


def _header(rng, m):
    if rng.random() < 0.5:
        m.header_attrs["replica_count"] = rng.choice(["1", "2", "4"])
    else:
        m.header_attrs.pop("entry_computation_layout", None)


def _move(rng, m):
    """An instruction (with its operands unchanged) moved to another
    computation: cross-computation operands."""
    i = _pick(rng, [i for i in _instrs(m) if not i._users and not i.is_root()
                    and i.opcode != "parameter"])
    c = rng.choice(m.computations)
    if i is None or c is i.parent:
        return
    ops = list(i.operands)
    i.parent.remove_instruction(i)
    i.replace_operands(ops)
    c.add_instruction(i)


EDITS = [(_set_shape, 6), (_drop_layout, 4), (_edit_attr, 6), (_add_attr, 3),
         (_set_operand, 6), (_swap_operands, 3), (_remove, 5), (_replace_uses, 5), (_add, 5),
         (_rename, 2), (_set_root, 2), (_opcode, 3), (_users, 1), (_control, 2),
         (_computation, 2), (_header, 1), (_move, 1), (_backend_config, 2)]


def _fuzz(m: Module, seed: int, steps: int, opts: HloVerifier) -> int:
    rng = random.Random(seed)
    fns = [f for f, w in EDITS for _ in range(w)]
    tracker = ModuleTracker()
    tracker.scan(m)
    assert _key(opts.check_changes(m, tracker)) == _key(opts.check(m))
    findings = 0
    for step in range(steps):
        for _ in range(rng.choice((1, 1, 1, 2, 3))):
            fn = rng.choice(fns)
            fn(rng, m)
        tracker.scan(m)
        inc = opts.check_changes(m, tracker)
        full = opts.check(m)
        assert _key(inc) == _key(full), f"seed {seed} step {step} after {fn.__name__}"
        assert not any("crashed" in d.message for d in full) or True
        findings += len(full)
    return findings


MODULES = [
    ("xla-dumps", "cnn_fp16",
     "module_14585.jit_model.0059.fusion.after_priority-fusion.before_cse.txt"),
    ("corpus", "xla", "files", "xla__hlo__builder__tests__math_asinh.hlo"),
    ("corpus", "xla", "files", "xla__hlo__translate__hlo_to_mhlo__tests__while.hlo"),
]


@pytest.mark.parametrize("parts", MODULES, ids=lambda p: p[-1][:40])
@pytest.mark.parametrize("opts", range(len(OPTIONS)))
def test_incremental_equals_full_under_random_edits(parts, opts):
    path = shared_path(*parts)
    text = read_text(str(path))
    m = parse_module(text.split("// -----")[0], str(path))
    total = 0
    for seed in range(3):
        m = parse_module(text.split("// -----")[0], str(path))
        total += _fuzz(m, seed * 7 + opts, 40, OPTIONS[opts])
    assert total > 0  # the edits do break things


def _verifier_cases() -> list[Path]:
    return sorted(Path(TESTDATA, "xla_verifier").glob("*.hlo"))


def test_incremental_equals_full_on_xla_verifier_cases():
    """XLA's verifier test modules (async chains, channels, fusions,
    collectives, aliasing...) edited at random."""
    checked = 0
    for k, path in enumerate(_verifier_cases()):
        try:
            m = parse_module(read_text(str(path)), str(path))
        except Exception:
            continue
        _fuzz(m, k, 6, OPTIONS[k % 2])
        checked += 1
    assert checked > 150


def test_memo_changes_no_finding_on_xla_verifier_cases():
    """Rules skipped for content that passed before: same findings."""
    n = 0
    for path in _verifier_cases():
        try:
            m = parse_module(read_text(str(path)), str(path))
        except Exception:
            continue
        for o in OPTIONS:
            plain = [(x[0] and x[0].name, x[2]) for x in run(m, o, memo=False)]
            assert [(x[0] and x[0].name, x[2]) for x in run(m, o)] == plain, path.name
            n += len(plain)
    assert n > 100


def test_violation_in_one_computation_after_a_clean_check_is_found():
    """A clean incremental check, then an edit deep in one computation (a
    fused computation's instruction gets a wrong shape by direct
    assignment): the next incremental check finds it, and the fusion
    that calls it is re-checked too."""
    m = load_module(shared_path(*MODULES[0]))
    v = HloVerifier()
    tracker = ModuleTracker()
    tracker.scan(m)
    assert v.check_changes(m, tracker) == []
    fused = next(c for c in m.computations
                 if c is not m.entry and any(i.opcode == "multiply" for i in c._instructions))
    mul = next(i for i in fused._instructions if i.opcode == "multiply")
    mul.shape = Shape.array("f32", (7,))
    tracker.scan(m)
    got = v.check_changes(m, tracker)
    assert _key(got) == _key(v.check(m))
    assert any(d.instruction == mul.name and "shape" in d.message for d in got)
    # the fix is seen too: back to clean
    mul.shape = mul.operands[0].shape
    tracker.scan(m)
    assert _key(v.check_changes(m, tracker)) == _key(v.check(m))


def test_direct_attribute_and_shape_edits_are_changes():
    m = load_module(shared_path(
        "xla-dumps", "cnn_fp16",
        "module_14585.jit_model.0011.simplification.after_reshape-mover.before_constant_folding.txt"))
    tracker = ModuleTracker()
    g0 = tracker.scan(m)
    assert tracker.scan(m) == g0  # nothing changed: same generation
    b = next(i for i in m.entry._instructions if i.opcode == "broadcast")
    b.attrs["dimensions"] = "{}"  # in place
    g1 = tracker.scan(m)
    assert g1 == g0 + 1 and tracker.changes_since(g0).instructions == {b}
    p = m.entry.parameters[0]
    p.shape = p.shape.without_layout()
    g2 = tracker.scan(m)
    ch = tracker.changes_since(g1)
    assert g2 == g1 + 1 and ch.instructions == {p}
    assert tracker.changes_since(g0).instructions == {b, p}
    before = b.attrs["dimensions"]
    b.attrs["dimensions"] = before  # same value again: no change
    assert tracker.scan(m) == g2


def test_renamed_computations_rename_their_findings():
    """Renaming a computation reruns only what may print its name: an
    instruction of it with a finding (an operand in another computation),
    the users with findings of its instructions, and the callers."""
    m = load_module(shared_path(*MODULES[0]))
    v = HloVerifier()
    tracker = ModuleTracker()
    tracker.scan(m)
    assert v.check_changes(m, tracker) == []
    fused = next(c for c in m.computations
                 if c is not m.entry and any(i.opcode == "multiply" for i in c._instructions))
    mul = next(i for i in fused._instructions if i.opcode == "multiply")
    other = next(i for i in m.entry._instructions if i.opcode == "parameter"
                 and i.shape == mul.operands[0].shape)
    mul.set_operand(0, other)  # an operand from another computation
    tracker.scan(m)
    assert _key(v.check_changes(m, tracker)) == _key(v.check(m))
    for comp in (fused, m.entry):  # the user's computation, then the operand's
        comp.name = comp.name + "_renamed"
        tracker.scan(m)
        got = v.check_changes(m, tracker)
        assert _key(got) == _key(v.check(m))
        assert any(comp.name in d.message for d in got)


def test_callers_reordered_by_removing_and_adding_a_caller_again():
    """A fused computation called by three fusions: each names the first
    other caller.  Removing a caller and adding it back unchanged moves
    it to the end of the call order, so another caller is named first."""
    m = parse_module("""HloModule m

%fused (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} negate(f32[4]{0} %p)
}

ENTRY %e (a: f32[4]) -> (f32[4], f32[4], f32[4]) {
  %a = f32[4]{0} parameter(0)
  %f1 = f32[4]{0} fusion(f32[4]{0} %a), kind=kLoop, calls=%fused
  %f2 = f32[4]{0} fusion(f32[4]{0} %a), kind=kLoop, calls=%fused
  %f3 = f32[4]{0} fusion(f32[4]{0} %a), kind=kLoop, calls=%fused
  ROOT %t = (f32[4]{0}, f32[4]{0}, f32[4]{0}) tuple(%f1, %f2, %f3)
}
""")
    v = HloVerifier()
    tracker = ModuleTracker()
    tracker.scan(m)
    before = _key(v.check_changes(m, tracker))
    assert any("also called by f2" in k[3] for k in before)
    entry = m.entry
    f2 = next(i for i in entry._instructions if i.name == "f2")
    del entry._instructions[f2]  # out and back in, unchanged: now last
    f2.parent = None
    entry._instructions[f2] = None
    f2.parent = entry
    tracker.scan(m)
    got = _key(v.check_changes(m, tracker))
    assert got == _key(v.check(m))
    assert got != before


def test_light_changes_rerun_no_rule(monkeypatch):
    """Changes no rule reads from the changed instruction itself (a new
    ``backend_config`` on every fusion, a rename, a user added elsewhere)
    rerun no instruction rule and keep the call graph; a rename still
    renames the findings that print the name."""
    import hlorun.verifier.incremental as inc
    m = load_module(shared_path(*MODULES[0]))
    v = HloVerifier()
    tracker = ModuleTracker()
    tracker.scan(m)
    assert v.check_changes(m, tracker) == []
    runs: list = []
    rebuilt: list = []
    real, real_calls = inc.instruction_findings, inc.update_calls
    monkeypatch.setattr(inc, "instruction_findings", lambda *a: runs.append(a[0]) or real(*a))
    monkeypatch.setattr(inc, "update_calls", lambda *a: rebuilt.append(1) or real_calls(*a))
    fusions = [i for i in m.entry._instructions if i.opcode == "fusion"]
    assert len(fusions) > 5
    for f in fusions:
        f.attrs["backend_config"] = '{"operation_queue_id":"0"}'
    fusions[0].name = fusions[0].name + "_renamed"
    tracker.scan(m)
    assert _key(v.check_changes(m, tracker)) == _key(v.check(m)) == []
    assert runs == [] and rebuilt == []
    # a finding on a user names its operand: renaming the operand reruns it
    user = next(u for u in fusions[1]._users)
    fusions[1]._users = tuple(u for u in fusions[1]._users if u is not user)  # broken use-def
    tracker.scan(m)
    assert _key(v.check_changes(m, tracker)) == _key(v.check(m)) != []
    fusions[1].name = fusions[1].name + "_renamed"
    tracker.scan(m)
    got = _key(v.check_changes(m, tracker))
    assert got == _key(v.check(m)) and any(fusions[1].name in k[3] for k in got)


def test_name_sets_follow_random_edits(monkeypatch):
    """Every computation keeps its set of names (the threshold lowered to
    0; normally only big ones do) and duplicate names come, go and move
    between computations by random renames, additions, removals and moves,
    the old rows of instructions changed over several scans merged into
    one change (the verifier asked every third scan): findings equal a
    full run's."""
    import hlorun.verifier.incremental_state as state
    monkeypatch.setattr(state, "NAME_SET_MIN", 0)
    opts = HloVerifier()
    edits = [f for f, w in EDITS + [(_rename, 12), (_move, 6), (_add, 4), (_remove, 4)]
             for _ in range(w)]
    used = dups = 0
    for parts in MODULES:
        text = read_text(str(shared_path(*parts)))
        for seed in range(3):
            rng = random.Random(seed)
            m = parse_module(text.split("// -----")[0], parts[-1])
            tracker = ModuleTracker()
            tracker.scan(m)
            opts.check_changes(m, tracker)
            for step in range(60):
                rng.choice(edits)(rng, m)
                tracker.scan(m)
                if step % 3:
                    continue
                inc = _key(opts.check_changes(m, tracker))
                assert inc == _key(opts.check(m)), f"{parts[-1]} seed {seed} step {step}"
                dups += sum("not unique" in k[3] for k in inc)
                st = next(v for k, v in tracker.cache.items() if k[0] == "hlo-verifier")
                used += len(st.names)
    assert used > 0 and dups > 0
