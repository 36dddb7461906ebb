"""stable-sort-expander: XLA's StableSortExpander
(xla/service/stable_sort_expander.cc; GpuCompiler's optimization pipeline,
after the CallInliner).  A stable ``sort`` gets an explicit tie-breaker, so
the sort emitter may use any (unstable) algorithm:

* the index operand is an s32 ``iota`` along the sort dimension among the
  operands; if there is none, one is appended (``iota`` of the first
  operand's dimensions) and the comparator is cloned with two extra s32
  parameters ``p.<n>.lhs, p.<n>.rhs``; the sort's old results are read back
  through ``get-tuple-element`` (a ``tuple`` of them for several operands);
* the comparator ``c`` becomes ``select(c == c', iota.lhs < iota.rhs, c)``
  with ``c'`` the comparator with every parameter pair swapped (cloned
  instruction by instruction): equivalent elements keep their index order.

XLA leaves the sort marked stable; its after-optimizations dumps print the
expanded sorts without ``is_stable`` (the comparator now orders ties
itself), and so does this pass.  A comparator another instruction also
calls is cloned before it is changed.

Postcondition: no ``sort`` with ``is_stable=true`` is left.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ..ir.module import Computation, Instruction, Module, has_opcode, module_has_opcode
from ..ir.shape import Shape
from .base import Pass
from .dfs_rewrite import nonfusion_computations, replace_instruction
from .topk_util import derived, gte

_S32 = Shape.array("s32", ())
_PRED = Shape.array("pred", ())


def _clone_instr(comp: Computation, instr: Instruction, operands: list[Instruction]) -> Instruction:
    new = Instruction(instr.opcode, instr.shape, operands, "", dict(instr.attrs))
    new.literal = instr.literal
    if instr.opcode == "parameter":
        new.parameter_number = instr.parameter_number
    comp.add_instruction(new, instr.name)
    return new


def clone_comparator(module: Module, comp: Computation, extra_params: int = 0,
                     caller: Computation | None = None) -> Computation:
    """``CloneWithReplacements`` with ``extra_params`` s32 parameter pairs
    ``p.<n>.lhs/rhs`` appended."""
    new = Computation(module.unique_name(f"{comp.name}.clone"))
    new.module = module
    mapping: dict[Instruction, Instruction] = {}
    for i in comp.post_order():
        mapping[i] = _clone_instr(new, i, [mapping[o] for o in i.operands])
    n = comp.num_parameters
    for j in range(extra_params):
        for side in ("lhs", "rhs"):
            p = Instruction("parameter", _S32)
            p.parameter_number = n
            new.add_instruction(p, f"p.{n // 2}.{side}")
            n += 1
    new.root = mapping[comp.root]
    module.insert_computation_before(new, caller)
    return new


def _iota_index(sort: Instruction) -> int:
    dim = sort.dimensions[0]
    for n, op in enumerate(sort.operands):
        if op.opcode == "iota" and op.int_attr("iota_dimension") == dim \
                and op.shape.element_type == "s32":
            return n
    return -1


def add_tie_breaker(comparator: Computation, iota_index: int) -> None:
    """The comparator breaks ties by the iota parameters."""
    params = comparator.parameters
    swap = {p: params[p.parameter_number ^ 1] for p in params}
    old_root = comparator.root
    mapping: dict[Instruction, Instruction] = {}
    for i in comparator.post_order():
        if not i.operands:
            continue
        mapping[i] = _clone_instr(comparator, i, [mapping.get(o, swap.get(o, o)) for o in i.operands])
    same = Instruction("compare", _PRED, [old_root, mapping[old_root]], "", {"direction": "EQ"})
    comparator.add_instruction(same, "compare")
    tie = Instruction("compare", _PRED, [params[2 * iota_index], params[2 * iota_index + 1]], "",
                      {"direction": "LT"})
    comparator.add_instruction(tie, "compare")
    root = Instruction("select", _PRED, [same, tie, old_root])
    comparator.add_instruction(root, "select")
    comparator.root = root


def expand(sort: Instruction, callers: Counter) -> Instruction:
    """``ExpandInstruction``: the sort that now carries the tie-breaker."""
    comp = sort.parent
    module = comp.module
    iota_index = _iota_index(sort)
    if iota_index == -1:
        x = sort.operands[0]
        dim = sort.dimensions[0]
        iota_shape = x.shape.with_element_type("s32")
        iota = derived(None, comp, "iota", iota_shape, [], iota_dimension=str(dim))
        comparator = clone_comparator(module, sort.to_apply, 1, comp)
        shapes = list(sort.shape.tuple_shapes) if sort.shape.is_tuple else [sort.shape]
        attrs = dict(sort.attrs)
        attrs["to_apply"] = comparator
        new = Instruction("sort", Shape.tuple(shapes + [iota_shape]),
                          list(sort.operands) + [iota], "", attrs)
        comp.add_instruction(new, sort.name)
        parts = [gte(None, new, i) for i in range(len(sort.operands))]
        wrapper = parts[0] if len(parts) == 1 else derived(None, comp, "tuple", sort.shape, parts)
        replace_instruction(sort, wrapper)
        sort, iota_index = new, len(new.operands) - 1
        callers[sort.to_apply] += 1
    elif callers[sort.to_apply] > 1:
        callers[sort.to_apply] -= 1
        sort.attrs["to_apply"] = clone_comparator(module, sort.to_apply, 0, comp)
        callers[sort.to_apply] += 1
    add_tie_breaker(sort.to_apply, iota_index)
    sort.attrs.pop("is_stable", None)
    return sort


_SORT = frozenset({"sort"})


@dataclass(frozen=True)
class StableSortExpander(Pass):
    """Make stable sorts break ties with an iota operand."""

    name = "stable-sort-expander"

    def run(self, module: Module) -> bool:
        changed = False
        if not module_has_opcode(module, _SORT):
            return False  # no sort to expand
        comps = nonfusion_computations(module)
        # a comparator other instructions also call is cloned before it is edited
        callers: Counter = Counter(callee for c in module.computations for i in c.instructions
                                   for callee in i.called_computations())
        for comp in comps:
            if not has_opcode(comp, _SORT):
                continue
            for sort in comp.post_order():
                if sort.parent is not comp or sort.opcode != "sort" \
                        or sort.attrs.get("is_stable") != "true":
                    continue
                name = sort.name
                new = expand(sort, callers)
                self.remark(new, f"{name}: stable sort made explicit: ties are broken by the iota "
                                 f"operand {new.operands[_iota_index(new)].name}",
                            derived_from=[name])
                changed = True
        return changed


__all__ = ["StableSortExpander", "add_tie_breaker", "clone_comparator", "expand"]
