"""XLA's ``DfsHloRewriteVisitor``, for passes written as XLA writes them.

The visiting order decides which instructions a rewrite sees and the order
in which new instructions (and so their names) are created, so it follows
``HloComputation::Accept`` / ``PostOrderDFS`` exactly: per non-fusion
computation (callees first), first every unreachable root (dead, no control
successors, in instruction order), then the root; depth first with an
explicit stack, the first operand's subtree first (operands are pushed
when their user is first reached, so an operand replaced later is seen in
its new form by users reached afterwards); an instruction is handled after
its operands, once; instructions created during the walk are only visited if
something not yet expanded reaches them (``set_visited`` prevents that).

Handlers are ``handle_<opcode>`` methods ('-' -> '_'), falling back to
``handle_elementwise_unary`` / ``handle_elementwise_binary`` for the opcodes
XLA routes there, then ``default_action``.  ``should_process`` filters.
"""

from __future__ import annotations

from typing import Any

from ..ir import edit
from ..ir.attrs import format_int_list
from ..ir.module import Computation, Instruction, Module, has_opcode, module_has_opcode
from ..ir.opcode import ELEMENTWISE_BINARY as _BINARY, ELEMENTWISE_UNARY as _UNARY
from ..ir.shape import Shape

#: Opcodes whose XLA handler defaults to HandleElementwiseUnary / Binary
#: (xla/hlo/ir/dfs_hlo_visitor.h).
ELEMENTWISE_UNARY = _UNARY | {"domain"}
ELEMENTWISE_BINARY = _BINARY

_VISITING, _VISITED = 1, 2


def nonfusion_computations(module: Module) -> list[Computation]:
    """``HloModule::MakeNonfusionComputations``: post order, without the
    computations that fusion instructions call."""
    fused: set[Computation] = set()
    order = module.computation_post_order(fused)  # (one scan finds both)
    return [c for c in order if c not in fused]


#: visitor class -> opcode -> handler function (looked up once per class:
#: the walk dispatches every instruction of every run)
_HANDLERS: dict[type, dict] = {}


def _class_handler(cls: type, opcode: str):
    """``handle_<opcode>`` of ``cls``, else ``handle_elementwise_unary`` /
    ``handle_elementwise_binary`` for the opcodes XLA routes there, else
    ``default_action`` (plain functions, called with the visitor)."""
    h = getattr(cls, "handle_" + opcode.replace("-", "_"), None)
    if h is not None:
        return h
    if opcode in ELEMENTWISE_UNARY:
        return getattr(cls, "handle_elementwise_unary", cls.default_action)
    if opcode in ELEMENTWISE_BINARY:
        return getattr(cls, "handle_elementwise_binary", cls.default_action)
    return cls.default_action


class DfsRewriteVisitor:
    """Subclass, add ``handle_*`` methods, call :meth:`run_on_module`."""

    #: The only opcodes whose handlers can change anything (every other
    #: opcode's handler and ``default_action`` do nothing), or None.  With
    #: it, computations (and modules) without such an instruction are not
    #: walked: nothing there could change.
    only_opcodes: frozenset[str] | None = None

    def __init__(self) -> None:
        self.changed = False
        self._state: dict[Instruction, int] = {}

    # -- overridables ------------------------------------------------------------
    def should_process(self, instr: Instruction) -> bool:
        return True

    def default_action(self, instr: Instruction) -> None:
        return None

    # -- state --------------------------------------------------------------------
    def set_visited(self, instr: Instruction) -> None:
        self._state[instr] = _VISITED

    def mark_changed(self) -> None:
        self.changed = True

    # -- dispatch -------------------------------------------------------------------
    def _handler(self, opcode: str):
        """The bound handler of ``opcode`` (see :func:`_class_handler`)."""
        return _class_handler(type(self), opcode).__get__(self)

    # -- walking ----------------------------------------------------------------------
    def run_on_module(self, module: Module) -> bool:
        ops = self.only_opcodes
        if ops is not None and not module_has_opcode(module, ops):
            return self.changed
        for comp in nonfusion_computations(module):
            if ops is not None and not has_opcode(comp, ops):
                continue
            self.run_on_computation(comp)
        return self.changed

    def run_on_computation(self, comp: Computation) -> None:
        roots = [i for i in comp._instructions
                 if not i._users and i is not comp.root and not i.control_successors]
        for r in roots:
            if r.parent is comp:
                self._dfs(r)
        if comp.root is not None:
            self._dfs(comp.root)

    def _dfs(self, root: Instruction) -> None:
        state = self._state
        get = state.get
        cls = type(self)
        handlers = _HANDLERS.setdefault(cls, {})
        # the base class's should_process accepts everything: skip the call
        should = None if cls.should_process is DfsRewriteVisitor.should_process \
            else self.should_process
        visiting, visited = _VISITING, _VISITED
        stack = [root]
        push = stack.append
        pop = stack.pop
        while stack:
            cur = stack[-1]
            st = get(cur)
            if st is None:
                if cur.parent is None:
                    pop()
                    continue
                state[cur] = visiting
                # XLA pushes the operands, then the control predecessors,
                # and reverses what it pushed (the first operand is expanded
                # first, as a recursive walk would): pushed here in that
                # reversed order directly
                preds = cur.control_predecessors
                if preds:
                    for op in reversed(preds):
                        if get(op) != visited:
                            push(op)
                ops = cur.operands
                if len(ops) == 1:
                    op = ops[0]
                    s = get(op)
                    if s is None:
                        push(op)
                    elif s == visiting:
                        raise ValueError(f"cycle through {op.name} and {cur.name}")
                else:
                    for op in reversed(ops):
                        s = get(op)
                        if s is None:
                            push(op)
                        elif s == visiting:
                            raise ValueError(f"cycle through {op.name} and {cur.name}")
                continue
            pop()
            if st == visiting and cur.parent is not None:
                if should is None or should(cur):
                    op = cur.opcode
                    fn = handlers.get(op)
                    if fn is None:
                        fn = handlers[op] = _class_handler(cls, op)
                    if fn is not _NOOP:
                        fn(self, cur)
                state[cur] = visited

    # -- rewriting ---------------------------------------------------------------------
    def replace_instruction(self, old: Instruction, new: Instruction) -> None:
        """``DfsHloRewriteVisitor::ReplaceInstruction``: control
        dependencies relayed, metadata carried over, the old name kept for
        the same opcode, and dead operands removed."""
        replace_instruction(old, new)
        self.changed = True

    def replace_reduce(self, reduce: Instruction, inputs: list, shape: Shape,
                       dimensions: list[int]) -> Instruction:
        """Replace ``reduce`` by a reduce of ``inputs`` (same init values and
        reducer) with result ``shape`` over ``dimensions``, bitcast back to
        the old shape (:func:`as_shape`); returns the replacement."""
        n = len(reduce.operands) // 2
        new = Instruction("reduce", shape, list(inputs) + list(reduce.operands[n:]), "",
                          {"dimensions": format_int_list(dimensions),
                           "to_apply": reduce.attrs["to_apply"]})
        new = as_shape(reduce.parent, new, reduce.shape)
        self.replace_instruction(reduce, new)
        return new


