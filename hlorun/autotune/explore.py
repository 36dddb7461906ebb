"""``hlorun explore``: which autotuning choices break the rest of the pipeline?

The autotuner's choice is a fork in the compilation: the same module can
leave it as a Triton fusion or as a BLAS call with a pinned output layout,
and only some forks reach a later checker or pass failure (S0: only the BLAS
fork breaks LayoutNormalization).  ``explore`` runs the pipeline once up to
the top-level step that holds the ``autotuner`` pass, snapshots the module,
then reruns the rest from the snapshot once per choice -- one GEMM varied at
a time (``force_backend: GEMM=BACKEND[:config]``), every other GEMM left to
the deterministic model -- and reports each fork's outcome.  Choices per
GEMM: each feasible backend's best candidate (``all_configs``: every
feasible candidate), bounded by ``max_runs``.  No noise: the answer is the
same on every run.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ..ir.module import Module
from ..pipeline.run import RunOptions, run_pipeline
from ..pipeline.spec import PassStep, PipelineSpec, PipelineStep
from ..text.printer import print_module


@dataclass
class Fork:
    gemm: str
    choice: str                 # backend or backend:config
    label: str
    estimate_ns: float | None
    baseline: bool              # the model's own choice
    status: str = "?"           # ok | violation | pass-failure
    detail: str = ""
    where: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"gemm": self.gemm, "choice": self.choice, "label": self.label,
                "estimate_ns": self.estimate_ns, "model_choice": self.baseline,
                "status": self.status, "where": self.where, "detail": self.detail}


@dataclass
class Exploration:
    pipeline: str
    device: str
    forks: list[Fork] = field(default_factory=list)
    skipped: int = 0
    baseline_status: str = "?"
    head_status: str = "ok"
    notes: list[str] = field(default_factory=list)

    @property
    def breaking(self) -> list[Fork]:
        return [f for f in self.forks if f.status != "ok"]

    def to_json(self) -> dict[str, Any]:
        return {"pipeline": self.pipeline, "device": self.device, "baseline_status": self.baseline_status,
                "forks": [f.to_json() for f in self.forks], "skipped_choices": self.skipped,
                "breaking": [f.to_json() for f in self.breaking], "notes": list(self.notes)}


def _contains_autotuner(step) -> bool:
    if isinstance(step, PassStep):
        return step.name == "autotuner"
    if isinstance(step, PipelineStep):
        return any(_contains_autotuner(s) for s in step.steps)
    return False


def split_at_autotuner(spec: PipelineSpec) -> tuple[PipelineSpec, PipelineSpec] | None:
    for i, s in enumerate(spec.steps):
        if _contains_autotuner(s):
            return replace(spec, steps=spec.steps[:i]), replace(spec, steps=spec.steps[i:])
    return None


def _with_autotune(spec: PipelineSpec, **kw: Any) -> PipelineSpec:
    sec = dict(spec.section("autotune") or {}, **kw)
    return replace(spec, sections=dict(spec.sections, autotune=sec))


def _outcome(res) -> tuple[str, str, str]:
    if res.failure is not None:
        f = res.failure
        return "pass-failure", f.path, f.message
    if res.violations:
        v = res.violations[0]
        where = f"after {v.after_pass}" + (f", precondition of {v.precondition_of}" if v.precondition_of else "")
        return "violation", where, f"[{v.rule}] {v.message}"
    return "ok", "", ""


def choices(record: dict[str, Any], all_configs: bool) -> list[tuple[str, str, float | None, bool]]:
    """(force spec, label, estimate, is the model's choice) per choice."""
    feasible = [c for c in record["candidates"] if c["feasible"] and c.get("estimate")]
    winner = record.get("winner") or {}
    out = []
    if all_configs:
        pick = feasible
    else:
        best: dict[str, dict] = {}
        for c in feasible:
            if c["backend"] not in best or c["estimate"]["ns"] < best[c["backend"]]["estimate"]["ns"]:
                best[c["backend"]] = c
        # the model's choice first (XLA's rule may prefer it within the
        # scratch window though another backend is a little faster)
        pick = sorted(best.values(), key=lambda c: (c["label"] != winner.get("label")
                                                    and not (c["backend"] == winner.get("backend")),
                                                    c["estimate"]["ns"]))
    for c in pick:
        if c.get("config"):
            cfg = c["label"].split(" ", 1)[1]
            spec = f"triton:{cfg}"
        else:
            spec = f"{c['backend']}:{c['algorithm']}" if c.get("algorithm") is not None else c["backend"]
        out.append((spec, c["label"], c["estimate"]["ns"], c["label"] == winner.get("label")))
    return out


def explore(module_text: str, filename: str, spec: PipelineSpec, *, max_runs: int = 64,
            all_configs: bool = False, disable: tuple = (), verify_each: bool = True,
            progress=None) -> Exploration:
    """``progress(total, label)``, if given, is called before each rerun
    (a progress bar)."""
    from ..text.parser import parse_module
    spec = _with_autotune(spec, mode="model", force_backend="", cache="", xla_results="")
    opts = RunOptions(verify_each=verify_each, disable=list(disable), keep_going=False)
    ex = Exploration(spec.name, str((spec.section("autotune") or {}).get("device") or spec.target.device))
    parts = split_at_autotuner(spec)
    if parts is None:
        ex.notes.append(f"pipeline {spec.name} has no autotuner pass: nothing to explore")
        return ex
    head, tail = parts
    module = parse_module(module_text, filename)
    hres = run_pipeline(module, head, opts)
    ex.head_status = hres.status
    if hres.status != "ok":
        ex.baseline_status = hres.status
        ex.notes.append("the pipeline fails before the autotuner; every choice inherits that")
        return ex
    snapshot = print_module(module)
    base_mod = parse_module(snapshot, filename)
    base = run_pipeline(base_mod, tail, opts)
    ex.baseline_status = _outcome(base)[0]
    records = base.records("autotune")
    if not records:
        ex.notes.append("the autotuner found no GEMM")
        return ex
    runs = 0
    plan = [(rec, list(choices(rec, all_configs))) for rec in records]
    total = min(max_runs, sum(len(c) for _, c in plan))
    for rec, recs_choices in plan:
        for force, label, est, is_model in recs_choices:
            if runs >= max_runs:
                ex.skipped += 1
                continue
            runs += 1
            if progress is not None:
                progress(total, f"{rec['instruction']}={label}")
            f = Fork(rec["instruction"], force, label, est, is_model)
            m: Module = parse_module(snapshot, filename)
            res = run_pipeline(m, _with_autotune(tail, force_backend=f"{rec['instruction']}={force}"), opts)
            f.status, f.where, f.detail = _outcome(res)
            ex.forks.append(f)
    if ex.skipped:
        ex.notes.append(f"bounded by --max-runs {max_runs}: {ex.skipped} choice(s) not run")
    return ex
