"""Producer priorities for priority fusion, kept up to date incrementally.

A producer's priority is ``unfused - fused`` over its non-bitcast users
(see the package docstring).  Recomputing it from scratch every time the
producer is re-queued costs O(users) cost-model calls, and a producer is
re-queued every time one of its users is fused: a broadcast read by every
layer of a 256-layer model has ~2,000 users and was re-estimated ~2,000
times, O(users^2).  XLA's PriorityFusion updates such priorities
incrementally (``operands_to_new_consumers_`` /
``operands_to_removed_consumers_runtimes``); :class:`ProducerCosts` does
too, but keeps the result identical to a fresh computation:

* per producer an aggregate of its users' terms: the CanFuse verdict and,
  for fusible pairs, ``t(user)`` and ``t(producer+user)`` as exact
  integers (multiples of 2**-1074), so the sums do not depend on the order
  terms were added or removed in; :func:`exact_sum` rounds once, exactly
  as a from-scratch sum (``reference: true``) does;
* dirty marks: the fusion loop tells which (producer, user) pairs a fusion
  step can have changed (:meth:`ProducerCosts.mark`,
  :meth:`ProducerCosts.recheck`, :meth:`ProducerCosts.content_changed`) and only those are re-evaluated.

What a pair's value depends on: the content of both instructions (opcode,
fused body, operands), and whether each (unfused) has more than one user
(``is_intermediate`` in the hero search).  A fusion step changes the
content of the fusion it builds or grows, and the user sets of the
fusion's operands and of the fused producer; replacing a consumer by its
fusion elsewhere only renames an operand of the fusion's users, which no
estimate depends on.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Callable

from ...ir.module import Instruction
from .analysis import is_fusible_bitcast
from .device import LAUNCH_US
from .model import Estimate

_SHIFT = 1074  # 2**-1074 is the smallest double: every double is an integer multiple


def exact(x: float) -> int:
    """``x`` as an exact integer multiple of 2**-1074."""
    n, d = x.as_integer_ratio()
    return n << (_SHIFT - d.bit_length() + 1)


def exact_sum(parts: int) -> float:
    """The double nearest to ``parts`` * 2**-1074 (correctly rounded)."""
    return parts / (1 << _SHIFT)


_NONE: dict = MappingProxyType({})  # type: ignore[assignment]
_NO_USERS: frozenset = frozenset()


class _Agg:
    """One producer's users: user -> [why, Estimate(user), Estimate(pair)]."""

    __slots__ = ("version", "terms", "bad", "sum_t", "sum_f", "missing", "bitcasts")

    def __init__(self, version: int):
        self.version = version
        self.terms: dict[Instruction, list] = {}
        self.bitcasts = 0  # bitcast users among ``terms`` (costed, never fused)
        # CanFuse reason -> users refused with it (the shared, read-only
        # _NONE until the first refusal: an aggregate is kept per costed
        # producer, and most have no refusal)
        self.bad: dict[str, int] = _NONE
        self.sum_t = 0
        self.sum_f = 0
        # fusible users not estimated yet (a set while there are some)
        self.missing: set[Instruction] | frozenset = _NO_USERS


