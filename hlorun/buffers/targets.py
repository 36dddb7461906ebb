"""The custom-call policy table: which targets may run in place, which
must never alias an operand, which the runtime autotunes on live buffers.

Keys are target names or globs (``fnmatch``); the longest matching glob
wins over shorter ones, an exact name over any glob, and ``"*"`` sets the
default for everything else.  Pipeline YAML (``custom_call_targets:``) and
command-line options are merged over :data:`BUILTIN_TARGETS`.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Any, Mapping

@dataclass(frozen=True)
class TargetPolicy:
    """How buffer assignment and the hazard checker treat one custom-call
    target.  ``in_place``: True (safe in place), False (never alias), None
    (undeclared).  ``autotuned``: the runtime autotunes the kernel by
    running it several times on the live buffers (jax-triton's
    ``triton_kernel_call``), saving and restoring only declared aliases."""

    in_place: bool | None = None
    autotuned: bool = False
    source: str = "default"


#: XLA's library custom calls: NVPTXAliasInfo never lets them reuse an
#: operand buffer (cuBLASLt's bias has its own rule).
BUILTIN_TARGETS: dict[str, dict[str, Any]] = {
    "__cublas$*": {"in_place": False},
    "__cudnn$*": {"in_place": False},
    "__cusolver$*": {"in_place": False},
    "__cub$*": {"in_place": False},
    "__gpu$*": {"in_place": False},
    "__triton*": {"in_place": False},
    "__onednn$*": {"in_place": False},
    "xla.gpu.*": {"in_place": False},
    "triton_kernel_call": {"autotuned": True},
}

_POLICY_KEYS = {"in_place", "autotuned"}


def validate_targets(mapping: Any, where: str = "custom_call_targets") -> dict[str, dict[str, Any]]:
    """Check a ``custom_call_targets`` mapping (from YAML); raise
    ValueError naming the bad entry."""
    if mapping is None:
        return {}
    if not isinstance(mapping, Mapping):
        raise ValueError(f"{where}: expected a mapping of target -> options, got {type(mapping).__name__}")
    out: dict[str, dict[str, Any]] = {}
    for name, opts in mapping.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"{where}: target names must be non-empty strings, got {name!r}")
        if opts is None:
            opts = {}
        if isinstance(opts, bool):
            opts = {"in_place": opts}
        if not isinstance(opts, Mapping):
            raise ValueError(f"{where}.{name}: expected a mapping like {{in_place: false}}")
        unknown = set(opts) - _POLICY_KEYS
        if unknown:
            raise ValueError(f"{where}.{name}: unknown option(s) {', '.join(sorted(map(str, unknown)))}; "
                             f"known: {', '.join(sorted(_POLICY_KEYS))}")
        for k, v in opts.items():
            if v is not None and not isinstance(v, bool):
                raise ValueError(f"{where}.{name}.{k}: expected true or false, got {v!r}")
        out[name] = dict(opts)
    return out


def validate_targets_section(value: Any, loc, text: str | None) -> None:
    """The pipeline-spec validator of the ``custom_call_targets`` section."""
    from ..pipeline.yaml_source import YamlError, loc_of
    try:
        validate_targets(value)
    except ValueError as e:
        where = loc
        if isinstance(value, Mapping):
            for k, v in value.items():
                try:
                    validate_targets({k: v})
                except ValueError:
                    vl = getattr(value, "value_loc", None)
                    where = vl(k) if vl else loc_of(v, loc)
                    break
        raise YamlError(str(e), where, text,
                        ["custom_call_targets: {TARGET_OR_GLOB: {in_place: BOOL, autotuned: BOOL}}"]) from None


def _is_glob(name: str) -> bool:
    return any(c in name for c in "*?[")


class TargetTable:
    def __init__(self, custom_call_targets: Mapping[str, Mapping[str, Any]] | None = None):
        table = dict(BUILTIN_TARGETS)
        for k, v in validate_targets(custom_call_targets).items():
            merged = dict(table.get(k, {}))
            merged.update(v)
            merged["_user"] = True
            table[k] = merged
        self.table = table
        self._exact = {k: v for k, v in table.items() if not _is_glob(k) and k != "*"}
        self._globs = sorted((k for k in table if _is_glob(k) and k != "*"), key=lambda k: -len(k))
        self._cache: dict[str, TargetPolicy] = {}

    def policy(self, target: str | None) -> TargetPolicy:
        target = target or ""
        got = self._cache.get(target)
        if got is not None:
            return got
        entry = self._exact.get(target)
        key = target
        if entry is None:
            for g in self._globs:
                if fnmatch.fnmatchcase(target, g):
                    entry, key = self.table[g], g
                    break
        star = self.table.get("*", {})
        in_place = star.get("in_place")
        autotuned = bool(star.get("autotuned", False))
        source = "'*'" if "*" in self.table else "default"
        if entry is not None:
            in_place = entry.get("in_place", in_place)
            autotuned = bool(entry.get("autotuned", autotuned))
            source = ("pipeline" if entry.get("_user") else "built-in") + f" '{key}'"
        got = TargetPolicy(in_place, autotuned, source)
        self._cache[target] = got
        return got
