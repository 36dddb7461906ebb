"""Which Triton configs XLA's autotuner compiles but discards, per compute
class, from the raw logs of calibration runs (issue 20).

    python bench/autotune_discards.py RAW [RAW ...] --device H200 [--out DIR]

RAW is a run directory of ``bench/autotune_collect.py`` (``main/{logs,hlo}``,
as for ``bench/autotune_ingest.py``).  Only the main phase is read, so each
GEMM counts once.  For every Triton config XLA tried on a GEMM it counts
whether XLA timed it (``ran``) or threw it away: ``spill`` (COMPILATION_FAILED,
"Discarding compilation due to register spilling"), ``wrong`` (WRONG_RESULTS)
or ``other`` (another compile failure, e.g. too much shared memory).  The
configs that failed in at least ``discards.MIN_SHARE`` of at least
``discards.MIN_COMPILES`` compiles of their class are written to
``data/discards_<device>.json``, which ``triton.check`` reads (the ingest
keeps only timed candidates, so the CSVs cannot say this).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from autotune_ingest import find_instruction, read_phase  # noqa: E402

from hlorun.autotune.cost import eff_class  # noqa: E402
from hlorun.autotune.discards import DATA_DIR, MIN_COMPILES, MIN_SHARE, listed  # noqa: E402
from hlorun.autotune.problem import gemm_problem  # noqa: E402


def outcome(failure: str | None) -> str:
    if failure is None:
        return "ran"
    if "spilling" in failure:
        return "spill"
    return "wrong" if failure.startswith("WRONG_RESULTS") else "other"


def count(raws: list[Path]) -> dict[tuple[str, str], Counter]:
    out: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for raw in raws:
        cache: dict = {}
        for _cid, (mod, name, profiles, _chosen) in sorted(read_phase(raw / "main", "m").items()):
            instr = find_instruction(raw / "main" / "hlo", mod, name, cache)
            if instr is None:
                continue
            cls = eff_class(gemm_problem(instr))
            for q in profiles:
                if q.config.triton is not None:
                    out[(cls, q.config.triton.label)][outcome(q.failure)] += 1
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("raw", nargs="+")
    ap.add_argument("--device", required=True)
    ap.add_argument("--out", default=str(DATA_DIR))
    a = ap.parse_args()
    counts = count([Path(r) for r in a.raw])
    configs: dict[str, dict] = {}
    for (cls, label), c in sorted(counts.items()):
        if listed(c):
            configs.setdefault(cls, {})[label] = dict(sorted(c.items()))
    doc = {"source": f"XLA autotune logs of {len(a.raw)} calibration run(s): "
                     + ", ".join(Path(r).name for r in a.raw),
           "rule": f"failed in >= {MIN_SHARE:.0%} of >= {MIN_COMPILES} compiles of the compute class",
           "tried": sum(sum(c.values()) for c in counts.values()),
           "configs": configs}
    path = Path(a.out) / f"discards_{a.device.upper()}.json"
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{path}: {sum(len(v) for v in configs.values())} configs of {len(counts)} (class, config) pairs",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
