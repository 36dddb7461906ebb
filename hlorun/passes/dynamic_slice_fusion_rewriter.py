"""dynamic-slice-fusion-rewriter: XLA's DynamicSliceFusionRewriter
(xla/backends/gpu/transforms/dynamic_slice_fusion_rewriter.cc, with
GetSlicedOperandPaths from xla/service/gpu/dynamic_slicing_utils.cc), which
GpuCompiler runs as the "dynamic-slice" pipeline right after
OptimizeHloPostLayoutAssignment and before the fusion passes
(xla_gpu_enable_dynamic_slice_fusion, on in the JAX 0.11 dumps).

A library call that reads a slice of a buffer reads it in place: the call
and the slices feeding it become one ``kCustom`` fusion with
``{"kind":"__custom_fusion","custom_fusion_config":{"name":"dynamic_slice_fusion"}}``,
whose body is the slices, the bitcasts between them and the call, and whose
operands are the sliced buffers (the slice is an address offset, no kernel).

* Heroes: cuBLAS GEMM calls (``__cublas$gemm``, and ``__cublas$lt$matmul``,
  which XLA's dump of fno_spectral_f32 shows wrapped: a registered custom
  call target).
* Per operand (skipping operands the call aliases to its output), a
  breadth-first walk up through bitcasts / tuples / get-tuple-elements
  stops at the first other instruction; it is a match when that is an
  *aligned* ``slice`` (``IsAlignedSlice``: unstrided and contiguous --
  every dimension more major than the first sliced one has size 1 in the
  slice -- and either some dimension's byte stride, minor to major up to
  the sliced one, is a multiple of 128, or the sliced dimension's offset
  is), or a ``dynamic-slice`` of the same kind whose offsets are all s32 /
  s64 / u32 / u64 constants.  The walk's instructions join the fusion.
* The fusion's parameters are the operands of the matched instructions
  that are not matched themselves, in path order (the sliced buffers first
  for the sliced operand, then the call's other operands); its body is
  named ``dynamic-slice-fusion`` and its root is the call (XLA builds a
  tuple of the call's elements, which its later tuple simplification
  folds: the dumps show the call as root).  The call's users read the
  fusion.

Not modelled (documented deviations): offsets that are functions of a
while loop's induction variable (XLA accepts them; none of the dumps has
such a call), sliced *user* paths (a call whose result only feeds a
dynamic-update-slice), and reduce-scatter / other custom-call heroes.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from ..ir.attrs import parse_slice
from ..ir.module import Computation, Instruction, Module
from ..ir.shape import Shape, bit_width
from .base import Pass
from .dfs_rewrite import nonfusion_computations

#: kXlaAllocatedBufferAlignBytes
ALIGN_BYTES = 128
GEMM_TARGETS = ("__cublas$gemm", "__cublas$lt$matmul")
_NO_OPS = frozenset({"bitcast", "tuple", "get-tuple-element"})
_INDEX_TYPES = frozenset({"s32", "s64", "u32", "u64"})


def _slice_ranges(instr: Instruction) -> list[tuple[int, int, int]] | None:
    if instr.opcode == "slice":
        return list(parse_slice(instr.attrs["slice"]))
    return None


def is_contiguous_slice(full: Shape, sliced: Shape) -> bool:
    """``IsContiguousSlice``: going minor to major, every dimension after
    the first sliced one has size 1 in the slice."""
    sliced_dim = None
    for d in full.minor_to_major:
        if sliced_dim is not None:
            if sliced.dimensions[d] != 1:
                return False
            continue
        if sliced.dimensions[d] < full.dimensions[d]:
            sliced_dim = d
    return True


def _byte_strides(shape: Shape) -> list[int]:
    strides = [0] * shape.rank
    stride = max(bit_width(shape.element_type) // 8, 1)
    for d in shape.minor_to_major:
        strides[d] = stride
        stride *= shape.dimensions[d]
    return strides


def is_aligned_slice(slice_: Instruction) -> bool:
    """``IsAlignedSlice`` for ``slice`` and ``dynamic-slice``."""
    full, sliced = slice_.operands[0].shape, slice_.shape
    ranges = _slice_ranges(slice_)
    if ranges is not None and any(st != 1 for _, _, st in ranges):
        return False
    if full.layout is None or sliced.layout is None or not is_contiguous_slice(full, sliced):
        return False
    strides = _byte_strides(sliced)
    for d in sliced.minor_to_major:
        if strides[d] % ALIGN_BYTES == 0:
            return True
        if sliced.dimensions[d] < full.dimensions[d]:
            return ranges is not None and (strides[d] * ranges[d][0]) % ALIGN_BYTES == 0
    return True


def _constant_offsets(ds: Instruction) -> bool:
    """``HasConstantOrLoopIterationOffsets`` without the loop case: every
    offset is an integer constant."""
    return all(o.opcode == "constant" and o.shape.element_type in _INDEX_TYPES
               for o in ds.operands[1:])


def _aliased_operands(call: Instruction) -> set[int]:
    text = str(call.attrs.get("output_to_operand_aliasing", ""))
    out: set[int] = set()
    for part in text.split("(")[1:]:
        head = part.split(",")[0].strip()
        if head.isdigit():
            out.add(int(head))
    return out


def sliced_operand_paths(call: Instruction) -> list[Instruction]:
    """``GetSlicedOperandPaths``: the matched instructions in def-use order,
    the call last."""
    paths: list[Instruction] = []
    processed: set[Instruction] = set()
    aliased = _aliased_operands(call)
    for k, operand in enumerate(call.operands):
        if k in aliased:
            continue
        path: list[Instruction] = []
        found = None
        slice_found = False
        queue, seen = deque([operand]), {operand}
        while queue:
            cur = queue.popleft()
            if cur in processed:
                found = cur
                break
            path.append(cur)
            if cur.opcode in ("slice", "dynamic-slice") and is_aligned_slice(cur):
                found, slice_found = cur, True
                break
            if cur.opcode not in _NO_OPS:
                found = cur
                break
            for o in cur.operands:
                if o not in seen:
                    seen.add(o)
                    queue.append(o)
        if found is None:
            continue
        valid = slice_found and (found.opcode == "slice" or _constant_offsets(found))
        if valid or found in processed:
            paths.extend(reversed(path))
            processed.update(path)
    paths.append(call)
    return paths


def _captures(matched: list[Instruction]) -> list[Instruction]:
    """``GetPatternCaptures``."""
    inside = set(matched)
    out: list[Instruction] = []
    for instr in matched:
        for o in instr.operands:
            if o not in inside and o not in out:
                out.append(o)
    return out


def _fusion_body(module: Module, caller: Computation, matched: list[Instruction],
                 captures: list[Instruction]) -> Computation:
    body = Computation(module.unique_name("dynamic-slice-fusion"))
    body.module = module
    mapping: dict[Instruction, Instruction] = {}
    for n, c in enumerate(captures):
        p = Instruction("parameter", c.shape)
        p.parameter_number = n
        body.add_instruction(p, f"p{n}")
        mapping[c] = p
    for instr in matched:
        clone = Instruction(instr.opcode, instr.shape, [mapping[o] for o in instr.operands], "",
                            dict(instr.attrs))
        clone.literal = instr.literal
        body.add_instruction(clone, instr.name)
        mapping[instr] = clone
    body.root = mapping[matched[-1]]
    module.insert_computation_before(body, caller)
    return body


@dataclass(frozen=True)
class DynamicSliceFusionRewriter(Pass):
    """cuBLAS calls reading aligned slices -> __custom_fusion dynamic_slice_fusion."""

    name = "dynamic-slice-fusion-rewriter"

    def run(self, module: Module) -> bool:
        heroes: list[tuple[Instruction, list[Instruction]]] = []
        for comp in nonfusion_computations(module):
            for instr in comp.instructions:
                if instr.opcode == "custom-call" and instr.custom_call_target in GEMM_TARGETS:
                    paths = sliced_operand_paths(instr)
                    if len(paths) > 1:
                        heroes.append((instr, paths))
        for hero, matched in heroes:
            comp = hero.parent
            captures = _captures(matched)
            body = _fusion_body(module, comp, matched, captures)
            fusion = Instruction("fusion", hero.shape, list(captures), "",
                                 {"kind": "kCustom", "calls": body})
            comp.add_instruction(fusion, "dynamic_slice_fusion")
            fusion.set_backend_config({
                "device_type": "DEVICE_TYPE_INVALID", "force_earliest_schedule": False,
                "fusion_backend_config": {
                    "custom_fusion_config": {"kernel_index": 0, "name": "dynamic_slice_fusion"},
                    "kind": "__custom_fusion"},
                "operation_queue_id": "0", "reification_cost": []})
            name = hero.name
            comp.replace_instruction(hero, fusion)
            from ..ir.edit import remove_dead
            remove_dead(comp, [m for m in matched[:-1] if m.parent is comp])
            self.remark(fusion, f"{name} reads {', '.join(m.name for m in matched[:-1])} "
                                f"in place (dynamic slice fusion)", derived_from=[name])
        return bool(heroes)


__all__ = ["DynamicSliceFusionRewriter", "is_aligned_slice", "is_contiguous_slice",
           "sliced_operand_paths"]
