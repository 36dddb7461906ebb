"""The HLO IR: Instruction, Computation, Module.

Use-def information is kept consistent by construction: operands are only
changed through methods that update the operands' user sets, so ``users`` is
an O(1) lookup and ``replace_all_uses_with`` is O(number of uses).

Attributes are stored in ``Instruction.attrs`` in the order they were given,
as the exact text XLA prints after ``key=`` (``"{0,1}"``, ``"kLoop"``,
``'"__cublas$gemm"'``), except for references, which are objects:
a :class:`Computation` (``to_apply=%add``) or a list of them
(``branch_computations={%a, %b}``).  Typed access goes through the helpers in
:mod:`hlorun.ir.attrs` (``instr.int_list("dimensions")`` ...), which parse on
demand and cache by text, so parsing a 100k-instruction module stays cheap
and printing loses nothing.
"""

from __future__ import annotations

import itertools
import re
from typing import Any, Callable, Iterable, Iterator, Sequence

from . import attrs as _attrs
from .shape import Shape

_ids = itertools.count(1)
_parse_int_list = _attrs.parse_int_list

#: The change journal's clock (:mod:`hlorun.ir.changes`).  Every mutation
#: through the methods below stamps the instructions whose state it changes,
#: and their computations, with ``EPOCH[0]`` (``instr.stamp``,
#: ``comp.stamp``); a :class:`~hlorun.ir.changes.ModuleTracker` scan moves
#: the clock on and re-reads only what was stamped since its previous scan.
#: Direct slot writes and in-place edits of the containers of scanned
#: instructions are stamped by the tracker's hooks (see there).
EPOCH = [1]
#: ``EPOCH[0]`` at the last scan of any tracker.  A scanned instruction
#: stamped before it is unchanged since: its first change after it records
#: its pre-image (:func:`pre_image`) in :data:`PENDING`, which the next scan
#: hands to the trackers (copy on write: trackers keep no rows of their
#: own).  ``PENDING`` is replaced by each scan: look it up as
#: ``module.PENDING`` at the time of use.
SINCE = [0]
PENDING: dict = {}


def pre_image(i: "Instruction") -> tuple:
    """What a tracker records of ``i`` (its row without the container)."""
    return (i.name, i.opcode, i.shape, i.parameter_number, i.literal, i.parent, dict(i.attrs),
            tuple(i.operands), tuple(i._users), tuple(i.control_predecessors))


def stamp(*instrs: "Instruction") -> None:
    """Record that ``instrs`` changed (their own and their computations'
    stamps; a scanned instruction's first change since the last scan
    records its pre-image first)."""
    e = EPOCH[0]
    s = SINCE[0]
    for i in instrs:
        if i.stamp < s and i.__class__ is not Instruction:
            PENDING[i] = pre_image(i)
        _set_stamp(i, e)
        p = i.parent
        if p is not None:
            _set_cstamp(p, e)


class _NoLinks(list):
    """The shared, empty, read-only control list of instructions that have
    no control dependencies (new ones and scanned ones; two empty lists per
    instruction were ~10% of a big module's memory).  Add dependencies with
    ``add_control_dependency_to`` or assign a new list."""

    __slots__ = ()

    def _read_only(self, *args, **kw):
        raise TypeError("this control list is shared and empty: use add_control_dependency_to "
                        "or assign a new list")

    append = extend = insert = pop = remove = clear = sort = reverse = _read_only
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only

    def __reduce__(self):
        return (list, ())


NO_LINKS = _NoLinks()


