"""Lineage of instructions through a pipeline run (for ``--explain``).

:class:`LineageTracker` is a pipeline :class:`~hlorun.pipeline.run.Listener`.
At the start of the run every instruction is its own origin (its name and
``metadata op_name`` in the input module).  Around each pass it takes a
snapshot (instructions, their users and each computation's root) and
afterwards carries origins and decision history forward:

* an instruction that disappeared hands its origins and history to the
  instruction its surviving users (or its computation's root) now read in
  its place -- replacements, CSE, rewrites of any pass, without the pass
  saying anything;
* a pass remark targets its ``instruction`` (after the pass; or, if that
  instruction is gone, the one it was before the pass) and links it to the
  instructions named in ``derived_from`` (before the pass): fusion
  ("X fused into F"), expansions, renames;
* new instructions that still have no origin take those of the new
  instructions they feed (the whole expansion of a rewritten dot derives
  from the dot).

The result: for every instruction alive at the end, the original
instructions it came from and the remarks (pass decisions) made about any
of them, in pipeline order.  Instructions are tracked by identity, so
renames (rename_fusions) do not break the chain.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..ir.module import Computation, Instruction, Module
from ..passes.base import Remark
from ..pipeline.run import Listener, PassEvent


@dataclass(frozen=True)
class Origin:
    """An instruction of the input module."""

    name: str
    opcode: str
    op_name: str | None
    shape: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "opcode": self.opcode, "op_name": self.op_name,
                "shape": self.shape}


@dataclass
class Decision:
    """A remark with where it was made."""

    index: int          # pass execution number
    path: str           # pipeline/pass
    remark: Remark
    seq: int = 0
    #: original instructions the remark's subject derived from at that point
    origins: frozenset[str] = frozenset()
    #: original instructions of what the remark's derived_from named
    source_origins: frozenset[str] = frozenset()

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "path": self.path, **self.remark.to_json(),
                "origins": sorted(self.origins)}


#: leaves that many unrelated instructions share (after CSE): their lineage
#: does not follow the instructions that read them when those are rewritten
_SHARED_LEAVES = frozenset({"constant", "iota", "parameter"})


def _base_name(name: str) -> str:
    """``cublas-gemm.2`` -> ``cublas-gemm`` (XLA's name uniquifier suffix)."""
    head, dot, tail = name.rpartition(".")
    return head if dot and tail.isdigit() else name


def _all_instructions(module: Module) -> list[Instruction]:
    out: list[Instruction] = []
    for c in module.computations:
        out.extend(c._instructions)
    return out


@dataclass
class _Snapshot:
    alive: set[Instruction]
    users: dict[Instruction, list[tuple[Instruction, int]]]
    roots: dict[Computation, Instruction | None]
    names: dict[str, Instruction]


class LineageTracker(Listener):
    """Carries origins and decisions through a pipeline run."""

    def __init__(self) -> None:
        self.origins: dict[Instruction, set[str]] = {}
        self.history: dict[Instruction, list[int]] = {}
        self.originals: dict[str, Origin] = {}
        self.decisions: list[Decision] = []
        self._snap: _Snapshot | None = None

    # -- listener events -------------------------------------------------------------
    def on_run_start(self, run: Any, module: Module) -> None:
        for i in _all_instructions(module):
            if i.opcode == "parameter" and i.parent is not module.entry:
                continue
            self.origins[i] = {i.name}
            self.history[i] = []
            self.originals[i.name] = Origin(i.name, i.opcode, i.op_name, str(i.shape))

    def on_before_pass(self, ev: PassEvent, module: Module) -> None:
        alive = set(_all_instructions(module))
        users = {i: [(u, k) for u in i._users for k, o in enumerate(u.operands) if o is i]
                 for i in alive}
        roots = {c: c.root for c in module.computations}
        names = {i.name: i for i in alive}
        self._snap = _Snapshot(alive, users, roots, names)

    def on_after_pass(self, ev: PassEvent, module: Module) -> None:
        snap = self._snap
        self._snap = None
        if snap is None:
            return
        if not ev.changed and not ev.remarks:
            return
        now = _all_instructions(module)
        alive = set(now)
        by_name = {i.name: i for i in now}
        # Remarks, in order.  A remark's target is the instruction it names
        # after the pass, else the one of that name before the pass (the
        # lineage then flows to its replacement below), else an instruction
        # that lived only inside the pass (a "virtual" name, e.g. a fusion
        # that was created and merged again).
        virtual: dict[str, tuple[set[str], list[int]]] = {}

        consumed: set[str] = set()

        def lineage_of(name: str) -> tuple[set[str], list[int]]:
            if name in virtual:
                consumed.add(name)  # e.g. a fusion fused into another one
                return virtual[name]
            obj = snap.names.get(name) or by_name.get(name)
            if obj is None:
                return set(), []
            return self.origins.get(obj, set()), self.history.get(obj, [])
        for r in ev.remarks:
            d = Decision(ev.index, ev.path, r, len(self.decisions))
            self.decisions.append(d)
            srcs = [lineage_of(n) for n in r.derived_from]
            d.source_origins = frozenset(x for o, _ in srcs for x in o)
            name = r.instruction
            obj = by_name.get(name) if name else None
            if obj is None and name:
                obj = snap.names.get(name)
            if obj is not None:
                for o, h in srcs:
                    self._merge_sets(obj, o, h)
                self._attach(obj, d)
                d.origins = frozenset(self.origins.get(obj, ()))
            elif name:
                o_acc, h_acc = virtual.setdefault(name, (set(), []))
                for o, h in srcs:
                    o_acc.update(o)
                    h_acc.extend(x for x in h if x not in h_acc)
                h_acc.append(d.seq)
                d.origins = frozenset(o_acc)
            else:
                d.origins = frozenset(x for o, _ in srcs for x in o)
        # replacements: what the surviving users of a removed instruction read
        # now; a removed instruction whose users were removed too (the inside
        # of a rewritten pattern) follows them to their replacement
        removed = [x for x in snap.alive if x not in alive]
        accounted = {snap.names[n] for r in ev.remarks for n in r.derived_from
                     if n in snap.names and snap.names[n] not in alive}
        for r, dests in self._destinations(removed, alive, snap, accounted).items():
            for d in dests:
                self._merge(d, r)
        # new instructions: take the origins of the new instructions they feed
        new = [i for i in now if i not in snap.alive]
        for i in new:
            self.origins.setdefault(i, set())
            self.history.setdefault(i, [])
        self._propagate_into_new(new, set(new))
        rest = {k: v for k, v in virtual.items() if k not in consumed}
        if rest:
            self._settle_virtual(rest, new)

    # -- helpers ---------------------------------------------------------------------
    def _attach(self, instr: Instruction, d: Decision) -> None:
        h = self.history.setdefault(instr, [])
        if d.seq not in h:
            h.append(d.seq)

    def _merge_sets(self, into: Instruction, origins: set[str], history: list[int]) -> None:
        self.origins.setdefault(into, set()).update(origins)
        h = self.history.setdefault(into, [])
        for x in history:
            if x not in h:
                h.append(x)

    def _merge(self, into: Instruction, src: Instruction) -> None:
        self.origins.setdefault(into, set()).update(self.origins.get(src, ()))
        h = self.history.setdefault(into, [])
        for s in self.history.get(src, ()):
            if s not in h:
                h.append(s)

    def _destinations(self, removed: list[Instruction], alive: set[Instruction],
                      snap: _Snapshot, accounted: set[Instruction]
                      ) -> dict[Instruction, set[Instruction]]:
        """Where the lineage of each removed instruction goes: the operands
        its surviving users read in its place, the new root of a computation
        it was the root of, else where its removed users went.  Instructions
        a remark already accounted for (``derived_from``: fused producers,
        rewritten dots) and shared leaves (constants) do not take that last
        step: the remark carried them."""
        removed_set = set(removed)
        new_root = {root: c.root for c, root in snap.roots.items()
                    if root in removed_set and c.root is not None and c.root is not root}
        dest: dict[Instruction, set[Instruction]] = {}
        for r0 in removed:
            stack = [(r0, False)]
            while stack:
                r, ready = stack.pop()
                if r in dest:
                    continue
                users = snap.users.get(r, ())
                if not ready:
                    stack.append((r, True))
                    stack.extend((u, False) for u, _ in users
                                 if u in removed_set and u not in dest and u is not r)
                    continue
                out: set[Instruction] = set()
                cone = r not in accounted and r.opcode not in _SHARED_LEAVES
                for user, k in users:
                    if user in alive:
                        if k < len(user.operands) and user.operands[k] is not r:
                            out.add(user.operands[k])
                    elif cone and user in dest:
                        out |= dest[user]
                if r in new_root:
                    out.add(new_root[r])
                dest[r] = out
        return dest

    def _settle_virtual(self, virtual: dict[str, tuple[set[str], list[int]]],
                        new: list[Instruction]) -> None:
        """A name that lived only inside the pass (a rewriter's intermediate
        ``cublas-gemm.1`` that became ``cublas-gemm.2``) hands its decisions
        to the new instructions of the same base name that derive from the
        same originals."""
        by_base: dict[str, list[Instruction]] = {}
        for i in new:
            by_base.setdefault(_base_name(i.name), []).append(i)
        for name, (origins, history) in virtual.items():
            same = by_base.get(_base_name(name), [])
            hits = [i for i in same if origins and origins <= self.origins.get(i, set())]
            for i in hits or (same if len(same) == 1 else []):
                self._merge_sets(i, origins, history)

    def _propagate_into_new(self, new: list[Instruction], new_set: set[Instruction]) -> None:
        """New instructions that no remark or replacement accounted for: a
        tuple element or bitcast of a new instruction is that instruction;
        anything else belongs to the new instructions it feeds (the
        expansion of a rewritten instruction derives from it)."""
        comps = {i.parent for i in new if i.parent is not None}
        for comp in comps:
            order = comp.post_order()
            for i in order:
                if i in new_set and not self.origins.get(i) and i.opcode in (
                        "get-tuple-element", "bitcast") and i.operands[0] in new_set:
                    self._merge(i, i.operands[0])
            for i in reversed(order):
                if i not in new_set or i.opcode == "parameter" or self.origins.get(i):
                    continue
                for u in i._users:
                    if u in new_set:
                        self._merge(i, u)

    # -- queries ---------------------------------------------------------------------
    def origins_of(self, instr: Instruction) -> list[Origin]:
        names = self.origins.get(instr, set())
        if instr.opcode == "fusion" and instr.fused_computation is not None:
            for i in instr.fused_computation._instructions:
                names = names | self.origins.get(i, set())
        return [self.originals[n] for n in sorted(names) if n in self.originals]

    def decisions_of(self, instr: Instruction) -> list[Decision]:
        seqs = set(self.history.get(instr, ()))
        if instr.opcode == "fusion" and instr.fused_computation is not None:
            for i in instr.fused_computation._instructions:
                seqs.update(self.history.get(i, ()))
        return [self.decisions[s] for s in sorted(seqs)]


__all__ = ["Decision", "LineageTracker", "Origin"]
