"""The ``buffer-aliasing`` invariant (scenario S1): a custom call whose
output shares memory with one of its operands, when its target is not
declared safe to run in place, is a violation.

Buffer assignment is run on the module (the same assignment ``hlorun
buffers`` prints).  For every custom call, every array output index is
compared with every array operand index: if their slices overlap in one
allocation and the pair is not declared in ``output_to_operand_aliasing``
(the S1 fix), the finding names the call, the operand, the allocation and
why the two met:

* *donation*: the module's ``input_output_alias`` / ``buffer_donor`` put the
  output in a donated parameter's buffer that the call also reads;
* *reuse*: the operand's buffer is dead after the call, nothing forbids
  in-place execution, and buffer assignment gave it to the output.

Targets declared ``in_place: true`` in ``custom_call_targets`` are
accepted.  A target the runtime autotunes (``autotuned: true``; built in for
jax-triton's ``triton_kernel_call``) gets a second finding for each such
pair: the autotuner runs the candidate kernels several times on the live
buffers and saves/restores only *declared* aliases, so every trial reads
input the previous trial overwrote.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..ir.module import Instruction, Module
from ..errors import Diagnostic
from ..verifier.checkers import Checker
from .alias_rules import declared_aliasing
from .targets import validate_targets
from .values import index_str, shape_indices


def _leaves(shape) -> list[tuple]:
    return [ix for ix in shape_indices(shape)
            if not (shape.subshape(ix) if ix else shape).is_tuple]


@dataclass
class BufferAliasingChecker(Checker):
    """Options: ``custom_call_targets`` (merged over the pipeline's
    ``custom_call_targets`` section; these win), ``platform`` (alias rules;
    default: the pipeline's target platform, else "cuda")."""

    name = "buffer-aliasing"
    custom_call_targets: dict[str, Any] = field(default_factory=dict)
    platform: str | None = None

    def __post_init__(self) -> None:
        self.custom_call_targets = validate_targets(self.custom_call_targets)
        if self.platform is None:
            self.platform = "cuda"

    @classmethod
    def from_pipeline(cls, spec, options: dict) -> "BufferAliasingChecker":
        targets: dict[str, Any] = {}
        platform = options.get("platform")
        if spec is not None:
            targets.update(validate_targets(spec.section("custom_call_targets") or {}))
            if platform is None and getattr(spec, "target", None) is not None:
                platform = spec.target.platform
        targets.update(validate_targets(options.get("custom_call_targets") or {}))
        return cls(custom_call_targets=targets, platform=platform)

    def check(self, module: Module) -> list[Diagnostic]:
        try:
            return self._check(module)
        except Exception as e:  # a checker never raises
            return [Diagnostic(rule=self.name, message=f"buffer assignment failed: {e!r}",
                               filename=module.filename)]

    def _check(self, module: Module) -> list[Diagnostic]:
        from .assign import AssignOptions, assign_buffers
        if module.entry is None:
            return []
        calls = [i for c in module.computations for i in c._instructions
                 if i.opcode == "custom-call"]
        if not calls:
            return []
        asg = assign_buffers(module, AssignOptions(platform=self.platform,
                                                   custom_call_targets=self.custom_call_targets))
        out: list[Diagnostic] = []
        for call in calls:
            if call not in asg.dataflow.value_sets or not asg.dataflow.value_sets[call]:
                continue
            out.extend(self._check_call(module, asg, call))
        return out

    def _check_call(self, module: Module, asg, call: Instruction) -> list[Diagnostic]:
        target = call.custom_call_target or ""
        policy = asg.rules.policy(target)
        if policy.in_place is True:
            return []
        declared = {(out, opnd, oidx) for out, opnd, oidx in declared_aliasing(call)}
        declared_outs = {out for out, _o, _i in declared}
        found: list[Diagnostic] = []
        for oix in _leaves(call.shape):
            out_vals = asg.dataflow.value_set(call, oix)
            for k, operand in enumerate(call.operands):
                for iix in _leaves(operand.shape):
                    if (oix, k, iix) in declared:
                        continue
                    hit = self._overlap(asg, out_vals, asg.dataflow.value_set(operand, iix))
                    if hit is None:
                        continue
                    alloc, ov, iv = hit
                    found.extend(self._report(module, asg, call, target, policy, oix, k, iix,
                                              alloc, ov, iv, oix in declared_outs))
        return found

    @staticmethod
    def _overlap(asg, out_vals, in_vals):
        for ov in out_vals:
            so = asg.slice_of(ov)
            if so is None:
                continue
            for iv in in_vals:
                si = asg.slice_of(iv)
                if si is None or si[0] is not so[0]:
                    continue
                if so[1] < si[1] + max(si[2], 1) and si[1] < so[1] + max(so[2], 1):
                    return so[0], ov, iv
        return None

    def _report(self, module, asg, call, target, policy, oix, k, iix, alloc, ov, iv,
                out_declared) -> list[Diagnostic]:
        operand = call.operands[k]
        same_buffer = asg.alias.buffer(ov) is asg.alias.buffer(iv)
        donated = same_buffer and alloc.is_entry_parameter and alloc.param_aliased
        if donated:
            why = "donation"
            detail = (f"parameter {alloc.param_number}{index_str(alloc.param_index)} is donated to "
                      f"the output (input_output_alias / buffer_donor) and the call also reads it")
        elif same_buffer:
            why = "aliasing"
            detail = "the operand and the output must share one buffer"
        else:
            why = "reuse of a dead operand buffer"
            detail = ("the operand is not used after the call and nothing forbids in-place "
                      "execution, so buffer assignment gave its memory to the output")
        decl = {None: f"not declared safe in place ({policy.source} rule: may alias)",
                False: f"declared in_place: false ({policy.source})"}[policy.in_place]
        off_o, size_o = alloc.assigned[ov]
        off_i = alloc.assigned[iv][0]
        opix = index_str(iix) if operand.shape.is_tuple else ""
        msg = (f"custom-call {call.name} ({target}) output {index_str(oix)} shares allocation "
               f"{alloc.index} ({alloc.kind}, offset {off_o}, {size_o} B) with operand {k}{opix} "
               f"{operand.name} (offset {off_i}): {why}")
        notes = [detail,
                 f"target {target!r} is {decl}; a kernel that reads elements after writing "
                 f"others (a permutation, a gather) computes wrong results in place",
                 "fix: pass a dedicated output buffer as an extra operand and declare "
                 "output_to_operand_aliasing={{" + index_str(oix)[1:-1] + "}: (N, {})}, "
                 "or mark the target in_place: false in custom_call_targets"]
        out = [self.diag(module, call, msg, notes=notes)]
        if policy.autotuned:
            out.append(self.diag(
                module, call,
                f"autotuning re-runs {call.name} ({target}) in place: operand {k}{opix} "
                f"{operand.name} and output {index_str(oix)} share allocation {alloc.index} "
                f"without a declared alias",
                notes=["the autotuner runs each candidate kernel several times on the live "
                       "buffers and saves/restores only declared aliases "
                       f"({'output ' + index_str(oix) + ' is declared for another operand' if out_declared else 'none here'}), "
                       "so every trial reads data the previous trial overwrote",
                       "declare the alias (output_to_operand_aliasing) so the buffer is saved "
                       "and restored between trials"]))
        return out
