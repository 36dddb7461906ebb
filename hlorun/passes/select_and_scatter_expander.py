"""select_and_scatter_expander: XLA's SelectAndScatterExpander
(xla/service/select_and_scatter_expander.cc), which XLA:GPU runs at the start
of its optimization pipeline, so a max-pool gradient becomes a variadic
reduce-window that finds each window's selected element and a scatter of
the source into the zeros -- two kernels (``kLoop reduce-window``,
``kInput scatter``) instead of an unfused select-and-scatter.

For ``select-and-scatter(operand, source, init), window=W, select=S,
scatter=T``:

* one ``iota`` per operand dimension (s32, the operand's dimensions);
* a reduce-window over ``(operand, iota_0, ..., iota_r-1)`` with inits
  ``(init, -1, ..., -1)`` and window W whose reducer keeps the (value,
  index) pair S selects, treating an index of -1 as "no element yet"
  (``<S>.reduce_window``: S's body inlined, ``pred = (S(lhs, rhs) and
  lhs_index != -1) or rhs_index == -1``);
* the selected indices reshaped to ``[source dims..., 1]`` and concatenated
  to ``[source dims..., r]``;
* ``scatter(broadcast(init), indices, source)`` with T, every operand
  dimension inserted (``update_window_dims={}``).

Postcondition: no select-and-scatter is left.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.build import make_constant
from ..ir.module import Computation, Instruction, Module, has_opcode
from ..ir.shape import Shape
from .base import Pass


def _add(comp: Computation, opcode: str, shape: Shape, operands, name: str | None = None,
         **attrs) -> Instruction:
    i = Instruction(opcode, shape, list(operands), "", {k: v for k, v in attrs.items()})
    comp.add_instruction(i, name or opcode)
    return i


def _scalar(t: str) -> Shape:
    return Shape.array(t, [])


def _int_list(xs) -> str:
    return "{" + ",".join(str(x) for x in xs) + "}"


def _reducer(module: Module, select: Computation, operand_type: str, rank: int) -> Computation:
    """``<select>.reduce_window``: keep the pair the select function picks."""
    comp = Computation(module.unique_name(f"{select.name}.reduce_window"))
    comp.module = module
    pred_t = select.root.shape
    s32 = _scalar("s32")

    def param(n: int, t: Shape, name: str) -> Instruction:
        p = Instruction("parameter", t)
        p.parameter_number = n
        comp.add_instruction(p, name)
        return p
    rhs_begin = rank + 1
    op_lhs = param(0, _scalar(operand_type), "operand_lhs")
    iota_lhs = [param(1 + i, s32, "iota_lhs") for i in range(rank)]
    op_rhs = param(rhs_begin, _scalar(operand_type), "operand_rhs")
    iota_rhs = [param(rhs_begin + 1 + i, s32, "iota_rhs") for i in range(rank)]
    c = make_constant(comp, "s32", -1)
    lhs_first = _add(comp, "compare", pred_t, [iota_lhs[0], c], direction="NE")
    rhs_first = _add(comp, "compare", pred_t, [iota_rhs[0], c], direction="NE")
    rhs_not_first = _add(comp, "not", pred_t, [rhs_first])
    # the select computation, inlined
    mapping: dict[Instruction, Instruction] = {}
    for i in select.post_order():
        if i.opcode == "parameter":
            mapping[i] = op_lhs if i.parameter_number == 0 else op_rhs
            continue
        clone = Instruction(i.opcode, i.shape, [mapping[o] for o in i.operands], "", dict(i.attrs))
        clone.literal = i.literal
        comp.add_instruction(clone, i.name)
        mapping[i] = clone
    call = mapping[select.root]
    pred = _add(comp, "and", pred_t, [call, lhs_first])
    pred = _add(comp, "or", pred_t, [pred, rhs_not_first])
    outs = [_add(comp, "select", _scalar(operand_type), [pred, op_lhs, op_rhs])]
    outs += [_add(comp, "select", s32, [pred, a, b]) for a, b in zip(iota_lhs, iota_rhs)]
    comp.root = _add(comp, "tuple", Shape.tuple([o.shape for o in outs]), outs)
    module.computations.insert(0, comp)
    return comp


def expand(sas: Instruction) -> Instruction:
    comp = sas.parent
    module = comp.module
    operand, source, init = sas.operands
    oshape, sshape = operand.shape, source.shape
    rank = oshape.rank
    iota_shape = Shape.array("s32", list(oshape.dimensions), oshape.minor_to_major
                             if oshape.layout is not None else None)
    iotas = [_add(comp, "iota", iota_shape, [], iota_dimension=str(i)) for i in range(rank)]
    reducer = _reducer(module, sas.attrs["select"], oshape.element_type, rank)
    neg = make_constant(comp, "s32", -1)
    layout = sshape.minor_to_major if sshape.layout is not None else None
    reduced = Shape.array("s32", list(sshape.dimensions), layout)
    rw_shape = Shape.tuple([sshape] + [reduced] * rank)
    rw = _add(comp, "reduce-window", rw_shape, [operand] + iotas + [init] + [neg] * rank,
              window=sas.attrs["window"], to_apply=reducer)
    col_shape = Shape.array("s32", list(sshape.dimensions) + [1])
    cols = []
    for i in range(1, rank + 1):
        g = _add(comp, "get-tuple-element", reduced, [rw], index=str(i))
        cols.append(_add(comp, "reshape", col_shape, [g]))
    indices = _add(comp, "concatenate", Shape.array("s32", list(sshape.dimensions) + [rank]),
                   cols, dimensions=_int_list([sshape.rank]))
    zeros = _add(comp, "broadcast", sas.shape, [init], dimensions="{}")
    dims = list(range(rank))
    scatter = _add(comp, "scatter", sas.shape, [zeros, indices, source],
                   update_window_dims="{}", inserted_window_dims=_int_list(dims),
                   scatter_dims_to_operand_dims=_int_list(dims),
                   index_vector_dim=str(sshape.rank), to_apply=sas.attrs["scatter"])
    for key in ("metadata",):
        if key in sas.attrs:
            for i in (rw, scatter):
                i.attrs[key] = sas.attrs[key]
    return scatter


_SELECT_AND_SCATTER = frozenset({"select-and-scatter"})


@dataclass(frozen=True)
class SelectAndScatterExpander(Pass):
    """Rewrite select-and-scatter as a variadic reduce-window and a scatter."""

    name = "select_and_scatter_expander"

    def run(self, module: Module) -> bool:
        changed = False
        for comp in list(module.computations):
            if not has_opcode(comp, _SELECT_AND_SCATTER):
                continue
            for instr in comp.post_order():
                if instr.opcode != "select-and-scatter":
                    continue
                new = expand(instr)
                name = instr.name
                comp.replace_instruction(instr, new)
                self.remark(new, f"{name} expanded into a reduce-window and {new.name}",
                            "applied", derived_from=[name], rule="expand")
                changed = True
        return changed


__all__ = ["SelectAndScatterExpander", "expand"]
