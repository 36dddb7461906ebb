"""What a compile is asked to do: :class:`CompileOptions`, a small frozen
dataclass in six groups, shared by :func:`hlorun.compile` and every command
(``hlorun compile``, ``reduce``, ``bisect``, ``explore`` ...).

    CompileOptions(selection=Selection(pipeline="gpu-rocm", disable_passes=("cse",)))
    CompileOptions.from_kwargs(pipeline="gpu-rocm", disable_passes="cse,dce", check_numerics="final")
    opts.with_xla_flags("--xla_disable_hlo_passes=cse --xla_dump_to=/tmp/d")

Groups: :class:`Selection` (which pipeline, which of its passes run),
:class:`Diagnostics` (checkers, lineage, diffs), :class:`Autotuning` (the
pipeline's ``autotune:`` section overrides), :class:`Numerics`
(``--check-numerics``), :class:`Device` (target overrides) and
:class:`Output` (dumps, reproducers, buffer assignment).  The XLA flag
spellings (``--xla_disable_hlo_passes`` ...) map onto these fields here and
nowhere else (:data:`XLA_FLAG_FIELDS`, :meth:`CompileOptions.with_xla_flags`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields, replace
from typing import Any, Iterable, Mapping

from .errors import UsageError

DIFF_MODES = ("none", "changed", "all")
DIFF_FORMS = ("diff", "canonical", "full")
NUMERICS_MODES = ("each", "final")
AUTOTUNE_MODES = ("model", "noisy")
SAMPLINGS = ("xla", "fair", "each")
PLATFORMS = ("cuda", "rocm", "sycl", "cpu")


def _names(value: Any) -> tuple[str, ...]:
    """"a,b" / ["a", "b,c"] -> ("a", "b", "c")."""
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else list(value)
    out: list[str] = []
    for v in items:
        out.extend(x.strip() for x in str(v).split(",") if x.strip())
    return tuple(out)


def _choice(what: str, value: Any, choices: Iterable[str]) -> None:
    if value is not None and value not in choices:
        raise UsageError(f"{what}: {value!r} is not one of {', '.join(choices)}")


def _regex(what: str, value: str | None) -> None:
    if value:
        try:
            re.compile(value)
        except re.error as e:
            raise UsageError(f"{what}: bad regex: {e}") from None


@dataclass(frozen=True)
class Selection:
    """Pipeline selection: the pipeline and which of its steps run."""

    #: a bundled pipeline name (``hlorun pipelines``) or a YAML path; None: gpu-cuda
    pipeline: str | None = None
    #: patterns: name, pipeline/name, name:N (``hlorun.pipeline.select``)
    disable_passes: tuple[str, ...] = ()
    enable_passes_only: tuple[str, ...] = ()
    disable_all: bool = False
    #: run only the first N passes (LLVM's -opt-bisect-limit)
    pass_limit: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "disable_passes", _names(self.disable_passes))
        object.__setattr__(self, "enable_passes_only", _names(self.enable_passes_only))
        if self.pass_limit is not None and self.pass_limit < 0:
            raise UsageError(f"pass_limit must be >= 0, not {self.pass_limit}")


@dataclass(frozen=True)
class Diagnostics:
    """What the run checks and records about itself."""

    #: run the checkers after every changed pass (else at start and end)
    verify_each: bool = True
    #: fingerprint around each pass; a pass whose ``changed`` lies is a violation
    check_changed: bool = False
    #: do not stop at the first violation
    keep_going: bool = False
    #: follow every instruction through the passes (``result.kernels`` then
    #: names the passes that formed each kernel); costs a scan per pass
    lineage: bool = True
    #: only explain kernels matching this kernel/instruction name or regex
    explain: str | None = None
    #: which passes keep a unified diff (``PassRecord.diff()``)
    diffs: str = "none"
    diff_filter: str | None = None
    diff_form: str = "diff"
    #: checkers re-examine only what changed (False: whole module each time)
    incremental_checks: bool = True

    def __post_init__(self) -> None:
        _choice("diffs", self.diffs, DIFF_MODES)
        _choice("diff_form", self.diff_form, DIFF_FORMS)
        _regex("diff_filter", self.diff_filter)
        if self.explain not in (None, ".*"):
            _regex("explain", self.explain)


@dataclass(frozen=True)
class Autotuning:
    """Overrides of the pipeline's ``autotune:`` section (None: the YAML's)."""

    mode: str | None = None  # model | noisy
    contention: str | None = None  # none/low/medium/high or a sigma
    sampling: str | None = None  # xla | fair | each
    flip_seeds: int | None = None
    cache: str | None = None  # JSON file of decisions to load and save
    xla_results: str | None = None  # XLA's autotune_results.textproto to replay
    #: "triton" for every GEMM, or "INSTR=BACKEND[:config]" for one
    force_backend: tuple[str, ...] = ()
    #: fail when a forced backend cannot run a GEMM (default: autotune it, say why)
    force_strict: bool | None = None
    seed: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "force_backend", tuple(
            [self.force_backend] if isinstance(self.force_backend, str) else self.force_backend))
        _choice("autotune mode", self.mode, AUTOTUNE_MODES)
        _choice("sampling", self.sampling, SAMPLINGS)

    def section(self) -> dict[str, Any]:
        """The ``autotune:`` keys these options override (only those given)."""
        out: dict[str, Any] = {}
        for f, key in (("mode", "mode"), ("contention", "contention"), ("sampling", "sampling"),
                       ("flip_seeds", "flip_seeds"), ("cache", "cache"),
                       ("xla_results", "xla_results"), ("force_strict", "force_strict")):
            v = getattr(self, f)
            if v is not None:
                out[key] = v
        if self.seed:
            out["seed"] = self.seed
        if self.force_backend:
            out["force_backend"] = ";".join(self.force_backend)
        if out.get("mode") is None and any(k in out for k in ("contention", "sampling")):
            out["mode"] = "noisy"
        return out


@dataclass(frozen=True)
class Numerics:
    """``check_numerics``: evaluate before the pipeline and after changed
    passes (``each``) or only at the end (``final``), compare outputs."""

    check: str | None = None
    rtol: float | None = None
    atol: float | None = None
    seed: int = 0
    #: parameter values: "NAME=FILE.npy" or "FILE.npz"
    inputs: tuple[str, ...] = ()
    max_bytes: str = "4G"

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(
            [self.inputs] if isinstance(self.inputs, str) else self.inputs))
        _choice("check_numerics", self.check, NUMERICS_MODES)
        if self.check is None and (self.rtol is not None or self.atol is not None or self.inputs):
            raise UsageError("--rtol, --atol and --input need --check-numerics")


@dataclass(frozen=True)
class Device:
    """Overrides of the pipeline's ``target:`` (None: the YAML's)."""

    platform: str | None = None
    device: str | None = None
    compute_capability: str | None = None

    def __post_init__(self) -> None:
        _choice("platform", self.platform, PLATFORMS)

    def overrides(self) -> dict[str, Any]:
        return {"platform": self.platform, "device": self.device,
                "compute_capability": self.compute_capability}


@dataclass(frozen=True)
class Output:
    """What the run writes or keeps besides the module."""

    dump_to: str | None = None  # XLA-style dumps (module_NNNN.NAME.*.txt)
    dump_pass_re: str | None = None  # dump after every matching pass
    repro_dir: str | None = None  # reproducer bundle on a violation / failure
    buffers: bool = False  # assign buffers on the final module (result.buffers)

    def __post_init__(self) -> None:
        _regex("dump_pass_re", self.dump_pass_re)
        if self.dump_pass_re and not self.dump_to:
            raise UsageError("--dump-pass-re needs --dump-to")


@dataclass(frozen=True)
class CompileOptions:
    selection: Selection = field(default_factory=Selection)
    diagnostics: Diagnostics = field(default_factory=Diagnostics)
    autotune: Autotuning = field(default_factory=Autotuning)
    numerics: Numerics = field(default_factory=Numerics)
    device: Device = field(default_factory=Device)
    output: Output = field(default_factory=Output)

    @classmethod
    def from_kwargs(cls, base: "CompileOptions | None" = None, **kwargs: Any) -> "CompileOptions":
        """Options from flat keyword names (:data:`FLAT`, e.g.
        ``disable_passes=``, ``force_backend=``, ``check_numerics=``) and
        the XLA spellings (:data:`XLA_FLAG_FIELDS`, ``xla_flags=`` a whole
        XLA_FLAGS string), on top of ``base``."""
        opts = base or cls()
        xla_flags = kwargs.pop("xla_flags", None)
        groups: dict[str, dict[str, Any]] = {}
        xla: list[tuple[str, str, Any]] = []
        for k, v in kwargs.items():
            if k == "seed":  # one seed: random inputs and noisy measurements
                groups.setdefault("numerics", {})["seed"] = v
                groups.setdefault("autotune", {})["seed"] = v or None  # 0: the model's default
                continue
            if k in XLA_FLAG_FIELDS:
                xla.append((*XLA_FLAG_FIELDS[k], v))
                continue
            target = FLAT.get(k)
            if target is None:
                import difflib
                near = difflib.get_close_matches(k, list(FLAT) + list(XLA_FLAG_FIELDS), n=3)
                raise TypeError(f"unknown compile option {k!r}"
                                + (f"; did you mean {', '.join(near)}?" if near else ""))
            g, f = target
            groups.setdefault(g, {})[f] = v
        for g, f, v in xla:  # XLA's spellings add to the lists, else fill what is unset
            group = groups.setdefault(g, {})
            if f in ("disable_passes", "enable_passes_only"):
                group[f] = _names(group.get(f, getattr(getattr(opts, g), f))) + _names(v)
            elif group.get(f) is None:
                group[f] = v
        if groups:
            opts = replace(opts, **{g: replace(getattr(opts, g), **kw) for g, kw in groups.items()})
        if xla_flags:
            opts, _ = opts.with_xla_flags(xla_flags)
        return opts

    def with_xla_flags(self, text: str) -> tuple["CompileOptions", list[str]]:
        """Apply an XLA_FLAGS string: its pass-selection and dump flags
        (``--xla_gpu_enable_triton_gemm=false`` disables the Triton GEMM
        passes); returns (options, notes about the flags it ignored)."""
        from .pipeline.select import parse_xla_flags
        f = parse_xla_flags(text)
        sel = replace(self.selection,
                      disable_passes=self.selection.disable_passes + tuple(f["disable"]),
                      enable_passes_only=self.selection.enable_passes_only + tuple(f["enable_only"]),
                      disable_all=self.selection.disable_all or bool(f["disable_all"]))
        out = replace(self.output, dump_to=self.output.dump_to or f["dump_to"],
                      dump_pass_re=self.output.dump_pass_re or f["dump_pass_re"])
        notes = ["xla flags: ignored " + " ".join(f["ignored"])] if f["ignored"] else []
        return replace(self, selection=sel, output=out), notes

    def to_argv(self) -> list[str]:
        """``hlorun compile`` flags that recreate these options."""
        argv: list[str] = []
        s, d, a, n, dev, o = (self.selection, self.diagnostics, self.autotune, self.numerics,
                              self.device, self.output)
        if s.pipeline:
            argv += ["--pipeline", s.pipeline]
        for p in s.disable_passes:
            argv += ["--disable-passes", p]
        for p in s.enable_passes_only:
            argv += ["--enable-passes-only", p]
        if s.disable_all:
            argv.append("--xla_disable_all_hlo_passes")
        if s.pass_limit is not None:
            argv += ["--pass-limit", str(s.pass_limit)]
        if not d.verify_each:
            argv.append("--no-verify-each")
        if d.check_changed:
            argv.append("--check-changed")
        if d.keep_going:
            argv.append("--keep-going")
        for k, v in dev.overrides().items():
            if v is not None:
                argv += ["--" + k.replace("_", "-"), str(v)]
        for f, flag in (("mode", "--autotune"), ("contention", "--contention"),
                        ("sampling", "--sampling"), ("flip_seeds", "--flip-seeds"),
                        ("cache", "--autotune-cache"), ("xla_results", "--autotune-results")):
            if getattr(a, f) is not None:
                argv += [flag, str(getattr(a, f))]
        for fb in a.force_backend:
            argv += ["--force-backend", fb]
        if a.force_strict:
            argv.append("--force-backend-strict")
        seed = n.seed or a.seed
        if seed:
            argv += ["--seed", str(seed)]
        if n.check is not None:
            argv.append(f"--check-numerics={n.check}")
            for f, flag in (("rtol", "--rtol"), ("atol", "--atol")):
                if getattr(n, f) is not None:
                    argv += [flag, str(getattr(n, f))]
            for i in n.inputs:
                argv += ["--input", i]
            if n.max_bytes != "4G":
                argv += ["--max-bytes", str(n.max_bytes)]
        if o.dump_to:
            argv += ["--dump-to", o.dump_to]
        if o.dump_pass_re:
            argv += ["--dump-pass-re", o.dump_pass_re]
        if o.repro_dir:
            argv += ["--repro-dir", o.repro_dir]
        return argv

    def to_json(self) -> dict[str, Any]:
        from dataclasses import asdict
        return asdict(self)


def _flat() -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    renames = {("numerics", "check"): "check_numerics", ("numerics", "inputs"): "numerics_inputs",
               ("autotune", "mode"): "autotune", ("autotune", "cache"): "autotune_cache",
               ("autotune", "xla_results"): "autotune_results",
               ("autotune", "force_strict"): "force_backend_strict",
               ("autotune", "seed"): "autotune_seed", ("numerics", "seed"): "numerics_seed"}
    for g in fields(CompileOptions):
        for f in fields(g.default_factory()):  # type: ignore[misc]
            out[renames.get((g.name, f.name), f.name)] = (g.name, f.name)
    return out


#: flat keyword -> (group, field), for ``hlorun.compile(**kwargs)``
FLAT: Mapping[str, tuple[str, str]] = _flat()

#: XLA's flag spellings -> (group, field); the only place they are known
XLA_FLAG_FIELDS: Mapping[str, tuple[str, str]] = {
    "xla_disable_hlo_passes": ("selection", "disable_passes"),
    "xla_enable_hlo_passes_only": ("selection", "enable_passes_only"),
    "xla_disable_all_hlo_passes": ("selection", "disable_all"),
    "xla_dump_to": ("output", "dump_to"),
    "xla_dump_hlo_pass_re": ("output", "dump_pass_re"),
}

__all__ = ["Autotuning", "CompileOptions", "Device", "Diagnostics", "FLAT", "Numerics", "Output",
           "Selection", "XLA_FLAG_FIELDS"]
