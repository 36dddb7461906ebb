"""Keep freed array memory in the process instead of returning it to the OS.

The evaluator allocates a fresh array for nearly every instruction.  With
glibc's default (dynamic) thresholds, arrays of a few MiB are ``mmap``-ed
and unmapped, or the heap top is trimmed, on every free, so each new array
page-faults its memory in again: on a virtual machine that costs ~3 us per
4 KiB page, more than the arithmetic (a bf16 [32,256,128] x [32,128,256]
dot: 11 ms with the defaults, 7 ms with this, of which 6.4 ms is BLAS).

``keep_freed_memory()`` sets glibc's ``M_MMAP_THRESHOLD`` to its maximum
(32 MiB: smaller arrays come from the heap and are reused) and
``M_TRIM_THRESHOLD`` to 256 MiB (that much freed heap stays mapped), once
per process.  It changes no value and no result; elsewhere than glibc, or
with ``HLORUN_MALLOC_DEFAULTS=1`` in the environment, it does nothing.
"""

from __future__ import annotations

import ctypes
import os
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 256 << 20

_done: bool | None = None


def keep_freed_memory() -> bool:
    """Tune glibc's malloc for the evaluator (idempotent); True if applied."""
    global _done
    if _done is not None:
        return _done
    _done = False
    if not sys.platform.startswith("linux") or os.environ.get("HLORUN_MALLOC_DEFAULTS"):
        return False
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    _done = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and \
        bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return _done
