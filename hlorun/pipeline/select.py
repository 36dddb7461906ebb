"""``--disable-passes`` / ``--enable-passes-only``: which steps run.

XLA's rules (``HloPassPipeline::GetEnabledPasses``), extended:

* ``name`` matches every pass or sub-pipeline called ``name``; a disabled
  sub-pipeline disables everything in it, an enabled one enables all of it;
* ``pipeline/name`` matches ``name`` inside the sub-pipeline ``pipeline``
  (any number of levels: ``a/b/name`` matches the end of the nesting path);
* ``name:N`` (or ``pipeline/name:N``) matches only the Nth such step in
  document order (1-based).

Unlike XLA, which silently ignores names that match nothing (jax issue
39596), such a name is an error that lists the closest step names.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from .spec import CheckStep, PipelineSpec, PipelineStep, Step
from ..errors import UsageError

_PATTERN = re.compile(r"^(?P<path>[^:]+?)(?::(?P<n>\d+))?$")


@dataclass
class Selection:
    """The outcome: ids of steps that do not run, and what each pattern matched."""

    disabled: set[int] = field(default_factory=set)
    matched: dict[str, list[str]] = field(default_factory=dict)
    mode: str = "all"  # "all", "disable", "enable-only", "none"

    def is_disabled(self, step: Step) -> bool:
        return id(step) in self.disabled


def step_paths(spec: PipelineSpec) -> list[tuple[tuple[str, ...], Step]]:
    """(path, step) for every pass and sub-pipeline, document order; the
    path is the enclosing pipeline names plus the step's own name."""
    return [(prefix + (s.name,), s) for prefix, s in spec.walk() if not isinstance(s, CheckStep)]


def split_names(values) -> list[str]:
    """Flatten repeated/comma-separated option values."""
    out: list[str] = []
    for v in values or ():
        out.extend(x.strip() for x in str(v).split(",") if x.strip())
    return out


def _match(pattern: str, entries) -> list[tuple[tuple[str, ...], Step]]:
    m = _PATTERN.match(pattern)
    if not m:
        raise UsageError(f"bad pass pattern '{pattern}' (expected name, pipeline/name or name:N)")
    parts = tuple(p for p in m.group("path").split("/"))
    if any(not p for p in parts):
        raise UsageError(f"bad pass pattern '{pattern}' (empty name)")
    hits = [(path, s) for path, s in entries if path[-len(parts):] == parts]
    n = m.group("n")
    if n is not None:
        k = int(n)
        if k < 1 or k > len(hits):
            base = m.group("path")
            raise UsageError(f"'{pattern}': there {'is' if len(hits) == 1 else 'are'} only "
                             f"{len(hits)} step(s) matching '{base}'" if hits else
                             f"'{pattern}' matches no step")
        hits = [hits[k - 1]]
    return hits


def _unknown(pattern: str, entries, flag: str) -> UsageError:
    names = sorted({p[-1] for p, _ in entries} | {"/".join(p[-2:]) for p, _ in entries if len(p) > 1})
    base = pattern.split(":")[0]
    near = difflib.get_close_matches(base, names, n=4, cutoff=0.5)
    if not near:
        near = difflib.get_close_matches(base.split("/")[-1], names, n=4, cutoff=0.5)
    msg = f"{flag}: '{pattern}' matches no pass or pipeline in this pipeline"
    if near:
        msg += f"; did you mean {', '.join(near)}?"
    return UsageError(msg + " (`hlorun pipelines NAME` shows the steps)")


def select(spec: PipelineSpec, disable=(), enable_only=(), disable_all: bool = False) -> Selection:
    disable = split_names(disable)
    enable_only = split_names(enable_only)
    entries = step_paths(spec)
    sel = Selection()
    if disable and enable_only:
        raise UsageError("--disable-passes and --enable-passes-only cannot be combined (as in XLA)")
    if disable_all:
        sel.mode = "none"
        sel.disabled = {id(s) for _, s in entries}
        return sel
    if disable:
        sel.mode = "disable"
        for pat in disable:
            optional = pat.startswith("?")  # "?name": only if the pipeline has it
            pat = pat.lstrip("?")
            hits = _match(pat, entries)
            if not hits:
                if optional:
                    continue
                raise _unknown(pat, entries, "--disable-passes")
            sel.matched[pat] = ["/".join(p) for p, _ in hits]
            for _, s in hits:
                sel.disabled.add(id(s))
        return sel
    if enable_only:
        sel.mode = "enable-only"
        enabled: set[int] = set()
        for pat in enable_only:
            hits = _match(pat, entries)
            if not hits:
                raise _unknown(pat, entries, "--enable-passes-only")
            sel.matched[pat] = ["/".join(p) for p, _ in hits]
            enabled.update(id(s) for _, s in hits)
        _mark_enable_only(spec.steps, enabled, sel.disabled, False)
    return sel


