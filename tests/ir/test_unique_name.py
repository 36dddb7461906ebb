"""Module.unique_name keeps XLA's NameUniquer semantics without storing
every generated name (hlorun/ir/module.py ``_Names``): against a plain
set of every name ever used, on random sequences of names taken, given,
and the name set rebuilt from the live names (as the reducer does)."""

from __future__ import annotations

import random
import re

from hlorun.ir.module import Computation, Module
from hlorun.text.parser import load_module

SUFFIX = re.compile(r"^(.*?)\.(\d+)$")


class PlainUniquer:
    """The definition: a set of every name used, a counter per root."""

    def __init__(self, names):
        self.names = set(names)
        self.counters: dict[str, int] = {}

    def reset(self, live):
        self.names = set(live)

    def unique(self, base):
        base = base.lstrip("%") or "instr"
        m = SUFFIX.match(base)
        root = m.group(1) if m else base
        if base not in self.names:
            self.names.add(base)
            return base
        n = self.counters.get(root, 0)
        while True:
            n += 1
            cand = f"{root}.{n}"
            if cand not in self.names:
                self.counters[root] = n
                self.names.add(cand)
                return cand


BASES = ["add", "add.3", "add.3.1", "fusion", "fusion.2", "param_0", "param_0.1", "x.07",
         "x.7", "%mul", "", "fused_computation", "add.10", "add.2"]


def test_unique_name_matches_plain_set():
    rng = random.Random(15)
    for trial in range(40):
        m = Module("m")
        comp = Computation("main")
        m.add_computation(comp, entry=True)
        ref = PlainUniquer(["main"])
        live: list[str] = ["main"]
        for step in range(300):
            r = rng.random()
            if r < 0.1:
                name = rng.choice(BASES + live) + rng.choice(["", ".1", ".5"])
                m.reserve_name(name)
                ref.names.add(name)
            elif r < 0.13:  # forget dead names (cosmetic renaming does this)
                live = live[: rng.randrange(len(live) + 1)] or ["main"]
                m._names = None
                m._all_names()
                m._names.given = set(live)
                ref.reset(live)
            else:
                base = rng.choice(BASES + live[-5:])
                got = m.unique_name(base)
                assert got == ref.unique(base), (trial, step, base)
                live.append(got)
            probe = rng.choice(BASES + live + [f"add.{rng.randrange(30)}"])
            assert (probe in m._all_names()) == (probe in ref.names), (trial, step, probe)


def test_fused_module_names_as_before():
    """Names generated for clones stay unique across a whole parsed module."""
    from pathlib import Path
    path = Path(__file__).resolve().parents[2] / "testdata" / "s2" / "cnn_fp16.hlo"
    m = load_module(str(path))
    ref = PlainUniquer(i.name for c in m.computations for i in c._instructions)
    ref.names.update(c.name for c in m.computations)
    for i in list(m.entry._instructions)[:50]:
        assert m.unique_name(i.name) == ref.unique(i.name)
