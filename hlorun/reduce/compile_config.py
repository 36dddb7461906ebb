"""The compile that ``hlorun reduce`` / ``hlorun bisect`` judge modules with.

``hlorun reduce -- compile --pipeline gpu-rocm-41481 --force-backend cublaslt
MODEL.hlo`` hands the words after ``compile`` to the compile command's own
click parser, and its callback builds the :class:`CompileSession` it would
run (captured, not run: :func:`hlorun.compile_session.capture_session`).
Every compile flag therefore means exactly what it means to ``compile``,
including flags other components add later.  Candidates are then compiled
in-process: :meth:`CompileConfig.run` runs the session's pipeline, target,
pass selection and listeners on a module object.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..ir.module import Module
from ..pipeline import Listener, PipelineResult, run_pipeline
from ..pipeline_spec import PipelineSpec
from ..source import UsageError

#: Compile flags that make no sense per candidate; ignored with a note.
_IGNORED = {"output": "-o", "dump_to": "--dump-to", "repro_dir": "--repro-dir",
            "bug_report": "--bug-report"}


@dataclass
class CompileConfig:
    session: Any  # hlorun.compile_session.CompileSession (configured, never run)
    argv: list[str]
    notes: list[str] = field(default_factory=list)
    #: Overrides the session's --pass-limit in :meth:`run` (bisection).
    pass_limit: int | None = None
    _spec: PipelineSpec | None = None

    # -- construction ------------------------------------------------------------------
    @classmethod
    def from_argv(cls, argv: Sequence[str]) -> "CompileConfig":
        """Parse ``compile`` arguments (without the word ``compile``)."""
        import click

        from ..cli.compile import compile_cmd
        from ..compile_session import capture_session
        argv = list(argv)
        try:
            ctx = compile_cmd.make_context("compile", list(argv))
        except click.exceptions.Exit:
            raise
        except click.ClickException as e:
            raise UsageError(f"in the compile command `{_join(['compile'] + argv)}`: "
                             f"{e.format_message()}") from None
        callback = compile_cmd.callback
        inner = getattr(callback, "__wrapped__", callback)  # errors propagate to us
        with ctx:
            session = capture_session(lambda: ctx.invoke(inner, **ctx.params))
        if session.file == "-":
            raise UsageError("reduce/bisect need the module in a file, not on stdin")
        session.argv = ["compile"] + argv
        cfg = cls(session=session, argv=argv)
        for attr, flag in _IGNORED.items():
            if getattr(session, attr, None):
                cfg.notes.append(f"compile {flag} is ignored while judging candidates")
        return cfg

    @classmethod
    def for_file(cls, file: str, extra: Sequence[str] = ()) -> "CompileConfig":
        return cls.from_argv([file, *extra])

    # -- facts ------------------------------------------------------------------------
    @property
    def file(self) -> str:
        return self.session.file

    def spec(self) -> PipelineSpec:
        if self._spec is None:
            spec = self.session.load_spec()
            extra = getattr(self.session, "autotune", None)
            if extra:  # compile's autotune flags (--force-backend ...) override the section
                from dataclasses import replace as _replace
                merged = dict(spec.section("autotune") or {}, **extra)
                spec = _replace(spec, sections=dict(spec.sections, autotune=merged))
            self._spec = spec
        return self._spec

    def set_spec(self, spec: PipelineSpec) -> None:
        self._spec = spec

    def argv_for(self, file: str) -> list[str]:
        """The compile argv with the module file replaced by ``file``."""
        out = list(self.argv)
        for i, a in enumerate(out):
            if a == self.session.file:
                out[i] = file
                return out
        return [file] + out

    def command_line(self, file: str | None = None) -> str:
        return "hlorun " + _join(["compile"] + (self.argv_for(file) if file else self.argv))

    # -- running ----------------------------------------------------------------------
    def run(self, module: Module, listeners: Sequence[Listener] = (),
            pass_limit: int | None = None, keep_going: bool | None = None) -> PipelineResult:
        """Compile ``module`` in place with this configuration."""
        options = self.session.run_options(list(listeners))
        if pass_limit is None:
            pass_limit = self.pass_limit
        if pass_limit is not None:
            options.pass_limit = pass_limit
        if keep_going is not None:
            options.keep_going = keep_going
        return run_pipeline(module, self.spec(), options)


def _join(words: Sequence[str]) -> str:
    return " ".join(shlex.quote(w) for w in words)


__all__ = ["CompileConfig"]