class Instruction:
    __slots__ = (
        "name", "opcode", "shape", "operands", "_users", "attrs", "parent",
        "control_predecessors", "control_successors", "parameter_number",
        "literal", "pos", "id", "stamp", "__weakref__",
    )

    def __init__(self, opcode: str, shape: Shape, operands: Sequence["Instruction"] = (),
                 name: str = "", attrs: dict[str, Any] | None = None):
        self.name = name
        self.opcode = opcode
        self.shape = shape
        self.operands: list[Instruction] = []
        #: the users, in the order they started using this instruction: a
        #: tuple (the shared ``()`` when none) up to :data:`USERS_TUPLE_MAX`,
        #: an insertion-ordered dict (user -> None) above; only
        #: :func:`add_user` / :func:`drop_user` change it (a 1-user dict was
        #: 240 B, a third of a parsed instruction; a 1-user tuple is 64 B)
        self._users: tuple[Instruction, ...] | dict[Instruction, None] = ()
        self.attrs: dict[str, Any] = attrs if attrs is not None else {}
        self.parent: Computation | None = None
        # the shared empty control lists (NO_LINKS) until a dependency is
        # added: two fresh empty lists were 128 B of each new instruction
        self.control_predecessors: list[Instruction] = NO_LINKS
        self.control_successors: list[Instruction] = NO_LINKS
        self.parameter_number: int | None = None
        self.literal = None  # hlorun.ir.literal.Literal for constants
        self.pos = -1  # offset of the definition in the parsed text, or -1
        self.id = next(_ids)
        #: ``EPOCH[0]`` when this instruction last changed
        self.stamp = e = EPOCH[0]
        for op in operands:
            self.operands.append(op)
            add_user(op, self)
            _set_stamp(op, e)  # its users changed
            p = op.parent
            if p is not None:
                _set_cstamp(p, e)

    # -- identity / display ------------------------------------------------
    def __repr__(self) -> str:
        return f"<{self.opcode} {self.name}: {self.shape}>"

    # hash/eq are identity (object defaults): fast and what passes want.

    @property
    def line(self) -> int:
        """1-based line of the definition in the parsed text (0 if unknown)."""
        return self.location()[0]

    @property
    def column(self) -> int:
        return self.location()[1]

    def location(self) -> tuple[int, int]:
        module = self.parent.module if self.parent is not None else None
        if self.pos < 0 or module is None or module.source is None:
            return 0, 0
        return module.line_col(self.pos)

    # -- users ---------------------------------------------------------------
    @property
    def users(self) -> list["Instruction"]:
        return list(self._users)

    @property
    def user_count(self) -> int:
        return len(self._users)

    def has_users(self) -> bool:
        return bool(self._users)

    # -- operand edits (keep users consistent) ---------------------------------
    def add_operand(self, op: "Instruction") -> None:
        self.operands.append(op)
        add_user(op, self)
        stamp(self, op)

    def set_operand(self, i: int, new: "Instruction") -> None:
        old = self.operands[i]
        if old is new:
            return
        self.operands[i] = new
        add_user(new, self)
        if old not in self.operands:
            drop_user(old, self)
        stamp(self, old, new)

    def replace_operand_with(self, old: "Instruction", new: "Instruction") -> None:
        """Replace every occurrence of ``old`` among the operands."""
        if old is new:
            return
        ops = self.operands
        i = -1
        try:  # list.index scans in C: a wide tuple's operands stay cheap
            while True:
                i = ops.index(old, i + 1)
                if ops[i] is old:
                    ops[i] = new
        except ValueError:
            pass
        add_user(new, self)
        drop_user(old, self)
        stamp(self, old, new)

    def replace_operands(self, new_operands: Sequence["Instruction"]) -> None:
        for o in self.operands:
            drop_user(o, self)
        stamp(self, *self.operands)
        self.operands = list(new_operands)
        for o in self.operands:
            add_user(o, self)
        stamp(*self.operands)

    def drop_all_operands(self) -> None:
        for o in self.operands:
            drop_user(o, self)
        stamp(self, *self.operands)
        self.operands = []

    def replace_all_uses_with(self, new: "Instruction",
                              keep: Callable[["Instruction"], bool] | None = None) -> bool:
        """Make every user of ``self`` (except those ``keep`` rejects) use
        ``new`` instead; the parent's root moves too.  Returns True if
        anything changed."""
        changed = False
        for user in list(self._users):
            if keep is not None and not keep(user):
                continue
            user.replace_operand_with(self, new)
            changed = True
        comp = self.parent
        if comp is not None and comp.root is self and (keep is None):
            comp.root = new
            changed = True
        return changed

    # -- control dependencies ---------------------------------------------------
    def add_control_dependency_to(self, successor: "Instruction") -> None:
        if successor not in self.control_successors:
            if self.control_successors is NO_LINKS:
                self.control_successors = []
            if successor.control_predecessors is NO_LINKS:
                successor.control_predecessors = []
            self.control_successors.append(successor)
            successor.control_predecessors.append(self)
            stamp(self, successor)

    def drop_all_control_deps(self) -> None:
        if not (self.control_predecessors or self.control_successors):
            return
        for p in self.control_predecessors:
            p.control_successors.remove(self)
        for s in self.control_successors:
            s.control_predecessors.remove(self)
        stamp(self, *self.control_predecessors, *self.control_successors)
        self.control_predecessors = NO_LINKS
        self.control_successors = NO_LINKS

    # -- attributes ---------------------------------------------------------------
    def called_computations(self) -> list["Computation"]:
        """Called computations in XLA's order (while: body, condition)."""
        out: list[Computation] = []
        if self.opcode == "while":
            b, c = self.attrs.get("body"), self.attrs.get("condition")
            return [x for x in (b, c) if isinstance(x, Computation)]
        for v in self.attrs.values():
            if type(v) is str:  # most values: skip the isinstance checks
                continue
            if isinstance(v, Computation):
                out.append(v)
            elif isinstance(v, list) and v and isinstance(v[0], Computation):
                out.extend(v)
        return out

    @property
    def to_apply(self) -> "Computation | None":
        v = self.attrs.get("to_apply")
        return v if isinstance(v, Computation) else None

    @property
    def fused_computation(self) -> "Computation | None":
        v = self.attrs.get("calls")
        if isinstance(v, Computation):
            return v
        if isinstance(v, list) and len(v) == 1:
            return v[0]
        return None

    def get(self, key: str, default: Any = None) -> Any:
        return self.attrs.get(key, default)

    @property
    def custom_call_target(self) -> str | None:
        v = self.attrs.get("custom_call_target")
        if v is None:
            return None
        return _attrs.unquote(v)

    @property
    def fusion_kind(self) -> str | None:
        return self.attrs.get("kind")

    @property
    def metadata(self) -> dict[str, Any]:
        text = self.attrs.get("metadata")
        return _attrs.parse_metadata(text) if text else {}

    @property
    def op_name(self) -> str | None:
        return self.metadata.get("op_name")

    @property
    def backend_config(self) -> Any:
        """The backend config as parsed JSON (dict), or None."""
        text = self.attrs.get("backend_config")
        return _attrs.parse_backend_config(text) if text else None

    def set_backend_config(self, config: Any) -> None:
        if config is None:
            self.attrs.pop("backend_config", None)
        else:
            self.attrs["backend_config"] = _attrs.format_backend_config(config)

    def int_list(self, key: str) -> tuple[int, ...]:
        v = self.attrs.get(key)
        return _parse_int_list(v) if v is not None else ()

    def set_int_list(self, key: str, values: Iterable[int]) -> None:
        self.attrs[key] = "{" + ",".join(str(int(v)) for v in values) + "}"

    def int_attr(self, key: str, default: int | None = None) -> int | None:
        v = self.attrs.get(key)
        return int(v) if v is not None else default

    @property
    def dimensions(self) -> tuple[int, ...]:
        return self.int_list("dimensions")

    @property
    def tuple_index(self) -> int:
        return int(self.attrs["index"])

    @property
    def computation(self) -> "Computation | None":
        return self.parent

    def operand_index(self, op: "Instruction") -> int:
        return self.operands.index(op)

    def is_root(self) -> bool:
        return self.parent is not None and self.parent.root is self


