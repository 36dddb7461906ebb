"""``--force-backend``: a backend for every GEMM, or per instruction.

Grammar (entries separated by ``;``)::

    triton | cublas | cublaslt | rocblas | hipblaslt | blas   every GEMM
    INSTR=BACKEND                                             one GEMM (name or glob)
    INSTR=triton:128x64x32/s3/w4[/sk2][/tma]                  one GEMM, one Triton config
    INSTR=cublaslt:3                                          one GEMM, BLAS algorithm 3

``INSTR`` matches the fusion's name, the name of the dot inside it, or that
dot's original name (``gemm_fusion_dot.7`` and ``dot.7`` both work), as a
shell-style glob.  An ``INSTR`` that matches no GEMM of the module is an
error with the nearest GEMM names (:func:`check_patterns`).

``blas`` is the platform's BLAS library: cuBLAS-LT on CUDA, hipBLASLt on
ROCm (:func:`resolve_backend`).

A backend forced on every GEMM that cannot run one of them (operand/result
types, layout, library support, device) is not fatal: that GEMM is
autotuned as if nothing were forced and the reason is reported per GEMM
(:class:`Infeasible`).  With ``--force-backend-strict`` it fails the pass
instead, and so does a force that names the GEMM (``INSTR=...``): there the
user asked for exactly that (S4: a config that cannot run, with figures).
"""

from __future__ import annotations

import difflib
import fnmatch
from dataclasses import dataclass, field

from ..errors import UsageError
from .candidates import BACKENDS
from .triton import TritonConfig

#: Backend names that stand for a platform-dependent library.
ALIASES = ("blas",)


@dataclass(frozen=True)
class Force:
    pattern: str | None          # None: every GEMM
    backend: str
    config: TritonConfig | None = None
    algorithm: int | None = None

    def matches(self, names: tuple[str, ...]) -> bool:
        if self.pattern is None:
            return True
        return any(fnmatch.fnmatchcase(n, self.pattern) for n in names if n)

    @property
    def text(self) -> str:
        what = self.backend
        if self.config is not None:
            what += ":" + self.config.label
        elif self.algorithm is not None:
            what += f":{self.algorithm}"
        return what if self.pattern is None else f"{self.pattern}={what}"


def parse_force(text: str) -> list[Force]:
    out: list[Force] = []
    for raw in (text or "").replace("\n", ";").split(";"):
        item = raw.strip()
        if not item:
            continue
        pattern = None
        if "=" in item.split(":", 1)[0]:
            pattern, item = (x.strip() for x in item.split("=", 1))
            if not pattern:
                raise UsageError(f"--force-backend: empty instruction name in {raw!r}")
        backend, _, detail = item.partition(":")
        backend = backend.strip().lower()
        if backend not in BACKENDS + ALIASES:
            near = difflib.get_close_matches(backend, BACKENDS + ALIASES, n=1)
            raise UsageError(f"--force-backend: unknown backend {backend!r} in {raw!r}; "
                             + (f"did you mean {near[0]}? " if near else "")
                             + f"use one of {', '.join(BACKENDS + ALIASES)}")
        if backend == "blas" and detail and not detail.strip().removeprefix("algo").isdigit():
            raise UsageError(f"--force-backend: blas takes an algorithm number, got {detail!r}")
        cfg = alg = None
        if detail:
            if pattern is None:
                raise UsageError(f"--force-backend: a config ({detail!r}) needs INSTR=, e.g. "
                                 f"gemm_fusion_dot.1={backend}:{detail}")
            if backend == "triton":
                try:
                    cfg = TritonConfig.parse(detail)
                except ValueError as e:
                    raise UsageError(f"--force-backend: bad Triton config {detail!r}: {e}") from None
            else:
                try:
                    alg = int(detail.removeprefix("algo"))
                except ValueError:
                    raise UsageError(f"--force-backend: BLAS algorithm must be a number, got {detail!r}") from None
        out.append(Force(pattern, backend, cfg, alg))
    return out


def force_for(forces: list[Force], names: tuple[str, ...]) -> Force | None:
    """The most specific force that applies (per-instruction beats global;
    the last one given wins)."""
    hit = None
    for f in forces:
        if f.pattern is not None and f.matches(names):
            hit = f
    if hit is not None:
        return hit
    for f in forces:
        if f.pattern is None:
            hit = f
    return hit


def resolve_backend(backend: str, is_rocm: bool) -> str:
    """``blas`` -> the platform's Lt library (cuBLAS-LT on CUDA, hipBLASLt on
    ROCm, as XLA's autotuner fissions to by default); other names as given."""
    if backend == "blas":
        return "hipblaslt" if is_rocm else "cublaslt"
    return backend


def check_patterns(forces: list[Force], gemm_names: list[tuple[str, ...]]) -> None:
    """Every ``INSTR=`` must match a GEMM of the module: a typo is a
    ``UsageError`` naming the closest GEMM names, never silently ignored."""
    known = sorted({n for names in gemm_names for n in names if n})
    for f in forces:
        if f.pattern is None or any(f.matches(names) for names in gemm_names):
            continue
        near = difflib.get_close_matches(f.pattern, known, n=3, cutoff=0.5)
        listed = ", ".join(known[:8]) + (f" (+{len(known) - 8} more)" if len(known) > 8 else "")
        raise UsageError(
            f"--force-backend {f.text}: no GEMM matches {f.pattern!r}"
            + (f"; did you mean {' or '.join(near)}?" if near else "")
            + (f" GEMMs in this module: {listed}" if known else " (the module has no GEMM to tune)"))


@dataclass
class Infeasible:
    """A forced backend that cannot run one GEMM, and why."""

    instruction: str
    force: str
    problem: str          # "128x64x512 f32->f16"
    reasons: list[str] = field(default_factory=list)
    instead: str = ""     # what the autotuner chose instead ("" under strict)

    def text(self) -> str:
        why = "; ".join(self.reasons) or "no candidate"
        s = f"{self.instruction} [{self.problem}]: {self.force} cannot run it: {why}"
        return s + (f"; autotuned instead: {self.instead}" if self.instead else "")

    def to_json(self) -> dict:
        return {"instruction": self.instruction, "force": self.force, "problem": self.problem,
                "reasons": list(self.reasons), "instead": self.instead}
