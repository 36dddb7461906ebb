"""convert-mover: XLA's ConvertMover (xla/service/convert_mover.cc).

Converts move across the ops that commute with them (concatenate, pad,
reshape, slice, transpose), so that data movement happens in the narrower
type:

1. *Increase-precision converts move down*, in post order:
   ``op(convert(x), ...) -> convert(op(x, ...))`` when every operand of
   ``op`` is a single-use convert or a constant, the converts all widen from
   the same source type, and every constant converts losslessly to that
   type (a constant operand gets a ``convert`` to the narrow type, which
   constant folding then folds).
2. *Decrease-precision converts move up*, walking from the bottom:
   ``convert(op(x, ...)) -> op(convert(x), ...)`` when ``op`` has this
   convert as its only user; the new converts are revisited, so a narrowing
   convert climbs through a chain of such ops.

XLA runs it with algsimp to a fixed point ("simplification-2",
"simplify_after_conv_canonicalization") after ReshapeMover's fixed point
(the two passes move converts in opposite directions).  A convert from or
to a packed (sub-byte, non-pred) type never moves ("packed types are not
supported in most ops"): int4 weights are dequantized before their
reshape/transpose.  On XLA's own steps (fp8_delayed_scaling_mlp's session-7
pass dumps, both sites) the output is XLA's
(tests/passes/test_convert_mover_steps.py).

In gpu-cuda at XLA's sites: this fixed point in "simplification-2", and
"reshape_mover_after_conv_canonicalization" (reshape-mover + algsimp) and
"simplify_after_conv_canonicalization" (this + algsimp) at the end of
conv_canonicalization.  Session 7 measured it alone as a trade (main
4c10af2: known +1, held-out -1, branch s7loop-convert-mover-wired); it went
in with move_copy_to_users and the free-loop-state layout assignment
(session 8; figures in move_copy_to_users' docstring).  It is what keeps
attention_dpa's copy of k a bf16 transpose once move_copy_to_users sinks
copies below converts: reshape-mover turns convert(transpose(k)) into
transpose(convert(k)), and this pass moves the convert back down.

Remarks: one per move (``applied``).

Postcondition: no commuting op left whose operands are all single-use
widening converts (or losslessly convertible constants) of one source
type, and no narrowing convert of a single-use commuting op.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from ..ir.build import make_convert
from ..ir.edit import replace_instruction
from ..ir.literal import numpy_dtype
from ..ir.module import Computation, Instruction, Module
from .base import Pass
from .dfs_rewrite import nonfusion_computations

#: opcodes for which convert(op(x)) == op(convert(x))
COMMUTES_WITH_CONVERT = frozenset({"concatenate", "pad", "reshape", "slice", "transpose"})

_BITS = {"pred": 1, "s1": 1, "u1": 1, "s2": 2, "u2": 2, "s4": 4, "u4": 4, "s8": 8, "u8": 8,
         "s16": 16, "u16": 16, "s32": 32, "u32": 32, "s64": 64, "u64": 64, "f16": 16,
         "bf16": 16, "f32": 32, "f64": 64, "c64": 64, "c128": 128, "tf32": 32}


def is_sub_byte(element_type: str) -> bool:
    """``primitive_util::IsSubByteNonPredType``: s2/s4/u2/u4 and 4-bit and
    smaller floats (pred is 8 bits wide in XLA's arrays)."""
    return element_type != "pred" and 0 < bit_width(element_type) < 8


def bit_width(element_type: str) -> int:
    """``primitive_util::BitWidth``."""
    if element_type in _BITS:
        return _BITS[element_type]
    if element_type.startswith("f8") or element_type.startswith("f6") \
            or element_type.startswith("f4"):
        return int(element_type[1])
    return 0


def losslessly_convertible(constant: Instruction, element_type: str) -> bool:
    """``IsLosslesslyConvertibleTo``: the literal survives a round trip
    through ``element_type``."""
    literal = getattr(constant, "literal", None)
    if literal is None:
        return False
    try:
        value = np.asarray(literal.value)
        there = value.astype(numpy_dtype(element_type))
        back = there.astype(value.dtype)
    except Exception:  # an unsupported conversion is not lossless
        return False
    return bool(np.array_equal(back, value, equal_nan=True))


@dataclass(frozen=True)
class ConvertMover(Pass):
    """Move widening converts down and narrowing converts up across
    data-movement ops."""

    name = "convert-mover"

    def run(self, module: Module) -> bool:
        changed = False
        for comp in nonfusion_computations(module):
            changed |= self._move_down(comp)
            changed |= self._move_up(comp)
        return changed

    def _move_down(self, comp: Computation) -> bool:
        changed = False
        for instr in comp.post_order():
            if instr.parent is not comp or instr.opcode not in COMMUTES_WITH_CONVERT \
                    or not instr.operands:
                continue
            ops = instr.operands
            if not all((o.opcode == "convert" and o.user_count == 1) or o.opcode == "constant"
                       for o in ops):
                continue
            converts = [o for o in ops if o.opcode == "convert"]
            if not converts:
                continue
            src = converts[0].operands[0].shape.element_type
            if any(c.operands[0].shape.element_type != src for c in converts):
                continue
            dst = converts[0].shape.element_type
            if bit_width(src) >= bit_width(dst):
                continue
            if any(o.opcode == "constant" and not losslessly_convertible(o, src) for o in ops):
                continue
            if is_sub_byte(src):
                continue  # packed types are not supported in most ops
            new_ops = [o.operands[0] if o.opcode == "convert" else make_convert(o, src)
                       for o in ops]
            inner = comp.add_instruction(Instruction(
                instr.opcode, instr.shape.with_element_type(src), new_ops, "", dict(instr.attrs)),
                instr.name)
            new = Instruction("convert", instr.shape, [inner])
            self.remark(instr, f"widening convert {converts[0].name} ({src} -> {dst}) moved "
                               f"below {instr.opcode}", derived_from=[instr, converts[0]])
            replace_instruction(comp, instr, new)
            changed = True
        return changed

    def _move_up(self, comp: Computation) -> bool:
        changed = False
        work = deque(reversed(comp.post_order()))
        while work:
            instr = work.popleft()
            if instr.parent is not comp or instr.opcode != "convert":
                continue
            op = instr.operands[0]
            if op.user_count != 1 or op.opcode not in COMMUTES_WITH_CONVERT:
                continue
            src, dst = op.shape.element_type, instr.shape.element_type
            if bit_width(src) <= bit_width(dst):
                continue
            if is_sub_byte(dst):
                continue
            new_ops = []
            for o in op.operands:
                c = make_convert(o, dst)
                work.appendleft(c)
                new_ops.append(c)
            new = Instruction(op.opcode, op.shape.with_element_type(dst), new_ops, "",
                              dict(op.attrs))
            self.remark(instr, f"narrowing convert ({src} -> {dst}) moved above {op.opcode} "
                               f"{op.name}", derived_from=[instr, op])
            replace_instruction(comp, instr, new)
            changed = True
        return changed


__all__ = ["ConvertMover", "COMMUTES_WITH_CONVERT", "bit_width"]
