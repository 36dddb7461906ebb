"""The measured GEMM calibration set shipped with hlorun
(``hlorun/autotune/data/``): for each GEMM XLA autotuned on a real GPU, the
problem as the autotuner saw it and every candidate it timed.

Two CSV files per device (written by ``bench/autotune_ingest.py`` from XLA's
``--xla_gpu_dump_autotune_logs_to`` / ``--xla_gpu_dump_autotune_results_to``
files, collected by ``bench/autotune_collect.py``):

* ``gemms_<device>.csv``: one row per GEMM fusion: the case (category,
  dtype, epilogue, operand layout), the ``GemmProblem`` fields, XLA's chosen
  backend and config, and the split (``train`` / ``test``, by GEMM shape).
* ``candidates_<device>.csv``: one row per candidate XLA profiled: backend,
  Triton tile or BLAS algorithm, measured run time, and the run time of the
  same candidate in a second, independent autotuning run where one exists.

``environment_<device>.json`` records the device, driver, CUDA, cuBLAS and
JAX versions of the run.
"""

from __future__ import annotations

import csv
import hashlib
import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

from .problem import EpilogueOperand, GemmProblem
from .triton import TritonConfig

DATA_DIR = Path(__file__).resolve().parent / "data"

GEMM_FIELDS = ["gemm", "module", "instruction", "category", "dtype", "epilogue", "layout",
               "batch", "m", "n", "k", "lhs_type", "rhs_type", "dot_type", "out_type",
               "input_bytes", "output_bytes", "prologue_ops", "epilogue_ops", "epilogue_operands",
               "lhs_expensive", "rhs_expensive", "precision", "algorithm", "output_canonical",
               "lhs_k_major", "rhs_k_major",
               "xla_backend", "xla_config", "split"]
CAND_FIELDS = ["gemm", "backend", "block_m", "block_n", "block_k", "split_k", "stages", "warps",
               "ctas", "tma", "algorithm", "ns", "ns_repeat", "scratch_bytes"]


@dataclass
class MeasuredCandidate:
    backend: str                       # triton | cublaslt | cublas
    ns: float                          # XLA's measured run time
    ns_repeat: float | None = None     # the same candidate in a second run
    triton: TritonConfig | None = None
    algorithm: int | None = None
    scratch_bytes: int = 0

    @property
    def label(self) -> str:
        return f"triton:{self.triton.label}" if self.triton else f"{self.backend}:algo{self.algorithm}"

    @property
    def ns_mean(self) -> float:
        """The run time to fit on: the geometric mean of the two runs where the
        candidate was timed twice (half the variance of one run), else ``ns``."""
        return (self.ns * self.ns_repeat) ** 0.5 if self.ns_repeat else self.ns


@dataclass
class MeasuredGemm:
    gemm: str
    problem: GemmProblem
    candidates: list[MeasuredCandidate]
    xla_backend: str
    xla_config: str
    split: str
    case: dict[str, str] = field(default_factory=dict)

    @property
    def triton(self) -> list[MeasuredCandidate]:
        return [c for c in self.candidates if c.triton is not None]

    @property
    def blas(self) -> list[MeasuredCandidate]:
        return [c for c in self.candidates if c.triton is None]


def shape_split(batch: int, m: int, n: int, k: int, test_fraction: float = 0.3) -> str:
    """Held-out split by GEMM shape: every dtype/epilogue/layout variant of a
    shape lands on the same side, so test shapes are unseen in training."""
    h = hashlib.sha256(f"{batch}x{m}x{n}x{k}".encode()).digest()
    return "test" if h[0] / 256.0 < test_fraction else "train"


def _epilogue_text(ops: Iterable[EpilogueOperand]) -> str:
    return ";".join(f"{e.kind}:{'T' if e.transposed else ''}:{e.shape}" for e in ops)


def _epilogue_parse(text: str) -> list[EpilogueOperand]:
    from ..ir.attrs import parse_shape_text
    out = []
    for i, part in enumerate(p for p in text.split(";") if p):
        kind, tr, shape = part.split(":", 2)
        out.append(EpilogueOperand(f"e{i}", parse_shape_text(shape), kind, tr == "T"))
    return out


def problem_row(p: GemmProblem) -> dict[str, Any]:
    return {"batch": p.batch, "m": p.m, "n": p.n, "k": p.k, "lhs_type": p.lhs_type,
            "rhs_type": p.rhs_type, "dot_type": p.dot_type, "out_type": p.out_type,
            "input_bytes": p.input_bytes, "output_bytes": p.output_bytes,
            "prologue_ops": p.prologue_ops, "epilogue_ops": p.epilogue_ops,
            "epilogue_operands": _epilogue_text(p.epilogue_operands),
            "lhs_expensive": int(p.lhs_expensive), "rhs_expensive": int(p.rhs_expensive),
            "precision": p.precision, "algorithm": p.algorithm,
            "output_canonical": int(p.output_canonical),
            "lhs_k_major": int(p.lhs_k_major), "rhs_k_major": int(p.rhs_k_major)}


