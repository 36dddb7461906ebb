"""A pass's remark: one decision it made (or declined to make), on one
instruction (``Pass.remark``; :mod:`.remark_log` keeps them packed).
``hlorun.passes.base`` re-exports :class:`Remark`."""

from __future__ import annotations

from typing import Any

#: Interned key tuples of remarks' data (a pass uses a handful of shapes).
_DATA_KEYS: dict[tuple[str, ...], tuple[str, ...]] = {}


class Remark:
    """One decision a pass made (or declined to make), on one instruction.

    ``kind``: "applied" (a rewrite fired), "missed" (a pattern did not
    match; ``message`` says which sub-pattern failed), or "analysis".
    ``derived_from``: names of the original instructions the result came
    from (lineage for --explain).  ``data`` is a fresh dict on every
    access: remarks are kept compact (tens of thousands per large module)
    as the key tuple, interned, and a tuple of values; ``derived_from``,
    likewise, is a fresh list on every access, kept as a tuple (the shared
    empty tuple when there is none)."""

    __slots__ = ("pass_name", "instruction", "message", "kind", "_keys", "_values",
                 "_derived")

    def __init__(self, pass_name: str, instruction: str | None, message: str,
                 kind: str = "applied", data: dict[str, Any] | None = None,
                 derived_from: list[str] | None = None) -> None:
        self.pass_name = pass_name
        self.instruction = instruction
        self.message = message
        self.kind = kind
        self.data = data or {}
        self._derived = tuple(derived_from) if derived_from else ()

    @classmethod
    def _from_fields(cls, f: tuple) -> "Remark":
        """The remark of :func:`hlorun.passes.remark_log._fields` ``f``."""
        r = cls.__new__(cls)
        (r.pass_name, r.instruction, r.message, r.kind, keys, r._values, r._derived) = f
        r._keys = _DATA_KEYS.setdefault(keys, keys)
        return r

    @property
    def derived_from(self) -> list[str]:
        return list(self._derived)

    @derived_from.setter
    def derived_from(self, names: list[str] | None) -> None:
        self._derived = tuple(names) if names else ()

    @property
    def data(self) -> dict[str, Any]:
        return dict(zip(self._keys, self._values))

    @data.setter
    def data(self, data: dict[str, Any]) -> None:
        keys = tuple(data)
        self._keys = _DATA_KEYS.setdefault(keys, keys)
        self._values = tuple(data.values())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Remark):
            return NotImplemented
        return (self.pass_name, self.instruction, self.message, self.kind, self.data,
                self.derived_from) == (other.pass_name, other.instruction, other.message,
                                       other.kind, other.data, other.derived_from)

    __hash__ = None  # type: ignore[assignment]  # mutable, as the dataclass was

    def __repr__(self) -> str:
        return (f"Remark(pass_name={self.pass_name!r}, instruction={self.instruction!r}, "
                f"message={self.message!r}, kind={self.kind!r}, data={self.data!r}, "
                f"derived_from={self.derived_from!r})")

    def to_json(self) -> dict[str, Any]:
        return {"pass": self.pass_name, "instruction": self.instruction, "kind": self.kind,
                "message": self.message, "data": self.data, "derived_from": self.derived_from}


__all__ = ["Remark"]
