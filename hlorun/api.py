"""The library: :func:`load` a module, :func:`compile` it with a pipeline,
read the :class:`~hlorun.result.CompileResult`.

    import hlorun
    m = hlorun.load("model.hlo.gz")                 # a path, HLO text, or ...
    m = hlorun.load(jax.jit(f).lower(x))            # ... a JAX Lowered / Compiled
    m = hlorun.load(f, x, w)                        # ... a (jitted) function and example args
    r = hlorun.compile(m, "gpu-rocm", disable_passes=["cse"], force_backend="cublaslt")
    r.passes, r.violations, r.failures, r.kernels, r.autotune, r.to_json()

Every command (``hlorun compile``, ``reduce``, ``bisect``, ``explore``,
``diff-pipelines``, ``explain``) goes through :func:`compile`: options are
a :class:`~hlorun.options.CompileOptions`, listeners (diffs, dumps,
reproducers, lineage, numerics) are attached here from them.  JAX is
imported only when a JAX object is passed.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from .options import CompileOptions
from .result import CompileResult

_HLO_START = ("HloModule", "//", "#", "ENTRY", "%")


def _looks_like_hlo(text: str) -> bool:
    head = text.lstrip()[:200]
    return "\n" in text or head.startswith(_HLO_START) or "{" in head


def _is_jax(obj: Any) -> bool:
    mod = type(obj).__module__ or ""
    return mod.startswith(("jax", "jaxlib")) or (callable(obj) and hasattr(obj, "lower"))


def _jax_text(source: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[str, str]:
    """(HLO text, a name) of a JAX object: a Lowered gives the HLO XLA
    receives (``as_text(dialect="hlo")``); a Compiled gives the module XLA
    produced (``as_text()``); a function is jitted and lowered with ``args``."""
    if hasattr(source, "lower") and callable(source.lower):  # jitted function
        return _jax_text(source.lower(*args, **kwargs), (), {})
    name = getattr(source, "__name__", None)
    if hasattr(source, "compile") and hasattr(source, "as_text"):  # jax.stages.Lowered
        return source.as_text(dialect="hlo"), "<jax lowered>"
    if hasattr(source, "as_text") and hasattr(source, "cost_analysis"):  # jax.stages.Compiled
        text = source.as_text()
        if not isinstance(text, str):
            from .errors import UsageError
            raise UsageError("this jax Compiled object has no HLO text")
        return text, "<jax compiled>"
    if callable(source):
        import jax
        return _jax_text(jax.jit(source).lower(*args, **kwargs), (), {})
    from .errors import UsageError
    raise UsageError(f"cannot load a {type(source).__name__} ({name or source!r:.60})")


def load(source: Any, *args: Any, name: str | None = None, **kwargs: Any):
    """A :class:`~hlorun.ir.module.Module` from ``source``:

    * a path (``str`` or ``os.PathLike``; ``.gz`` / ``.xz`` are decompressed);
    * HLO text (a ``str`` holding a module);
    * a ``jax.stages.Lowered`` (the HLO XLA receives) or ``jax.stages.Compiled``
      (the module XLA produced);
    * a function, jitted or not, with example ``args``/``kwargs``: lowered by JAX;
    * a Module (returned as is).

    Raises :class:`~hlorun.HloSyntaxError` (with line and column) for bad
    HLO and :class:`~hlorun.UsageError` for a missing file."""
    from .ir.module import Module
    from .text.parser import parse_module
    if isinstance(source, Module):
        return source
    if isinstance(source, bytes):
        source = source.decode("utf-8")
    if isinstance(source, os.PathLike) or (isinstance(source, str) and not _looks_like_hlo(source)):
        from .text.fileio import read_text
        path = os.fspath(source)
        return parse_module(read_text(path), name or path)
    if isinstance(source, str):
        return parse_module(source, name or "<string>")
    if _is_jax(source) or callable(source):
        text, label = _jax_text(source, args, kwargs)
        return parse_module(text, name or label)
    from .errors import UsageError
    raise UsageError(f"cannot load a {type(source).__name__}: give a path, HLO text, a Module "
                     f"or a JAX object")


def resolve_spec(pipeline: Any, options: CompileOptions):
    """The effective pipeline: ``pipeline`` (a name, a YAML path, a
    :class:`~hlorun.pipeline.spec.PipelineSpec`; None: the options', else
    gpu-cuda) with the device overrides and the autotuning section."""
    from dataclasses import replace

    from .pipeline.spec import PipelineSpec
    from .pipeline.loader import load_pipeline
    if isinstance(pipeline, PipelineSpec):
        spec = pipeline
    else:
        spec = load_pipeline(pipeline or options.selection.pipeline)
    spec = spec.with_target(**options.device.overrides())
    extra = options.autotune.section()
    if extra:
        spec = replace(spec, sections=dict(spec.sections,
                                           autotune=dict(spec.section("autotune") or {}, **extra)))
    return spec


def run_options(options: CompileOptions, listeners: Sequence[Any] = (),
                clock: Callable[[], float] = time.perf_counter):
    """The pipeline runner's :class:`~hlorun.pipeline.run.RunOptions` for ``options``."""
    from .pipeline.run import RunOptions
    s, d = options.selection, options.diagnostics
    return RunOptions(verify_each=d.verify_each, check_changed=d.check_changed,
                      disable=list(s.disable_passes), enable_only=list(s.enable_passes_only),
                      disable_all=s.disable_all, pass_limit=s.pass_limit,
                      keep_going=d.keep_going, clock=clock,
                      incremental_checks=d.incremental_checks, listeners=list(listeners))