def problem_from_row(r: dict[str, str]) -> GemmProblem:
    return GemmProblem(
        name=r["instruction"], batch=int(r["batch"]), m=int(r["m"]), n=int(r["n"]), k=int(r["k"]),
        lhs_type=r["lhs_type"], rhs_type=r["rhs_type"], dot_type=r["dot_type"], out_type=r["out_type"],
        input_bytes=int(r["input_bytes"]), output_bytes=int(r["output_bytes"]),
        lhs_expensive=r["lhs_expensive"] == "1", rhs_expensive=r["rhs_expensive"] == "1",
        prologue_ops=int(r["prologue_ops"]), epilogue_ops=int(r["epilogue_ops"]),
        epilogue_operands=_epilogue_parse(r["epilogue_operands"]),
        output_canonical=r["output_canonical"] == "1", precision=r["precision"],
        algorithm=r["algorithm"], source="fusion",
        lhs_k_major=r.get("lhs_k_major", "1") == "1", rhs_k_major=r.get("rhs_k_major", "1") == "1")


def candidate_row(gemm: str, c: MeasuredCandidate) -> dict[str, Any]:
    t = c.triton
    return {"gemm": gemm, "backend": c.backend,
            "block_m": t.block_m if t else "", "block_n": t.block_n if t else "",
            "block_k": t.block_k if t else "", "split_k": t.split_k if t else "",
            "stages": t.num_stages if t else "", "warps": t.num_warps if t else "",
            "ctas": t.num_ctas if t else "", "tma": int(t.is_tma_allowed) if t else "",
            "algorithm": "" if c.algorithm is None else c.algorithm, "ns": int(c.ns),
            "ns_repeat": "" if c.ns_repeat is None else int(c.ns_repeat), "scratch_bytes": c.scratch_bytes}


def _candidate_from_row(r: dict[str, str]) -> MeasuredCandidate:
    t = None
    if r["block_m"]:
        t = TritonConfig(int(r["block_m"]), int(r["block_n"]), int(r["block_k"]), int(r["split_k"] or 1),
                         int(r["stages"]), int(r["warps"]), int(r["ctas"] or 1), r["tma"] == "1")
    return MeasuredCandidate(r["backend"], float(r["ns"]), float(r["ns_repeat"]) if r["ns_repeat"] else None,
                             t, int(r["algorithm"]) if r["algorithm"] else None, int(r["scratch_bytes"] or 0))


def write_csv(path: Path, fields: list[str], rows: Iterable[dict[str, Any]]) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields, lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow(r)


def available_devices(data_dir: Path = DATA_DIR) -> list[str]:
    return sorted(p.stem.split("_", 1)[1] for p in data_dir.glob("gemms_*.csv"))


@lru_cache(maxsize=8)
def _load(device: str, data_dir: str) -> tuple[MeasuredGemm, ...]:
    d = Path(data_dir)
    cands: dict[str, list[MeasuredCandidate]] = {}
    with open(d / f"candidates_{device}.csv", newline="") as fh:
        for r in csv.DictReader(fh):
            cands.setdefault(r["gemm"], []).append(_candidate_from_row(r))
    out = []
    with open(d / f"gemms_{device}.csv", newline="") as fh:
        for r in csv.DictReader(fh):
            out.append(MeasuredGemm(r["gemm"], problem_from_row(r), cands.get(r["gemm"], []),
                                    r["xla_backend"], r["xla_config"], r["split"],
                                    {k: r[k] for k in ("category", "dtype", "epilogue", "layout", "module")}))
    return tuple(out)


def load(device: str, split: str | None = None, data_dir: Path = DATA_DIR) -> list[MeasuredGemm]:
    """The measured GEMMs of ``device`` (``H200``, ``H100``), optionally one split."""
    key = device.upper()
    if not (data_dir / f"gemms_{key}.csv").exists():
        raise FileNotFoundError(f"no calibration data for {device} in {data_dir} "
                                f"(have: {', '.join(available_devices(data_dir)) or 'none'})")
    rows = _load(key, str(data_dir))
    return [g for g in rows if split is None or g.split == split]


def environment(device: str, data_dir: Path = DATA_DIR) -> dict[str, Any]:
    p = data_dir / f"environment_{device.upper()}.json"
    return json.loads(p.read_text()) if p.exists() else {}