_set_stamp = Instruction.stamp.__set__  # type: ignore[attr-defined]  # no hooks

#: the most users kept in a tuple (more: a dict, back to a tuple at half)
USERS_TUPLE_MAX = 8


def add_user(op: Instruction, user: Instruction) -> None:
    """Make ``user`` the last user of ``op`` unless it is one already.  A
    tuple is replaced (a slot write: on a scanned instruction the journal's
    ``__setattr__`` records its pre-image and stamps it); a dict is edited
    in place after :func:`stamp`."""
    us = op._users
    if us.__class__ is tuple:
        if user not in us:
            op._users = us + (user,) if len(us) < USERS_TUPLE_MAX else dict.fromkeys(us + (user,))
    elif user not in us:
        stamp(op)
        us[user] = None


def drop_user(op: Instruction, user: Instruction) -> None:
    """``user`` no longer uses ``op`` (nothing if it did not)."""
    us = op._users
    if us.__class__ is tuple:
        if user in us:
            op._users = () if len(us) == 1 else tuple([u for u in us if u is not user])
    elif user in us:
        if len(us) <= USERS_TUPLE_MAX // 2 + 1:
            op._users = tuple([u for u in us if u is not user])
        else:
            stamp(op)
            del us[user]


class Computation:
    """An ordered set of instructions with a root and numbered parameters."""

    __slots__ = ("name", "_instructions", "root", "parameters", "module",
                 "is_entry", "execution_thread", "pos", "_names", "stamp",
                 "__weakref__")

    def __init__(self, name: str):
        self.name = name
        self._instructions: dict[Instruction, None] = {}
        self.root: Instruction | None = None
        self.parameters: list[Instruction | None] = []
        self.module: Module | None = None
        self.is_entry = False
        self.execution_thread: str | None = None  # None == "main"
        self.pos = -1
        self._names: dict[str, Instruction] | None = None
        #: ``EPOCH[0]`` when an instruction of this computation, or (once a
        #: tracker has scanned it) one of its own fields, last changed
        self.stamp = EPOCH[0]

    def __repr__(self) -> str:
        return f"<computation {self.name}: {len(self._instructions)} instructions>"

    @property
    def line(self) -> int:
        if self.pos < 0 or self.module is None or self.module.source is None:
            return 0
        return self.module.line_col(self.pos)[0]

    # -- contents --------------------------------------------------------------
    @property
    def instructions(self) -> list[Instruction]:
        """Instructions in insertion order (use ``post_order`` for a
        def-before-use order)."""
        return list(self._instructions)

    def __iter__(self) -> Iterator[Instruction]:
        return iter(list(self._instructions))

    def __len__(self) -> int:
        return len(self._instructions)

    @property
    def instruction_count(self) -> int:
        return len(self._instructions)

    def __contains__(self, instr: Instruction) -> bool:
        return instr in self._instructions

    def add_instruction(self, instr: Instruction, name: str | None = None) -> Instruction:
        """Add ``instr`` (giving it a module-unique name based on ``name`` or
        its opcode when it has none)."""
        if instr.parent is not None and instr.parent is not self:
            raise ValueError(f"{instr.name} already belongs to {instr.parent.name}")
        if name is not None or not instr.name:
            base = name or instr.name or instr.opcode
            instr.name = self.module.unique_name(base) if self.module else base
        elif self.module is not None:
            self.module.reserve_name(instr.name)
        self._instructions[instr] = None
        instr.parent = self
        stamp(instr)
        if self._names is not None:
            self._names[instr.name] = instr
        if instr.opcode == "parameter" and instr.parameter_number is not None:
            n = instr.parameter_number
            while len(self.parameters) <= n:
                self.parameters.append(None)
            self.parameters[n] = instr
        return instr

    def remove_instruction(self, instr: Instruction) -> None:
        """Remove an instruction that has no users (operands released)."""
        if instr._users:
            raise ValueError(f"cannot remove {instr.name}: it still has users "
                             f"{', '.join(u.name for u in instr._users)}")
        if instr is self.root:
            raise ValueError(f"cannot remove the root {instr.name}")
        instr.drop_all_operands()
        instr.drop_all_control_deps()
        self._instructions.pop(instr, None)
        stamp(instr)
        if self._names is not None:
            self._names.pop(instr.name, None)
        if instr.opcode == "parameter" and instr.parameter_number is not None:
            n = instr.parameter_number
            if n < len(self.parameters) and self.parameters[n] is instr:
                self.parameters[n] = None
                while self.parameters and self.parameters[-1] is None:
                    self.parameters.pop()
        # (A removed instruction can live on (pre-images, remarks'
        # callers) until the next scan, and a pass removes thousands: it
        # keeps no user container.)
        instr._users = ()
        instr.parent = None

    def replace_instruction(self, old: Instruction, new: Instruction) -> Instruction:
        """Add ``new`` if needed, redirect all uses of ``old`` to it, and
        remove ``old``.  Returns ``new``."""
        if new.parent is None:
            self.add_instruction(new, new.name or None)
        old.replace_all_uses_with(new)
        for p in list(old.control_predecessors):
            p.add_control_dependency_to(new)
        for s in list(old.control_successors):
            new.add_control_dependency_to(s)
        self.remove_instruction(old)
        return new

    def get_instruction(self, name: str) -> Instruction | None:
        if self._names is None:
            self._names = {i.name: i for i in self._instructions}
        got = self._names.get(name)
        if got is None or got.parent is not self or got.name != name:
            self._names = {i.name: i for i in self._instructions}
            got = self._names.get(name)
        return got

    def parameter(self, n: int) -> Instruction:
        p = self.parameters[n] if n < len(self.parameters) else None
        if p is None:
            raise IndexError(f"computation {self.name} has no parameter {n}")
        return p

    @property
    def num_parameters(self) -> int:
        return len(self.parameters)

    def program_shape(self) -> tuple[list[Shape], Shape]:
        params = [p.shape if p is not None else Shape.tuple(()) for p in self.parameters]
        return params, self.root.shape if self.root is not None else Shape.tuple(())

    # -- orders --------------------------------------------------------------------
    def post_order(self) -> list[Instruction]:
        """XLA's ``MakeInstructionPostOrder``: DFS from every instruction
        without users (in insertion order), operands first-to-last, control
        predecessors after operands.  Defines before uses."""
        order: list[Instruction] = []
        visited: dict[Instruction, int] = {}  # 1 visiting, 2 done
        push_order = order.append
        get = visited.get
        for root in self._instructions:
            if root._users or root in visited:
                continue
            # Operands are pushed even when already done (in C, reversed);
            # a done instruction reaching the top is just dropped, which is
            # what filtering it out when pushing did.
            stack = [root]
            pop = stack.pop
            extend = stack.extend
            while stack:
                cur = stack[-1]
                st = get(cur)
                if st is None:
                    visited[cur] = 1
                    ops = cur.operands
                    if ops:
                        extend(ops[::-1])
                    if cur.control_predecessors:
                        extend(cur.control_predecessors)
                else:
                    pop()
                    if st == 1:
                        visited[cur] = 2
                        push_order(cur)
        if len(order) != len(self._instructions):
            # Instructions only reachable through a cycle or from foreign
            # users: keep them, in insertion order, so nothing is lost.
            seen = set(order)
            order.extend(i for i in self._instructions if i not in seen)
        return order

    def make_instruction_post_order(self) -> list[Instruction]:
        return self.post_order()


