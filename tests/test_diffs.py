"""Unified diffs: hunks that turn the old text into the new one, with the
patience cut for long sections; snapshots reprint only what changed."""

from __future__ import annotations

import random
import re

import pytest

from hlorun.report import diffs
from hlorun.text.parser import load_module
from hlorun.text.printer import print_module
from hlorun.pipeline.snapshots import SnapshotCache

from .conftest import shared_path


def apply(a, hunks):
    out, ai, i = [], 0, 0
    while i < len(hunks):
        m = re.match(r"@@ -(\d+),(\d+) \+(\d+),(\d+) @@", hunks[i])
        start = int(m.group(1)) - 1 if int(m.group(2)) else int(m.group(1))
        out += a[ai:start]
        ai = start
        i += 1
        while i < len(hunks) and not hunks[i].startswith("@@"):
            h = hunks[i]
            if h[0] == " ":
                assert a[ai] == h[1:]
                out.append(a[ai])
                ai += 1
            elif h[0] == "-":
                assert a[ai] == h[1:]
                ai += 1
            else:
                out.append(h[1:])
            i += 1
    return out + a[ai:]


@pytest.mark.parametrize("limit", [0, 8, diffs.DIFFLIB_LIMIT])
def test_hunks_reconstruct_the_new_text(monkeypatch, limit):
    monkeypatch.setattr(diffs, "DIFFLIB_LIMIT", limit)
    rnd = random.Random(7)
    for _ in range(400):
        a = [f"l{rnd.randint(0, 60)}" for _ in range(rnd.randint(0, 80))]
        b = list(a)
        for _ in range(rnd.randint(0, 8)):
            op = rnd.random()
            if op < 0.3 and b:
                del b[rnd.randrange(len(b))]
            elif op < 0.6:
                b.insert(rnd.randint(0, len(b)), f"n{rnd.randint(0, 20)}")
            elif b:
                b[rnd.randrange(len(b))] = "x"
        hunks = diffs.unified(a, b)
        assert apply(a, hunks) == b
        assert bool(hunks) == (a != b)


def test_patience_diff_is_local_on_a_big_computation():
    a = [f"  %i{k} = f32[] add(%i{k - 1}, %c)" for k in range(60000)]
    b = list(a)
    b[30000] = "  %i30000 = f32[] multiply(%i29999, %c)"
    del b[45000]
    hunks = diffs.unified(a, b)
    assert apply(a, hunks) == b
    assert sum(1 for h in hunks if h[0] in "+-") == 3


def test_snapshot_cache_matches_printer_and_reprints_only_changed():
    m = load_module(shared_path("xla-dumps", "cnn_fp16",
                                "module_14585.jit_model.0059.fusion.after_priority-fusion.before_cse.txt"))
    cache = SnapshotCache()
    assert cache.module_text(m, state=0) == print_module(m)
    assert diffs.snapshot(m, "diff", cache, 0) == diffs.snapshot(m, "diff")
    printed = cache.printed
    n = len(m.computations)
    cache.texts(m, "diff", 1)
    assert cache.printed == printed  # nothing changed: all reused
    r = m.entry.root
    r.attrs["metadata"] = '{op_name="x"}'
    r.name = r.name + "_renamed"
    assert cache.module_text(m, state=2) == print_module(m)
    assert diffs.snapshot(m, "diff", cache, 2) == diffs.snapshot(m, "diff")
    assert cache.printed - printed == 2  # the entry, in two forms
    assert n > 2
