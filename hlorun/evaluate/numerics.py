"""``compile --check-numerics``: evaluate the module before the pipeline and
after every pass that changed it, on the same inputs, and name the first
pass whose outputs differ from the input module's beyond tolerance.

:class:`NumericsListener` is a pipeline :class:`~hlorun.pipeline.run.Listener`
(it never mutates the module).  ``mode="each"`` checks after every changed
pass; ``mode="final"`` only compares the start and the end.  Every check
compares with the *input module's* outputs (the ground truth) and records
the drift from the previous check too, so a pass that nudges rounding
without crossing the tolerance is still visible.  After the first
mismatch, checking stops: the culprit is found.  A module a pass made
unevaluable (an op the evaluator lacks) is noted and skipped, never guessed.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

from ..ir.module import Module
from ..pipeline.run import Listener, PassEvent, PipelineResult
from .compare import Comparison, compare_values
from .core import DEFAULT_MAX_BYTES, Evaluator
from .registry import EvaluationError


def _same_leaves(a: Any, b: Any) -> list[bool]:
    """Per output leaf (depth-first): do the two value ids (see
    :class:`~hlorun.evaluate.memo.MemoEvaluator`) say the arrays are equal?"""
    def leaves(v):
        if isinstance(v, tuple) and v and v[0] == "t":
            return [x for e in v[1:] for x in leaves(e)]
        return [v]
    la, lb = leaves(a), leaves(b)
    if len(la) != len(lb):
        return [False] * len(lb)
    return [x is not None and x == y for x, y in zip(la, lb)]


def _worst_json(cmp: Comparison) -> dict | None:
    leaf = cmp.worst()
    if leaf is None:
        leaf = max(cmp.leaves, key=lambda x: x.worst_ratio, default=None)
    return leaf.to_json() if leaf is not None else None


class NumericsListener(Listener):
    """Checks the numbers around passes; results in :attr:`checks`,
    :attr:`first_mismatch`, :attr:`notes`."""

    def __init__(self, mode: str = "each", inputs: Sequence[str] = (), seed: int = 0,
                 rtol: float | None = None, atol: float | None = None,
                 max_bytes: int | None = DEFAULT_MAX_BYTES):
        if mode not in ("each", "final"):
            raise ValueError(f"--check-numerics mode must be 'each' or 'final', not {mode!r}")
        self.mode = mode
        self.input_specs = list(inputs)
        self.seed = seed
        self.rtol = rtol
        self.atol = atol
        self.max_bytes = max_bytes
        self.args: list[Any] | None = None
        self.reference: Any = None
        self.previous: Any = None
        self.types: list[str] = []
        self.tolerance_types: list[str] = []
        self.signature: list[str] = []
        self.checks: list[dict] = []
        self.first_mismatch: dict | None = None
        self.notes: list[str] = []
        self.start_seconds = 0.0
        self._changed_since_check = False

    # -- listener events -------------------------------------------------------------------
    def on_run_start(self, run, module: Module) -> None:
        from . import output_types, tolerance_types, unsupported_ops
        from .session import build_inputs
        missing = unsupported_ops(module)
        if missing:
            raise EvaluationError("--check-numerics: the input module cannot be evaluated: "
                                  f"{', '.join(missing)} not supported by the evaluator")
        if self.max_bytes is not None:
            from .memory import check_memory
            check_memory(module, None, self.max_bytes)
        self.args = build_inputs(module, self.input_specs, self.seed)
        from ..ir.clone import clone_module
        from .compare import reduction_lengths
        from .inputs import describe_inputs
        self.types = output_types(module)
        self.tolerance_types = tolerance_types(module)
        self.terms = reduction_lengths(module)
        self.input_scheme = describe_inputs(module)
        self._input_module = clone_module(module)  # for the f64 referee
        self._f64 = None
        self.signature = self._signature(module)
        t = time.perf_counter()
        from .memo import MemoEvaluator
        # Each check re-evaluates only instructions whose structure or inputs
        # changed since the previous evaluation (bitwise-equal values reused).
        self.memo = MemoEvaluator(self.args, max_bytes=self.max_bytes,
                                  budget_bytes=self.max_bytes or DEFAULT_MAX_BYTES)
        self.reference = self.memo.evaluate(module)
        self._ref_vid = self._prev_vid = self.memo.root_vid
        self._vs_start = None
        self.start_seconds = time.perf_counter() - t
        self.previous = self.reference

    def on_after_pass(self, ev: PassEvent, module: Module) -> None:
        if not ev.changed:
            return
        self._changed_since_check = True
        if self.mode == "each" and self.first_mismatch is None:
            self._check(ev.index, ev.path, module)

    def on_run_end(self, result: PipelineResult, module: Module) -> None:
        if self.mode == "final" and self._changed_since_check and self.reference is not None:
            last = result.events[-1] if result.events else None
            self._check(last.index if last else 0, "pipeline-end", module)

    # -- checking ------------------------------------------------------------------------------
    @staticmethod
    def _signature(module: Module) -> list[str]:
        return [p.shape.to_string(False) if p is not None else "?" for p in module.entry.parameters]

    def _check(self, index: int, path: str, module: Module) -> None:
        from . import unsupported_ops
        rec: dict[str, Any] = {"index": index, "pass": path}
        missing = unsupported_ops(module)
        if missing:
            rec.update(status="unevaluable", message=f"{', '.join(missing)} not supported by the evaluator")
            self.checks.append(rec)
            return
        sig = self._signature(module)
        if sig != self.signature:
            rec.update(status="unevaluable",
                       message=f"entry parameters changed: ({', '.join(self.signature)}) -> ({', '.join(sig)})")
            self.checks.append(rec)
            return
        t = time.perf_counter()
        try:
            out = self.memo.evaluate(module)
        except EvaluationError as e:
            rec.update(status="unevaluable", message=e.message)
            self.checks.append(rec)
            return
        rec["seconds"] = round(time.perf_counter() - t, 6)
        rec["evaluated"], rec["reused"] = self.memo.evaluated, self.memo.reused
        kw = dict(rtol=self.rtol, atol=self.atol, tolerance_types=self.tolerance_types,
                  terms=self.terms)
        vid = self.memo.root_vid
        # bitwise-equal results (same content digests) need no element-wise pass
        vs_start = (self._vs_start if vid == self._prev_vid and self._vs_start is not None
                    else compare_values(self.reference, out, self.types, **kw,
                                        identical=_same_leaves(self._ref_vid, vid)))
        vs_prev = compare_values(self.previous, out, self.types, **kw,
                                 identical=_same_leaves(self._prev_vid, vid))
        if not vs_start.ok and self.rtol is None and self.atol is None:
            rec["f64_reference"] = self._referee(vs_start, out)
        self.previous, self._prev_vid, self._vs_start = out, vid, vs_start
        rec["status"] = "ok" if vs_start.ok else "mismatch"
        rec["max_abs_error"] = max((leaf.max_abs_error for leaf in vs_start.leaves), default=0.0)
        rec["max_abs_change"] = max((leaf.max_abs_error for leaf in vs_prev.leaves), default=0.0)
        rec["worst_ratio"] = max((leaf.worst_ratio for leaf in vs_start.leaves), default=0.0)
        rec["worst"] = _worst_json(vs_start)
        rec["outputs"] = [leaf.to_json() for leaf in vs_start.leaves]
        rec["describe"] = [leaf.describe() for leaf in vs_start.leaves if not leaf.ok]
        self.checks.append(rec)
        if not vs_start.ok and self.first_mismatch is None:
            self.first_mismatch = rec

    def _referee(self, cmp: Comparison, out: Any) -> str:
        """Re-judge a mismatch against an f64 evaluation of the input module
        (computed once; see :mod:`hlorun.evaluate.reference`)."""
        from .reference import f64_reference, referee
        if self._f64 is None:
            try:
                self._f64 = f64_reference(self._input_module, self.args, self.max_bytes)
            except EvaluationError as e:
                self._f64 = e
        if isinstance(self._f64, EvaluationError):
            return f"no f64 reference: {self._f64.message}"
        return referee(cmp, self.reference, out, self._f64)

    # -- results -----------------------------------------------------------------------------------
    @property
    def exit_code(self) -> int:
        return 2 if self.first_mismatch is not None else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode, "seed": self.seed, "rtol": self.rtol, "atol": self.atol,
            "inputs": self.input_specs, "input_scheme": getattr(self, "input_scheme", []),
            "start_seconds": round(self.start_seconds, 6),
            "checks": [{k: v for k, v in c.items() if k != "describe"} for c in self.checks],
            "first_mismatch": ({k: v for k, v in self.first_mismatch.items() if k != "describe"}
                               if self.first_mismatch else None),
            "notes": self.notes,
        }

    def update_report(self, doc: dict[str, Any]) -> None:
        """Add the ``numerics`` section to ``compile --format json``'s report."""
        doc["numerics"] = self.to_json()
        if self.first_mismatch is not None and doc.get("status") == "ok":
            doc["status"] = "numerics-mismatch"
            doc["exit_code"] = 2

    def render_text(self, report) -> None:
        evaluated = [c for c in self.checks if c.get("status") in ("ok", "mismatch")]
        skipped = [c for c in self.checks if c.get("status") == "unevaluable"]
        for c in skipped:
            report.warn(f"numerics: not checked after #{c['index']} {c['pass']}: {c['message']}")
        what = "after every changed pass" if self.mode == "each" else "at the end"
        if self.first_mismatch is not None:
            m = self.first_mismatch
            body = [f"pass #{m['index']} {m['pass']} changed the result beyond tolerance "
                    f"(inputs: seed {self.seed}" + (", " + ", ".join(self.input_specs) if self.input_specs else "")
                    + ")"]
            body += [f"  {d}" for d in m["describe"]]
            if self.mode == "final":
                body.append("  (--check-numerics=final compares only start and end; "
                            "use --check-numerics to find the pass)")
            report.panel("numerics mismatch", "\n".join(body))
            return
        worst = max(evaluated, key=lambda c: c.get("worst_ratio", 0.0), default=None)
        detail = ""
        if worst is not None and worst.get("worst_ratio"):
            detail = (f"; closest to the tolerance: {worst['worst_ratio']:.2g}x after "
                      f"#{worst['index']} {worst['pass']}")
        report.info(f"numerics: {len(evaluated)} check(s) {what} agree with the input module "
                    f"(seed {self.seed}{detail}; default inputs: --format json lists the "
                    f"range of each parameter)")
