"""The compile that ``hlorun reduce`` / ``hlorun bisect`` judge modules with:
a module file and :class:`hlorun.options.CompileOptions`.

``hlorun reduce -- compile --pipeline gpu-rocm-41481 --force-backend cublaslt
MODEL.hlo``: the command line parses the words after ``compile`` with the
compile command's own flags (:func:`hlorun.cli.compile_options.
parse_compile_argv`) into options, so every compile flag means exactly what
it means to ``compile``.  Candidates are then compiled in-process by
:meth:`CompileConfig.run` (:func:`hlorun.api.run_options`, the options'
pipeline, target and selection); outputs, dumps and
reproducers are never written per candidate.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from ..ir.module import Module
from ..options import CompileOptions, Output
from ..pipeline.run import Listener, PipelineResult, run_pipeline
from ..pipeline.spec import PipelineSpec


@dataclass
class CompileConfig:
    file: str
    options: CompileOptions = field(default_factory=CompileOptions)
    #: the compile arguments as given (without the word ``compile``), for command lines
    argv: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: Overrides the options' pass limit in :meth:`run` (bisection).
    pass_limit: int | None = None
    _spec: PipelineSpec | None = None

    def __post_init__(self) -> None:
        o = self.options
        # per candidate: no diffs, dumps or reproducers; lineage only when explaining
        self.options = replace(o, output=Output(),
                               diagnostics=replace(o.diagnostics, diffs="none",
                                                   lineage=o.diagnostics.explain is not None))
        if not self.argv:
            self.argv = [self.file] + o.to_argv()

    @classmethod
    def for_file(cls, file: str, options: CompileOptions | None = None, **kwargs: Any) -> "CompileConfig":
        return cls(file, CompileOptions.from_kwargs(options, **kwargs))

    # -- facts ------------------------------------------------------------------------
    @property
    def pipeline_name(self) -> str | None:
        return self.options.selection.pipeline

    def spec(self) -> PipelineSpec:
        if self._spec is None:
            from ..api import resolve_spec
            self._spec = resolve_spec(None, self.options)
        return self._spec

    def set_spec(self, spec: PipelineSpec) -> None:
        self._spec = spec

    def argv_for(self, file: str) -> list[str]:
        """The compile argv with the module file replaced by ``file``."""
        out = list(self.argv)
        for i, a in enumerate(out):
            if a == self.file:
                out[i] = file
                return out
        return [file] + out

    def command_line(self, file: str | None = None) -> str:
        return "hlorun " + _join(["compile"] + (self.argv_for(file) if file else self.argv))

    # -- running ----------------------------------------------------------------------
    def run(self, module: Module, listeners: Sequence[Listener] = (),
            pass_limit: int | None = None, keep_going: bool | None = None) -> PipelineResult:
        """Compile ``module`` in place with this configuration."""
        from ..api import run_options
        options = self.options
        if pass_limit is None:
            pass_limit = self.pass_limit
        if pass_limit is not None:
            options = replace(options, selection=replace(options.selection, pass_limit=pass_limit))
        if keep_going is not None:
            options = replace(options, diagnostics=replace(options.diagnostics,
                                                           keep_going=keep_going))
        return run_pipeline(module, self.spec(), run_options(options, listeners))


def _join(words: Sequence[str]) -> str:
    return " ".join(shlex.quote(w) for w in words)


__all__ = ["CompileConfig"]
