"""``--force-backend``: a backend for every GEMM, or per instruction.

Grammar (entries separated by ``;``)::

    triton | cublas | cublaslt | rocblas | hipblaslt          every GEMM
    INSTR=BACKEND                                             one GEMM (name or glob)
    INSTR=triton:128x64x32/s3/w4[/sk2][/tma]                  one GEMM, one Triton config
    INSTR=cublaslt:3                                          one GEMM, BLAS algorithm 3

``INSTR`` matches the fusion's name, the name of the dot inside it, or that
dot's original name (``gemm_fusion_dot.7`` and ``dot.7`` both work), as a
shell-style glob.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from ..source import UsageError
from .candidates import BACKENDS
from .triton import TritonConfig


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
        if backend not in BACKENDS:
            raise UsageError(f"--force-backend: unknown backend {backend!r} in {raw!r}; "
                             f"use one of {', '.join(BACKENDS)}")
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
