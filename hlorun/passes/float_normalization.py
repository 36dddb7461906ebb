"""float-normalization-bf16: XLA's FloatNormalization
(xla/hlo/transforms/simplifiers/float_normalization.cc) with XLA:GPU's
``GpuFloatSupport(cc, BF16)`` (xla/service/gpu/gpu_float_support.cc).

Every instruction that the GPU cannot compute in bf16 is computed in f32
with converts around it: unsupported bf16 operands get a ``convert`` to
f32, an unsupported bf16 result is produced in f32 and converted back, and
instructions mixing bf16 and f32 that do not support mixed precision are
made uniform (all bf16 when every operand allows it, else f32); a
reduction's computation is cloned in f32 when its operands are promoted
(the f16/bf16 "reduction precision" of scenario S2).  Supported in bf16 on
GPU: data movement (broadcast, reshape, transpose, slice, concatenate,
copy, pad, gather/scatter, select ...), convert/compare/bitcast, dots
(Triton/cuBLAS), convolutions, exp and log (CUDA), abs/max/min/negate
(sm_80+), add/multiply/subtract (sm_90+), and reductions whose computation
only uses supported ops; everything else (tanh, sqrt, rsqrt, divide ...)
is upcast.

Each upcast is a remark naming the instruction and the reason.

Not modelled: multi-output (tuple-shaped) sort / all-reduce handling,
collectives' computations, the f8/s4 variants XLA also runs.

Postcondition: every instruction is computed in a precision the target
supports.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.module import Computation, Instruction, Module, calls_something
from .base import Pass, Target
from .dfs_rewrite import add_instruction

_DATA_MOVEMENT = frozenset({
    "all-gather", "all-to-all", "broadcast", "collective-permute", "concatenate", "copy",
    "constant", "dynamic-slice", "dynamic-update-slice", "gather", "pad", "ragged-all-to-all",
    "reshape", "reverse", "scatter", "select", "select-and-scatter", "slice", "transpose",
    "bitcast", "bitcast-convert", "convert", "compare", "reduce-precision", "xor",
})
_SKIP = frozenset({"tuple", "get-tuple-element", "constant", "domain", "parameter", "fusion",
                   "convert", "call", "custom-call", "while", "conditional", "bitcast-convert",
                   "bitcast", "async-start", "async-done"})
_OUTPUT_PRECISION_OPS = frozenset({
    "abs", "all-gather", "all-to-all", "broadcast", "clamp", "collective-broadcast",
    "collective-permute", "concatenate", "convert", "copy", "domain", "get-tuple-element",
    "maximum", "minimum", "pad", "ragged-all-to-all", "reshape", "reverse", "slice", "sort",
    "transpose", "tuple", "opt-barrier"})
_ALWAYS = frozenset({"call", "conditional", "custom-call", "domain", "get-tuple-element",
                     "tuple", "while", "opt-barrier", "count-leading-zeros",
                     "shift-right-logical", "shift-right-arithmetic"})


def _cc(target: Target) -> tuple[int, int]:
    try:
        a, _, b = target.compute_capability.partition(".")
        return int(a), int(b or 0)
    except ValueError:
        return (0, 0)


class GpuFloatSupport:
    """``GpuFloatSupport(cc, low)``: which instructions run in ``low``."""

    def __init__(self, target: Target, low: str = "bf16", high: str = "f32"):
        self.target, self.low, self.high = target, low, high

    def is_supported(self, hlo: Instruction) -> bool:
        op = hlo.opcode
        if op in ("all-reduce", "all-reduce-start", "all-reduce-done", "reduce-scatter",
                  "scaled-dot"):
            return True
        if op == "dot":
            return self.low == "bf16"
        if op in ("convolution", "ragged-dot"):
            return True
        if op in _DATA_MOVEMENT:
            return True
        if op == "exponential":
            return self.low == "bf16" and self.target.is_cuda
        if op == "log":
            return self.low == "bf16" and self.target.is_cuda
        if op in ("rsqrt", "sqrt", "tanh"):
            return False
        if op in ("abs", "maximum", "minimum", "negate"):
            return self.low == "bf16" and self.target.is_cuda and _cc(self.target) >= (8, 0)
        if op in ("add", "multiply", "subtract"):
            return self.low == "bf16" and self.target.is_cuda and _cc(self.target) >= (9, 0)
        if op in ("reduce", "sort"):
            comp = hlo.to_apply
            return comp is not None and all(i.opcode == "parameter" or self.is_supported(i)
                                            for i in comp.instructions)
        return False

    def supports_low_operand(self, hlo: Instruction, i: int) -> bool:
        if hlo.opcode in _ALWAYS:
            return True
        if hlo.opcode == "convert":
            return hlo.operands[0].shape.element_type == self.low
        return self.is_supported(hlo)

    def supports_low_output(self, hlo: Instruction) -> bool:
        if hlo.opcode in _ALWAYS:
            return True
        if hlo.opcode == "convert":
            return hlo.shape.element_type == self.low
        return self.is_supported(hlo)

    def supports_mixed(self, hlo: Instruction) -> bool:
        if hlo.opcode in ("call", "conditional", "convert", "custom-call", "get-tuple-element",
                          "tuple", "while", "opt-barrier"):
            return True
        if hlo.opcode == "dot":
            lt, rt = hlo.operands[0].shape.element_type, hlo.operands[1].shape.element_type
            return hlo.shape.element_type == "f32" and lt == rt and lt in ("f16", "bf16")
        return False

    @staticmethod
    def operand_precision_is_output_precision(hlo: Instruction, i: int) -> bool:
        op = hlo.opcode
        if op in _OUTPUT_PRECISION_OPS:
            return True
        if op == "bitcast":
            return hlo.shape.element_type == hlo.operands[0].shape.element_type
        if op in ("dynamic-slice", "gather"):
            return i == 0
        if op == "dynamic-update-slice":
            return i in (0, 1)
        if op == "select":
            return i in (1, 2)
        if op in ("reduce", "reduce-window"):
            comp = hlo.to_apply
            return comp is not None and all(
                GpuFloatSupport.operand_precision_is_output_precision(x, j)
                for x in comp.instructions if x.opcode != "parameter"
                for j in range(len(x.operands)))
        return False


def _count(shape, t: str) -> int:
    if shape.is_tuple:
        return sum(_count(s, t) for s in shape.tuple_shapes)
    return 1 if shape.element_type == t else 0


@dataclass(frozen=True)
class FloatNormalization(Pass):
    """Compute in f32 what the GPU cannot compute in bf16."""

    name = "float-normalization-bf16"
    low_precision_type: str = "bf16"
    high_precision_type: str = "f32"

    def run(self, module: Module) -> bool:
        object.__setattr__(self, "_support", GpuFloatSupport(
            self.target, self.low_precision_type, self.high_precision_type))
        changed = False
        for comp in module.computation_post_order():
            for hlo in comp.post_order():
                if hlo.parent is comp:
                    changed |= self._handle(comp, hlo)
        if changed:
            from .dce import HloDCE
            HloDCE().run(module)
        return changed

    # -- conversions ---------------------------------------------------------------------
    def _convert(self, comp: Computation, x: Instruction, to: str) -> Instruction:
        if x.opcode == "convert" and x.operands[0].shape.element_type == to \
                and to == self.low_precision_type:
            return x.operands[0]
        return add_instruction(comp, Instruction("convert", x.shape.with_element_type(to), [x]))

    def _operand_to(self, comp, hlo: Instruction, i: int, frm: str, to: str) -> bool:
        x = hlo.operands[i]
        if x.shape.is_tuple or x.shape.element_type != frm:
            return False
        hlo.set_operand(i, self._convert(comp, x, to))
        return True

    def _output_to(self, comp, hlo: Instruction, frm: str, to: str) -> bool:
        """``ChangeOutputTypeThenInsertConvertBack``."""
        if hlo.shape.is_tuple or hlo.shape.element_type != frm:
            return False
        users = hlo.users
        is_root = comp.root is hlo
        original = hlo.shape
        hlo.shape = original.with_element_type(to)
        back = add_instruction(comp, Instruction("convert", original, [hlo]))
        for u in users:
            u.replace_operand_with(hlo, back)
        if is_root:
            comp.root = back
        return True

    # -- the visitor ---------------------------------------------------------------------------
    def _handle(self, comp: Computation, hlo: Instruction) -> bool:
        if hlo.opcode in _SKIP or hlo.shape.is_tuple:
            return False
        s, low, high = self._support, self.low_precision_type, self.high_precision_type
        if hlo.shape.element_type != low and not (hlo.attrs and calls_something(hlo)):
            for o in hlo.operands:
                if o.shape.element_type == low or o.shape.is_tuple:
                    break
            else:
                return False  # nothing in low precision: nothing below would change
        hi = sum(_count(o.shape, high) for o in hlo.operands) + _count(hlo.shape, high)
        lo = sum(_count(o.shape, low) for o in hlo.operands) + _count(hlo.shape, low)
        low_comps: list[Computation] = []
        for c in hlo.called_computations():
            hi += _count(c.root.shape, high) + sum(_count(p.shape, high) for p in c.parameters if p)
            n = _count(c.root.shape, low) + sum(_count(p.shape, low) for p in c.parameters if p)
            if n:
                lo += n
                low_comps.append(c)
        changed = False
        why: list[str] = []
        for i, o in enumerate(list(hlo.operands)):
            n = _count(o.shape, low)
            if n and not s.supports_low_operand(hlo, i):
                changed |= self._operand_to(comp, hlo, i, low, high)
                lo, hi = lo - n, hi + n
                why.append(f"operand {i}")
        if not s.supports_low_output(hlo):
            n = _count(hlo.shape, low)
            if n:
                changed |= self._output_to(comp, hlo, low, high)
                lo, hi = lo - n, hi + n
                why.append("result")
        if not (s.supports_mixed(hlo) or lo == 0 or hi == 0):
            if not hlo.called_computations() and _count(hlo.shape, low) == 1 and all(
                    _count(o.shape, low) == 1 or (
                        s.operand_precision_is_output_precision(hlo, i)
                        and s.supports_low_operand(hlo, i))
                    for i, o in enumerate(hlo.operands)):
                for i in range(len(hlo.operands)):
                    changed |= self._operand_to(comp, hlo, i, high, low)
                why.append("mixed precision resolved to bf16")
            else:
                changed |= self._output_to(comp, hlo, low, high)
                for i in range(len(hlo.operands)):
                    changed |= self._operand_to(comp, hlo, i, low, high)
                for c in low_comps:
                    hlo.attrs = {k: (self._f32_clone(c) if v is c else v)
                                 for k, v in hlo.attrs.items()}
                    changed = True
                why.append("mixed precision resolved to f32")
        if changed:
            self.remark(hlo, (f"{hlo.opcode} computed in {high}: {', '.join(why)} not supported in "
                              f"{low} on {self.target.platform} sm/arch "
                              f"{self.target.compute_capability}; converts inserted"),
                        derived_from=[hlo], rule="upcast")
        return changed

    def _f32_clone(self, comp: Computation) -> Computation:
        """``ConvertCalledComputations``: a copy with f32 parameters and root."""
        module = comp.module
        clone = Computation(module.unique_name(comp.name + ".clone"))
        module.add_computation(clone)
        mapping: dict[Instruction, Instruction] = {}
        for i in comp.post_order():
            new = Instruction(i.opcode, i.shape, [mapping[o] for o in i.operands], "", dict(i.attrs))
            new.literal, new.parameter_number = i.literal, i.parameter_number
            clone.add_instruction(new, i.name)
            mapping[i] = new
        clone.root = mapping[comp.root]
        low, high = self.low_precision_type, self.high_precision_type
        if clone.root.shape.element_type == low:
            r = clone.root
            clone.root = add_instruction(clone, Instruction("convert", r.shape.with_element_type(high), [r]))
        for p in list(clone.parameters):
            if p is not None and p.shape.element_type == low:
                self._output_to(clone, p, low, high)
        return clone
