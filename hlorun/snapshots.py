"""Printing a module again after a pass, reprinting only what changed.

Diffs and dumps need the module's text after every pass that changed it.
Printing a 50k-instruction module takes a few tenths of a second, but a
pass usually touches few computations.  :class:`SnapshotCache` keeps each
computation's printed text with the computation's fingerprint
(:func:`hlorun.fingerprint.computation_fingerprint`, several times cheaper
than printing) and reprints a computation only when its fingerprint
changed.  ``state`` tokens let several listeners share the fingerprints of
one module state (the runner's ``state``: passes completed so far).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Hashable

from .fingerprint import computation_fingerprint
from .ir.module import Computation, Module
from .printer import PRESETS, _header, _stack_frames, print_computation


class SnapshotCache:
    def __init__(self) -> None:
        self._state: Any = object()
        self._fps: dict[Computation, int] = {}
        self._texts: dict[tuple, dict[Computation, tuple[int, str]]] = {}
        self.printed = 0  # computations printed (statistics)
        self.reused = 0

    def fingerprints(self, module: Module, state: Hashable | None = None) -> dict[Computation, int]:
        """Per-computation fingerprints, computed once per ``state`` token
        (None: always recompute)."""
        if state is None or state != self._state:
            self._fps = {c: computation_fingerprint(c) for c in module.computations}
            self._state = state if state is not None else object()
        return self._fps

    def texts(self, module: Module, form: str = "diff", state: Hashable | None = None) -> dict[str, str]:
        """Computation name -> printed text (``form``: a printer preset), in
        print order."""
        fps = self.fingerprints(module, state)
        cache = self._texts.setdefault((form, module.is_scheduled, module.compact_gte), {})
        opts = PRESETS[form]
        out: dict[str, str] = {}
        live: set[Computation] = set()
        for c in module.print_order():
            live.add(c)
            fp = fps.get(c)
            if fp is None:
                fp = computation_fingerprint(c)
            got = cache.get(c)
            if got is None or got[0] != fp:
                got = (fp, print_computation(c, opts, scheduled=module.is_scheduled))
                cache[c] = got
                self.printed += 1
            else:
                self.reused += 1
            out[c.name] = got[1]
        for c in [c for c in cache if c not in live]:
            del cache[c]
        return out

    def module_text(self, module: Module, state: Hashable | None = None, form: str = "full") -> str:
        """The whole module as ``print_module(module, form=form)`` prints it."""
        opts = PRESETS[form]
        if opts.compact_gte is None:
            opts = replace(opts, compact_gte=module.compact_gte)
        out = [_header(module, opts)]
        if opts.stack_frames and opts.metadata and module.stack_frames:
            out.append(_stack_frames(module))
        out.append("\n\n")
        for text in self.texts(module, form, state).values():
            out.append(text)
            out.append("\n\n")
        return "".join(out)
