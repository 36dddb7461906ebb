"""layout assignment's IsPackedInstruction on a deep chain: the residual
stream of a 256-layer transformer is an add chain of a few thousand
instructions in front of every dot (it raised RecursionError)."""

from __future__ import annotations

from hlorun.passes.layout_assignment.gpu import is_packed_instruction
from hlorun.text.parser import parse_module


def _chain(n: int, first: str) -> str:
    lines = ["HloModule chain", "", "ENTRY main {",
             f"  p0 = {first}[64]{{0}} parameter(0)",
             "  p1 = bf16[64]{0} parameter(1)",
             f"  a0 = bf16[64]{{0}} convert(p0)" if first != "bf16" else "  a0 = bf16[64]{0} negate(p0)"]
    for k in range(1, n):
        lines.append(f"  a{k} = bf16[64]{{0}} add(p1, a{k - 1})")
    lines.append(f"  ROOT r = bf16[64]{{0}} negate(a{n - 1})")
    lines.append("}")
    return "\n".join(lines)


def test_deep_add_chain_without_a_packed_source():
    m = parse_module(_chain(5000, "bf16"))
    assert is_packed_instruction(m.entry.root) is False


def test_deep_add_chain_reaches_an_s4_source():
    m = parse_module(_chain(5000, "s4"))
    assert is_packed_instruction(m.entry.root) is True


def test_shared_memo_walks_the_chain_once():
    """Every dot of the layer stack asks about its own point of the chain: with
    the run's memo the chain is walked once in all (linear), not once per dot,
    and the verdicts are those of a fresh walk."""
    m = parse_module(_chain(3000, "s4"))
    instrs = [i for i in m.entry.instructions if i.name.startswith("a")]
    memo: dict = {}
    got = [is_packed_instruction(i, memo) for i in reversed(instrs)]
    assert got == [True] * len(instrs)
    assert len(memo) <= len(m.entry.instructions)
    m = parse_module(_chain(3000, "bf16"))
    memo = {}
    instrs = [i for i in m.entry.instructions if i.name.startswith("a")]
    assert [is_packed_instruction(i, memo) for i in instrs[::500]] == \
        [is_packed_instruction(i) for i in instrs[::500]] == [False] * 6
    assert len(memo) <= len(m.entry.instructions)
