"""Invariant checkers: read-only, named, ``check(module) -> [Diagnostic]``.

A checker never raises and never mutates.  The pipeline runs its checkers at
the start and after every pass that changed the module (like XLA's
``AddInvariantChecker``); a finding names the pass after which it appeared.

``CHECKERS`` is the registry (name -> "module:Class"), alphabetical.  This
module holds the base class and ``hlo-verifier``; other checkers live next
to the passes whose precondition they state.
"""

from __future__ import annotations

from importlib import import_module
from typing import ClassVar

from .ir.module import Computation, Instruction, Module
from .ir.opcode import OPCODES, VARIADIC, split_async_sugar
from .ir.shape import compatible
from .source import Diagnostic


class Checker:
    """Base class: subclasses set ``name`` and implement ``check``."""

    name: ClassVar[str] = ""

    def check(self, module: Module) -> list[Diagnostic]:  # pragma: no cover
        raise NotImplementedError

    def diag(self, module: Module, instr: Instruction | None, message: str,
             computation: Computation | None = None, notes: list[str] | None = None) -> Diagnostic:
        comp = computation or (instr.parent if instr is not None else None)
        line, col = instr.location() if instr is not None else (0, 0)
        return Diagnostic(rule=self.name, message=message,
                          instruction=instr.name if instr is not None else None,
                          computation=comp.name if comp is not None else None,
                          filename=module.filename, line=line or None, column=col or None,
                          notes=list(notes or []))