#: writes a computation's stamp without the journal's hook (the stamp is
#: not part of its row: :class:`hlorun.ir.journal.TrackedComputation`)
_set_cstamp = Computation.stamp.__set__  # type: ignore[attr-defined]


class Module:
    """An HLO module: computations (callees before callers), an entry, and
    the header attributes XLA keeps in HloModule/HloModuleConfig."""

    def __init__(self, name: str = "module"):
        self.name = name
        self._computations: list[Computation] = []
        self._members: set[Computation] = set()
        # Edits not yet applied to _computations (see ``computations``):
        # body -> the computation it goes before (None: the end), removals.
        self._pending_insert: dict[Computation, Computation | None] = {}
        self._pending_remove: set[Computation] = set()
        self.entry: Computation | None = None
        self.is_scheduled = False
        #: Header attributes other than is_scheduled, in print order, as raw
        #: text after ``key=`` (entry_computation_layout is rebuilt on print
        #: when absent).
        self.header_attrs: dict[str, str] = {}
        #: (output shape index, parameter number, parameter shape index, kind)
        self.input_output_alias: list[tuple[tuple[int, ...], int, tuple[int, ...], str]] = []
        #: (parameter number, parameter shape index)
        self.buffer_donor: list[tuple[int, tuple[int, ...]]] = []
        #: FileNames / FunctionNames / FileLocations / StackFrames, verbatim
        #: rows: {"FileNames": [(id, text)], ...}
        self.stack_frames: dict[str, list[tuple[int, str]]] | None = None
        self.filename: str | None = None
        #: The text this module was parsed from (for diagnostics' line
        #: numbers), or None.
        self.source: str | None = None
        self._newlines: list[int] | None = None
        #: The text used compact get-tuple-element operands (``%x#0``);
        #: printing follows suit.
        self.compact_gte = False
        self._names: _Names | None = None
        self._name_counters: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"<module {self.name}: {len(self.computations)} computations>"

    # -- computations -----------------------------------------------------------------
    @property
    def computations(self) -> list[Computation]:
        """The computations in module order (callees before callers as
        parsed or built).  Inserting before a caller and removing are
        O(1) (:meth:`insert_computation_before`, :meth:`remove_computation`);
        they are applied to this list, in one O(n) sweep, the next time it
        is read -- a pass that creates or drops thousands of fusion bodies
        stays linear."""
        if self._pending_insert or self._pending_remove:
            self._flush_computations()
        return self._computations

    @computations.setter
    def computations(self, comps: Iterable[Computation]) -> None:
        self._computations = list(comps)
        self._members = set(self._computations)
        self._pending_insert = {}
        self._pending_remove = set()

    def _flush_computations(self) -> None:
        removed = self._pending_remove
        before: dict[Computation | None, list[Computation]] = {}
        for body, caller in self._pending_insert.items():
            before.setdefault(caller, []).append(body)
        self._pending_insert = {}
        self._pending_remove = set()
        out: list[Computation] = []

        def emit(c: Computation) -> None:
            for b in before.pop(c, ()):  # bodies inserted before c (maybe pending themselves)
                emit(b)
            if c not in removed:
                out.append(c)
        for c in self._computations:
            emit(c)
        while before:  # callers gone (or None): at the end
            for b in before.pop(next(iter(before))):
                emit(b)
        self._computations = out
        # the sweep also picks up computations put in the list directly
        self._members = set(out)

    def has_computation(self, comp: Computation) -> bool:
        """``comp in module.computations`` (O(1) when it is)."""
        return comp in self._members or comp in self.computations

    def add_computation(self, comp: Computation, entry: bool = False) -> Computation:
        if comp in self._pending_remove:
            self._flush_computations()
        comp.module = self
        self.computations.append(comp)
        self._members.add(comp)
        if entry:
            self.set_entry(comp)
        if self._names is not None:
            for i in comp._instructions:
                self._names.add(i.name)
        return comp

    def insert_computation_before(self, comp: Computation, caller: Computation | None) -> None:
        """Add ``comp`` just before ``caller`` (after computations inserted
        before it earlier); at the end if ``caller`` is None or not in the
        module.  O(1): applied when :attr:`computations` is next read."""
        if comp in self._members:
            return
        if comp in self._pending_remove:
            self._flush_computations()
        comp.module = self
        self._members.add(comp)
        self._pending_insert[comp] = caller if caller in self._members else None
        if self._names is not None:
            for i in comp._instructions:
                self._names.add(i.name)

    def set_entry(self, comp: Computation) -> None:
        if self.entry is not None:
            self.entry.is_entry = False
        self.entry = comp
        comp.is_entry = True

    def remove_computation(self, comp: Computation) -> None:
        if comp not in self._members:
            comps = self.computations  # maybe put in the list directly
            if comp not in comps:
                raise ValueError(f"computation {comp.name} is not in module {self.name}")
            comps.remove(comp)
            comp.module = None
            return
        self._members.discard(comp)
        if self._pending_insert.pop(comp, False) is False:
            self._pending_remove.add(comp)
        comp.module = None

    def get_computation(self, name: str) -> Computation | None:
        for c in self.computations:
            if c.name == name:
                return c
        return None

    def print_order(self) -> list[Computation]:
        """Computations in the order they were written if every callee comes
        before its callers (so text round-trips byte for byte), else
        :meth:`computation_post_order`."""
        pos = {c: i for i, c in enumerate(self.computations)}
        for i, c in enumerate(self.computations):
            for instr in c._instructions:
                if instr.attrs:
                    for callee in instr.called_computations():
                        if pos.get(callee, -1) >= i:
                            return self.computation_post_order()
        return list(self.computations)

    def computation_post_order(self, fused: set[Computation] | None = None
                               ) -> list[Computation]:
        """XLA's ``MakeComputationPostOrder(dfs_postorder=true)``: for each
        computation nobody calls (in module order), its embedded
        computations (callees first) and then itself.  ``fused``, if given,
        receives the computations fusion instructions call (found in the
        same scan)."""
        comps = self.computations
        calls = _module_call_lists(comps, fused)
        called: set[Computation] = set()
        for lists in calls.values():
            for cc in lists:
                called.update(cc)
        added: set[Computation] = set()
        order: list[Computation] = []
        for comp in comps:
            if comp in called:
                continue
            for emb in embedded_computations(comp, calls):
                if emb not in added:
                    added.add(emb)
                    order.append(emb)
            if comp not in added:
                added.add(comp)
                order.append(comp)
        if len(order) != len(comps):
            # Call cycles or computations reachable only from themselves:
            # keep everything printable.
            order.extend(c for c in comps if c not in added)
        return order

    def instructions(self) -> Iterator[Instruction]:
        for c in self.computations:
            yield from c._instructions

    @property
    def instruction_count(self) -> int:
        return sum([len(c._instructions) for c in self.computations])

    def line_col(self, offset: int) -> tuple[int, int]:
        """1-based (line, column) of an offset into :attr:`source`."""
        if self._newlines is None:
            text = self.source or ""
            nl = []
            i = text.find("\n")
            while i >= 0:
                nl.append(i)
                i = text.find("\n", i + 1)
            self._newlines = nl
        import bisect
        k = bisect.bisect_left(self._newlines, offset)
        start = self._newlines[k - 1] + 1 if k else 0
        return k + 1, offset - start + 1

    # -- names --------------------------------------------------------------------------
    def _all_names(self) -> "_Names":
        """Every name in use (``in``, ``add``, ``update``); set to None to
        forget the names of what is no longer in the module."""
        if self._names is None:
            self._names = _Names((i.name for c in self.computations for i in c._instructions),
                                 self._name_counters)
            self._names.update(c.name for c in self.computations)
        return self._names

    def reserve_name(self, name: str) -> None:
        self._all_names().add(name)

    _SUFFIX = re.compile(r"^(.*?)\.(\d+)$")

    def unique_name(self, base: str) -> str:
        """XLA NameUniquer style: ``base`` if unused, else ``base.N``."""
        names = self._all_names()
        base = base.lstrip("%") or "instr"
        if base not in names:
            names.add(base)
            return base
        split = _split_suffix(base)
        root = split[0] if split else base
        n = self._name_counters.get(root, 0)
        given = names.given
        while True:
            n += 1
            cand = f"{root}.{n}"
            if cand not in given:  # above the counter: only a given name can hold it
                self._name_counters[root] = n
                return cand

    # -- header -----------------------------------------------------------------------
    def entry_computation_layout(self) -> tuple[list[Shape], Shape] | None:
        """The parsed ``entry_computation_layout`` header, or None."""
        text = self.header_attrs.get("entry_computation_layout")
        if text is None:
            return None
        return _attrs.parse_computation_layout(text)

    def set_entry_computation_layout(self, params: Sequence[Shape], result: Shape) -> None:
        self.header_attrs["entry_computation_layout"] = _attrs.format_computation_layout(params,
                                                                                        result)


