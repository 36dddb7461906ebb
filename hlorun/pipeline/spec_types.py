"""Checking YAML option values against dataclass field annotations.

``check_value(value, hint)`` returns the value converted for the field
(YAML lists become tuples for ``tuple[...]`` fields, so frozen passes stay
hashable) or raises TypeError/ValueError with a one-line reason.  Supported
annotations: bool, int, float, str, None, Optional/Union, Literal,
tuple[T, ...], tuple[A, B], list[T], frozenset[T], dict[K, V], Any.
"""

from __future__ import annotations

import types
import typing
from dataclasses import fields
from typing import Any, Literal, Union, get_args, get_origin


def option_fields(cls: type, skip: tuple[str, ...] = ()) -> list[str]:
    """Names of the YAML-settable options of a pass or checker class: its
    dataclass init fields other than ``target``."""
    try:
        fs = fields(cls)
    except TypeError:
        return []
    return [f.name for f in fs if f.name not in ("target",) + skip and f.init]


def did_you_mean(name: str, choices, n: int = 3) -> str:
    """``"; did you mean a, b?"`` with the closest of ``choices``, or ""."""
    import difflib
    near = difflib.get_close_matches(name, list(choices), n=n, cutoff=0.5)
    return f"; did you mean {', '.join(near)}?" if near else ""


def type_hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception:  # unresolvable annotations: accept values as given
        return {}


def _name(hint: Any) -> str:
    if hint is type(None):
        return "null"
    if isinstance(hint, type):
        return {"bool": "true/false", "int": "an integer", "float": "a number",
                "str": "a string"}.get(hint.__name__, hint.__name__)
    return str(hint).replace("typing.", "")


def _show(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    return repr(v)


def check_value(value: Any, hint: Any) -> Any:
    if hint is None or hint is Any:
        return value
    origin = get_origin(hint)
    if origin is Union or (hasattr(types, "UnionType") and isinstance(hint, types.UnionType)):
        for arg in get_args(hint):
            try:
                return check_value(value, arg)
            except (TypeError, ValueError):
                pass
        raise TypeError(f"expected {' or '.join(_name(a) for a in get_args(hint))}, got {_show(value)}")
    if origin is Literal:
        allowed = get_args(hint)
        if any(value == a and type(value) is type(a) for a in allowed):
            return value
        raise ValueError(f"expected one of {', '.join(_show(a) for a in allowed)}, got {_show(value)}")
    if hint is type(None):
        if value is None:
            return None
        raise TypeError(f"expected null, got {_show(value)}")
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise TypeError(f"expected true or false, got {_show(value)}")
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise TypeError(f"expected an integer, got {_show(value)}")
    if hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise TypeError(f"expected a number, got {_show(value)}")
    if hint is str:
        if isinstance(value, str):
            return value
        raise TypeError(f"expected a string, got {_show(value)}")
    if origin in (tuple, list, frozenset, set):
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"expected a list, got {_show(value)}")
        args = get_args(hint)
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            if len(args) != len(value):
                raise ValueError(f"expected a list of {len(args)} items, got {len(value)}")
            return tuple(check_value(v, a) for v, a in zip(value, args))
        elem = args[0] if args else Any
        items = [check_value(v, elem) for v in value]
        if origin is list:
            return items
        if origin in (frozenset, set):
            return frozenset(items)
        return tuple(items)
    if origin is dict:
        if not isinstance(value, dict):
            raise TypeError(f"expected a mapping, got {_show(value)}")
        kt, vt = (get_args(hint) + (Any, Any))[:2]
        return {check_value(k, kt): check_value(v, vt) for k, v in value.items()}
    if isinstance(hint, type):
        if isinstance(value, hint):
            return value
        raise TypeError(f"expected {_name(hint)}, got {_show(value)}")
    return value
