"""Repeated evaluation of a module that a pipeline keeps changing, reusing
what did not change (``compile --check-numerics=each``).

Every instruction (of the entry and of every computation it calls, except
lifted scalar reducers) gets a key: its structure (opcode, shape, for
bitcasts with its own and its operand's layout, attributes other than
metadata and the
backend config of anything but a custom call, literal, parameter number, and the
structure of every computation it calls, recursively) plus the *value ids*
of its operands.  A value id names an array by its content (dtype, shape
and a 128-bit digest of its bytes: xxh3 when the ``xxhash`` package
is installed, else BLAKE2), so an instruction a pass rewrote but
whose result is bitwise the same (a fusion of the same elementwise ops, a
renamed or moved instruction) hands the same id to its users, and their
keys match the previous evaluation again.  Only instructions whose key is
new are evaluated; the others take the stored value.  The store keeps the
values of the last evaluation (bounded by ``budget_bytes``), so memory
stays about one evaluation's worth of values.

The results are exactly those of a fresh :class:`Evaluator` run: a key
fixes the computation and the bytes of every input.
"""

from __future__ import annotations

import hashlib
from typing import Any, Sequence

try:  # xxh3-128 hashes at memory speed; BLAKE2 (stdlib) is the fallback
    from xxhash import xxh3_128_digest as _digest
except ImportError:  # pragma: no cover - depends on the environment
    def _digest(data) -> bytes:
        return hashlib.blake2b(data, digest_size=16).digest()

import numpy as np

from ..ir.module import Computation, Instruction, Module
from .core import Evaluator, check_result, check_value
from .registry import EvaluationError

_SKIP_ATTRS = frozenset({"metadata", "frontend_attributes", "statistics"})


