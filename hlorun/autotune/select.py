"""Choosing among candidates: the deterministic model, or simulated
measurements under contention with XLA's or a fair sampling policy.

* ``model``: every feasible candidate's estimate, XLA's selection rule
  (``calibrate.pick_best``: fastest, but a candidate needing less scratch
  memory wins within 2 us).
* ``noisy``: each timed sample is the estimate slowed down by seeded noise
  (contention only ever slows a kernel: ``t * (1 + |N(0, s)|)``, plus with
  probability ``s`` a co-runner burst of 20-100%).  Policies:

  - ``xla``: the policy of S0: Triton contributes one config (the one it
    would run) timed once after a warm-up; the BLAS library contributes
    every algorithm its heuristic returns, each timed once; the minimum
    wins.  The BLAS side takes the minimum of many noisy draws and wins
    more often than its true speed deserves.
  - ``fair``: the same sample count and statistic for everyone: each
    backend's finalist (from that first pass) is timed ``fair_samples``
    times and the medians are compared.
  - ``each``: XLA's current profiler -- every candidate (all Triton
    configs and all BLAS algorithms) timed once, the minimum wins.

A decision carries its margin (runner-up of another backend vs the winner,
by the model) and, under contention, its flip rate: the fraction of
``flip_seeds`` seeds whose measured choice differs from the model's.
"""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass, field
from typing import Any, Sequence

from .calibrate import SCRATCH_WINDOW_US, pick_best
from .candidates import Candidate

CONTENTION = {"none": 0.0, "low": 0.03, "medium": 0.10, "high": 0.30}
#: ``--contention measured``: each candidate gets the run-to-run spread
#: measured for its size class on an idle H100/H200 (``noise.py``)
MEASURED = -1.0


def contention_sigma(level: str | float) -> float:
    if isinstance(level, (int, float)):
        return float(level)
    key = str(level).strip().lower()
    if key == "measured":
        return MEASURED
    if key in CONTENTION:
        return CONTENTION[key]
    try:
        return float(key)
    except ValueError:
        from ..errors import UsageError
        raise UsageError(f"unknown contention level {level!r}: use none, low, medium, high, measured "
                         f"or a number")


def sample(true_ns: float, sigma: float, rng: random.Random) -> float:
    if sigma == MEASURED:
        from .noise import measured_sigma
        sigma = measured_sigma(true_ns)
    if sigma <= 0:
        return true_ns
    x = abs(rng.gauss(0.0, sigma))
    if rng.random() < sigma:
        x += rng.uniform(0.2, 1.0)
    return true_ns * (1.0 + x)


def _rng(seed: int, instr: str, key: str, i: int) -> random.Random:
    return random.Random(f"{seed}|{instr}|{key}|{i}")


@dataclass
class Measurement:
    winner: Candidate
    measured: dict[str, float]        # candidate key -> measured ns (the statistic compared)
    samples: int                      # timed runs spent


def measure(cands: Sequence[Candidate], instr: str, seed: int, sigma: float, sampling: str,
            fair_samples: int = 15, window_us: float = SCRATCH_WINDOW_US) -> Measurement:
    feasible = [c for c in cands if c.feasible]
    if sampling == "each":
        measured = {c.key: sample(c.ns, sigma, _rng(seed, instr, c.key, 0)) for c in feasible}
        w = pick_best(feasible, lambda c: measured[c.key], lambda c: c.scratch_bytes, window_us)
        return Measurement(w, measured, len(feasible))
    if sampling not in ("xla", "fair"):
        from ..errors import UsageError
        raise UsageError(f"unknown sampling policy {sampling!r}: use xla, fair or each")
    # Triton contributes the config it would run (its best by the model);
    # a BLAS library contributes every algorithm its heuristic returns.
    triton = [c for c in feasible if not c.is_blas]
    entrants = ([min(triton, key=lambda c: c.ns)] if triton else []) + [c for c in feasible if c.is_blas]
    measured = {c.key: sample(c.ns, sigma, _rng(seed, instr, c.key, 0)) for c in entrants}
    runs = len(entrants)
    if sampling == "xla":
        w = pick_best(entrants, lambda c: measured[c.key], lambda c: c.scratch_bytes, window_us)
        return Measurement(w, measured, runs)
    finalists: dict[str, Candidate] = {}
    for c in entrants:
        f = finalists.get(c.backend)
        if f is None or measured[c.key] < measured[f.key]:
            finalists[c.backend] = c
    med: dict[str, float] = {}
    for c in finalists.values():
        xs = [sample(c.ns, sigma, _rng(seed, instr, c.key, 1 + i)) for i in range(fair_samples)]
        med[c.key] = statistics.median(xs)
        runs += fair_samples
    fin = list(finalists.values())
    w = pick_best(fin, lambda c: med[c.key], lambda c: c.scratch_bytes, window_us)
    measured.update(med)
    return Measurement(w, measured, runs)


