"""The real-autotuner sweep in ``shared/xla-dumps/gemm_sweep``: for each GEMM
the problem (read from the final HLO), every candidate XLA profiled with its
run time, and which backend XLA's final HLO uses."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..text.parser import load_module
from .problem import GemmProblem, gemm_problem, is_blas_call, is_triton_gemm_fusion
from .xla_logs import InstructionProfiles, read_logs


@dataclass
class SweepCase:
    name: str
    problem: GemmProblem
    profiles: InstructionProfiles
    xla_backend: str        # triton | cublaslt (from the final HLO)
    info: dict

    def as_measured(self):
        """The case as a ``dataset.MeasuredGemm`` (what ``calibrate`` evaluates)."""
        from .dataset import MeasuredCandidate, MeasuredGemm, shape_split
        cands = [MeasuredCandidate(q.config.backend, q.run_time_ns, None, q.config.triton,
                                   None if q.config.triton else (q.config.algorithm or 0), q.scratch_bytes)
                 for q in self.profiles.measured()]
        p = self.problem
        return MeasuredGemm(self.name, p, cands, self.xla_backend, "", shape_split(p.batch, p.m, p.n, p.k),
                            {"category": "gemm_sweep", "dtype": p.lhs_type, "epilogue": "none", "layout": "NN"})


def _final_gemm(path: Path):
    m = load_module(path)
    for comp in m.computations:
        for i in comp.instructions:
            if is_blas_call(i):
                return i, "cublaslt" if "$lt$" in (i.custom_call_target or "") else "cublas"
            if i.opcode == "fusion":
                cfg = i.backend_config
                kind = cfg.get("fusion_backend_config", {}).get("kind") if isinstance(cfg, dict) else None
                if kind == "__triton_nested_gemm_fusion" or is_triton_gemm_fusion(i):
                    return i, "triton"
    return None, None


def load_case(d: Path) -> SweepCase | None:
    """One sweep folder, or None when XLA did not treat it as a GEMM (the
    1xNxK cases become reductions)."""
    profs = [p for p in read_logs(d / "autotune_logs.textproto") if "__triton_gemm" in p.hlo_text]
    if not profs:
        return None
    finals = sorted(d.glob("*after_optimizations.txt"))
    if not finals:
        return None
    instr, backend = _final_gemm(finals[0])
    if instr is None:
        return None
    info = json.loads((d / "info.json").read_text()) if (d / "info.json").exists() else {}
    return SweepCase(d.name, gemm_problem(instr), profs[0], backend, info)


def load_sweep(root: str | Path) -> list[SweepCase]:
    out = []
    for d in sorted(Path(root).iterdir()):
        if d.is_dir() and (d / "autotune_logs.textproto").exists():
            c = load_case(d)
            if c is not None:
                out.append(c)
    return out
