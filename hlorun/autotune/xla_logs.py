"""XLA's autotuning files: ``autotune_results.textproto`` (the winners, as
``--xla_gpu_dump_autotune_results_to`` writes them) and
``autotune_logs.textproto`` (every candidate profiled, with run times, as
``--xla_gpu_dump_autotune_logs_to`` writes them).

Both the current format (``entries { key { target { device hlo_fingerprint } }
value { optimal_config { backend backend_config {...} } } }``) and the legacy
one (``version: 3 results { device hlo result { triton {...} | gemm {...} } }``)
are read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..text.fileio import read_text
from .textproto import Message, TextprotoError, parse
from .triton import TritonConfig

#: XLA backend enum -> hlorun backend name.
BACKENDS = {"TRITON": "triton", "CUBLAS": "cublas", "CUBLASLT": "cublaslt",
            "CUBLASLT_FISSION": "cublaslt", "CUBLAS_FISSION": "cublas",
            "HIPBLASLT": "hipblaslt", "HIPBLASLT_FISSION": "hipblaslt",
            "ROCBLAS": "rocblas", "ROCBLAS_FISSION": "rocblas",
            "CUDNN": "cudnn", "NATIVE_EMITTER": "native", "BLOCK_LEVEL_EMITTER": "block-level",
            "MIOPEN": "miopen"}
GEMM_BACKENDS = ("triton", "cublas", "cublaslt", "hipblaslt", "rocblas")


@dataclass
class XlaConfig:
    """One backend choice as XLA wrote it."""

    backend: str                 # hlorun name: triton, cublaslt, ...
    xla_backend: str             # XLA's enum name: TRITON, CUBLASLT_FISSION, ...
    triton: TritonConfig | None = None
    algorithm: int | None = None
    workspace: int | None = None
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def is_gemm(self) -> bool:
        return self.backend in GEMM_BACKENDS

    @property
    def label(self) -> str:
        if self.triton is not None:
            return f"{self.backend}:{self.triton.label}"
        if self.algorithm is not None:
            return f"{self.backend}:algo{self.algorithm}"
        return self.backend

    def to_json(self) -> dict[str, Any]:
        return {"backend": self.backend, "xla_backend": self.xla_backend,
                "triton": self.triton.to_json() if self.triton else None,
                "algorithm": self.algorithm, "workspace": self.workspace}


def config_from_message(backend_enum: str, bc: Message | None) -> XlaConfig:
    name = BACKENDS.get(backend_enum, backend_enum.lower())
    cfg = XlaConfig(name, backend_enum, raw=bc.to_plain() if bc else {})
    if bc is None:
        return cfg
    t = bc.one("triton")
    if isinstance(t, Message):
        cfg.triton = TritonConfig.from_dict(t.to_plain())
    g = bc.one("gemm")
    if isinstance(g, Message):
        cfg.algorithm = int(g.one("algorithm", 0))
        ws = g.one("autotune_workspace_size")
        cfg.workspace = int(ws) if ws is not None else None
    return cfg


@dataclass
class ResultEntry:
    """One entry of autotune_results: a fingerprint (or legacy HLO text)
    and the chosen config."""

    device: str
    fingerprint: str | None
    hlo: str | None
    config: XlaConfig
    version: str | None = None


def read_results(path: str | Path) -> list[ResultEntry]:
    """Entries of an ``autotune_results.textproto`` (both formats)."""
    text = read_text(path)
    msg = parse(text, str(path))
    out: list[ResultEntry] = []
    for e in msg.all("entries"):
        key = e.one("key") or Message()
        target = key.one("target") or Message()
        value = e.one("value") or Message()
        oc = value.one("optimal_config") or Message()
        out.append(ResultEntry(device=str(target.one("device", "")),
                               fingerprint=target.one("hlo_fingerprint"), hlo=None,
                               config=config_from_message(str(oc.one("backend", "")), oc.one("backend_config")),
                               version=value.one("optimal_backend_version")))
    for r in msg.all("results"):
        res = r.one("result") or Message()
        if res.one("triton") is not None:
            cfg = XlaConfig("triton", "TRITON", triton=TritonConfig.from_dict(res.one("triton").to_plain()))
        elif res.one("gemm") is not None:
            g = res.one("gemm")
            cfg = XlaConfig("cublas", "CUBLAS", algorithm=int(g.one("algorithm", 0)))
        elif res.one("algorithm") is not None:
            cfg = XlaConfig("cudnn", "CUDNN", raw=res.one("algorithm").to_plain())
        else:
            cfg = XlaConfig("unknown", "UNKNOWN", raw=res.to_plain())
        out.append(ResultEntry(device=str(r.one("device", "")), fingerprint=None,
                               hlo=r.one("hlo"), config=cfg))
    return out


@dataclass
class Profile:
    config: XlaConfig
    run_time_ns: int | None          # None for failed configs
    scratch_bytes: int = 0
    failure: str | None = None       # kind: message


@dataclass
class InstructionProfiles:
    fingerprint: str
    hlo_text: str
    profiles: list[Profile]

    @property
    def fusion_kind(self) -> str | None:
        import re
        m = re.search(r'"kind":"([^"]+)"', self.hlo_text)
        return m.group(1) if m else None

    def measured(self, backend: str | None = None) -> list[Profile]:
        return [p for p in self.profiles if p.run_time_ns is not None
                and (backend is None or p.config.backend == backend)]

    def failed(self) -> list[Profile]:
        return [p for p in self.profiles if p.failure is not None]


def read_logs(path: str | Path) -> list[InstructionProfiles]:
    """The ``instruction_profiles`` of an autotune_logs.textproto."""
    msg = parse(read_text(path), str(path))
    out: list[InstructionProfiles] = []
    for ip in msg.all("instruction_profiles"):
        profs: list[Profile] = []
        for cp in ip.all("config_profiles"):
            c = cp.one("config") or Message()
            rt = cp.path("run_time.nanos")
            profs.append(Profile(config_from_message(str(c.one("backend", "")), c.one("backend_config")),
                                 int(rt) if rt is not None else 0,
                                 int(cp.one("scratch_bytes", 0) or 0)))
        for fc in ip.all("failed_configs"):
            c = fc.one("config") or Message()
            profs.append(Profile(config_from_message(str(c.one("backend", "")), c.one("backend_config")),
                                 None, 0, f"{fc.one('kind', '')}: {fc.one('message', '')}"))
        out.append(InstructionProfiles(str(ip.one("hlo_fingerprint", "")), str(ip.one("hlo_text", "")), profs))
    return out


__all__ = ["BACKENDS", "InstructionProfiles", "Profile", "ResultEntry", "TextprotoError",
           "XlaConfig", "read_logs", "read_results"]
