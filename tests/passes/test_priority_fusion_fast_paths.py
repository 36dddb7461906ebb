"""Shortcuts in priority fusion's CanFuse and cost model that must give the
answers of the straightforward code: the parameter-count rule (counted only
when the operands could exceed the limit), a kernel's read time summed as
one fold (``model._timed``), and a pair view's member set kept as its two
units' sets (``walks._PairMembers``)."""

from __future__ import annotations

import random
from functools import reduce
from operator import add

from hlorun.passes.priority_fusion import MAX_PARAMETERS, PriorityFusion, _Queue
from hlorun.passes.priority_fusion import model as M
from hlorun.passes.priority_fusion.model import DEVICES
from hlorun.passes.priority_fusion.walks import _PairMembers
from hlorun.text.parser import parse_module


def _concats(n_producer: int, n_consumer: int, shared: int):
    """A concatenate of ``n_producer`` parameters read by a concatenate of
    it and ``n_consumer`` parameters, ``shared`` of them the producer's."""
    n = n_producer + n_consumer - shared
    lines = [f"  p{i} = f32[4]{{0}} parameter({i})" for i in range(n)]
    pops = ", ".join(f"p{i}" for i in range(n_producer))
    lines.append(f"  producer = f32[{4 * n_producer}]{{0}} concatenate({pops}), dimensions={{0}}")
    cops = [f"p{i}" for i in range(n_producer - shared, n)]
    lines.append(f"  ROOT consumer = f32[{4 * (n_producer + len(cops))}]{{0}} "
                 f"concatenate(producer, {', '.join(cops)}), dimensions={{0}}")
    m = parse_module("HloModule m\n\nENTRY e {\n" + "\n".join(lines) + "\n}\n")
    comp = m.entry
    pf = PriorityFusion()
    object.__setattr__(pf, "_device", DEVICES["H100"])
    q = _Queue(pf, comp)
    return q, comp.get_instruction("producer"), comp.get_instruction("consumer")


def test_parameter_count_rule():
    # 40 + 57 distinct operands: 97 parameters
    q, p, c = _concats(40, 57, 0)
    assert q.can_fuse_pair(p, c) == \
        f"the fusion would have 97 parameters (more than {MAX_PARAMETERS})"
    # as many operand slots, but 10 shared: 87 parameters
    q, p, c = _concats(40, 57, 10)
    assert q.can_fuse_pair(p, c) is None
    # exactly the limit
    q, p, c = _concats(40, 56, 0)
    assert len(set(c.operands) - {p} | set(p.operands)) == MAX_PARAMETERS
    assert q.can_fuse_pair(p, c) is None


def _timed_loop(device, entries, unc, blocks):
    """_timed's read time written as the plain loop it was."""
    cap = blocks * device.clock_ghz * 1e9 * M.TRANSACTIONS_PER_CLOCK
    bandwidth = device.bandwidth
    dram = min(bandwidth, cap)
    rest = (min(bandwidth * M.L2_SPEEDUP * M.L1_SPEEDUP, cap), min(bandwidth * M.L2_SPEEDUP, cap),
            min(bandwidth, cap))
    read_s = 0.0
    for src, net, again, cls, width in entries:
        if unc and src.name in unc:
            slow = min(bandwidth * width / M.TRANSACTION_BYTES, cap)
            read_s += net / slow + again / (rest[cls] if cls < 2 else slow)
        else:
            read_s += net / dram + again / rest[cls]
    return read_s


def test_read_time_is_the_loops_fold():
    q, p, c = _concats(40, 20, 0)
    device = DEVICES["H100"]
    rng = random.Random(15)
    srcs = list(c.operands)
    for _ in range(300):
        entries = [(rng.choice(srcs), rng.randrange(1 << 30), rng.randrange(1 << 34),
                    rng.randrange(3), rng.choice((1, 2, 4))) for _ in range(rng.randrange(1, 90))]
        blocks = rng.choice((1, 7, 132, 100000))
        unc = [] if rng.random() < 0.7 else [e[0].name for e in entries[::3]]
        got = M._timed(device, "loop", c, entries, 0, 0, 0.0, unc, blocks, 128, False, 0, None)
        ref = _timed_loop(device, entries, set(unc), blocks)
        # the estimate with no writes and no flops is the read time itself
        assert got.time_us == ref * 1e6
    assert reduce(add, [0.1, 0.2, 0.3], 0.0) == (0.0 + 0.1) + 0.2 + 0.3


def test_pair_members_are_the_union():
    a, b = set("abc"), set("cde")
    both = _PairMembers(a, b)
    for x in "abcdefg":
        assert (x in both) == (x in (a | b))
