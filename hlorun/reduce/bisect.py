"""``hlorun bisect``: which pass makes a condition true, and where two
pipeline versions part ways.

:func:`bisect_passes` is LLVM's ``-opt-bisect-limit`` workflow done for
you: the compile is run with ``--pass-limit N`` for a binary-searched N
(passes are numbered as in the compile table) until the first N after
which the condition holds; that pass is the culprit.  Like the LLVM
workflow it assumes the condition stays true once it holds.  A condition
that does not compile by itself (``--until-cmd``) is applied to the
module the limited compile produced.

:func:`first_difference` runs two pipelines on the same module, records
the canonical module after every pass, aligns the two step sequences
(pass names and options) and walks them in lockstep: the first aligned
step after which the modules differ, or the first step present in only
one version that changes the module, is the divergence.  A step that
runs in both versions at different places (a reordering) is reported with
where the other version runs it (``Divergence.moved``).  The final modules
stay on the :class:`Divergence` (``module_a`` / ``module_b``) for callers
that compare the kernels (``hlorun diff-pipelines``).
"""

from __future__ import annotations

import difflib
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..ir.module import Module
from ..text.parser import parse_module
from ..pipeline.run import Listener, PassEvent
from ..text.printer import print_module
from ..errors import UsageError
from .compile_config import CompileConfig
from .conditions import Condition, Verdict


class CompiledOutput(Condition):
    """Apply a module condition (``--until-cmd``) to the compile's output."""

    def __init__(self, inner: Condition):
        self.inner = inner
        self.text = inner.text

    def prepare(self, cfg: CompileConfig | None) -> None:
        super().prepare(cfg)
        self.inner.prepare(cfg)

    def test(self, module: Module, text: str) -> Verdict:
        res = self._compile(module)
        v = self.inner.test(module, print_module(module))
        v.result = res
        return v

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close:
            close()


@dataclass
class Probe:
    limit: int | None
    interesting: bool
    detail: str
    passes_run: int
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {"pass_limit": self.limit, "interesting": self.interesting, "detail": self.detail,
                "passes_run": self.passes_run, "seconds": round(self.seconds, 4)}


@dataclass
class BisectResult:
    condition: str
    passes_total: int
    first: int | None  # 1-based pass index; 0: holds before any pass
    path: str = ""
    name: str = ""
    iteration: int | None = None
    detail: str = ""
    probes: list[Probe] = field(default_factory=list)
    diff: list[str] = field(default_factory=list)
    remarks: list[dict] = field(default_factory=list)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"condition": self.condition, "passes_total": self.passes_total,
                "first_pass": None if self.first is None else {
                    "index": self.first, "path": self.path, "name": self.name,
                    "iteration": self.iteration},
                "detail": self.detail, "probes": [p.to_json() for p in self.probes],
                "diff": self.diff, "remarks": self.remarks, "seconds": round(self.seconds, 3)}


def _wrap(condition: Condition) -> Condition:
    return condition if condition.needs_compile else CompiledOutput(condition)


def bisect_passes(text: str, filename: str, condition: Condition, cfg: CompileConfig) -> BisectResult:
    """``condition`` must be prepared with ``cfg`` (use :func:`prepare_for_bisect`)."""
    t0 = time.perf_counter()
    probes: list[Probe] = []

    def probe(limit: int | None) -> Verdict:
        m = parse_module(text, filename)
        cfg.pass_limit = limit
        t = time.perf_counter()
        try:
            v = condition.test(m, text)
        finally:
            cfg.pass_limit = None
        ran = len(v.result.events) if v.result is not None else 0
        probes.append(Probe(limit, v.interesting, v.detail, ran, time.perf_counter() - t))
        return v

    full = probe(None)
    if not full.interesting:
        raise UsageError(f"{condition.describe()} does not hold after the whole pipeline "
                         f"({full.detail}); nothing to bisect")
    assert full.result is not None
    events = list(full.result.events)
    total = len(events)
    res = BisectResult(condition.describe(), total, None, probes=probes)
    zero = probe(0)
    if zero.interesting:
        res.first, res.detail = 0, zero.detail
        res.seconds = time.perf_counter() - t0
        return res
    lo, hi = 0, total
    hit = full
    while hi - lo > 1:
        mid = (lo + hi) // 2
        v = probe(mid)
        if v.interesting:
            hi, hit = mid, v
        else:
            lo = mid
    res.first, res.detail = hi, hit.detail
    ev: PassEvent | None = None
    if hit.result is not None and hit.result.events:
        ev = hit.result.events[-1] if hit.result.events[-1].index == hi else None
    if ev is None:
        ev = next((e for e in events if e.index == hi), None)
    if ev is not None:
        res.path, res.name, res.iteration = ev.path, ev.name, ev.iteration
        res.remarks = [r.to_json() for r in ev.remarks]
    res.diff = _pass_diff(text, filename, cfg, hi)
    res.seconds = time.perf_counter() - t0
    return res


