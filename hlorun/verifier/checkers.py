"""Invariant checkers: read-only, named, ``check(module) -> [Diagnostic]``.

A checker never raises and never mutates.  The pipeline runs its checkers at
the start and after every pass that changed the module (like XLA's
``AddInvariantChecker``); a finding names the pass after which it appeared.

``CHECKERS`` is the registry (name -> "module:Class"), alphabetical.  This
module holds the base class and ``hlo-verifier``; other checkers live next
to the passes whose precondition they state.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING, Any, ClassVar

from ..ir.module import Computation, Instruction, Module
from ..errors import Diagnostic

if TYPE_CHECKING:
    from ..ir.changes import ModuleTracker


class Checker:
    """Base class: subclasses set ``name`` and implement ``check``."""

    name: ClassVar[str] = ""

    def check(self, module: Module) -> list[Diagnostic]:  # pragma: no cover
        raise NotImplementedError

    def check_changes(self, module: Module, tracker: "ModuleTracker") -> list[Diagnostic]:
        """What ``check(module)`` returns, for a module that ``tracker``
        (:class:`hlorun.ir.changes.ModuleTracker`) has just scanned.  A
        checker that can re-examines only what changed since its last call
        (``tracker.changes_since``), keeping its state in
        ``tracker.cache``; it must return exactly what ``check`` would.
        The default runs ``check``."""
        return self.check(module)

    def diag(self, module: Module, instr: Instruction | None, message: str,
             computation: Computation | None = None, notes: list[str] | None = None) -> Diagnostic:
        comp = computation or (instr.parent if instr is not None else None)
        line, col = instr.location() if instr is not None else (0, 0)
        return Diagnostic(rule=self.name, message=message,
                          instruction=instr.name if instr is not None else None,
                          computation=comp.name if comp is not None else None,
                          filename=module.filename, line=line or None, column=col or None,
                          notes=list(notes or []))


@dataclass(frozen=True)
class HloVerifier(Checker):
    """XLA's HloVerifier (``hlo_verifier.cc``): operand counts, shape
    inference for every opcode that has a rule (elementwise incl. compare,
    select, clamp, convert and bitcast-convert; broadcast, reshape, bitcast,
    transpose, dot with all dimension numbers and its preferred element type,
    convolution, reduce (variadic) and reduce-window with their reducer
    signatures, slice, dynamic-slice, dynamic-update-slice, pad,
    concatenate, iota, gather, scatter, sort, tuple, get-tuple-element,
    collectives), call/fusion/while/conditional/async signatures, fusion
    computations, the entry computation layout against the parameters and
    root, input/output aliasing, unique names and use-def links.

    Options are ``HloVerifierOpts``' (XLA's defaults): ``layout_sensitive``
    compares layouts where XLA does (and checks bitcast memory spaces),
    ``allow_mixed_precision`` lets f32/bf16 differ where XLA allows it,
    ``verify_layout_changes`` applies LayoutAssignment's
    ``InstructionCanChangeLayout`` (what XLA:GPU passes after layout
    assignment: elementwise ops etc. keep their operands' layouts),
    ``verify_no_collective_deadlocks`` matches send/recv pairs in scheduled
    modules (XLA:GPU turns it on).
    Custom-calls get no shape inference (their shapes are the target's
    contract).  Every finding is a located diagnostic; the checker reports
    all of them instead of stopping at the first like XLA.
    """

    name: ClassVar[str] = "hlo-verifier"
    layout_sensitive: bool = False
    allow_mixed_precision: bool = False
    verify_broadcast_dimensions_order: bool = False
    verify_reshape_is_bitcast: bool = False
    verify_call_nested_computation_thread_name: bool = False
    allow_unbounded_dynamism: bool = False
    check_replica_groups: bool = True
    verify_layout_changes: bool = False
    verify_no_collective_deadlocks: bool = False

    def check(self, module: Module) -> list[Diagnostic]:
        out: list[Diagnostic] = []
        try:
            from .module import run
            try:
                found = list(run(module, self))
            except RecursionError:  # deeply nested shapes: read-only, so rerun
                from ..ir.deep import call_deep
                found = call_deep(lambda: list(run(module, self)))
            for instr, comp, message in found:
                out.append(self.diag(module, instr, message, comp))
        except Exception as e:  # a checker never raises
            out.append(Diagnostic(rule=self.name, message=f"verifier crashed: {e!r}",
                                  filename=module.filename))
        return out

    def check_changes(self, module: Module, tracker: "ModuleTracker") -> list[Diagnostic]:
        """Re-runs the rules only where the module changed since the last
        call (:mod:`hlorun.verifier.incremental`); same findings as ``check``."""
        out: list[Diagnostic] = []
        try:
            from .incremental import run_changes
            for instr, comp, message in run_changes(module, self, tracker):
                out.append(self.diag(module, instr, message, comp))
        except Exception:  # never raise; the full run reports a crash itself
            tracker.cache.pop(("hlo-verifier", self), None)
            return self.check(module)
        return out


#: name -> "module:Class" (alphabetical); imported on use.
CHECKERS: dict[str, str] = {
    "buffer-aliasing": "hlorun.buffers.checker:BufferAliasingChecker",
    "hlo-verifier": "hlorun.verifier.checkers:HloVerifier",
    "reshape-is-bitcast": "hlorun.passes.reshape_is_bitcast:ReshapeIsBitcast",
}


def checker_class(name: str) -> type[Checker]:
    """The class registered as ``name`` (UsageError with near matches if none)."""
    spec = CHECKERS.get(name)
    if spec is None:
        import difflib
        near = difflib.get_close_matches(name, CHECKERS, n=3)
        from ..errors import UsageError
        raise UsageError(f"unknown checker '{name}'" + (f"; did you mean {', '.join(near)}?" if near else ""))
    module, attr = spec.split(":")
    return getattr(import_module(module), attr)


def get_checker(name: str, **options) -> Checker:
    """An instance of checker ``name``.  A checker with options is a
    dataclass (its fields are the options pipeline YAML may set); one that
    needs pipeline-level configuration (e.g. the ``custom_call_targets``
    section) defines ``from_pipeline(cls, spec, options) -> Checker``."""
    return checker_class(name)(**options)


def verify(module: Module, **options: Any) -> list[Diagnostic]:
    """``hlo-verifier``'s findings on ``module`` (options as HloVerifier's)."""
    return HloVerifier(**options).check(module)


__all__ = ["Checker", "CHECKERS", "HloVerifier", "checker_class", "get_checker", "verify"]
