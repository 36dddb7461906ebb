"""Rebuild the Hopper default Triton config list (XLA's h100.txtpb, absent
from the checkout) from the real H200 autotuning logs in
shared/xla-dumps/gemm_sweep, and check it.

Every Triton config XLA profiled (or failed to compile) for a sweep GEMM is
a default-list entry clamped to that problem (OptimizeConfigSet).  The
candidate hints are all those configs; a candidate is dropped when, clamped
to some GEMM, it lands in that GEMM's generated space but XLA did not try
it.  The survivors must reproduce every GEMM's candidate list exactly.

    python bench/derive_hopper_hints.py [SWEEP_DIR]    # prints the table and the check
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hlorun.autotune.devices import H200  # noqa: E402
from hlorun.autotune.sweep import load_sweep  # noqa: E402
from hlorun.autotune.triton import SearchSpace  # noqa: E402


def observed(case):
    return {replace(p.config.triton, split_k=1, num_ctas=1) for p in case.profiles.profiles
            if p.config.triton is not None}


def clamp(space, h):
    bm = min(max(h.block_m, space.min_out[0]), space.max_out[0])
    bn = min(max(h.block_n, space.min_out[1]), space.max_out[1])
    bk = min(max(h.block_k, space.min_k), space.max_k((bm, bn)))
    return replace(h, block_m=bm, block_n=bn, block_k=bk)


def derive(cases):
    spaces = [(c, SearchSpace(c.problem, H200), observed(c)) for c in cases]
    gen = {c.name: set(s.generate()) for c, s, _ in spaces}
    seen = set().union(*(o for _, _, o in spaces))
    # Pre-images under clamping: a hint may be larger than any problem
    # let it appear (e.g. 128x32 clamped to 64x32 for M=64).
    cands = set()
    for o in seen:
        for a in range(5):
            for b in range(6):
                for c in range(3):
                    m, n, k = o.block_m << a, o.block_n << b, o.block_k << c
                    if m <= 256 and n <= 256 and k <= 256:
                        cands.add(replace(o, block_m=m, block_n=n, block_k=k))
    consistent = []
    for h in sorted(cands):
        images = {}
        ok = True
        for c, s, o in spaces:
            img = clamp(s, h)
            if img in gen[c.name]:
                if img not in o:
                    ok = False
                    break
                images[c.name] = img
        if ok and images:
            consistent.append((h, images))
    # Greedy cover of every (GEMM, config) XLA tried, preferring hints that
    # explain the most and are seen un-clamped.
    todo = {(c.name, x) for c, _, o in spaces for x in o}
    hints = []
    while todo:
        best = max(consistent, key=lambda hi: (len({(k, v) for k, v in hi[1].items()} & todo),
                                                hi[0] in seen, -hi[0].block_m, -hi[0].block_n))
        gain = {(k, v) for k, v in best[1].items()} & todo
        if not gain:
            break
        hints.append(best[0])
        todo -= gain
    return sorted(hints), spaces


def main() -> int:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "shared/xla-dumps/gemm_sweep"
    if not root.exists():
        root = Path("/work/shared/xla-dumps/gemm_sweep")
    cases = load_sweep(root)
    hints, spaces = derive(cases)
    print(f"{len(hints)} hints:")
    print("HOPPER = [" + ", ".join(f"({h.block_m}, {h.block_n}, {h.block_k}, {h.num_stages}, "
                                   f"{h.num_warps}, 0, {int(h.is_tma_allowed)})" for h in hints) + "]")
    exact = 0
    for c, s, o in spaces:
        got = set(s.optimize(s.generate(), hints))
        if got == o:
            exact += 1
        else:
            print(f"  {c.name}: missing {sorted(x.label for x in o - got)} extra {sorted(x.label for x in got - o)}")
    print(f"candidate lists reproduced exactly: {exact}/{len(spaces)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
