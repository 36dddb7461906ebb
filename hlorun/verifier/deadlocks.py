"""XLA's ``VerifyNoCollectiveDeadlocks`` (the ``verify_no_collective_deadlocks``
option, which XLA:GPU turns on): in a scheduled module, device-to-device
send/recv pairs, walked in schedule order through the entry computation and
what it calls, must match by ``_xla_send_recv_source_target_pairs`` with no
other collective in between, no cycles or duplicated sources/targets, and
nothing left dangling at the end."""

from __future__ import annotations

import re
from typing import Any

from ..ir import attrs as A
from ..ir.module import Computation, Instruction, Module
from .base import VerifyError

PAIRS_ATTR = "_xla_send_recv_source_target_pairs"
PIPELINE_ATTR = "_xla_send_recv_pipeline"
_OTHER = frozenset({"all-gather", "all-reduce", "all-to-all", "ragged-all-to-all",
                    "collective-permute", "reduce-scatter", "collective-broadcast"})

NONE, EXPECT_SEND, EXPECT_RECV = "none", "send", "recv"


def _fa(instr: Instruction) -> dict[str, str]:
    text = instr.attrs.get("frontend_attributes")
    return A.parse_frontend_attributes(text) if text else {}


def _pairs(instr: Instruction) -> list[tuple[int, int]]:
    text = _fa(instr).get(PAIRS_ATTR)
    if text is None:
        raise VerifyError(f"Instruction {instr.name} does not have source-target pairs "
                          "attribute")
    groups = re.findall(r"\{([^{}]*)\}", text)
    out = []
    for g in groups:
        ids = [int(x) for x in g.split(",") if x.strip()]
        if len(ids) != 2:
            raise VerifyError(f"Incorrect element size : {text}")
        out.append((ids[0], ids[1]))
    return out


def _has_cycles(pairs: list[tuple[int, int]]) -> bool:
    nxt: dict[int, int] = {}
    for s, t in pairs:
        nxt[s] = t
    acyclic: set[int] = set()
    for start in list(nxt):
        path: set[int] = set()
        cur = start
        while cur in nxt and cur not in acyclic:
            if cur in path:
                return True
            path.add(cur)
            cur = nxt[cur]
        acyclic |= path
    return False


def _no_conflicts(instr: Instruction, pairs: list[tuple[int, int]]) -> None:
    if _has_cycles(pairs):
        raise VerifyError("Expected send and recv instructions to have non-cyclical "
                          f"source-target pairs, but found {instr.name}")
    if len({s for s, _ in pairs}) != len(pairs) or len({t for _, t in pairs}) != len(pairs):
        raise VerifyError("Expected send and recv instructions to have unique source and "
                          f"target pairs, but found {instr.name}")


def _conflict_free(instr: Instruction, pending: list[Instruction]) -> bool:
    mine = _pairs(instr)
    for other in pending:
        try:
            _no_conflicts(other, mine + _pairs(other))
        except VerifyError:
            return False
    pending.append(instr)
    return True


def _skip(instr: Instruction) -> bool:
    if instr.attrs.get("is_host_transfer") == "true" or PIPELINE_ATTR in _fa(instr):
        return True
    _no_conflicts(instr, _pairs(instr))
    return False


def _match(instr: Instruction, candidates: list[Instruction]) -> Instruction | None:
    mine = "".join(_fa(instr).get(PAIRS_ATTR, "").split())
    for c in candidates:
        if "".join(_fa(c).get(PAIRS_ATTR, "?").split()) == mine:
            return c
    return None


class _Walk:
    def __init__(self, async_comps: set[Computation]):
        self.async_comps = async_comps

    def run(self, comp: Computation, st: dict) -> None:
        for instr in comp._instructions:
            callees = instr.called_computations() if instr.attrs else []
            if not callees:
                self.visit(instr, st)
                continue
            for callee in callees:
                expands = all(i is callee.root or i.opcode == "parameter"
                              for i in callee._instructions)
                if callee in self.async_comps and not expands:
                    inner = {"state": NONE, "sends": [], "recvs": []}
                    self.run(callee, inner)
                    if st["state"] != NONE:
                        pending(inner["sends"], inner["recvs"])
                else:
                    self.run(callee, st)

    def visit(self, instr: Instruction, st: dict) -> None:
        op = instr.opcode
        if op == "send":
            if _skip(instr):
                return
            if st["state"] == NONE:
                st["sends"].append(instr)
                st["state"] = EXPECT_RECV
            elif st["state"] == EXPECT_RECV:
                if not _conflict_free(instr, st["sends"]):
                    raise VerifyError(f"Expected recv, but found {instr.name}")
            else:
                recv = _match(instr, st["recvs"])
                if recv is not None:
                    st["recvs"].remove(recv)
                    if not st["recvs"]:
                        st["state"] = NONE
                else:
                    st["sends"].append(instr)
        elif op == "recv":
            if _skip(instr):
                return
            if st["state"] == NONE:
                st["recvs"].append(instr)
                st["state"] = EXPECT_SEND
            elif st["state"] == EXPECT_SEND:
                if not _conflict_free(instr, st["recvs"]):
                    raise VerifyError(f"Expected send, but found {instr.name}")
            else:
                send = _match(instr, st["sends"])
                if send is not None:
                    st["sends"].remove(send)
                    if not st["sends"]:
                        st["state"] = NONE
                else:
                    st["recvs"].append(instr)
        elif op in _OTHER and st["state"] != NONE:
            if st["sends"] or st["recvs"]:
                raise VerifyError("Expected send and recv instructions to have the same "
                                  "source-target pairs, but could not match some "
                                  "instructions. Introducing the following instruction will "
                                  f"cause a deadlock: {instr.name}")
            raise VerifyError(f"Expected send or recv, but found {instr.name}")


def pending(sends: list[Instruction], recvs: list[Instruction]) -> None:
    """``CheckPendingSendRecvDeadlocks``."""
    if not recvs and sends:
        raise VerifyError("Expected recv to match send")
    if not sends and recvs:
        raise VerifyError("Expected send to match recv")
    sends, recvs = list(sends), list(recvs)
    left = []
    for s in list(sends):
        r = _match(s, recvs)
        if r is not None:
            recvs.remove(r)
        else:
            left.append(s.name)
    for r in recvs:
        s = _match(r, sends)
        if s is not None:
            sends.remove(s)
        else:
            left.append(r.name)
    if left:
        raise VerifyError(f"Deadlock detected. Last checked instructions: {', '.join(left)}")


def check_deadlocks(module: Module, ctx: Any) -> str | None:
    """The deadlock finding of a scheduled module, or None."""
    if not module.is_scheduled or module.entry is None:
        return None
    st = {"state": NONE, "sends": [], "recvs": []}
    try:
        _Walk(ctx.async_computations).run(module.entry, st)
        if st["state"] != NONE:
            pending(st["sends"], st["recvs"])
    except VerifyError as e:
        return str(e)
    return None
