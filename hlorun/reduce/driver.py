"""The reduction loop: delta debugging over strategy units.

Each round runs every strategy.  A strategy's units are tried in chunks,
ddmin style: all of them at once, then halves, quarters ... down to single
units; a chunk whose candidate is accepted is kept and the units are
re-enumerated on the smaller module.  Rounds repeat until one changes
nothing, the ``timeout`` or ``max_tests`` budget runs out.

A candidate is: a copy of the best module, the strategy applied, dead code
and uncalled computations removed, printed.  It is skipped if its text was
seen before (a cache, so nothing is tested twice and nothing loops) or if
it is not smaller than the best (instructions*100 + bytes, then elements,
then non-default layouts: a strict well-founded order, so the loop ends).
Otherwise it must re-parse and pass the hlo-verifier before the condition
is tested; an interesting one (with the original's bug signature unless
slippage is allowed) becomes the best and is written atomically to the
output at once.  At the end the result is re-tested ``flaky_runs`` times:
a condition that does not hold every time is reported as flaky.
"""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..ir.clone import clone_module
from ..ir.module import Module
from ..text.printer import print_module
from ..errors import HloError, UsageError
from .conditions import Condition, Verdict
from .edit import cleanup
from .strategies import Strategy, make_strategies


@dataclass
class ReduceOptions:
    output: str | None = None
    timeout: float | None = None
    max_tests: int | None = None
    flaky_runs: int = 3
    strategies: list[str] | None = None
    allow_slippage: bool = False
    #: progress(event: dict): called after every test and acceptance.
    progress: Callable[[dict[str, Any]], None] | None = None


@dataclass
class StrategyStats:
    tests: int = 0
    accepted: int = 0
    seconds: float = 0.0


@dataclass
class ReduceResult:
    text: str
    start_instructions: int
    start_bytes: int
    end_instructions: int
    end_bytes: int
    seconds: float = 0.0
    tests: int = 0
    interesting: int = 0
    invalid: int = 0
    not_smaller: int = 0
    cache_hits: int = 0
    rounds: int = 0
    test_seconds: float = 0.0
    stopped: str = "done"  # done | timeout | max-tests
    original_detail: str = ""
    final_detail: str = ""
    signature: tuple | None = None
    flaky_runs: int = 0
    flaky_passes: int = 0
    strategies: dict[str, StrategyStats] = field(default_factory=dict)
    invalid_reasons: dict[str, int] = field(default_factory=dict)
    verifier_baseline: list[str] = field(default_factory=list)

    @property
    def flaky(self) -> bool:
        return self.flaky_runs > 0 and self.flaky_passes < self.flaky_runs

    @property
    def tests_per_second(self) -> float:
        return self.tests / self.seconds if self.seconds else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "start": {"instructions": self.start_instructions, "bytes": self.start_bytes},
            "end": {"instructions": self.end_instructions, "bytes": self.end_bytes},
            "seconds": round(self.seconds, 3), "tests": self.tests,
            "tests_per_second": round(self.tests_per_second, 3),
            "interesting": self.interesting, "invalid": self.invalid,
            "not_smaller": self.not_smaller, "cache_hits": self.cache_hits,
            "rounds": self.rounds, "stopped": self.stopped,
            "original": self.original_detail, "final": self.final_detail,
            "signature": list(self.signature) if self.signature else None,
            "flaky": {"runs": self.flaky_runs, "interesting": self.flaky_passes,
                      "flaky": self.flaky},
            "strategies": {k: {"tests": v.tests, "accepted": v.accepted,
                               "seconds": round(v.seconds, 3)} for k, v in self.strategies.items()},
            "invalid_reasons": dict(self.invalid_reasons),
            "input_verifier_findings": self.verifier_baseline[:20],
        }


def finding_key(message: str) -> str:
    """A verifier finding without names and numbers (its kind)."""
    return re.sub(r"%?[A-Za-z_][\w.-]*\.\d+|\d+", "#", message)