def _mark_enable_only(steps, enabled: set[int], disabled: set[int], inherited: bool) -> bool:
    """Disable everything not enabled; returns whether anything in ``steps`` runs."""
    any_runs = False
    for s in steps:
        if isinstance(s, CheckStep):
            continue
        on = inherited or id(s) in enabled
        if isinstance(s, PipelineStep):
            inner = _mark_enable_only(s.steps, enabled, disabled, on)
            runs = on or inner
        else:
            runs = on
        if not runs:
            disabled.add(id(s))
        any_runs |= runs
    return any_runs


#: The passes XLA:GPU runs only when Triton GEMMs are enabled
#: (gpu_compiler.cc: IsTritonGemmEnabled).
TRITON_GEMM_PASSES = ("gemv-rewriter", "splitk-rewriter", "triton-gemm-rewriter", "gemm-fusion")


#: The config-assigner's choice between the native and the block-level
#: emitter for generic fusions (not its GEMM part, convert_triton_gemm_config)
FUSION_AUTOTUNING_PASS = "config-assigner/config-assigner"


def _no_fusion_autotuning(key: str, value: str) -> bool:
    """Whether flag ``key=value`` turns XLA's generic-fusion autotuning off
    (config_assigner_pass.cc: ``xla_gpu_autotune_level`` 0,
    ``xla_gpu_deterministic_ops``, ``xla_gpu_exclude_nondeterministic_ops``,
    ``xla_gpu_experimental_enable_fusion_autotuner=false``)."""
    v = value.strip().lower()
    true = v in ("", "true", "1")
    if key == "xla_gpu_autotune_level":
        return v == "0"
    if key in ("xla_gpu_deterministic_ops", "xla_gpu_exclude_nondeterministic_ops"):
        return true
    if key == "xla_gpu_experimental_enable_fusion_autotuner":
        return v in ("false", "0")
    return False


def parse_xla_flags(text: str) -> dict[str, object]:
    """The pass-selection and dump flags of an ``XLA_FLAGS`` string:
    ``--xla_disable_hlo_passes``, ``--xla_enable_hlo_passes_only``,
    ``--xla_disable_all_hlo_passes``, ``--xla_dump_to``,
    ``--xla_dump_hlo_pass_re``; ``--xla_gpu_enable_triton_gemm=false``
    disables :data:`TRITON_GEMM_PASSES` where the pipeline has them; flags
    that turn XLA's fusion autotuning off (autotune level 0, deterministic
    ops) disable :data:`FUSION_AUTOTUNING_PASS`.
    Other flags are returned under "ignored"."""
    import shlex
    out: dict[str, object] = {"disable": [], "enable_only": [], "disable_all": False,
                              "dump_to": None, "dump_pass_re": None, "ignored": []}
    for tok in shlex.split(text or ""):
        key, _, value = tok.partition("=")
        key = key.lstrip("-")
        if key == "xla_disable_hlo_passes":
            out["disable"] += split_names([value])  # type: ignore[operator]
        elif key == "xla_enable_hlo_passes_only":
            out["enable_only"] += split_names([value])  # type: ignore[operator]
        elif key == "xla_disable_all_hlo_passes":
            out["disable_all"] = value.lower() not in ("false", "0")
        elif key == "xla_dump_to":
            out["dump_to"] = value
        elif key == "xla_dump_hlo_pass_re":
            out["dump_pass_re"] = value
        elif key == "xla_gpu_enable_triton_gemm" and value.lower() in ("false", "0"):
            # IsTritonGemmEnabled: XLA adds these passes only with Triton GEMMs on
            out["disable"] += ["?" + n for n in TRITON_GEMM_PASSES]  # type: ignore[operator]
        elif _no_fusion_autotuning(key, value):
            # GetShouldAssignConfigToInstructionFn: without the fusion
            # autotuner no generic fusion gets a native/block-level choice
            out["disable"] += ["?" + FUSION_AUTOTUNING_PASS]  # type: ignore[operator]
        else:
            out["ignored"].append(tok)  # type: ignore[union-attr]
    return out
