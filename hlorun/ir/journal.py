"""The change journal's hooks on scanned instructions (see
:mod:`hlorun.ir.changes`).  Every hook also records the instruction's
pre-image (:func:`hlorun.ir.module.pre_image`) at its first change since
the last scan, so trackers keep no copy of the module.

A :class:`~hlorun.ir.changes.ModuleTracker` scan re-reads only what was
stamped since its previous scan.  The IR's mutation methods stamp
(:func:`hlorun.ir.module.stamp`); :func:`adopt` puts hooks on every
instruction a scan reads so that edits that bypass the methods stamp too:
its class becomes :class:`TrackedInstruction` (slot writes) and its
``attrs``, ``operands`` and control lists become :class:`Attrs` /
:class:`Links` (in-place edits).  ``_users`` is a tuple, replaced on every
change (a slot write), or above a few users a dict that only
:func:`hlorun.ir.module.add_user` / ``drop_user`` edit, stamping first.  Instructions a pass
builds are plain until the next scan reads them, so construction and the
new instructions' edits cost nothing extra.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any, Iterable

from . import module as _ir
from .module import NO_LINKS, Computation, Instruction

_set_slot = object.__setattr__


class TrackedInstruction(Instruction):
    """An instruction a tracker has scanned: a direct write to any of its
    fields stamps its computation (old and new, for ``parent``)."""

    __slots__ = ()

    def __setattr__(self, key: str, value: Any) -> None:
        p = self.parent
        e = _ir.EPOCH[0]
        if self.stamp < _SINCE[0]:  # its first change since the last scan
            _ir.PENDING[self] = _pre_image(self)
        if p is not None:
            _put_cstamp(p, e)
        _set_slot(self, "stamp", e)
        _set_slot(self, key, value)
        if key == "parent":
            # A removed instruction must not stay in cycles with its own
            # containers (reference counting frees it); re-added, it gets
            # them back.
            owner = self if value is not None else None
            for c in _CONTAINERS(self):
                if c.__class__ in _HOOKED:
                    c.owner = owner
            if value is not None:
                _put_cstamp(value, e)


_EPOCH = _ir.EPOCH
_SINCE = _ir.SINCE
_pre_image = _ir.pre_image
_put_stamp = Instruction.stamp.__set__  # type: ignore[attr-defined]
_put_cstamp = _ir._set_cstamp


def _hooked(base: type, methods: tuple[str, ...], name: str) -> type:
    """A subclass of ``base`` whose ``methods`` stamp the owner's
    computation (the other methods only read)."""

    def make(m):
        f = getattr(base, m)

        def hook(self, *args, **kw):
            o = self.owner
            if o is not None:
                if o.stamp < _SINCE[0]:  # the owner's first change since the last scan
                    _ir.PENDING[o] = _pre_image(o)
                e = _EPOCH[0]
                _put_stamp(o, e)
                p = o.parent
                if p is not None:
                    _put_cstamp(p, e)
            return f(self, *args, **kw)
        hook.__name__ = m
        return hook
    ns: dict[str, Any] = {m: make(m) for m in methods}
    ns["__slots__"] = ("owner",)
    ns["__reduce__"] = lambda self: (base, (base(self),))  # copies are plain
    ns["__doc__"] = f"A scanned instruction's {base.__name__}: edits stamp its computation."
    return type(name, (base,), ns)


#: ``attrs`` of scanned instructions
Attrs = _hooked(dict, ("__setitem__", "__delitem__", "pop", "popitem", "setdefault", "update",
                       "clear", "__ior__"), "Attrs")
#: ``operands`` and the control lists of scanned instructions
Links = _hooked(list, ("__setitem__", "__delitem__", "append", "extend", "insert", "pop",
                       "remove", "clear", "sort", "reverse", "__iadd__", "__imul__"), "Links")
_HOOKED = (Attrs, Links)
_CONTAINERS = attrgetter("attrs", "operands", "control_predecessors", "control_successors")
_put_attrs, _put_operands, _put_cpred, _put_csucc = (
    getattr(Instruction, k).__set__ for k in ("attrs", "operands", "control_predecessors",
                                              "control_successors"))


#: Computation fields outside its row (a write does not stamp it)
_UNROWED = frozenset({"stamp", "pos", "_names"})


class TrackedComputation(Computation):
    """A computation a tracker has scanned: a direct write to any of the
    fields in its row (name, root, ENTRY, execution thread, module,
    parameters, instruction sequence) stamps it, so a scan need not
    compare the rows of computations stamped before it."""

    __slots__ = ()

    def __setattr__(self, key: str, value: Any) -> None:
        if key not in _UNROWED:
            _put_cstamp(self, _EPOCH[0])
        _set_slot(self, key, value)


def _chooked(methods: tuple[str, ...]) -> type:
    """A list whose ``methods`` stamp the owner computation."""

    def make(m):
        f = getattr(list, m)

        def hook(self, *args, **kw):
            o = self.owner
            if o is not None:
                _put_cstamp(o, _EPOCH[0])
            return f(self, *args, **kw)
        hook.__name__ = m
        return hook
    ns: dict[str, Any] = {m: make(m) for m in methods}
    ns["__slots__"] = ("owner",)
    ns["__reduce__"] = lambda self: (list, (list(self),))  # copies are plain
    ns["__doc__"] = "A scanned computation's parameter list: edits stamp the computation."
    return type("Params", (list,), ns)


#: ``parameters`` of scanned computations
Params = _chooked(("__setitem__", "__delitem__", "append", "extend", "insert", "pop", "remove",
                   "clear", "sort", "reverse", "__iadd__", "__imul__"))


def adopt_computations(comps: Iterable[Computation]) -> None:
    """Put the journal's hooks on ``comps`` (being scanned)."""
    for c in comps:
        if c.__class__ is Computation:
            c.__class__ = TrackedComputation
        p = c.parameters
        if p.__class__ is not Params or p.owner is not c:
            p = Params(p)
            p.owner = c
            _set_slot(c, "parameters", p)


def adopt(instrs: Iterable[Instruction]) -> None:
    """Put the journal's hooks on ``instrs`` (being scanned)."""
    for i in instrs:
        if i.__class__ is Instruction:
            i.__class__ = TrackedInstruction
        c = i.attrs
        if c.__class__ is not Attrs or c.owner is not i:
            c = Attrs(c)
            c.owner = i
            _put_attrs(i, c)
        c = i.operands
        if c.__class__ is not Links or c.owner is not i:
            c = Links(c)
            c.owner = i
            _put_operands(i, c)
        for c, put in ((i.control_predecessors, _put_cpred), (i.control_successors, _put_csucc)):
            if c is NO_LINKS:
                continue
            if not c:  # no control dependencies: the shared empty list
                put(i, NO_LINKS)
            elif c.__class__ is not Links or c.owner is not i:
                c = Links(c)
                c.owner = i
                put(i, c)


__all__ = ["Attrs", "Links", "Params", "TrackedComputation", "TrackedInstruction", "adopt",
           "adopt_computations"]
