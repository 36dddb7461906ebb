"""XLA's measured emitter choices for generic-Triton candidates, and where
they contradict each other.

XLA:GPU does not decide native emitter vs block-level (generic Triton)
emitter by a rule: its config-assigner (xla/backends/autotuner/
config_assigner.cc, autotuner.cc) groups the candidate fusions of a module
by fingerprint (the fusion printed with operand shapes and backend config:
identical fusions of one module are measured once and all get the result),
asks each backend for its configs (NATIVE_EMITTER: one; BLOCK_LEVEL_EMITTER:
the top-k tilings of the indexing performance model,
``xla_gpu_fusion_autotune_top_k_configs``, plus a TMA variant of each tiling
``IsTmaRecommended`` for, block_level_emitter.cc), compiles and times them all on
the GPU and keeps the fastest (``PickBestConfig``: minimum duration).  So
the same fusion can go either way in two programs compiled on the same GPU
when the two emitters are close.  hlorun models the outcome
(:mod:`hlorun.passes.config_assigner`); this tool shows what there is to
model.

For every candidate fusion of XLA's after_optimizations modules (the
fusions :func:`~hlorun.passes.config_assigner.block_level_candidate`
accepts once reset to a plain fusion) it prints, per native-emitter class,
XLA's choices and hlorun's agreement, counting both instances and
*measurements* (identical fusions of one program count once), and lists the
fusion bodies that XLA measured both ways on one device model
(contradictions: no rule on the fusion alone can match both).

    python bench/config_assigner_choices.py [--contradictions] [DUMP ...]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import kernel_lists  # noqa: E402

_TO_APPLY = re.compile(r"(to_apply|calls)=%?[\w.\-]+")


@dataclass(frozen=True)
class Choice:
    program: str
    device: str
    fusion: str
    emitter: str        # hlorun's native-emitter class
    xla_triton: bool    # XLA measured the block-level emitter faster
    ours_triton: bool   # hlorun's config-assigner sends it to Triton
    body: str           # canonical text of the fused computation


def body_key(fusion) -> str:
    """The fused computation printed canonically (names renumbered, no
    metadata or backend config, a called computation by its root opcode): equal for
    fusions XLA would fingerprint alike up to their parameters' producers."""
    from hlorun.text.printer import PRESETS, print_computation
    body = fusion.fused_computation
    # a called computation counts by what it computes (its root's opcode: add, maximum ...)
    called = {c.name: c.root.opcode for i in body.instructions
              for c in (i.attrs.get("to_apply"),) if c is not None and hasattr(c, "root")}
    text = print_computation(body, PRESETS["canonical"])
    lines = text.splitlines()[1:]  # drop the header with the computation's name
    return _TO_APPLY.sub(lambda m: f"{m.group(1)}={called.get(m.group(0).split('=')[1].lstrip('%'), '_')}",
                         "\n".join(lines))


def device_of(d: Path) -> str:
    info = d / "info.json"
    if info.is_file():
        return json.loads(info.read_text()).get("device", "?")
    return "?"


def choices(dumps: list[Path]):
    """Every generic-Triton candidate fusion of the dumps' after_optimizations
    modules with XLA's and hlorun's choice."""
    import hlorun
    from hlorun.analysis.kernels import kernel_list
    from hlorun.passes.base import Target
    from hlorun.passes.config_assigner import (ConfigAssigner, block_level_candidate,
                                               native_emitter)
    for d in dumps:
        files = kernel_lists.dump_files(d)
        if files is None:
            continue
        device = device_of(d)
        for k in kernel_list(hlorun.load_module(files[1])):
            i = k.instruction
            # fusions priority fusion / softmax-rewriter-triton made Triton are not this pass's
            if i.opcode != "fusion" or i.name.startswith(("fusion", "triton_softmax")):
                continue
            if k.kind.startswith("kCustom") and k.kind != "kCustom:__triton":
                continue
            xla = k.kind == "kCustom:__triton"
            i.attrs["kind"] = "kLoop"
            i.attrs.pop("backend_config", None)
            if block_level_candidate(i) is not None:
                continue
            key = body_key(i)
            emitter = native_emitter(i, 132)
            ours = ConfigAssigner(target=Target(device="H200"))._assign(i)
            yield Choice(d.name, device, i.name, emitter, xla, ours, key)