def _split_suffix(name: str) -> tuple[str, str] | None:
    """``(root, digits)`` of ``root.digits`` (the last dot followed by
    decimal digits only, as ``Module._SUFFIX`` matches a name), or None: a string
    split instead of the regex, which ``unique_name`` ran twice per clone."""
    root, dot, digits = name.rpartition(".")
    if dot and digits.isdecimal():
        return root, digits
    return None


class _Names:
    """The names used in a module, as XLA's NameUniquer keeps them, without
    storing every generated name: ``given`` holds the names present when it
    was built and those added since; a name ``unique_name`` generated is
    ``root.k`` with ``k`` up to the root's counter (``counters``, shared
    with the module), so it is in use when ``start[root] < k <=
    counters[root]`` (``start``: the counters when this was built).  A
    fused module generates one name per clone; keeping them all was ~8% of
    the pipeline's memory."""

    __slots__ = ("given", "counters", "start")

    def __init__(self, names: Iterable[str], counters: dict[str, int]):
        self.given = set(names)
        self.counters = counters
        self.start = dict(counters)

    def __contains__(self, name: str) -> bool:
        if name in self.given:
            return True
        split = _split_suffix(name)
        if split is None:
            return False
        root, digits = split
        hi = self.counters.get(root)
        if hi is None:
            return False
        k = int(digits)
        return self.start.get(root, 0) < k <= hi and str(k) == digits

    def add(self, name: str) -> None:
        self.given.add(name)

    def update(self, names: Iterable[str]) -> None:
        self.given.update(names)


