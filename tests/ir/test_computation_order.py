"""Module.computation_post_order / embedded_computations (one sweep of
call lists shared by every computation) against the direct definition
(walk each computation's instructions, callees pushed in reverse), on real
dumps with fusions, while loops, conditionals and async calls."""

from __future__ import annotations

from pathlib import Path

import pytest

from hlorun.ir.module import Computation, embedded_computations
from hlorun.text.parser import load_module

DUMPS = Path(__file__).resolve().parents[2] / "testdata" / "xla-dumps"


def _embedded(comp: Computation) -> list[Computation]:
    visited: set = set()
    order: list = []
    for instr in comp._instructions:
        stack = []
        for callee in reversed(instr.called_computations()):
            if callee not in visited:
                visited.add(callee)
                stack.append((callee, iter(list(callee._instructions))))
        while stack:
            cur, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                order.append(cur)
                continue
            for callee in reversed(nxt.called_computations()):
                if callee not in visited:
                    visited.add(callee)
                    stack.append((callee, iter(list(callee._instructions))))
    return order


def _post_order(module) -> list[Computation]:
    called = {c for comp in module.computations for i in comp._instructions
              for c in i.called_computations()}
    added: set = set()
    order: list = []
    for comp in module.computations:
        if comp in called:
            continue
        for emb in _embedded(comp) + [comp]:
            if emb not in added:
                added.add(emb)
                order.append(emb)
    order.extend(c for c in module.computations if c not in added)
    return order


FILES = sorted(p for d in ("cond_while", "transformer_scan_4l_bf16", "gqa_decode_loop",
                           "moe_topk_train", "transformer_2l_bf16")
               for p in (DUMPS / d).glob("*optimizations.txt*")
               if "buffer-assignment" not in p.name and "memory-usage" not in p.name)


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name[:40]}")
def test_same_order_as_the_definition(path):
    m = load_module(str(path))
    got = m.computation_post_order()
    assert [c.name for c in got] == [c.name for c in _post_order(m)]
    assert len(got) == len(m.computations)
    for comp in m.computations:
        assert embedded_computations(comp) == _embedded(comp)


def test_files_exercise_nested_calls():
    """The files above have callees that call again (reducers inside fusions,
    while bodies with fusions), so the order is not trivial."""
    nested = 0
    for path in FILES:
        m = load_module(str(path))
        nested += sum(1 for c in m.computations if len(embedded_computations(c)) >= 2)
    assert nested > 10


def _instruction_post_order(comp) -> list:
    """``MakeInstructionPostOrder`` written directly: operands (first to
    last) then control predecessors, each only while not yet done."""
    order: list = []
    visited: dict = {}
    for root in comp._instructions:
        if root._users or visited.get(root) == 2:
            continue
        stack = [root]
        while stack:
            cur = stack[-1]
            st = visited.get(cur)
            if st is None:
                visited[cur] = 1
                for o in reversed(cur.operands):
                    if visited.get(o) != 2:
                        stack.append(o)
                for p in cur.control_predecessors:
                    if visited.get(p) != 2:
                        stack.append(p)
            else:
                stack.pop()
                if st != 2:
                    visited[cur] = 2
                    order.append(cur)
    seen = set(order)
    order.extend(i for i in comp._instructions if i not in seen)
    return order


POST_ORDER_FILES = FILES + sorted(
    (Path(__file__).resolve().parents[2] / "testdata").glob("xla_verifier/*Deadlock*.hlo")) + [
    Path(__file__).resolve().parents[2] / "testdata" / "transformer" / "jax_4layer_train_step.hlo.gz"]


@pytest.mark.parametrize("path", POST_ORDER_FILES, ids=lambda p: p.name[:50])
def test_instruction_post_order_is_the_definition(path):
    """Computation.post_order pushes done operands too (in C) and drops them
    when they reach the top; the order is the direct definition's,
    control predecessors included."""
    m = load_module(str(path))
    for comp in m.computations:
        assert comp.post_order() == _instruction_post_order(comp)


def test_post_order_files_have_control_predecessors_and_shared_operands():
    found = False
    for path in POST_ORDER_FILES:
        m = load_module(str(path))
        found |= any(i.control_predecessors for i in m.instructions())
    assert found