def summarize(rows: list[Choice]) -> dict:
    """Per class: instances and measurements (distinct bodies per program),
    XLA-Triton counts and hlorun agreement."""
    out: dict[str, dict] = defaultdict(lambda: dict(instances=0, xla_triton=0, agree=0,
                                                    measurements=set(), m_triton=set(),
                                                    m_agree=set()))
    for r in rows:
        s = out[r.emitter]
        m = (r.program, r.body)
        s["instances"] += 1
        s["xla_triton"] += r.xla_triton
        s["agree"] += r.xla_triton == r.ours_triton
        s["measurements"].add(m)
        if r.xla_triton:
            s["m_triton"].add(m)
        if r.xla_triton == r.ours_triton:
            s["m_agree"].add(m)
    return out


def contradictions(rows: list[Choice]) -> list[tuple[str, str, list[Choice], list[Choice]]]:
    """Bodies XLA measured both ways on one device model: (device, body,
    Triton instances, native instances)."""
    groups: dict[tuple[str, str], list[Choice]] = defaultdict(list)
    for r in rows:
        groups[(r.device, r.body)].append(r)
    out = []
    for (device, body), rs in groups.items():
        t = [r for r in rs if r.xla_triton]
        n = [r for r in rs if not r.xla_triton]
        if t and n:
            out.append((device, body, t, n))
    out.sort(key=lambda c: -(len(c[2]) + len(c[3])))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dumps", nargs="*")
    ap.add_argument("--contradictions", action="store_true",
                    help="also print each fusion body XLA measured both ways")
    args = ap.parse_args(argv)
    if args.dumps:
        dumps = [kernel_lists.resolve(x) for x in args.dumps]
    else:
        dumps = kernel_lists.all_dumps()
        hold = ROOT / "testdata" / "xla-dumps-holdout"
        if hold.is_dir():
            dumps += [d for d in sorted(hold.iterdir()) if d.is_dir() and kernel_lists.dump_files(d)]
    rows = list(choices(dumps))
    print("| native emitter (hlorun's class) | instances: XLA Triton / all, hlorun agrees "
          "| measurements: XLA Triton / all, hlorun agrees |")
    print("|---|---|---|")
    tot = [0, 0, 0, 0, 0, 0]
    for emitter, s in sorted(summarize(rows).items()):
        vals = [s["xla_triton"], s["instances"], s["agree"],
                len(s["m_triton"]), len(s["measurements"]), len(s["m_agree"])]
        tot = [a + b for a, b in zip(tot, vals)]
        print(f"| {emitter} | {vals[0]}/{vals[1]}, {vals[2]} | {vals[3]}/{vals[4]}, {vals[5]} |")
    print(f"| all | {tot[0]}/{tot[1]}, {tot[2]} | {tot[3]}/{tot[4]}, {tot[5]} |")
    cs = contradictions(rows)
    n = sum(len(t) + len(nat) for _, _, t, nat in cs)
    forced = sum(min(len(t), len(nat)) for _, _, t, nat in cs)
    print(f"\n{len(cs)} fusion bodies measured both ways on one device model "
          f"({n} instances of {len(rows)}); a rule on the fusion alone misses at least "
          f"{forced} of them")
    if args.contradictions:
        for device, body, t, nat in cs:
            def names(rs):
                return ", ".join(sorted({f"{r.program}:{r.fusion}" for r in rs}))
            print(f"\n{device} [{t[0].emitter}] Triton: {names(t)}\n  native: {names(nat)}")
            print("  " + body.replace("\n", "\n  "))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