def _diff_capture(d, cache, sink, keep: bool = False):
    from .report.diffs import DiffListener

    class _Capture(DiffListener):
        def __init__(self):
            super().__init__(self._keep, d.diffs, d.diff_filter, d.diff_form, cache=cache)
            self.kept: dict[int, list[str]] = {}
            self._index = 0

        def _keep(self, header: str, lines: list[str]) -> None:
            if sink is not None:
                sink(header, lines)
            if sink is None or keep:
                self.kept[self._index] = lines

        def on_after_pass(self, ev, module) -> None:
            self._index = ev.index
            super().on_after_pass(ev, module)

    return _Capture()


def compile(module_or_source: Any, pipeline: Any = None, *, options: CompileOptions | None = None,
            listeners: Sequence[Any] = (), copy: bool = True, diff_sink: Callable | None = None,
            keep_diffs: bool = False, command_line: str | None = None, clock: Callable[[], float] = time.perf_counter,
            **kwargs: Any) -> CompileResult:
    """Run ``pipeline`` (default gpu-cuda) on a module and return what happened.

    ``module_or_source``: anything :func:`load` takes, or a Module (copied
    first unless ``copy=False``).  Options come as ``options=`` and/or flat
    keywords (:data:`hlorun.options.FLAT`): ``disable_passes``,
    ``enable_passes_only``, ``pass_limit``, ``force_backend``, ``device``,
    ``platform``, ``check_numerics``, ``keep_going``, ``diffs``,
    ``lineage``, ``buffers``, ``dump_to``, ``xla_flags`` ... .  A violation
    or a pass failure does not raise: the result says so
    (``result.status``; ``result.raise_for_status()`` raises).  Bad input
    raises :class:`~hlorun.HloSyntaxError` / :class:`~hlorun.UsageError` /
    :class:`~hlorun.PipelineError`.

    ``listeners``: extra :class:`hlorun.pipeline.run.Listener` objects;
    ``diff_sink(header, lines)`` receives each diff as it is made (``keep_diffs``:
    also keep it in ``result.diffs``, e.g. for the HTML report) instead of
    keeping it; ``command_line`` is recorded in reproducer bundles."""
    from .ir.module import Module
    options = CompileOptions.from_kwargs(options, **kwargs)
    if isinstance(pipeline, CompileOptions):  # compile(m, options) by position
        options, pipeline = pipeline, None
    spec = resolve_spec(pipeline, options)
    t = clock()
    if isinstance(module_or_source, Module):
        module = module_or_source
        if copy:
            from .ir.clone import clone_module
            module = clone_module(module)
        input_name = module.name
    else:
        module = load(module_or_source)
        input_name = os.fspath(module_or_source) if isinstance(
            module_or_source, (os.PathLike, str)) and not _looks_like_hlo(
            os.fspath(module_or_source)) else module.name
    parse_seconds = 0.0 if isinstance(module_or_source, Module) else clock() - t

    from .pipeline.snapshots import SnapshotCache
    d, o, n = options.diagnostics, options.output, options.numerics
    cache = SnapshotCache()  # diffs and dumps share computation prints
    attached: list[Any] = []
    capture = dumper = repro = lineage = numerics = None
    if d.diffs != "none":
        capture = _diff_capture(d, cache, diff_sink, keep_diffs)
        attached.append(capture)
    if o.dump_to:
        from .pipeline.dump import DumpListener
        dumper = DumpListener(o.dump_to, o.dump_pass_re,
                              input_path=input_name if Path(input_name).is_file() else None,
                              cache=cache)
        attached.append(dumper)
    if o.repro_dir:
        from .pipeline.repro import ReproListener
        repro = ReproListener(o.repro_dir, command=command_line or _command_line(input_name, options))
        attached.append(repro)
    if d.lineage or d.explain is not None:
        from .analysis.lineage import LineageTracker
        lineage = LineageTracker()
        attached.append(lineage)
    if n.check is not None:
        from .evaluate.numerics import NumericsListener
        from .evaluate.session import parse_bytes
        numerics = NumericsListener(n.check, n.inputs, n.seed, n.rtol, n.atol,
                                    parse_bytes(n.max_bytes))
        attached.append(numerics)
    from .pipeline.run import run_pipeline
    # (the runner's GC policy, hlorun.pipeline.gc_policy, keeps the collector off the module)
    run = run_pipeline(module, spec, run_options(options, attached + list(listeners), clock))
    buffers = None
    if o.buffers:
        from .buffers import AssignOptions, assign_buffers
        from .buffers.targets import validate_targets
        targets = validate_targets(spec.section("custom_call_targets") or {})
        buffers = assign_buffers(module, AssignOptions(platform=run.target.platform,
                                                       custom_call_targets=targets))
    return CompileResult(module=module, run=run, options=options, input_name=input_name,
                         parse_seconds=parse_seconds, lineage=lineage, numerics=numerics,
                         dump_files=list(dumper.files) if dumper else [],
                         repro=repro.bundle if repro else None, buffers=buffers,
                         diffs=capture.kept if capture is not None else {}, snapshots=cache)


def _command_line(input_name: str, options: CompileOptions) -> str:
    import shlex
    return " ".join(shlex.quote(p) for p in ["hlorun", "compile", input_name] + options.to_argv())


__all__ = ["compile", "load", "resolve_spec", "run_options"]
