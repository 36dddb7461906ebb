"""A compact, append-only list of :class:`~hlorun.passes.base.Remark`.

Passes write tens of thousands of remarks on a big module (a 64-layer
transformer step: ~69k, ~390 B each as objects, ~14% of the pipeline's
peak memory), and almost nobody reads them until the run is over.  A
:class:`RemarkLog` keeps the newest remarks as objects and packs every
:data:`CHUNK` of them into one ``zlib``-compressed pickle of their fields
(~16 B a remark: names, messages and data repeat a lot); reading
(iteration, indexing, ``len``) rebuilds equal :class:`Remark` objects, in
order, each time.  Remarks whose data holds anything but plain values
(str, int, float, bool, None, and lists, tuples and dicts of them) stay
objects, so packing never copies an instruction or changes a value.

``Pass.remarks`` is one (``self.remark(...)`` appends); the pipeline moves
a pass's log into its :class:`~hlorun.pipeline.events.PassEvent` with
:meth:`RemarkLog.take`.
"""

from __future__ import annotations

import pickle
import zlib
from itertools import chain, islice
from typing import Any, Iterable, Iterator

from .remark import Remark

#: remarks per packed chunk
CHUNK = 1024
_LEAF = frozenset((str, int, float, bool, type(None)))


def _plain(v: Any) -> bool:
    t = type(v)
    if t in _LEAF:
        return True
    if t is list or t is tuple:
        return all(map(_plain, v))
    if t is dict:
        return all(type(k) is str and _plain(x) for k, x in v.items())
    return False


def _fields(r: "Remark") -> tuple | None:
    """``r``'s fields if they are all plain (packable), else None."""
    if (type(r.pass_name) is str and type(r.message) is str and type(r.kind) is str
            and (r.instruction is None or type(r.instruction) is str)
            and all(type(d) is str for d in r._derived) and _plain(r._values)):
        return (r.pass_name, r.instruction, r.message, r.kind, r._keys, r._values, r._derived)
    return None


class RemarkLog:
    """An append-only sequence of remarks, packed in chunks (see the
    module docstring).  Reads like a list of :class:`Remark`."""

    __slots__ = ("_chunks", "_tail", "_n")

    def __init__(self, remarks: Iterable["Remark"] = ()) -> None:
        #: (count, payload): zlib'd pickled field tuples (bytes) or a list of Remarks
        self._chunks: list[tuple[int, bytes | list]] = []
        self._tail: list[Remark] = []
        self._n = 0
        for r in remarks:
            self.append(r)

    # -- writing ---------------------------------------------------------------------------
    def append(self, remark: "Remark") -> None:
        self._tail.append(remark)
        self._n += 1
        if len(self._tail) >= CHUNK:
            self._pack()

    def extend(self, remarks: Iterable["Remark"]) -> None:
        for r in remarks:
            self.append(r)

    def _pack(self) -> None:
        tail = self._tail
        if not tail:
            return
        self._tail = []
        rows = []
        for r in tail:
            f = _fields(r)
            if f is None:  # keep this chunk as objects
                self._chunks.append((len(tail), tail))
                return
            rows.append(f)
        self._chunks.append((len(rows), zlib.compress(pickle.dumps(rows, 5), 1)))

    def clear(self) -> None:
        self._chunks = []
        self._tail = []
        self._n = 0

    def take(self) -> "RemarkLog":
        """A log with all of this one's remarks (packed); this one becomes empty."""
        self._pack()
        out = RemarkLog()
        out._chunks, out._n = self._chunks, self._n
        self.clear()
        return out

    # -- reading ---------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._n

    def __bool__(self) -> bool:
        return self._n > 0

    def __iter__(self) -> Iterator["Remark"]:
        return chain(chain.from_iterable(map(_unpack, self._chunks)), list(self._tail))

    def __getitem__(self, k):
        if isinstance(k, slice):
            return list(self)[k]
        n = self._n
        if k < 0:
            k += n
        if not 0 <= k < n:
            raise IndexError("remark index out of range")
        for count, payload in self._chunks:
            if k < count:
                return next(islice(_unpack((count, payload)), k, None))
            k -= count
        return self._tail[k]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (RemarkLog, list)):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"RemarkLog({list(self)!r})"

    def __reduce__(self):
        return (RemarkLog, (list(self),))


def _unpack(chunk: tuple[int, bytes | list]) -> Iterable["Remark"]:
    payload = chunk[1]
    if type(payload) is list:
        return list(payload)
    make = Remark._from_fields
    return map(make, pickle.loads(zlib.decompress(payload)))


__all__ = ["CHUNK", "RemarkLog"]