_NO_CALLS: list[list[Computation]] = []  # shared, never mutated


def _call_lists(comp: Computation,
                memo: dict[Computation, list[list[Computation]]]) -> list[list[Computation]]:
    """The non-empty ``called_computations()`` of ``comp``'s instructions,
    in instruction order (memoized in ``memo``)."""
    got = memo.get(comp)
    if got is None:
        got = memo[comp] = [cc for cc in (i.called_computations() for i in comp._instructions
                                          if i.attrs) if cc]
    return got


def _module_call_lists(comps: list[Computation], fused: set[Computation] | None = None
                       ) -> dict[Computation, list[list[Computation]]]:
    """:func:`_call_lists` of every computation in ``comps`` (and, into
    ``fused`` if given, the fused computations of its fusion instructions)."""
    memo: dict[Computation, list[list[Computation]]] = {}
    for c in comps:
        got = None
        for i in c._instructions:
            a = i.attrs
            if a:
                # only an instruction with a non-text attribute value can
                # call anything (most have none: skip the call)
                for v in a.values():
                    if v.__class__ is not str:
                        cc = i.called_computations()
                        if cc:
                            if got is None:
                                got = []
                            got.append(cc)
                            if fused is not None and i.opcode == "fusion":
                                fc = i.fused_computation
                                if fc is not None:
                                    fused.add(fc)
                        break
        memo[c] = got or _NO_CALLS
    return memo


