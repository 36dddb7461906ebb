"""topk-decomposer: XLA's TopkDecomposer (xla/service/topk_rewriter.cc).

A ``topk`` instruction, or a ``TopK`` custom call (TopkRewriter's), becomes
a stable sort along the last dimension and slices of its first ``k``
elements:

* only the values read (one user, ``get-tuple-element`` index 0) and a
  2-parameter comparator: ``slice(sort(x))`` replaces that user;
* otherwise ``iota`` (s32, along the last dimension), ``sort(x, iota)``,
  ``tuple(slice(gte0), slice(gte1))`` replaces the call.

The comparator is the custom call's own; for ``topk`` it is built like
XLA's ``CreateScalarGtComputation`` / ``CreateScalarLtComputation``
(``largest``): ``compare-greater-than`` with parameters ``p.0.lhs, p.0.rhs
[, p.1.lhs, p.1.rhs]`` whose root compares ``p.0`` only (GT / LT, total
order for floating-point types).  The new instructions take the call's
metadata (``SetupDerivedInstruction``).

``only_topk_opcode: true`` is GpuCompiler's pre-SPMD instance (predicate
``opcode == kTopK``); the optimization pipeline's instance decomposes the
``TopK`` calls TopkSpecializer left (those ``__gpu$TopK`` cannot serve).

Postcondition: no ``topk`` (and, without the option, no ``TopK`` call) is left.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.module import Computation, Instruction, Module, has_opcode, module_has_opcode
from ..ir.shape import Shape
from ..ir.shape_inference.common import is_float
from .base import Pass
from .dfs_rewrite import nonfusion_computations, replace_instruction
from .topk_util import comparator_of, derived, gte, is_topk_call, make_sort, slice_prefix


def scalar_comparator(module: Module, types: list[str], largest: bool,
                      caller: Computation | None = None) -> Computation:
    """``CreateScalarGtComputation`` / ``CreateScalarLtComputation`` (added
    before ``caller``)."""
    base = "compare-greater-than" if largest else "compare-less-than"
    comp = Computation(module.unique_name(base))
    comp.module = module
    params = []
    for n, t in enumerate(types):
        for side in ("lhs", "rhs"):
            p = Instruction("parameter", Shape.array(t, ()))
            p.parameter_number = len(params)
            comp.add_instruction(p, f"p.{n}.{side}")
            params.append(p)
    attrs = {"direction": "GT" if largest else "LT"}
    if is_float(types[0]):
        attrs["order"] = "TOTAL"
    root = Instruction("compare", Shape.array("pred", ()), [params[0], params[1]], "", attrs)
    comp.add_instruction(root, "compare")
    comp.root = root
    module.insert_computation_before(comp, caller)
    return comp


def _reads_only_values(call: Instruction) -> bool:
    """``HasSingleUserReadingOnlyTheValueOutput``."""
    users = call.users
    return (len(users) == 1 and users[0].opcode == "get-tuple-element"
            and users[0].tuple_index == 0)


def decompose(call: Instruction, comparator: Computation) -> Instruction:
    """``DecomposeTopK``: the instruction that replaced ``call`` (or its
    values user)."""
    comp = call.parent
    x = call.operands[0]
    dim = x.shape.rank - 1
    values_shape = call.shape.tuple_shapes[0]
    if _reads_only_values(call) and comparator.num_parameters == 2:
        user = call.users[0]
        sort = make_sort(call, comp, x.shape, [x], dim, comparator, True)
        new = slice_prefix(call, sort, values_shape)
        replace_instruction(user, new)
        return new
    iota_shape = x.shape.with_element_type("s32")
    iota = derived(call, comp, "iota", iota_shape, [], iota_dimension=str(dim))
    sort = make_sort(call, comp, Shape.tuple([x.shape, iota_shape]), [x, iota], dim,
                     comparator, True)
    parts = [slice_prefix(call, gte(call, sort, i), call.shape.tuple_shapes[i]) for i in (0, 1)]
    new = derived(call, comp, "tuple", call.shape, parts)
    replace_instruction(call, new)
    return new


_TOPK_OPS = frozenset({"topk", "custom-call"})


@dataclass(frozen=True)
class TopkDecomposer(Pass):
    """Decompose topk / TopK custom calls into a stable sort and slices."""

    name = "topk-decomposer"
    #: GpuCompiler's pre-SPMD predicate: only ``topk`` instructions
    only_topk_opcode: bool = False

    def run(self, module: Module) -> bool:
        changed = False
        if not module_has_opcode(module, _TOPK_OPS):
            return False  # nothing to decompose (no topk, no custom call)
        for comp in nonfusion_computations(module):
            if not has_opcode(comp, _TOPK_OPS):
                continue
            for instr in comp.post_order():
                if instr.parent is not comp:
                    continue
                if instr.opcode == "topk":
                    largest = instr.attrs.get("largest", "true") != "false"
                    types = [instr.operands[0].shape.element_type]
                    if not _reads_only_values(instr):
                        types.append("s32")
                    comparator = scalar_comparator(module, types, largest, comp)
                elif is_topk_call(instr) and not self.only_topk_opcode:
                    comparator = comparator_of(instr)
                    if comparator is None:
                        self.fail("TopK custom call without a comparator", instr)
                else:
                    continue
                name = instr.name
                new = decompose(instr, comparator)
                self.remark(new, f"{name} became a stable sort along the last dimension and "
                                 f"slices of its first k elements", derived_from=[name])
                changed = True
        return changed


__all__ = ["TopkDecomposer", "decompose", "scalar_comparator"]
