"""The constraint propagation of XLA's LayoutAssignment (one computation).

Constraints are *buffer* layouts (an instruction's result) and *operand*
layouts (what an instruction wants an operand to be); each is mandatory or
not and propagates depth-first or breadth-first, as in
xla/service/layout_assignment.cc:

* a buffer layout is pushed to the instruction's operands
  (``ChooseOperandLayoutFromOutputLayout``: the same layout for
  layout-preserving ops, the layout that keeps a reshape or transpose a
  bitcast, ...) and to its users' operand constraints;
* an operand layout is pushed to the operand's buffer (so no copy is
  needed) and forward to the user's result
  (``ChooseOutputLayoutFromOperandLayout``) or, for layout-preserving ops,
  to the sibling operands;
* the computation's result layout is pushed to the root's buffers.

A non-mandatory constraint never replaces a different existing one; a
mandatory one does.  Buffers left unconstrained get the default layout one
at a time, each followed by propagation.  Finally every instruction gets
its buffer's layout, and a ``copy`` is inserted wherever an operand's
layout differs from what its user asked for (and at the root, when it
differs from the result layout).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

from ...ir.module import Computation, Instruction
from ...ir.shape import (Layout, Shape, align_layouts, default_layout, delete_dimensions,
                         drop_degenerate_dimensions, has_degenerate_dimensions,
                         inserted_or_deleted_1_sized_dimensions, true_num_dimensions)

#: Opcodes XLA's LayoutAssignment::InstructionCanChangeLayout answers false
#: for: their result and operands of equal rank share one layout.
LAYOUT_PRESERVING = frozenset("""
abs acos acosh asin asinh add add-dependency and atan2 atanh bitcast-convert ceil clamp
count-leading-zeros compare complex concatenate convert cosine cosh all-gather all-gather-start
all-gather-done all-to-all collective-broadcast collective-permute divide dynamic-slice
dynamic-update-slice erf exponential exponential-minus-one fft floor imag is-finite log
log-plus-one logistic map maximum minimum multiply mulhi negate not opt-barrier or xor pad power
real reduce-precision reduce-window remainder reverse round-nearest-afz round-nearest-even rsqrt
scatter select select-and-scatter shift-left shift-right-arithmetic shift-right-logical sign sine
sinh slice sort topk sqrt cbrt subtract stochastic-convert tan tanh popcnt triangular-solve
cholesky while set-dimension-size all-reduce reduce-scatter all-reduce-start all-reduce-done
ragged-all-to-all scan
""".split())

#: Instructions whose result is (part of) an operand's buffer.
FORWARDING = frozenset({"bitcast", "get-tuple-element", "tuple"})


def _positions(operands: list[Instruction], x: Instruction) -> list[int]:
    """The indices of ``x`` among ``operands``, ascending.  A wide tuple (a
    training step's root returns every parameter) is searched in C: each
    of its operands asks once."""
    if len(operands) <= 8:
        return [i for i, o in enumerate(operands) if o is x]
    out = []
    i = -1
    try:
        while True:
            i = operands.index(x, i + 1)
            if operands[i] is x:
                out.append(i)
    except ValueError:
        pass
    return out


def can_change_layout(instr: Instruction) -> bool:
    return instr.opcode not in LAYOUT_PRESERVING


def rank(shape: Shape) -> int:
    return shape.rank if shape.is_array else 0


def at_most_rank1(shape: Shape) -> bool:
    if shape.is_tuple:
        return all(at_most_rank1(s) for s in shape.tuple_shapes)
    return not shape.is_array or shape.rank <= 1


def should_propagate_depth_first(instr: Instruction) -> bool:
    op = instr.opcode
    if op == "fusion":
        return instr.attrs.get("kind") == "kCustom"
    if op in ("gather", "scatter", "transpose"):
        return True
    if op == "reshape":
        a = instr.operands[0].shape
        return a.rank == 1 or inserted_or_deleted_1_sized_dimensions(a, instr.shape) is not None
    return False


def operand_always_propagates_forward(instr: Instruction) -> bool:
    return instr.opcode in ("reduce", "transpose") or not can_change_layout(instr)


def output_always_propagates_to_operands(instr: Instruction) -> bool:
    return False if instr.opcode == "reshape" else not can_change_layout(instr)


def operand_always_propagates_to_siblings(instr: Instruction) -> bool:
    return instr.opcode == "reduce" or not can_change_layout(instr)


@lru_cache(maxsize=65536)
def align_layouts_gpu(input_shape: Shape, output_shape: Shape) -> Layout | None:
    """GpuLayoutAssignment's ``AlignLayoutsGPU``: like ``AlignLayouts`` on
    the shapes without size-1 dimensions, but the size-1 dimensions keep
    their place relative to the others in the template layout (the
    default one: layout assignment clears layouts first) instead of going
    most major."""
    simple_in = drop_degenerate_dimensions(input_shape)
    simple_out = drop_degenerate_dimensions(output_shape.with_default_layout())
    aligned = align_layouts(simple_in, simple_out)
    if aligned is None:
        return None
    if not has_degenerate_dimensions(input_shape) and not has_degenerate_dimensions(output_shape):
        return aligned.layout
    dim_map = [i for i, n in enumerate(output_shape.dimensions) if n != 1]
    mapped = [dim_map[d] for d in aligned.minor_to_major]
    initial: list[int] = []
    follow: dict[int, list[int]] = {}
    last = -1
    for d in range(output_shape.rank - 1, -1, -1):  # the default template
        if output_shape.dimensions[d] == 1:
            (initial if last == -1 else follow.setdefault(last, [])).append(d)
        else:
            last = d
    m2m = list(initial)
    for d in mapped:
        m2m.append(d)
        m2m.extend(follow.get(d, []))
    return Layout(m2m)


@dataclass(eq=False)
class Constraint:
    kind: str                       # "buffer", "operand" or "result"
    layout: Layout | None
    mandatory: bool
    dfs: bool
    instr: Instruction | None = None
    operand_no: int = -1
    result_shape: Shape | None = None


class Propagation:
    """Layout assignment state for one computation.  ``reduction_threshold``
    is the GPU backend's minimum reduction size for making reductions row
    reductions (PropagateReductionLayoutToOperand); None disables it."""

    def __init__(self, comp: Computation, reduction_threshold: int | None = 32,
                 free_params: bool = False):
        self.comp = comp
        #: the computation's tuple parameters are unconstrained (XLA's first
        #: round for a non-entry computation, whose ComputationLayout is
        #: null): a layout asked of a get-tuple-element of one becomes the
        #: layout of that parameter element
        self.free_params = free_params
        self.order = comp.post_order()
        self.reduction_threshold = reduction_threshold
        self.buffers: dict[Instruction, Constraint] = {}
        self.operands: dict[tuple[Instruction, int], Constraint] = {}
        #: layouts of top-level array elements of tuple-shaped instructions
        #: that define them (a cuDNN call's result element 0)
        self.elements: dict[tuple[Instruction, int], Constraint] = {}
        self.added: list[Constraint] = []
        self.unconstrained: dict = {}
        for i in self.order:
            if self.defines_buffer(i):
                self.unconstrained[i] = None
            elif free_params and i.opcode == "parameter" and i.shape.is_tuple:
                # the parameter's element buffers, in index order (XLA's
                # LogicalBuffer ids: the parameter defines them where the
                # post order reaches it)
                for k, part in enumerate(i.shape.tuple_shapes):
                    if part.is_array:
                        self.unconstrained[(i, k)] = None

    # -- buffers --------------------------------------------------------------------
    @staticmethod
    def defines_buffer(instr: Instruction) -> bool:
        return instr.shape.is_array and instr.opcode not in FORWARDING

    def sources(self, instr: Instruction, index: tuple[int, ...] = ()) -> list[Instruction]:
        """The buffer-defining instructions a value comes from."""
        op = instr.opcode
        if op == "bitcast":
            return self.sources(instr.operands[0], index)
        if op == "get-tuple-element":
            return self.sources(instr.operands[0], (instr.tuple_index,) + index)
        if op == "tuple" and index:
            return self.sources(instr.operands[index[0]], index[1:])
        return [instr] if self.defines_buffer(instr) and not index else []

    def array_uses(self, instr: Instruction) -> list[tuple[Instruction, int]]:
        """Uses of ``instr``'s buffer by array-shaped aliases (bitcasts, and
        get-tuple-elements taking it back out of a tuple)."""
        out: list[tuple[Instruction, int]] = []
        aliases = [instr]
        k = 0
        while k < len(aliases):
            a = aliases[k]
            k += 1
            for user in a.users:
                op = user.opcode
                if op == "bitcast":
                    aliases.append(user)
                elif op == "tuple":
                    for i in _positions(user.operands, a):
                        aliases.extend(g for g in user.users if g.opcode == "get-tuple-element"
                                       and g.tuple_index == i)
                if op not in FORWARDING:
                    for j in _positions(user.operands, a):
                        out.append((user, j))
        return out

    # -- setting constraints --------------------------------------------------------------
    def push(self, c: Constraint) -> None:
        self.added.append(c)

    def set_buffer_layout(self, layout: Layout, instr: Instruction, mandatory: bool = True,
                          dfs: bool = True) -> None:
        self.unconstrained.pop(instr, None)
        existing = self.buffers.get(instr)
        if existing is not None:
            if existing.layout.minor_to_major == layout.minor_to_major:
                change = False
                if mandatory and not existing.mandatory:
                    existing.mandatory = change = True
                if dfs and not existing.dfs:
                    existing.dfs = change = True
                if not change:
                    return
            else:
                if not mandatory:
                    return
                existing.layout, existing.mandatory, existing.dfs = layout, mandatory, dfs
            if at_most_rank1(instr.shape):
                return
            self.push(existing)
            return
        c = Constraint("buffer", layout, mandatory, dfs, instr)
        self.buffers[instr] = c
        self.push(c)

    def set_operand_layout(self, layout: Layout, user: Instruction, operand_no: int,
                           mandatory: bool = True, dfs: bool = True) -> None:
        operand = user.operands[operand_no]
        if operand.shape.is_array and operand.shape.rank == 0:
            return
        if user.opcode == "dynamic-update-slice" and operand_no > 0 and not mandatory:
            dfs = False
        elif user.opcode == "reshape" and not mandatory and operand.opcode == "dynamic-slice":
            dfs = False
        key = (user, operand_no)
        existing = self.operands.get(key)
        if existing is not None:
            if existing.layout.minor_to_major == layout.minor_to_major:
                return
            if not mandatory:
                return
            existing.layout, existing.mandatory, existing.dfs = layout, mandatory, dfs
            self.push(existing)
            return
        c = Constraint("operand", layout, mandatory, dfs, user, operand_no)
        self.operands[key] = c
        self.push(c)

    def set_element_layout(self, layout: Layout, instr: Instruction, index: int,
                           mandatory: bool = True, dfs: bool = True) -> None:
        """A buffer constraint on element ``index`` of a tuple-shaped
        instruction (the buffer XLA's points-to analysis defines at
        ``{index}``).  It is not pushed to the instruction's operands (XLA
        leaves buffers inside a tuple alone), only to the users of the
        element."""
        key = (instr, index)
        self.unconstrained.pop(key, None)
        existing = self.elements.get(key)
        if existing is not None:
            if existing.layout.minor_to_major == layout.minor_to_major or not mandatory:
                return
            existing.layout, existing.mandatory, existing.dfs = layout, mandatory, dfs
            self.push(existing)
            return
        c = Constraint("element", layout, mandatory, dfs, instr, index)
        self.elements[key] = c
        self.push(c)

    def set_result_layout(self, shape: Shape) -> None:
        self.push(Constraint("result", None, True, True, result_shape=shape))

    # -- propagation ------------------------------------------------------------------------
    def propagate(self) -> None:
        work: deque[Constraint] = deque()

        def take_added():
            added, self.added = self.added, []
            for c in added:
                if c.dfs:
                    work.appendleft(c)
                else:
                    work.append(c)

        take_added()
        while work:
            c = work.popleft()
            if c.kind == "buffer":
                self.propagate_buffer(c)
            elif c.kind == "operand":
                self.propagate_operand(c)
            elif c.kind == "element":
                self.propagate_element(c)
            else:
                self.propagate_result(c)
            take_added()

    def propagate_result(self, c: Constraint) -> None:
        root = self.comp.root
        for index, leaf in c.result_shape.leaves():
            if leaf.is_array and leaf.layout is not None:
                for src in self.sources(root, index):
                    if not (src.opcode == "reduce" and src.shape.is_tuple):
                        self.set_buffer_layout(leaf.layout, src, mandatory=False, dfs=True)

    def propagate_buffer(self, c: Constraint) -> None:
        instr, layout = c.instr, c.layout
        if not instr.shape.is_array:
            return
        if not at_most_rank1(instr.shape):
            for k, operand in enumerate(instr.operands):
                if at_most_rank1(operand.shape):
                    continue
                if not can_change_layout(instr):
                    if operand.shape.is_array and operand.shape.rank == len(layout.minor_to_major):
                        self.set_operand_layout(layout, instr, k, mandatory=True, dfs=True)
                elif instr.opcode == "broadcast":
                    keep = set(instr.dimensions)
                    out = delete_dimensions(instr.shape.with_layout(layout),
                                            [d for d in range(instr.shape.rank) if d not in keep])
                    self.set_operand_layout(out.layout, instr, k, mandatory=True,
                                            dfs=should_propagate_depth_first(instr))
                elif operand.shape.is_array:
                    got = self.choose_operand_layout(layout, instr, k)
                    if got is not None:
                        self.set_operand_layout(got, instr, k,
                                                mandatory=output_always_propagates_to_operands(instr),
                                                dfs=should_propagate_depth_first(instr))
        for user, k in self.array_uses(instr):
            self.set_operand_layout(layout, user, k, mandatory=False, dfs=True)

    def propagate_element(self, c: Constraint) -> None:
        for gte in c.instr.users:
            if gte.opcode == "get-tuple-element" and gte.tuple_index == c.operand_no:
                for user, k in self.array_uses(gte):
                    self.set_operand_layout(c.layout, user, k, mandatory=False, dfs=True)

    def propagate_operand(self, c: Constraint) -> None:
        user, k, layout = c.instr, c.operand_no, c.layout
        operand = user.operands[k]
        if at_most_rank1(operand.shape):
            return
        for src in self.sources(operand):
            if not (src.opcode == "reduce" and src.shape.is_tuple):
                self.set_buffer_layout(layout, src, mandatory=False, dfs=True)
        if self.free_params and operand.opcode == "get-tuple-element" \
                and operand.operands[0].opcode == "parameter" and operand.shape.is_array:
            self.set_element_layout(layout, operand.operands[0], operand.tuple_index,
                                    mandatory=False, dfs=True)
        if not operand.shape.is_array:
            return
        if can_change_layout(user) and not user.shape.is_array and user.opcode != "reduce":
            return
        if user.opcode in FORWARDING:
            return
        r = operand.shape.rank
        if operand_always_propagates_to_siblings(user):
            if user.opcode == "concatenate":
                cd = user.dimensions[0]
                if any(s is not operand and s.shape.dimensions[cd] > operand.shape.dimensions[cd]
                       for s in user.operands):
                    return
            for j, sib in enumerate(user.operands):
                if sib is operand or not sib.shape.is_array or sib.shape.rank <= 1 \
                        or sib.shape.rank != r:
                    continue
                self.set_operand_layout(layout, user, j, mandatory=True, dfs=True)
            if user.shape.is_array and user.shape.rank == r and user.shape.rank > 1 \
                    and self.defines_buffer(user):
                self.set_buffer_layout(layout, user, mandatory=True, dfs=True)
            return
        if user.shape.is_array and user.shape.rank > 1 and self.defines_buffer(user):
            got = self.choose_output_layout(layout, user, k)
            if got is not None:
                self.set_buffer_layout(got, user, mandatory=operand_always_propagates_forward(user),
                                       dfs=should_propagate_depth_first(user))

    # -- layout choices ------------------------------------------------------------------------
    def choose_operand_layout(self, out: Layout, instr: Instruction, k: int) -> Layout | None:
        """``ChooseOperandLayoutFromOutputLayout``."""
        operand = instr.operands[k]
        if operand.shape.rank and operand.shape.rank == instr.shape.rank \
                and not can_change_layout(instr):
            return out
        if instr.opcode == "reshape":
            if true_num_dimensions(operand.shape) == 1 and true_num_dimensions(instr.shape) == 1:
                return None
            got = align_layouts_gpu(instr.shape.with_layout(out), operand.shape)
            if got is not None:
                return got
            got = align_layouts(instr.shape.with_layout(out), operand.shape.with_default_layout())
            return got.layout if got is not None else None
        if instr.opcode == "transpose":
            dims = instr.dimensions
            return Layout([dims[d] for d in out.minor_to_major])
        if instr.opcode == "reduce" and not instr.shape.is_tuple and self.reduction_threshold is not None:
            size = 1
            for d in instr.dimensions:
                size *= operand.shape.dimensions[d]
            if size >= self.reduction_threshold:
                reduced = set(instr.dimensions)
                kept = [d for d in range(operand.shape.rank) if d not in reduced]
                m2m = list(reversed(instr.dimensions)) + [kept[d] for d in out.minor_to_major]
                return Layout(m2m)
        return None

    def choose_output_layout(self, operand_layout: Layout, user: Instruction, k: int) -> Layout | None:
        """``ChooseOutputLayoutFromOperandLayout``."""
        operand = user.operands[k]
        if user.opcode == "reduce" and user.shape.is_tuple:
            return None
        if operand.shape.rank and operand.shape.rank == user.shape.rank and not can_change_layout(user):
            return operand_layout
        if user.opcode == "reshape":
            if true_num_dimensions(operand.shape) == 1 and true_num_dimensions(user.shape) == 1:
                return None
            got = align_layouts_gpu(operand.shape.with_layout(operand_layout), user.shape)
            if got is not None:
                return got
            got = align_layouts(operand.shape.with_layout(operand_layout),
                                user.shape.with_default_layout())
            return got.layout if got is not None else None
        if user.opcode == "transpose":
            inv = [0] * user.shape.rank
            for i, d in enumerate(user.dimensions):
                inv[d] = i
            return Layout([inv[d] for d in operand_layout.minor_to_major])
        return None

    # -- finishing ------------------------------------------------------------------------------
    def constrain_remaining(self) -> None:
        """Give each still unconstrained buffer its default layout (a
        constant: its literal's layout), propagating after each."""
        # The first remaining buffer in post order, from a cursor: nothing is
        # ever added to ``unconstrained``, and ``next(iter(dict))`` would step
        # over every entry popped so far each time (quadratic).
        unconstrained = self.unconstrained
        keys = list(unconstrained)
        k = 0
        while unconstrained:
            while keys[k] not in unconstrained:
                k += 1
            instr = keys[k]
            if isinstance(instr, tuple):  # a free parameter's element
                param, index = instr
                self.set_element_layout(default_layout(param.shape.tuple_shapes[index].rank),
                                        param, index, mandatory=False)
                self.propagate()
                self.unconstrained.pop(instr, None)
                continue
            layout = instr.shape.layout if instr.opcode == "constant" and instr.shape.layout \
                is not None else default_layout(instr.shape.rank)
            self.set_buffer_layout(layout, instr, mandatory=False)
            self.propagate()
            self.unconstrained.pop(instr, None)

    def assign(self, result_shape: Shape | None,
               on_copy: Callable[[Instruction, Instruction], None]) -> bool:
        """Apply the layouts; insert copies for mismatching operands and
        result.  Returns True if any shape changed or a copy was added."""
        from ..dfs_rewrite import add_instruction
        changed = False
        for instr in self.order:
            new_shape = self._assigned_shape(instr)
            if new_shape != instr.shape:
                instr.shape = new_shape
                changed = True
            for k in range(len(instr.operands)):
                c = self.operands.get((instr, k))
                operand = instr.operands[k]
                if c is None or not operand.shape.is_array \
                        or operand.shape.minor_to_major == c.layout.minor_to_major:
                    continue
                copy = add_instruction(self.comp, Instruction(
                    "copy", operand.shape.with_layout(c.layout), [operand]))
                instr.set_operand(k, copy)
                on_copy(copy, instr)
                changed = True
                if instr.opcode == "tuple":
                    instr.shape = Shape.tuple(o.shape for o in instr.operands)
        root = self.comp.root
        if result_shape is not None and root is not None:
            new_root = self._copy_to_layout(root, result_shape, on_copy)
            if new_root is not root:
                self.comp.root = new_root
                changed = True
        return changed

    def _copy_to_layout(self, instr: Instruction, target: Shape,
                        on_copy: Callable[[Instruction, Instruction | None], None]) -> Instruction:
        """``CreateCopyWithNewLayout`` where ``instr``'s layout differs from
        ``target``'s: an array gets a copy; a tuple is copied element by
        element (a get-tuple-element of each element, copies of those that
        differ, a new tuple) -- in the entry only: elsewhere hlorun's result
        layout is a default it chose, while XLA lets a while body or a
        branch keep the layouts its root computes (CalculateComputationLayout).
        Returns ``instr`` itself when nothing differs."""
        from ..dfs_rewrite import add_instruction
        if instr.shape.is_array:
            if not target.is_array or target.layout is None \
                    or instr.shape.minor_to_major == target.layout.minor_to_major:
                return instr
            copy = add_instruction(self.comp, Instruction(
                "copy", instr.shape.with_layout(target.layout), [instr]))
            on_copy(copy, None)
            return copy
        if not self.comp.is_entry or not (instr.shape.is_tuple and target.is_tuple) \
                or not self._layouts_differ(
                instr.shape, target):
            return instr
        elements = []
        for i, (have, want) in enumerate(zip(instr.shape.tuple_shapes, target.tuple_shapes)):
            gte = add_instruction(self.comp, Instruction(
                "get-tuple-element", have, [instr], "", {"index": str(i)}))
            elements.append(self._copy_to_layout(gte, want, on_copy)
                            if self._layouts_differ(have, want) else gte)
        return add_instruction(self.comp, Instruction(
            "tuple", Shape.tuple(e.shape for e in elements), elements))

    @staticmethod
    def _layouts_differ(have: Shape, want: Shape) -> bool:
        for (_, a), (_, b) in zip(have.leaves(), want.leaves()):
            if a.is_array and b.is_array and b.layout is not None \
                    and a.minor_to_major != b.layout.minor_to_major:
                return True
        return False

    def _assigned_shape(self, instr: Instruction) -> Shape:
        s = instr.shape
        if self.defines_buffer(instr):
            c = self.buffers.get(instr)
            layout = c.layout if c is not None else default_layout(s.rank)
            return s.with_layout(s.layout.with_minor_to_major(layout.minor_to_major)
                                 if s.layout is not None else layout)
        if instr.opcode == "tuple":
            return Shape.tuple(o.shape for o in instr.operands)
        if s.is_tuple and any((instr, i) in self.elements for i in range(len(s.tuple_shapes))):
            parts = []
            for i, part in enumerate(s.tuple_shapes):
                c = self.elements.get((instr, i))
                parts.append(part.with_layout(c.layout) if c is not None and part.is_array
                             else part.with_default_layout_if_missing())
            return Shape.tuple(parts)
        if instr.opcode == "get-tuple-element":
            return instr.operands[0].shape.tuple_shapes[instr.tuple_index]
        if instr.opcode == "bitcast":
            return s
        return s.with_default_layout_if_missing()