class HloVerifier(Checker):
    """Structural checks XLA's HloVerifier makes: operand counts, parameter
    numbering against the entry layout, called-computation signatures, and
    result shapes against shape inference for the common opcodes."""

    name = "hlo-verifier"

    def check(self, module: Module) -> list[Diagnostic]:
        out: list[Diagnostic] = []
        try:
            self._check(module, out)
        except Exception as e:  # a checker never raises
            out.append(Diagnostic(rule=self.name, message=f"verifier crashed: {e!r}",
                                  filename=module.filename))
        return out

    def _check(self, module: Module, out: list[Diagnostic]) -> None:
        from .ir.shape_inference import infer_shape
        if module.entry is None:
            out.append(Diagnostic(rule=self.name, message="module has no entry computation",
                                  filename=module.filename))
            return
        for comp in module.computations:
            if comp.root is None:
                out.append(self.diag(module, None, f"computation {comp.name} has no root", comp))
                continue
            if comp.root.parent is not comp:
                out.append(self.diag(module, comp.root,
                                     f"root {comp.root.name} is not in computation {comp.name}", comp))
            for i, p in enumerate(comp.parameters):
                if p is None:
                    out.append(self.diag(module, None,
                                         f"computation {comp.name} has no parameter {i}", comp))
            for instr in comp._instructions:
                self._check_instruction(module, comp, instr, out, infer_shape)
        ecl = module.entry_computation_layout()
        if ecl is not None:
            params, result = ecl
            entry = module.entry
            if len(params) != entry.num_parameters:
                out.append(self.diag(module, None,
                                     f"entry_computation_layout has {len(params)} parameters, "
                                     f"entry computation has {entry.num_parameters}", entry))
            else:
                for i, (want, p) in enumerate(zip(params, entry.parameters)):
                    if p is not None and not compatible(want, p.shape):
                        out.append(self.diag(module, p,
                                             f"parameter {i} shape {p.shape} does not match "
                                             f"entry_computation_layout {want}"))
            if entry.root is not None and not compatible(result, entry.root.shape):
                out.append(self.diag(module, entry.root,
                                     f"root shape {entry.root.shape} does not match "
                                     f"entry_computation_layout result {result}"))

    def _check_instruction(self, module, comp, instr, out, infer_shape) -> None:
        opcode = instr.opcode
        base = opcode
        if opcode not in OPCODES:
            sugar = split_async_sugar(opcode)
            if sugar is None:
                out.append(self.diag(module, instr, f"unknown opcode {opcode}"))
                return
            return  # async sugar: wrapped op's shapes are not checked here
        for op in instr.operands:
            if op.parent is not comp:
                out.append(self.diag(module, instr,
                                     f"operand {op.name} is not in computation {comp.name}"))
            if instr not in op._users:
                out.append(self.diag(module, instr, f"use-def broken: {op.name} does not list "
                                                    f"{instr.name} as a user"))
        n = OPCODES[base]
        if n != VARIADIC and len(instr.operands) != n:
            out.append(self.diag(module, instr,
                                 f"{opcode} expects {n} operands, has {len(instr.operands)}"))
            return
        if base == "get-tuple-element":
            s = instr.operands[0].shape
            idx = int(instr.attrs.get("index", -1))
            if not s.is_tuple or not 0 <= idx < len(s.tuple_shapes):
                out.append(self.diag(module, instr, f"tuple index {idx} invalid for {s}"))
            elif not compatible(s.tuple_shapes[idx], instr.shape):
                out.append(self.diag(module, instr, f"get-tuple-element shape {instr.shape} "
                                                    f"does not match {s.tuple_shapes[idx]}"))
            return
        if base in ("reshape", "bitcast"):
            a, b = instr.operands[0].shape, instr.shape
            if base == "reshape" and a.is_array and b.is_array \
                    and a.element_count != b.element_count:
                out.append(self.diag(module, instr, f"reshape changes the element count: "
                                                    f"{a} -> {b}"))
            if base == "bitcast" and a.is_array and b.is_array and a.byte_size() != b.byte_size():
                out.append(self.diag(module, instr, f"bitcast changes the byte size: "
                                                    f"{a} ({a.byte_size()} B) -> {b} ({b.byte_size()} B)"))
            return
        if base in ("fusion", "call"):
            callee = instr.attrs.get("calls") if base == "fusion" else instr.attrs.get("to_apply")
            if isinstance(callee, Computation):
                if callee.num_parameters != len(instr.operands):
                    out.append(self.diag(module, instr,
                                         f"{base} passes {len(instr.operands)} operands to "
                                         f"{callee.name}, which has {callee.num_parameters} parameters"))
                else:
                    for i, (op, p) in enumerate(zip(instr.operands, callee.parameters)):
                        if p is not None and not compatible(op.shape, p.shape):
                            out.append(self.diag(module, instr,
                                                 f"operand {i} shape {op.shape} does not match "
                                                 f"{callee.name} parameter {i} shape {p.shape}"))
                if callee.root is not None and not compatible(callee.root.shape, instr.shape):
                    out.append(self.diag(module, instr, f"{base} shape {instr.shape} does not match "
                                                        f"{callee.name} root shape {callee.root.shape}"))
            return
        try:
            inferred = infer_shape(base, instr.operands, instr.attrs)
        except (ValueError, KeyError, IndexError) as e:
            out.append(self.diag(module, instr, f"shape inference failed: {e}"))
            return
        if inferred is not None and not compatible(inferred, instr.shape):
            out.append(self.diag(module, instr, f"shape {instr.shape.to_string(False)} does not "
                                                f"match inferred shape {inferred.to_string(False)}"))


#: name -> "module:Class" (alphabetical); imported on use.
CHECKERS: dict[str, str] = {
    "buffer-aliasing": "hlorun.buffers.checker:BufferAliasingChecker",
    "hlo-verifier": "hlorun.verify:HloVerifier",
    "reshape-is-bitcast": "hlorun.passes.reshape_is_bitcast:ReshapeIsBitcast",
}


def checker_class(name: str) -> type[Checker]:
    """The class registered as ``name`` (UsageError with near matches if none)."""
    spec = CHECKERS.get(name)
    if spec is None:
        import difflib
        near = difflib.get_close_matches(name, CHECKERS, n=3)
        from .source import UsageError
        raise UsageError(f"unknown checker '{name}'" + (f"; did you mean {', '.join(near)}?" if near else ""))
    module, attr = spec.split(":")
    return getattr(import_module(module), attr)


def get_checker(name: str, **options) -> Checker:
    """An instance of checker ``name``.  A checker with options is a
    dataclass (its fields are the options pipeline YAML may set); one that
    needs pipeline-level configuration (e.g. the ``custom_call_targets``
    section) defines ``from_pipeline(cls, spec, options) -> Checker``."""
    return checker_class(name)(**options)


def verify(module: Module) -> list[Diagnostic]:
    return HloVerifier().check(module)


__all__ = ["Checker", "CHECKERS", "HloVerifier", "checker_class", "get_checker", "verify"]