def _pass_diff(text: str, filename: str, cfg: CompileConfig, index: int) -> list[str]:
    out = []
    for limit in (index - 1, index):
        m = parse_module(text, filename)
        cfg.run(m, pass_limit=limit, keep_going=True)
        out.append(print_module(m, form="diff"))
    return list(difflib.unified_diff(out[0].splitlines(), out[1].splitlines(),
                                     f"before #{index}", f"after #{index}", lineterm="", n=2))


# ---------------------------------------------------------------------------
# Two pipeline versions
# ---------------------------------------------------------------------------


@dataclass
class Step:
    index: int
    path: str
    label: str
    iteration: int | None
    text: str  # canonical module after the step
    changed: bool
    remarks: list[dict] = field(default_factory=list)

    @property
    def ident(self) -> tuple[str, str]:
        return (self.path, self.label)

    def describe(self) -> str:
        it = f" [{self.iteration}]" if self.iteration else ""
        opts = self.label[len(self.path.rsplit("/", 1)[-1]):]
        return f"#{self.index} {self.path}{opts}{it}"


class _Trace(Listener):
    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.start = ""

    def on_run_start(self, run, module: Module) -> None:
        self.start = print_module(module, form="canonical")

    def on_after_pass(self, ev: PassEvent, module: Module) -> None:
        label = ev.step.label() if hasattr(ev.step, "label") else ev.name
        self.steps.append(Step(ev.index, ev.path, label, ev.iteration,
                               print_module(module, form="canonical"), ev.changed,
                               [r.to_json() for r in ev.remarks]))


@dataclass
class Divergence:
    pipeline_a: str
    pipeline_b: str
    found: bool
    kind: str = ""  # "same-step" | "only-a" | "only-b" | "different-steps" | ""
    step_a: Step | None = None
    step_b: Step | None = None
    skipped_a: list[Step] = field(default_factory=list)  # steps only in A (no effect)
    skipped_b: list[Step] = field(default_factory=list)
    diff: list[str] = field(default_factory=list)
    steps_a: int = 0
    steps_b: int = 0
    status_a: str = ""
    status_b: str = ""
    seconds: float = 0.0
    #: the blamed step of an only-a / only-b divergence as the other
    #: version runs it elsewhere (the two versions order it differently)
    moved: Step | None = None
    module_a: Module | None = field(default=None, repr=False)  # final modules
    module_b: Module | None = field(default=None, repr=False)
    #: each version's PipelineResult (run to the end: keep_going)
    result_a: Any = field(default=None, repr=False)
    result_b: Any = field(default=None, repr=False)

    def summary(self) -> str:
        if not self.found:
            return (f"no difference: {self.pipeline_a} ({self.steps_a} passes) and "
                    f"{self.pipeline_b} ({self.steps_b} passes) produce the same module")
        a = self.step_a.describe() if self.step_a else "-"
        b = self.step_b.describe() if self.step_b else "-"
        text = {
            "same-step": f"first difference after the same step: {a} in {self.pipeline_a} vs {b} "
                         f"in {self.pipeline_b}",
            "only-a": f"first difference: {a} runs only in {self.pipeline_a} and changes the module",
            "only-b": f"first difference: {b} runs only in {self.pipeline_b} and changes the module",
            "different-steps": f"first difference: {self.pipeline_a} runs {a} where "
                               f"{self.pipeline_b} runs {b}",
        }[self.kind]
        if self.moved is not None:
            other = self.pipeline_a if self.kind == "only-b" else self.pipeline_b
            blamed = self.step_b if self.kind == "only-b" else self.step_a
            when = "later" if blamed is not None and self.moved.index > blamed.index else "elsewhere"
            text += f" ({other} runs it {when}, as {self.moved.describe()})"
        return text

    def to_json(self) -> dict[str, Any]:
        def st(s: Step | None):
            return None if s is None else {"index": s.index, "path": s.path, "label": s.label,
                                           "iteration": s.iteration, "remarks": s.remarks}
        return {"pipelines": [self.pipeline_a, self.pipeline_b], "found": self.found,
                "kind": self.kind, "summary": self.summary(), "step_a": st(self.step_a),
                "step_b": st(self.step_b),
                "no_effect_only_in_a": [s.describe() for s in self.skipped_a],
                "no_effect_only_in_b": [s.describe() for s in self.skipped_b],
                "moved": None if self.moved is None else st(self.moved),
                "passes": [self.steps_a, self.steps_b], "status": [self.status_a, self.status_b],
                "diff": self.diff, "seconds": round(self.seconds, 3)}


