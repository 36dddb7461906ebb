"""layout-assignment: choose a layout for every array (XLA's LayoutAssignment
with GpuLayoutAssignment's backend constraints).

Per non-fusion computation (callees first):

1. mandatory constraints: the entry parameters and result get the layouts
   of ``entry_computation_layout`` (other computations: descending layouts);
   ``call``/``while``/``conditional`` operands and results get their callee's;
2. GPU backend constraints (GpuLayoutAssignment::AddBackendConstraints, in
   reverse post order): a cuDNN convolution call gets NHWC or NCHW operand
   and result layouts (:mod:`.conv`); a dot with batch dimensions, several contracting or
   non-contracting dimensions gets operand layouts that cuBLAS accepts (the
   existing layout if it is a valid matrix layout, else the descending one,
   else batch/rows/columns major to minor) and an output layout: a layout a
   user already asked for if the dot can write it, else descending; a
   transpose whose operand is a single-use dot asks the dot for the layout
   that makes the transpose a bitcast; a sort whose keys have rank > 1 gets
   the keys' default layout on every operand and output; an fft gets the
   default layout on its operand and result (cuFFT); a triangular-solve
   gets Fortran (column-major) layouts on both operands and its result;
3. propagation (see :mod:`.propagation`): layouts flow to users and back to
   operands so that elementwise ops keep one layout and reshapes and
   transposes stay bitcasts wherever constraints allow (consumer-pulled
   layouts: a reshape asked for a non-descending result layout passes the
   matching layout on to its operand);
4. copies where an operand's layout differs from what its user needs.

A module that already has bitcasts (XLA's after_optimizations output) is
refused, as XLA's LayoutAssignment refuses it ("Unexpected bitcast
operation seen during layout assignment"), naming the bitcast.

While loops (XLA's kWhile rule in AddMandatoryConstraints, for a loop whose
body and condition nothing else calls): the body is laid out first with its
parameter and result free, as in XLA's first round (a null
ComputationLayout for a non-entry computation): a layout asked of a
get-tuple-element of the parameter becomes that state element's layout,
and elements nothing asks for get the default layout in XLA's buffer order
(where the post order reaches the parameter, element by element, each
followed by propagation).  Where the result comes out in other layouts,
the parameter takes the result's layouts and the body is laid out again
with them mandatory, reaching the body's uses (copies at the root where it
still differs); the condition gets the same parameter layout, and in the
caller the loop's init elements and result elements take them (copies --
transposes after layout normalization -- before and after the loop).  A KV
cache carried through a decode loop stays in the layout the in-loop dots
read, a scan stacks Q/K/V in the transposed layout its attention dots read
(transformer_scan_4l), and a backward scan keeps its stacked residuals in
the row-reduction layout of its gradient sums (hmm_forward_scan: XLA's own
layout-assignment step gives the same loop states), as in XLA.

Simplifications (documented deviations): one propagation round with equal
priorities (XLA runs two rounds, clearing all buffer and operand
constraints in between and raising current_priority_ from 0 to 1; inside
one computation every constraint of a round has that round's priority, so
a non-mandatory update never replaces a different layout -- priorities
only decide between computations and for dynamic-update-slice operands);
fusion computations are not laid out; TopK-custom-call backend
constraints are not modelled.  Option ``free_gemm_output``: do not
constrain dot outputs, as for a dot a Triton GEMM fusion will compute (its
emitter writes any layout); consumer layouts then reach the dot through
bitcast reshapes, which is how scenario S0's non-canonical GEMM output
layout arises before a BLAS rewrite pins it.

Postcondition: every array shape has a layout; every reshape whose layouts
could be aligned is a bitcast; entry parameters and root match
``entry_computation_layout``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ir.module import Computation, Instruction, Module
from ...ir.shape import Layout, Shape, default_layout
from ..base import Pass
from ..dfs_rewrite import nonfusion_computations
from .conv import add_conv_constraints, is_dnn_convolution
from .gpu import (add_dot_constraints, add_fft_constraints, add_sort_constraints,
                  add_transpose_of_dot_constraint, add_triangular_solve_constraints)
from .propagation import Propagation


@dataclass(frozen=True)
class LayoutAssignment(Pass):
    """Assign layouts from the entry layout, GEMM constraints and propagation."""

    name = "layout-assignment"
    #: leave dot outputs unconstrained (Triton GEMM model of S0)
    free_gemm_output: bool = False
    #: GPU: minimum reduction size for which a row-reduction layout is asked
    reduction_threshold: int = 32

    def run(self, module: Module) -> bool:
        changed = False
        ecl = module.entry_computation_layout()
        comps = nonfusion_computations(module)
        for comp in comps:
            self._refuse_bitcasts(comp)
        loops = while_loops(module)
        conds = {cond: body for body, (_, cond) in loops.items()}
        loop_shapes: dict[Instruction, Shape] = {}
        for comp in comps:
            if comp in conds:
                continue  # laid out right after its loop's body
            if comp.is_entry:
                if ecl is not None:
                    params, result = ecl
                else:
                    params, result = comp.program_shape()
            elif comp in loops:
                # XLA's first round passes a null ComputationLayout for a
                # non-entry computation: the body's parameter and result take
                # the layouts their uses and producers give them, and the
                # kWhile rule then settles the parameter on the result's
                params, result = [None] * comp.num_parameters, None
            else:
                params = [p.shape.with_default_layout() if p is not None else None
                          for p in comp.parameters]
                result = comp.root.shape.with_default_layout() if comp.root is not None else None
            if self._run_on(comp, params, result, loop_shapes, free_params=comp in loops):
                changed = True
            if comp in loops:
                w, cond = loops[comp]
                changed |= self._settle_loop(comp, cond, w, loop_shapes)
        return changed

    def _settle_loop(self, body: Computation, cond: Computation, w: Instruction,
                     loop_shapes: dict[Instruction, Shape]) -> bool:
        """XLA's rule for a while loop (AddMandatoryConstraints, kWhile): the
        body's parameter takes the layout its result was given, the body is
        laid out again with it, and the condition and the loop itself use
        that layout (the caller copies the init value into it and the
        loop's result out of it)."""
        param, changed = body.parameter(0), False
        if param.shape.is_tuple and body.root.shape.is_tuple \
                and len(param.shape.tuple_shapes) == len(body.root.shape.tuple_shapes):
            settled = Shape.tuple(
                p.with_layout(r.layout) if p.is_array and r.is_array and r.layout is not None
                and p.rank > 1 else p
                for p, r in zip(param.shape.tuple_shapes, body.root.shape.tuple_shapes))
            if settled != param.shape:
                self.remark(w, f"loop state laid out as the body computes it: {settled}",
                            kind="analysis")
                param.shape = settled
                self._run_on(body, [settled], None, loop_shapes, fixed_state=True)
                changed = True
            root = body.root
            if root.opcode == "tuple":
                for i, (op, want) in enumerate(zip(root.operands, param.shape.tuple_shapes)):
                    if op.shape.is_array and want.is_array and want.layout is not None \
                            and op.shape.minor_to_major != want.layout.minor_to_major:
                        from ..dfs_rewrite import add_instruction
                        copy = add_instruction(body, Instruction(
                            "copy", op.shape.with_layout(want.layout), [op]))
                        root.set_operand(i, copy)
                        changed = True
                root.shape = Shape.tuple(o.shape for o in root.operands)
        cparam = cond.parameter(0)
        cparam.shape = param.shape
        result = cond.root.shape.with_default_layout() if cond.root is not None else None
        changed |= self._run_on(cond, [param.shape], result, loop_shapes)
        if param.shape.is_tuple:
            loop_shapes[w] = param.shape
        return changed

    def _refuse_bitcasts(self, comp: Computation) -> None:
        """XLA's LayoutAssignment refuses a module with bitcasts: they are
        layout-sensitive and only exist after layout assignment (an
        ``after_optimizations`` module, or one a post-layout pass made)."""
        for instr in comp.instructions:
            if instr.opcode == "bitcast":
                self.fail(f"Unexpected bitcast operation seen during layout assignment: {instr.name} "
                          f"({instr.operands[0].shape} -> {instr.shape}); bitcasts only exist after "
                          "layout assignment (is this an after_optimizations module? compile XLA's "
                          "before_optimizations module, or run only the post-layout passes)", instr)

    def _run_on(self, comp: Computation, params, result: Shape | None,
                loop_shapes: dict[Instruction, Shape], free_params: bool = False,
                fixed_state: bool = False) -> bool:
        prop = Propagation(comp, self.reduction_threshold, free_params)
        # 1. mandatory constraints
        for p, shape in zip(comp.parameters, params):
            if p is not None and shape is not None and shape.is_array and shape.layout is not None:
                prop.set_buffer_layout(shape.layout, p)
            elif fixed_state and p is not None and shape is not None and shape.is_tuple:
                # XLA's second round: the loop state layouts the first round
                # settled on are mandatory and reach the body's uses of them
                for i, part in enumerate(shape.tuple_shapes):
                    if part.is_array and part.layout is not None and part.rank > 1:
                        prop.set_element_layout(part.layout, p, i)
        for instr in prop.order:
            self._callee_constraints(prop, instr)
            if instr in loop_shapes:
                _loop_constraints(prop, instr, loop_shapes[instr])
        if result is not None:
            prop.set_result_layout(result)
        # 2. backend constraints, reverse post order
        packed: dict = {}  # is_packed_instruction's verdicts (the graph is fixed here)
        for instr in reversed(prop.order):
            if is_dnn_convolution(instr):
                add_conv_constraints(prop, instr, self.target, self.remark)
            elif instr.opcode == "dot":
                add_dot_constraints(prop, instr, free_output=self.free_gemm_output,
                                    packed_memo=packed)
            elif instr.opcode == "transpose" and not self.free_gemm_output:
                add_transpose_of_dot_constraint(prop, instr)
            elif instr.opcode == "fft":
                add_fft_constraints(prop, instr)
            elif instr.opcode == "sort":
                add_sort_constraints(prop, instr)
            elif instr.opcode == "triangular-solve":
                add_triangular_solve_constraints(prop, instr)
        # 3. propagation, then defaults for whatever is left
        prop.propagate()
        prop.constrain_remaining()
        before = {i: i.shape for i in comp._instructions}

        def on_copy(copy: Instruction, user: Instruction | None) -> None:
            self.remark(copy, f"copy to {copy.shape} for "
                              + (f"{user.name}" if user is not None else "the result layout"),
                        derived_from=[copy.operands[0]])

        changed = prop.assign(result, on_copy)
        for instr, shape in before.items():
            if instr.parent is comp and instr.shape != shape and instr.opcode == "dot":
                self.remark(instr, f"dot output layout {instr.shape.layout}", kind="analysis")
        return changed

    def _callee_constraints(self, prop: Propagation, instr: Instruction) -> None:
        callees = instr.called_computations()
        if instr.opcode not in ("call", "while", "conditional") or not callees:
            return
        if instr.shape.is_array:
            prop.set_buffer_layout(default_layout(instr.shape.rank), instr)
        for k, op in enumerate(instr.operands):
            if op.shape.is_array and op.shape.rank > 0:
                prop.set_operand_layout(default_layout(op.shape.rank), instr, k)


def while_loops(module: Module) -> dict[Computation, tuple[Instruction, Computation]]:
    """body -> (while, condition) for loops whose body and condition nothing
    else calls (the ones laid out by XLA's kWhile rule here)."""
    calls: dict[Computation, int] = {}
    whiles = []
    for comp in module.computations:
        for instr in comp.instructions:
            if instr.attrs:
                for c in instr.called_computations():
                    calls[c] = calls.get(c, 0) + 1
            if instr.opcode == "while":
                whiles.append(instr)
    out = {}
    for w in whiles:
        body, cond = w.attrs.get("body"), w.attrs.get("condition")
        if isinstance(body, Computation) and isinstance(cond, Computation) and body is not cond \
                and calls.get(body) == 1 and calls.get(cond) == 1 \
                and body.num_parameters == 1 and cond.num_parameters == 1:
            out[body] = (w, cond)
    return out


def _loop_constraints(prop: Propagation, w: Instruction, shape: Shape) -> None:
    """The loop's init value elements and result elements take the loop
    state's layouts (copies before and after the loop where they differ)."""
    init = w.operands[0]
    if not shape.is_tuple or not w.shape.is_tuple:
        return
    for i, s in enumerate(shape.tuple_shapes):
        if not s.is_array or s.rank <= 1 or s.layout is None:
            continue
        if init.opcode == "tuple":
            prop.set_operand_layout(s.layout, init, i)
        prop.set_element_layout(s.layout, w, i)


__all__ = ["LayoutAssignment", "while_loops"]
