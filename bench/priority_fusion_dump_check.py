"""Compare priority fusion's cost model with XLA's own numbers.

XLA writes ``*.priority_fusion_dump.txt`` when priority-fusion's passes are
dumped (``--xla_dump_hlo_pass_re=.*``): one ``update_priority`` step per
producer priority it computes, with ``us_unfused`` / ``us_fused``.  For every
producer's first step before any fusion in its computation, this computes
the same two sums with hlorun's model on XLA's pre-fusion module (the dump
``*.fusion.after_pipeline-start.before_variadic-op-splitter.txt``) and
prints the pairs that differ by more than 1%.

    python bench/priority_fusion_dump_check.py DUMP_DIR [--device H200] [--all]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hlorun.api import load  # noqa: E402
from hlorun.passes.base import Target  # noqa: E402
from hlorun.passes.priority_fusion import PriorityFusion, _Queue  # noqa: E402
from hlorun.passes.priority_fusion.model import device_of  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dump_dir", type=Path)
    ap.add_argument("--device", default="H200")
    ap.add_argument("--all", action="store_true", help="print matching pairs too")
    args = ap.parse_args(argv)
    pre = sorted(args.dump_dir.glob("*.fusion.after_pipeline-start.before_variadic-op-splitter.txt"))
    steps_file = sorted(args.dump_dir.glob("*priority_fusion_dump.txt"))
    if not pre or not steps_file:
        raise SystemExit(f"{args.dump_dir}: no pre-fusion module or priority_fusion_dump")
    module = load(pre[0])
    owner = PriorityFusion(target=Target(device=args.device))
    object.__setattr__(owner, "_device", device_of(owner.target))
    where = {}
    for comp in module.computations:
        for instr in comp.instructions:
            where.setdefault(instr.name, (instr, comp))
    queues: dict = {}
    seen: set = set()
    fused_in: set = set()  # computations where XLA has fused something already
    total = bad = 0
    for step in steps_file[0].read_text().split("fusion_steps {")[1:]:
        names = re.findall(r'name[s]?: "([^"]+)"', step)
        head = step.split("\n")[1] if "\n" in step else ""
        if "fusion {" in head:
            fused_in.update(where[n][1] for n in names[1:] if n in where)
            continue
        if "update_priority" not in head or not names or names[0] in seen:
            continue
        got = where.get(names[0])
        if got is None or got[1] in fused_in:
            continue
        producer, comp = got
        seen.add(names[0])
        q = queues.get(comp) or queues.setdefault(comp, _Queue(owner, comp))
        xla_u = float(re.search(r"us_unfused: ([-\d.e]+)", step).group(1))
        xla_f = float(re.search(r"us_fused: ([-\d.e]+)", step).group(1))
        users = list(producer.users)
        u = len(users) + 1 + q.time(producer).time_us + sum(q.time(x).time_us for x in users)
        f = len(users) + sum(q.fused_time(producer, x).time_us for x in users)
        total += 1
        off = abs(u - xla_u) > 0.01 * max(1.0, xla_u) or abs(f - xla_f) > 0.01 * max(1.0, xla_f)
        bad += off
        if off or args.all:
            print(f"{names[0]:30s} users={','.join(x.name for x in users)[:40]:40s} "
                  f"xla {xla_u:9.4f} -> {xla_f:9.4f} | ours {u:9.4f} -> {f:9.4f}"
                  f"{'  <-- differs' if off else ''}")
    print(f"{total} producers compared, {bad} differ by more than 1%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