class ProducerCosts:
    """Cost-model values of one computation's producers (see module doc).

    ``time(x)`` and ``fused(p, u)`` are the estimates, ``can_fuse(p, u)``
    the CanFuse verdict without the root rule (the caller checks that);
    all three are pure functions of the instructions' content."""

    def __init__(self, time: Callable[[Instruction], Estimate],
                 fused: Callable[[Instruction, Instruction], Estimate],
                 can_fuse: Callable[[Instruction, Instruction], str | None]):
        self.time = time
        self.fused = fused
        self.can_fuse = can_fuse
        self.version: dict[Instruction, int] = {}
        self.multi: dict[Instruction, bool] = {}
        self.agg: dict[Instruction, _Agg] = {}
        self.dirty: dict[Instruction, set[Instruction]] = {}

    # -- invalidation -------------------------------------------------------------------
    def watch(self, instr: Instruction) -> None:
        """Start tracking ``instr``'s "more than one user" flag."""
        self.multi[instr] = instr.user_count > 1

    def content_changed(self, instr: Instruction) -> None:
        """``instr`` was rewritten: every pair it is part of is stale."""
        self.version[instr] = self.version.get(instr, 0) + 1
        agg = self.agg
        for op in instr.operands:
            if op in agg:
                self.dirty.setdefault(op, set()).add(instr)

    def mark(self, instr: Instruction, users) -> None:
        """``instr``'s user set changed, but only as far as ``users`` go.
        (Only a producer with an aggregate keeps marks: :meth:`aggregate`
        builds a new one from scratch and drops the marks.)"""
        if instr not in self.agg:
            return
        got = self.dirty.get(instr)
        if got is None:
            self.dirty[instr] = set(users)
        else:
            got.update(users)

    def recheck(self, instr: Instruction) -> None:
        """After ``instr``'s users changed: if it went from one user to
        several (or back), every pair it is part of is stale."""
        multi = instr.user_count > 1
        if self.multi.get(instr) != multi:
            self.multi[instr] = multi
            self.content_changed(instr)

    def forget(self, instr: Instruction) -> None:
        self.agg.pop(instr, None)
        self.dirty.pop(instr, None)
        self.multi.pop(instr, None)
        self.version.pop(instr, None)

    def release(self, producer: Instruction) -> None:
        """Keep no aggregate for ``producer`` (memory: one per costed
        producer was the largest of the queue's caches); :meth:`aggregate`
        builds it from scratch when asked again."""
        if self.agg.pop(producer, None) is not None:
            self.dirty.pop(producer, None)

    # -- aggregates ---------------------------------------------------------------------
    def _add(self, a: _Agg, user: Instruction, why: str | None) -> None:
        """A user's term.  Bitcast users are not asked CanFuse (XLA's
        CanFuseWithAllNonBitcastUsers skips them) but are costed like any
        other consumer: XLA's CalculateProducerPriority passes all of
        ``producer->users()`` to EstimateRunTimes."""
        bitcast = is_fusible_bitcast(user)
        a.bitcasts += bitcast
        a.terms[user] = [why, None, None, bitcast]
        if why is not None:
            bad = a.bad
            if bad is _NONE:
                bad = a.bad = {}
            bad[why] = bad.get(why, 0) + 1
        elif a.missing is _NO_USERS:
            a.missing = {user}
        else:
            a.missing.add(user)

    def _drop(self, a: _Agg, user: Instruction) -> None:
        old = a.terms.pop(user, None)
        if old is None:
            return
        why, t, f, bitcast = old
        a.bitcasts -= bitcast
        if why is not None:
            n = a.bad[why] - 1
            if n:
                a.bad[why] = n
            else:
                del a.bad[why]
        elif t is None:
            if user in a.missing:
                a.missing.discard(user)
        else:
            a.sum_t -= exact(t.time_us)
            a.sum_f -= exact(f.time_us)

    def aggregate(self, producer: Instruction) -> _Agg:
        v = self.version.get(producer, 0)
        a = self.agg.get(producer)
        users = producer._users
        if a is None or a.version != v:
            a = self.agg[producer] = _Agg(v)
            self.dirty.pop(producer, None)
            for u in users:
                self._add(a, u, None if is_fusible_bitcast(u) else self.can_fuse(producer, u))
            return a
        for u in self.dirty.pop(producer, ()):
            self._drop(a, u)
            if u in users:
                self._add(a, u, None if is_fusible_bitcast(u) else self.can_fuse(producer, u))
        return a

    def estimates(self, producer: Instruction, a: _Agg) -> None:
        """Fill in the estimates of fusible users (once every user can fuse)."""
        for u in a.missing:
            term = a.terms[u]
            term[1] = t = self.time(u)
            term[2] = f = self.fused(producer, u)
            a.sum_t += exact(t.time_us)
            a.sum_f += exact(f.time_us)
        a.missing = _NO_USERS

    @staticmethod
    def totals(n_users: int, producer_time: float, sum_t: int, sum_f: int) -> tuple[float, float]:
        """(unfused, fused), each the exactly rounded sum of its terms."""
        unfused = exact_sum(exact(LAUNCH_US * (n_users + 1)) + exact(producer_time) + sum_t)
        fused = exact_sum(exact(LAUNCH_US * n_users) + sum_f)
        return unfused, fused


def first_refusal(producer: Instruction, a: _Agg) -> tuple[str, Instruction] | None:
    """The first non-bitcast user (in user order) that cannot fuse, and why."""
    if not a.bad:
        return None
    for u in producer._users:
        term = a.terms.get(u)
        if term is not None and term[0] is not None:
            return term[0], u
    return None


__all__ = ["ProducerCosts", "exact", "exact_sum", "first_refusal"]