class MemoEvaluator:
    """Evaluates successive states of one module on fixed arguments."""

    def __init__(self, args: Sequence[Any], max_bytes: int | None = None,
                 budget_bytes: int = 2 << 30):
        self.args = list(args)
        self.max_bytes = max_bytes
        self.budget_bytes = budget_bytes
        self._ids: dict[Any, int] = {}          # structure/content -> small int
        self._store: dict[tuple, tuple[Any, Any]] = {}  # key -> (value, value id)
        self.root_vid: Any = None                # value id of the last result
        self.evaluated = 0                       # instructions computed in the last run
        self.reused = 0                          # instructions taken from the store

    # -- ids -----------------------------------------------------------------------------
    def _id(self, key: Any) -> int:
        got = self._ids.get(key)
        if got is None:
            got = self._ids[key] = len(self._ids)
        return got

    def value_id(self, value: Any) -> Any:
        if isinstance(value, tuple):
            return ("t",) + tuple(self.value_id(v) for v in value)
        if value is None:
            return None
        a = np.ascontiguousarray(value)
        digest = _digest(a.view(np.uint8).reshape(-1) if a.size else b"")
        return self._id((a.dtype.str, a.shape, digest))

    def _attrs(self, ins: Instruction, comp_ids: dict) -> tuple:
        out = []
        for k, v in ins.attrs.items():
            if k in _SKIP_ATTRS or (k == "backend_config" and ins.opcode != "custom-call"):
                continue
            if isinstance(v, Computation):
                v = ("comp", self._comp_id(v, comp_ids))
            elif isinstance(v, list):
                v = tuple(("comp", self._comp_id(c, comp_ids)) if isinstance(c, Computation)
                          else (c if not isinstance(c, list) else tuple(c)) for c in v)
            elif not isinstance(v, (str, int, float, bool, type(None), tuple)):
                v = repr(v)
            out.append((k, v))
        return tuple(out)

    def _struct(self, ins: Instruction, comp_ids: dict) -> int:
        lit = ins.literal.text if ins.literal is not None else None
        # Backend configs (tiling, Triton configs) change values in this
        # evaluator only for custom calls (GEMM/conv parameters); layouts only
        # for bitcasts (the one op that reads the physical order).
        shape = str(ins.shape) if ins.opcode == "bitcast" else ins.shape.to_string(False)
        return self._id((ins.opcode, shape, self._attrs(ins, comp_ids),
                         lit, ins.parameter_number))

    def _comp_id(self, comp: Computation, comp_ids: dict) -> int:
        """Structure of a called computation (names do not matter)."""
        got = comp_ids.get(comp)
        if got is not None:
            return got
        comp_ids[comp] = -1  # a cycle guard; computations do not recurse in valid HLO
        local: dict[Instruction, int] = {}
        order = _post_order(comp.root) if comp.root is not None else []
        for ins in order:
            local[ins] = self._id((self._struct(ins, comp_ids), _operand_keys(ins, local)))
        got = comp_ids[comp] = self._id(("C", local[comp.root]) if comp.root is not None
                                        else ("C", None))
        return got

    # -- evaluation ------------------------------------------------------------------------
    def evaluate(self, module: Module) -> Any:
        entry = module.entry
        if entry is None or entry.root is None:
            raise EvaluationError("module has no entry computation")
        params = entry.parameters
        if len(params) != len(self.args):
            raise EvaluationError(f"entry computation {entry.name} takes {len(params)} "
                                  f"arguments, {len(self.args)} given")
        for i, (p, a) in enumerate(zip(params, self.args)):
            if p is None:
                raise EvaluationError(f"entry computation {entry.name} has no parameter {i}")
            check_value(p.shape, a, f"argument {i} ({p.name})")
        if self.max_bytes is not None:
            from .memory import check_memory
            check_memory(module, self.args, self.max_bytes)
        ev = _MemoCalls(module, self, self.max_bytes)
        self._comp_ids: dict[Computation, int] = {}
        self._orders: dict[Computation, list[Instruction]] = {}
        self._known: dict[int, tuple[Any, Any]] = {}
        self._new_store: dict[tuple, tuple[Any, Any]] = {}
        self._stored = 0
        self.evaluated = self.reused = 0
        arg_vids = []
        for n, a in enumerate(self.args):
            vid = ("arg", n)
            self._known[id(a)] = (a, vid)
            arg_vids.append(vid)
        try:
            out = self.call(ev, entry, self.args, arg_vids)
            self.root_vid = self._vid_of(out)
            return out
        finally:
            self._store = self._new_store
            self._new_store = {}
            self._known = {}

    def _vid_of(self, value: Any) -> Any:
        got = self._known.get(id(value))
        if got is not None and got[0] is value:
            return got[1]
        vid = self.value_id(value)
        self._known[id(value)] = (value, vid)
        return vid

    def call(self, ev: Evaluator, comp: Computation, args: Sequence[Any],
             arg_vids: Sequence[Any] | None = None) -> Any:
        """Evaluate ``comp`` on ``args``, reusing stored values by key."""
        if arg_vids is None:
            arg_vids = [self._vid_of(a) for a in args]
        order = self._orders.get(comp)
        if order is None:
            if comp.root is None:
                raise EvaluationError(f"computation {comp.name} has no root")
            order = self._orders[comp] = _post_order(comp.root)
        comp_ids = self._comp_ids
        values: dict[Instruction, Any] = {}
        vids: dict[Instruction, Any] = {}
        for ins in order:
            if ins.opcode == "parameter":
                n = ins.parameter_number
                if n is None or n >= len(args):
                    raise EvaluationError(f"parameter {n} was not passed to {comp.name}").at(ins)
                values[ins] = args[n]
                vids[ins] = arg_vids[n]
                continue
            key = (self._struct(ins, comp_ids), _operand_keys(ins, vids))
            hit = self._store.get(key) or self._new_store.get(key)
            if hit is not None:
                val, vid = hit
                self.reused += 1
            else:
                val = ev._eval(ins, [values[o] for o in ins.operands])
                check_result(ins, val)
                vid = self.value_id(val)
                self.evaluated += 1
            self._known[id(val)] = (val, vid)
            values[ins] = val
            vids[ins] = vid
            if key not in self._new_store:
                size = _nbytes(val)
                if self._stored + size <= self.budget_bytes:
                    self._new_store[key] = (val, vid)
                    self._stored += size
        return values[comp.root]


class _MemoCalls(Evaluator):
    """An :class:`Evaluator` whose computation calls (fusion bodies, called
    computations, loop bodies) go through the memo; lifted scalar
    computations (reducers, comparators) are evaluated directly."""

    def __init__(self, module: Module, memo: MemoEvaluator, max_bytes: int | None):
        super().__init__(module, max_bytes=max_bytes)
        self.memo = memo

    def call(self, comp: Computation, args: Sequence[Any]) -> Any:
        if self.lifted:
            return super().call(comp, args)
        return self.memo.call(self, comp, args)


def _operand_keys(ins: Instruction, ids: dict) -> tuple:
    """Operands' ids; for a bitcast with their layouts too (it reads its
    operand's physical order)."""
    if ins.opcode == "bitcast":
        return tuple((ids[o], str(o.shape)) for o in ins.operands)
    return tuple(ids[o] for o in ins.operands)


def _nbytes(v: Any) -> int:
    if isinstance(v, tuple):
        return sum(_nbytes(x) for x in v)
    return int(getattr(v, "nbytes", 0))


def _post_order(root: Instruction) -> list[Instruction]:
    order: list[Instruction] = []
    state: dict[Instruction, int] = {}
    stack = [root]
    while stack:
        cur = stack[-1]
        if cur not in state:
            state[cur] = 1
            stack.extend(o for o in reversed(cur.operands) if o not in state)
        else:
            stack.pop()
            if state[cur] == 1:
                state[cur] = 2
                order.append(cur)
    return order
