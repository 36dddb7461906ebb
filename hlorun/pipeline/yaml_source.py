"""YAML with source locations, loaded safely.

``load_located(text, filename)`` parses with PyYAML's SafeLoader (only plain
data: mappings, sequences, strings, numbers, booleans, null; no tags that
build objects, nothing executes) and returns the data as :class:`LMap` /
:class:`LSeq` (dict/list subclasses that remember where each key and item
was written) and plain scalars.  Duplicate keys are errors.
:class:`YamlError` renders as ``file:line:col: error: ...`` with the source
line and a caret.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from ..errors import PipelineError, render_location


@dataclass(frozen=True)
class Loc:
    filename: str | None
    line: int  # 1-based
    column: int  # 1-based

    def __str__(self) -> str:
        return f"{self.filename or '<string>'}:{self.line}:{self.column}"


class YamlError(PipelineError):
    """A located error in a YAML file (exit code 1)."""

    def __init__(self, message: str, loc: Loc | None, text: str | None = None,
                 notes: list[str] | None = None):
        self.message = message
        self.loc = loc
        self.text = text
        self.notes = list(notes or [])
        super().__init__(f"{loc}: error: {message}" if loc else f"error: {message}")

    def render(self) -> str:
        if self.loc is None:
            out = f"error: {self.message}"
        else:
            out = render_location(self.loc.filename, self.loc.line, self.loc.column, "error",
                                  self.message, self.text)
        for n in self.notes:
            out += f"\n  note: {n}"
        return out


class LMap(dict):
    """A mapping that knows where it and each of its keys and values were."""

    loc: Loc
    key_locs: dict
    value_locs: dict

    def loc_of(self, key: Any) -> Loc:
        return self.key_locs.get(key, self.loc)

    def value_loc(self, key: Any) -> Loc:
        return self.value_locs.get(key, self.loc_of(key))


class LSeq(list):
    """A sequence that knows where it and each item were."""

    loc: Loc
    locs: list


def loc_of(value: Any, default: Loc | None = None) -> Loc | None:
    return getattr(value, "loc", default)


def load_located(text: str, filename: str | None) -> Any:
    """Parse one YAML document into located data (see module doc)."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        loc = Loc(filename, mark.line + 1, mark.column + 1) if mark else None
        msg = " ".join(x for x in (e.context, e.problem) if x) or str(e)
        raise YamlError(f"invalid YAML: {msg}", loc, text) from None
    except yaml.YAMLError as e:
        raise YamlError(f"invalid YAML: {e}", Loc(filename, 1, 1), text) from None
    if node is None:
        return None
    constructor = yaml.SafeLoader("")
    return _convert(node, filename, text, constructor, set())


def _loc(node, filename) -> Loc:
    return Loc(filename, node.start_mark.line + 1, node.start_mark.column + 1)


_PLAIN_TAGS = frozenset("tag:yaml.org,2002:" + t for t in
                        ("str", "int", "float", "bool", "null", "map", "seq", "merge"))


def _convert(node, filename, text, constructor, active: set) -> Any:
    if node.tag not in _PLAIN_TAGS:
        raise YamlError(f"YAML tag {node.tag} is not allowed (plain data only)",
                        _loc(node, filename), text)
    if isinstance(node, yaml.ScalarNode):
        try:
            return constructor.construct_object(node, deep=True)
        except yaml.YAMLError as e:
            raise YamlError(f"bad value: {e}", _loc(node, filename), text) from None
    if id(node) in active:
        raise YamlError("recursive YAML alias", _loc(node, filename), text)
    active.add(id(node))
    try:
        if isinstance(node, yaml.SequenceNode):
            seq = LSeq()
            seq.loc = _loc(node, filename)
            seq.locs = []
            for item in node.value:
                seq.append(_convert(item, filename, text, constructor, active))
                seq.locs.append(_loc(item, filename))
            return seq
        if isinstance(node, yaml.MappingNode):
            m = LMap()
            m.loc = _loc(node, filename)
            m.key_locs = {}
            m.value_locs = {}
            constructor.flatten_mapping(node)  # YAML merge keys (<<: *anchor)
            for knode, vnode in node.value:
                key = _convert(knode, filename, text, constructor, active)
                try:
                    hash(key)
                except TypeError:
                    raise YamlError("a mapping key must be a plain value", _loc(knode, filename),
                                    text) from None
                if key in m:
                    raise YamlError(f"duplicate key '{key}' (first at line {m.key_locs[key].line})",
                                    _loc(knode, filename), text)
                m[key] = _convert(vnode, filename, text, constructor, active)
                m.key_locs[key] = _loc(knode, filename)
                m.value_locs[key] = _loc(vnode, filename)
            return m
    finally:
        active.discard(id(node))
    raise YamlError(f"unsupported YAML node {type(node).__name__}", _loc(node, filename), text)