@dataclass
class Decision:
    """What the autotuner chose for one GEMM, and how firmly."""

    instruction: str
    candidates: list[Candidate]
    winner: Candidate | None
    runner_up: Candidate | None = None
    margin: float | None = None           # (runner-up - winner) / winner, by the model
    source: str = "model"                 # model | noisy | cache | xla-results | forced
    flip_rate: float | None = None        # backend flips over flip_seeds seeds
    config_flip_rate: float | None = None
    flip_seeds: int = 0
    model_winner: Candidate | None = None
    measured: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    problem: Any = None

    @property
    def feasible(self) -> list[Candidate]:
        return [c for c in self.candidates if c.feasible]

    @property
    def rejected(self) -> list[Candidate]:
        return [c for c in self.candidates if not c.feasible]

    def rejection_cost(self) -> dict[str, Any] | None:
        """The fastest rejected config (by the model, had it fit) when it
        beats the winner: what the rejection costs (S4)."""
        hyp = [c for c in self.rejected if c.hypothetical is not None]
        if not hyp or self.winner is None or self.winner.estimate is None:
            return None
        best = min(hyp, key=lambda c: c.hypothetical.ns)
        if best.hypothetical.ns >= self.winner.ns:
            return None
        flops = self.problem.flops if self.problem is not None else 0
        return {"label": best.label, "reasons": list(best.reasons),
                "would_take_ns": round(best.hypothetical.ns, 1), "winner_ns": round(self.winner.ns, 1),
                "slowdown": round(self.winner.ns / best.hypothetical.ns - 1, 4),
                "tflops_rejected": round(flops / best.hypothetical.ns / 1e3, 1) if flops else None,
                "tflops_winner": round(flops / self.winner.ns / 1e3, 1) if flops else None}

    def to_json(self, candidate_json=None) -> dict[str, Any]:
        """``candidate_json(c)``: the JSON of a candidate (default
        ``c.to_json()``; the autotuner passes a per-run memo)."""
        p = self.problem
        cj = candidate_json or (lambda c: c.to_json())
        return {
            "instruction": self.instruction,
            "problem": p.to_json() if p is not None else None,
            "shape": p.shape_text if p is not None else None,
            "types": p.types_text if p is not None else None,
            "source": self.source,
            "winner": cj(self.winner) if self.winner else None,
            "runner_up": cj(self.runner_up) if self.runner_up else None,
            "margin": None if self.margin is None else round(self.margin, 4),
            "flip_rate": self.flip_rate, "config_flip_rate": self.config_flip_rate,
            "flip_seeds": self.flip_seeds,
            "considered": len(self.candidates), "feasible": len(self.feasible),
            "rejected": [{"label": c.label, "reasons": c.reasons} for c in self.rejected],
            "rejection_cost": self.rejection_cost(),
            "candidates": [cj(c) for c in self.candidates],
            "measured_ns": {k: round(v, 1) for k, v in self.measured.items()},
            "notes": list(self.notes),
        }


def model_pick(cands: Sequence[Candidate], window_us: float = SCRATCH_WINDOW_US) -> Candidate | None:
    feasible = [c for c in cands if c.feasible]
    if not feasible:
        return None
    return pick_best(feasible, lambda c: c.ns, lambda c: c.scratch_bytes, window_us)


def runner_up(cands: Sequence[Candidate], winner: Candidate) -> Candidate | None:
    """The best feasible candidate of another backend, else the next config."""
    others = [c for c in cands if c.feasible and c.backend != winner.backend]
    if not others:
        others = [c for c in cands if c.feasible and c is not winner]
    return min(others, key=lambda c: c.ns) if others else None


def decide(instr: str, cands: list[Candidate], *, mode: str = "model", seed: int = 0,
           contention: str | float = "none", sampling: str = "xla", flip_seeds: int = 20,
           fair_samples: int = 15, problem: Any = None) -> Decision:
    sigma = contention_sigma(contention)
    best = model_pick(cands)
    d = Decision(instr, cands, best, problem=problem, model_winner=best)
    if best is None:
        d.notes.append("no feasible candidate")
        return d
    if mode == "noisy":
        m = measure(cands, instr, seed, sigma, sampling, fair_samples)
        d.winner, d.measured, d.source = m.winner, m.measured, "noisy"
        how = "the measured run-to-run spread of its size class" if sigma == MEASURED else f"sigma {sigma:g}"
        d.notes.append(f"measured with {sampling} sampling, contention {how}, seed {seed}: "
                       f"{m.samples} timed runs")
    elif mode != "model":
        from ..errors import UsageError
        raise UsageError(f"unknown autotune mode {mode!r}: use model or noisy")
    ru = runner_up(cands, d.winner)
    d.runner_up = ru
    if ru is not None and d.winner.estimate is not None:
        d.margin = (ru.ns - d.winner.ns) / d.winner.ns
    if (sigma > 0 or sigma == MEASURED) and flip_seeds > 0:
        flips = cflips = 0
        for s in range(seed, seed + flip_seeds):
            w = measure(cands, instr, s, sigma, sampling, fair_samples).winner
            flips += w.backend != best.backend
            cflips += w.key != best.key
        d.flip_rate = flips / flip_seeds
        d.config_flip_rate = cflips / flip_seeds
        d.flip_seeds = flip_seeds
    return d