def _trace(text: str, filename: str, cfg: CompileConfig,
           listeners: Sequence[Listener] = ()) -> tuple[_Trace, Any, Module]:
    tr = _Trace()
    m = parse_module(text, filename)
    res = cfg.run(m, listeners=[tr, *listeners], keep_going=True)
    return tr, res, m


def first_difference(text: str, filename: str, cfg_a: CompileConfig, cfg_b: CompileConfig,
                     listeners_a: Sequence[Listener] = (),
                     listeners_b: Sequence[Listener] = ()) -> Divergence:
    """``listeners_a`` / ``listeners_b`` also watch each version's run (e.g.
    a lineage tracker for explanations of the final kernels)."""
    t0 = time.perf_counter()
    ta, ra, ma = _trace(text, filename, cfg_a, listeners_a)
    tb, rb, mb = _trace(text, filename, cfg_b, listeners_b)
    d = Divergence(cfg_a.spec().name, cfg_b.spec().name, False, steps_a=len(ta.steps),
                   steps_b=len(tb.steps), status_a=ra.status, status_b=rb.status, module_a=ma,
                   module_b=mb, result_a=ra, result_b=rb)
    if cfg_a.spec().name == cfg_b.spec().name:
        d.pipeline_a, d.pipeline_b = cfg_a.pipeline_name or "A", cfg_b.pipeline_name or "B"
    state_a = state_b = ta.start
    sm = difflib.SequenceMatcher(None, [s.ident for s in ta.steps], [s.ident for s in tb.steps],
                                 autojunk=False)
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op == "equal":
            for k in range(i2 - i1):
                a, b = ta.steps[i1 + k], tb.steps[j1 + k]
                if a.text != b.text:
                    _found(d, "same-step", a, b, a.text, b.text)
                    break
                state_a = state_b = a.text
            if d.found:
                break
            continue
        block_a, block_b = ta.steps[i1:i2], tb.steps[j1:j2]
        end_a = block_a[-1].text if block_a else state_a
        end_b = block_b[-1].text if block_b else state_b
        if end_a == end_b:
            d.skipped_a += block_a
            d.skipped_b += block_b
            state_a, state_b = end_a, end_b
            continue
        first_a = _first_change(block_a, state_a)
        first_b = _first_change(block_b, state_b)
        if block_a and block_b:
            kind, a, b = "different-steps", first_a or block_a[0], first_b or block_b[0]
        elif block_a:
            kind, a, b = "only-a", first_a, None
        else:
            kind, a, b = "only-b", None, first_b
        _found(d, kind, a, b, a.text if a else state_a, b.text if b else state_b)
        blamed, others = (a, tb.steps) if kind == "only-a" else (b, ta.steps)
        if kind != "different-steps" and blamed is not None:
            d.moved = next((s for s in others if s.ident == blamed.ident), None)
        break
    if not d.found and (len(ta.steps) and len(tb.steps)) and ta.steps[-1].text != tb.steps[-1].text:
        _found(d, "same-step", ta.steps[-1], tb.steps[-1], ta.steps[-1].text, tb.steps[-1].text)
    d.seconds = time.perf_counter() - t0
    return d


def _first_change(block: list[Step], before: str) -> Step | None:
    prev = before
    for s in block:
        if s.text != prev:
            return s
        prev = s.text
    return None


def _found(d: Divergence, kind: str, a: Step | None, b: Step | None, text_a: str, text_b: str) -> None:
    d.found, d.kind, d.step_a, d.step_b = True, kind, a, b
    d.diff = list(difflib.unified_diff(text_a.splitlines(), text_b.splitlines(), d.pipeline_a,
                                       d.pipeline_b, lineterm="", n=2))


__all__ = ["BisectResult", "CompiledOutput", "Divergence", "Probe", "bisect_passes",
           "first_difference"]