#: The base class's ``default_action``, which does nothing: the walk does
#: not call it (most instructions of a module have no handler).
_NOOP = DfsRewriteVisitor.default_action


# ---------------------------------------------------------------------------
# Instruction creation and replacement with XLA's conventions
# ---------------------------------------------------------------------------


def add_instruction(comp: Computation, instr: Instruction, metadata_from: Instruction | None = None
                    ) -> Instruction:
    """``HloComputation::AddInstruction(instr, &metadata)``: a module-unique
    name from the opcode (``bitcast``, ``bitcast.1``, ...) and, if given,
    the metadata of ``metadata_from``."""
    if metadata_from is not None and "metadata" in metadata_from.attrs:
        instr.attrs["metadata"] = metadata_from.attrs["metadata"]
    return comp.add_instruction(instr, instr.name or instr.opcode)


def as_shape(comp: Computation, new: Instruction, shape: Shape) -> Instruction:
    """``new`` (not yet in ``comp``) seen as ``shape``: itself when the shapes
    agree, else ``new`` added to ``comp`` and bitcast back -- element by
    element (get-tuple-element, bitcast, tuple) for a tuple-shaped result.
    The returned instruction is not added (a replacement for an old one)."""
    if new.shape == shape:
        return new
    wrapped = add_instruction(comp, new)
    if not new.shape.is_tuple:
        return Instruction("bitcast", shape, [wrapped])
    parts = []
    for k, sub in enumerate(new.shape.tuple_shapes):
        gte = add_instruction(comp, Instruction("get-tuple-element", sub, [wrapped], "",
                                                {"index": str(k)}))
        parts.append(add_instruction(comp, Instruction("bitcast", shape.tuple_shapes[k], [gte])))
    return Instruction("tuple", shape, parts)


def make(opcode: str, shape: Shape, operands: list[Instruction], attrs: dict[str, Any] | None = None,
         metadata_from: Instruction | None = None, comp: Computation | None = None) -> Instruction:
    """Create an instruction in ``comp`` (default: the operands' computation)."""
    comp = comp or operands[0].parent
    assert comp is not None
    return add_instruction(comp, Instruction(opcode, shape, operands, "", dict(attrs or {})),
                           metadata_from)


def make_bitcast(operand: Instruction, shape: Shape, metadata_from: Instruction | None = None
                 ) -> Instruction:
    """``MakeBitcastHlo(operand, shape, &metadata)``."""
    return make("bitcast", shape, [operand], metadata_from=metadata_from)


def make_copy(operand: Instruction, shape: Shape) -> Instruction:
    """``MakeCopyHlo(operand, shape)`` (no metadata)."""
    return make("copy", shape, [operand])


def make_transpose(operand: Instruction, shape: Shape, dimensions, metadata_from=None) -> Instruction:
    return make("transpose", shape, [operand], {"dimensions": _int_list(dimensions)}, metadata_from)


def make_reshape(operand: Instruction, shape: Shape, metadata_from=None) -> Instruction:
    return make("reshape", shape, [operand], metadata_from=metadata_from)


def _int_list(values) -> str:
    return "{" + ",".join(str(int(v)) for v in values) + "}"


def replace_instruction(old: Instruction, new: Instruction, remove_unused_operands: bool = True
                        ) -> None:
    """``HloComputation::ReplaceInstructionWithDifferentShape`` with
    relayed control dependencies (what DfsHloRewriteVisitor uses):
    metadata carried over, the old name kept for the same opcode, dead
    operands removed (:func:`hlorun.ir.edit.replace_instruction`)."""
    comp = old.parent
    assert comp is not None
    if new.parent is None:
        add_instruction(comp, new)
    edit.replace_instruction(comp, old, new, relay_control_dependency=True,
                             remove_unused_operands=remove_unused_operands, check_shape=False)
