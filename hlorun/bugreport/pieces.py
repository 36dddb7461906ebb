"""The pieces of a bug report: the command line, the effective pipeline
YAML, versions, the failure text and the XLA flags that correspond."""

from __future__ import annotations

from typing import Any, Sequence


def pipeline_yaml(spec, selection) -> str:
    """The effective pipeline as YAML; disabled steps are commented out."""
    import yaml

    from ..pipeline.spec import CheckStep, PipelineStep
    head = {k: v for k, v in spec.to_yaml().items() if k != "steps"}
    lines = ["# hlorun bug report: the effective pipeline (includes resolved, target overrides",
             "# applied); steps the command disabled are commented out.",
             yaml.safe_dump(head, sort_keys=False, default_flow_style=False).rstrip(), "steps:"]

    def emit(steps, indent: int, off: bool) -> None:
        pad = " " * indent
        for s in steps:
            dis = off or (not isinstance(s, CheckStep) and selection.is_disabled(s))
            c = "# " if dis else ""
            if isinstance(s, PipelineStep):
                d = s.to_yaml()
                d.pop("steps", None)
                first = True
                for k, v in d.items():
                    item = yaml.safe_dump({k: v}, default_flow_style=True, width=10_000).strip()
                    item = item[1:-1] if item.startswith("{") else item
                    lines.append(f"{pad}{c}{'- ' if first else '  '}{item}"
                                 + ("   # disabled by this command" if dis and first and not off else ""))
                    first = False
                lines.append(f"{pad}{c}  steps:")
                emit(s.steps, indent + 4, dis)
                continue
            text = yaml.safe_dump([s.to_yaml()], sort_keys=False, default_flow_style=False).rstrip()
            for k, ln in enumerate(text.splitlines()):
                lines.append(f"{pad}{c}{ln}" + ("   # disabled by this command"
                                                if dis and k == 0 and not off else ""))
    emit(spec.steps, 2, False)
    return "\n".join(lines) + "\n"


def versions() -> dict[str, Any]:
    import platform
    from importlib import metadata

    from .. import __version__
    pkgs = {}
    for name in ("click", "lark", "rich", "numpy", "PyYAML", "ml_dtypes", "jax", "jaxlib"):
        try:
            pkgs[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return {"hlorun": __version__, "python": platform.python_version(),
            "implementation": platform.python_implementation(),
            "os": f"{platform.system()} {platform.release()} {platform.machine()}",
            "packages": pkgs}


def failure_text(res) -> str:
    out = []
    if res.failure is not None:
        f = res.failure
        out.append(f"pass failure: pass #{f.index} {f.path} failed ({f.exception})")
        out.append(f"  {f.message}")
        if f.instruction:
            out.append(f"  instruction: {(f.computation + '/') if f.computation else ''}{f.instruction}")
    for v in res.violations:
        where = f"after #{v.pass_index} {v.after_pass}" if v.pass_index else "at pipeline start"
        if v.precondition_of:
            where = f"precondition of {v.precondition_of}, first violated {where}"
        out.append(f"violation [{v.rule}] {where}")
        if v.instruction:
            out.append(f"  instruction: {(v.computation + '/') if v.computation else ''}{v.instruction}")
        out.append(f"  {v.message}")
        if v.diagnostic is not None:
            out += [f"  note: {n}" for n in v.diagnostic.notes]
    return "\n".join(out) + ("\n" if out else "")


_BLAS_FLAGS = {
    "cublas": "--xla_gpu_enable_triton_gemm=false --xla_gpu_enable_cublaslt=false",
    "cublaslt": "--xla_gpu_enable_triton_gemm=false --xla_gpu_enable_cublaslt=true",
    "rocblas": "--xla_gpu_enable_triton_gemm=false --xla_gpu_enable_cublaslt=false",
    "hipblaslt": "--xla_gpu_enable_triton_gemm=false --xla_gpu_enable_cublaslt=true",
    "triton": "--xla_gpu_enable_triton_gemm=true",
}


def xla_flags(session, res) -> list[tuple[str, str]]:
    """(flag, why) pairs: the XLA flags that correspond to this command."""
    flags: list[tuple[str, str]] = []
    sel = res.selection
    names = sorted({p.split("/")[-1].split(":")[0] for pats in sel.matched.values() for p in pats})
    if sel.mode == "disable" and names:
        flags.append((f"--xla_disable_hlo_passes={','.join(names)}", "the passes this command disabled"))
    elif sel.mode == "enable-only" and names:
        flags.append((f"--xla_enable_hlo_passes_only={','.join(names)}", "the only passes this command ran"))
    elif sel.mode == "none":
        flags.append(("--xla_disable_all_hlo_passes=true", "this command ran no pass"))
    section = res.spec.section("autotune", None)
    force = (_argv_value(session.argv, "--force-backend")
             or (getattr(session, "autotune", None) or {}).get("force_backend")
             or (section.get("force_backend") if isinstance(section, dict) else None))
    if force:
        backend = force.split("=")[-1].split(":")[0].strip().lower()
        if backend in _BLAS_FLAGS:
            flags.append((_BLAS_FLAGS[backend], f"--force-backend {force}: the GEMM backend XLA would pick"))
    culprit = None
    if res.violations:
        v = res.violations[0]
        culprit = v.after_pass.split("/")[-1] if v.pass_index else None
    elif res.failure is not None:
        culprit = res.failure.name
    if culprit:
        flags.append((f"--xla_disable_hlo_passes={culprit}", "to check the culprit pass (XLA's name)"))
    flags.append(("--xla_dump_to=dump --xla_dump_hlo_pass_re=.*",
                  "pass-by-pass dumps to compare with hlorun's --dump-to"))
    return flags


def _argv_value(argv: Sequence[str], flag: str) -> str | None:
    argv = list(argv or ())
    for i, a in enumerate(argv):
        if a == flag and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


__all__ = ["failure_text", "pipeline_yaml", "versions", "xla_flags"]