def size_key(module: Module, text: str) -> tuple[int, int, int]:
    elements = 0
    layouts = 0
    for i in module.instructions():
        for _, leaf in i.shape.leaves():
            if leaf.is_array:
                elements += leaf.element_count
                if leaf.layout is not None and leaf.layout.minor_to_major != tuple(
                        range(leaf.rank - 1, -1, -1)):
                    layouts += 1
    return (module.instruction_count * 100 + len(text), elements, layouts)


class Reducer:
    def __init__(self, text: str, filename: str, condition: Condition, options: ReduceOptions):
        self.filename = filename
        self.condition = condition
        self.options = options
        self.strategies: list[Strategy] = make_strategies(options.strategies)
        if condition.needs_same_semantics:
            self.strategies = [s for s in self.strategies if s.preserves_semantics]
        from ..text.parser import parse_module
        self.best_module = parse_module(text, filename)
        self.best_text = print_module(self.best_module)
        self.best_key = size_key(self.best_module, self.best_text)
        self.cache: dict[str, bool] = {}
        self.pinned: tuple | None = None
        self.deadline: float | None = None
        self.res = ReduceResult(self.best_text, self.best_module.instruction_count,
                                len(self.best_text), self.best_module.instruction_count,
                                len(self.best_text))
        self._verifier = None
        self._strategy = ""
        #: Kinds of hlo-verifier findings the input already has (tolerated in
        #: candidates; a new kind makes a candidate invalid).
        self.baseline: set[str] | None = None
        self.baseline_findings: list[str] = []

    # -- testing ------------------------------------------------------------------------
    def _verify(self, text: str) -> tuple[Module | None, str]:
        from ..text.parser import parse_module
        try:
            fresh = parse_module(text, self.filename)
        except HloError as e:
            return None, "does not re-parse: " + e.render().splitlines()[0]
        if self._verifier is None:
            from ..verifier.checkers import get_checker
            self._verifier = get_checker("hlo-verifier")
        diags = [d for d in self._verifier.check(fresh)
                 if self.baseline is None or finding_key(d.message) not in self.baseline]
        if diags:
            return None, "hlo-verifier: " + diags[0].message
        return fresh, ""

    def test_text(self, text: str) -> Verdict:
        """Verify and test one text (no cache)."""
        fresh, why = self._verify(text)
        if fresh is None:
            return Verdict(False, why)
        remaining = None if self.deadline is None else max(1.0, self.deadline - time.perf_counter())
        t = time.perf_counter()
        try:
            if remaining is not None and hasattr(self.condition, "command"):
                verdict = self.condition.test(fresh, text, timeout=remaining)  # type: ignore[call-arg]
            else:
                verdict = self.condition.test(fresh, text)
        except HloError as e:
            if isinstance(e, UsageError):
                raise
            verdict = Verdict(False, e.render().splitlines()[0])
        self.res.test_seconds += time.perf_counter() - t
        return verdict

    def _out_of_budget(self) -> bool:
        if self.deadline is not None and time.perf_counter() >= self.deadline:
            self.res.stopped = "timeout"
            return True
        if self.options.max_tests is not None and self.res.tests >= self.options.max_tests:
            self.res.stopped = "max-tests"
            return True
        return False

    def _try(self, strategy: Strategy, chunk: list) -> bool:
        m = clone_module(self.best_module)
        try:
            if not strategy.apply(m, chunk):
                return False
            cleanup(m, keep_signature=self.condition.needs_same_semantics)
            text = print_module(m)
        except (ValueError, KeyError, IndexError, AttributeError, TypeError) as e:
            self._invalid(f"{strategy.name}: {type(e).__name__}")
            return False
        if text == self.best_text:
            return False
        h = hashlib.sha1(text.encode()).hexdigest()
        got = self.cache.get(h)
        if got is not None:
            self.res.cache_hits += 1
            return False  # accepted texts become the best, so a hit is never news
        k = size_key(m, text)
        if k >= self.best_key:
            self.cache[h] = False
            self.res.not_smaller += 1
            return False
        st = self.res.strategies.setdefault(strategy.name, StrategyStats())
        t = time.perf_counter()
        verdict = self.test_text(text)
        self.res.tests += 1
        st.tests += 1
        st.seconds += time.perf_counter() - t
        ok = verdict.matches(self.pinned)
        self.cache[h] = ok
        if not verdict.interesting and verdict.detail.startswith(("does not re-parse", "hlo-verifier")):
            self._invalid(strategy.name + ": " + verdict.detail.split(":")[0])
        if ok:
            st.accepted += 1
            self.res.interesting += 1
            self.best_module, self.best_text, self.best_key = m, text, k
            self.res.final_detail = verdict.detail
            self._write()
        self._report("accepted" if ok else "rejected")
        return ok

    def _invalid(self, why: str) -> None:
        self.res.invalid += 1
        self.res.invalid_reasons[why] = self.res.invalid_reasons.get(why, 0) + 1

    def _write(self) -> None:
        if self.options.output:
            from ..text.fileio import write_atomic
            write_atomic(self.options.output, self.best_text)

    def _report(self, event: str) -> None:
        if self.options.progress is not None:
            self.options.progress({"event": event, "strategy": self._strategy,
                                   "instructions": self.best_module.instruction_count,
                                   "bytes": len(self.best_text), "tests": self.res.tests,
                                   "start_instructions": self.res.start_instructions,
                                   "start_bytes": self.res.start_bytes})

    # -- the loop ----------------------------------------------------------------------
    def _run_strategy(self, strategy: Strategy) -> bool:
        self._strategy = strategy.name
        units = strategy.units(self.best_module)
        if not units:
            return False
        progress = False
        chunk = len(units)
        while True:
            i = 0
            while i < len(units):
                if self._out_of_budget():
                    return progress
                if self._try(strategy, units[i:i + chunk]):
                    progress = True
                    units = strategy.units(self.best_module)
                    chunk = min(chunk, max(1, len(units)))
                else:
                    i += chunk
            if chunk <= 1 or not units:
                break
            chunk = max(1, chunk // 2)
        return progress

    def _set_baseline(self) -> None:
        from ..verifier.checkers import get_checker
        self._verifier = get_checker("hlo-verifier")
        diags = self._verifier.check(self.best_module)
        self.baseline = {finding_key(d.message) for d in diags}
        self.baseline_findings = [d.message for d in diags]

    def run(self) -> ReduceResult:
        t0 = time.perf_counter()
        if self.options.timeout is not None:
            self.deadline = t0 + self.options.timeout
        self._set_baseline()
        self.res.verifier_baseline = list(self.baseline_findings)
        first = self.test_text(self.best_text)
        self.res.tests += 1
        if not first.interesting:
            raise UsageError(f"the input is not interesting: {self.condition.describe()} does not "
                             f"hold ({first.detail})")
        self.res.original_detail = self.res.final_detail = first.detail
        self.res.signature = first.signature
        if not self.options.allow_slippage:
            self.pinned = first.signature
        self._write()
        self._report("start")
        while not self._out_of_budget():
            self.res.rounds += 1
            changed = False
            for s in self.strategies:
                if self._out_of_budget():
                    break
                changed |= self._run_strategy(s)
            if not changed:
                break
        self._check_flaky()
        self.res.text = self.best_text
        self.res.end_instructions = self.best_module.instruction_count
        self.res.end_bytes = len(self.best_text)
        self.res.seconds = time.perf_counter() - t0
        return self.res

    def _check_flaky(self) -> None:
        n = max(0, self.options.flaky_runs)
        self.res.flaky_runs = n
        deadline, self.deadline = self.deadline, None  # the re-tests always run
        passes = 0
        for _ in range(n):
            v = self.test_text(self.best_text)
            if v.matches(self.pinned):
                passes += 1
                self.res.final_detail = v.detail
        self.res.flaky_passes = passes
        self.deadline = deadline
        self._strategy = "re-test"
        self._report("flaky-check")


def reduce_text(text: str, filename: str, condition: Condition,
                options: ReduceOptions | None = None) -> ReduceResult:
    """Reduce ``text`` while ``condition`` (already prepared) holds."""
    return Reducer(text, filename, condition, options or ReduceOptions()).run()


__all__ = ["ReduceOptions", "ReduceResult", "Reducer", "reduce_text", "size_key"]