def embedded_computations(comp: Computation,
                          _memo: dict[Computation, list[list[Computation]]] | None = None
                          ) -> list[Computation]:
    """``MakeEmbeddedComputationsList``: computations called (transitively)
    from ``comp``, callees before callers, ``comp`` itself excluded.
    (``_memo``: call lists shared by several calls on one module state.)"""
    memo = {} if _memo is None else _memo
    visited: set[Computation] = set()
    order: list[Computation] = []
    for top in _call_lists(comp, memo):
        stack: list[tuple[Computation, Iterator[list[Computation]]]] = []
        for callee in reversed(top):
            if callee not in visited:
                visited.add(callee)
                stack.append((callee, iter(_call_lists(callee, memo))))
        while stack:
            cur, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                order.append(cur)
                continue
            for callee in reversed(nxt):
                if callee not in visited:
                    visited.add(callee)
                    stack.append((callee, iter(_call_lists(callee, memo))))
    return order


def calls_something(instr: Instruction) -> bool:
    """Can ``instr`` call a computation?  False when every attribute value
    is text (most instructions): then ``called_computations()`` is empty,
    and a scan over a module can skip the call."""
    for v in instr.attrs.values():
        if v.__class__ is not str:
            return True
    return False


def has_opcode(comp: Computation, opcodes: "frozenset[str] | set[str]") -> bool:
    """Does ``comp`` hold an instruction of one of ``opcodes``?  (One scan
    of its instructions, no ordering: passes use it to skip computations,
    or whole modules, where nothing they rewrite exists.)"""
    for i in comp._instructions:
        if i.opcode in opcodes:
            return True
    return False


def module_has_opcode(module: Module, opcodes: "frozenset[str] | set[str]") -> bool:
    """:func:`has_opcode` over every computation of ``module``."""
    for c in module.computations:
        for i in c._instructions:
            if i.opcode in opcodes:
                return True
    return False


def iter_operand_tree(instr: Instruction) -> Iterator[Instruction]:
    """Instruction and all transitive operands (each once)."""
    seen: set[Instruction] = set()
    stack = [instr]
    while stack:
        cur = stack.pop()
        if cur in seen:
            continue
        seen.add(cur)
        yield cur
        stack.extend(cur.operands)
