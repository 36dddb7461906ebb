"""Run a function where deep recursion is safe.

Shapes nest (tuples of tuples), and a few read-only analyses (the verifier's
shape rules, shape-index walks) recurse once per nesting level.  Python's
default recursion limit (1000) is far below what a valid module may nest, so
code that must not fail on deep input calls :func:`call_deep` when it hits
a ``RecursionError``: the function runs again in a helper thread with a large
stack and a recursion limit to match, while the caller waits.  Only
side-effect-free work may be retried this way.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Callable, TypeVar

T = TypeVar("T")

#: Python frames allowed in the helper thread (a nesting depth of about
#: 100k levels in the analyses that recurse a few frames per level).
DEEP_RECURSION_LIMIT = 400_000
#: The helper thread's stack (virtual memory; only what is touched is used).
DEEP_STACK_BYTES = 1 << 30

_LOCK = threading.Lock()


def call_deep(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` on a thread with a 1 GiB stack and a high
    recursion limit; its result or its exception comes back to the caller."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as e:  # re-raised in the caller
            box["error"] = e

    with _LOCK:  # the recursion limit is interpreter-wide
        old_stack = threading.stack_size()
        old_limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(old_limit, DEEP_RECURSION_LIMIT))
        try:
            threading.stack_size(DEEP_STACK_BYTES)
            try:
                t = threading.Thread(target=target, name="hlorun-deep", daemon=True)
                t.start()
            finally:
                threading.stack_size(old_stack)
            t.join()
        finally:
            sys.setrecursionlimit(old_limit)
    if "error" in box:
        raise box["error"]
    return box["value"]
