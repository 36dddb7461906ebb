"""The JSON Schema (draft 2020-12 subset) of ``hlorun compile --format
json`` — the CI interface.  ``hlorun compile --print-json-schema`` prints
it; README's "JSON report" section documents it; tests validate every
report against it with :func:`validate` (a small validator for the subset
used here: type, required, properties, additionalProperties, items, enum,
const, minimum)."""

from __future__ import annotations

from typing import Any

_NUM = {"type": "number", "minimum": 0}
_STR_OR_NULL = {"type": ["string", "null"]}
_INT = {"type": "integer", "minimum": 0}

PASS = {
    "type": "object",
    "required": ["index", "name", "pipeline", "path", "iteration", "changed", "seconds",
                 "instructions_before", "instructions_after", "remarks", "changed_mismatch"],
    "additionalProperties": False,
    "properties": {
        "index": {"type": "integer", "minimum": 1},
        "name": {"type": "string"},
        "pipeline": {"type": "string"},
        "path": {"type": "string"},
        "iteration": {"type": ["integer", "null"]},
        "changed": {"type": "boolean"},
        "seconds": _NUM,
        "instructions_before": _INT,
        "instructions_after": _INT,
        "remarks": _INT,
        "changed_mismatch": _STR_OR_NULL,
    },
}

VIOLATION = {
    "type": "object",
    "required": ["rule", "message", "instruction", "computation", "after_pass", "pass_index",
                 "precondition_of", "checked_at"],
    "additionalProperties": False,
    "properties": {
        "rule": {"type": "string"}, "message": {"type": "string"},
        "instruction": _STR_OR_NULL, "computation": _STR_OR_NULL,
        "after_pass": {"type": "string"}, "pass_index": _INT,
        "precondition_of": _STR_OR_NULL, "checked_at": _STR_OR_NULL,
    },
}

FAILURE = {
    "type": ["object", "null"],
    "required": ["index", "pass", "path", "message", "instruction", "computation", "exception"],
    "additionalProperties": False,
    "properties": {
        "index": _INT, "pass": {"type": "string"}, "path": {"type": "string"},
        "message": {"type": "string"}, "instruction": _STR_OR_NULL,
        "computation": _STR_OR_NULL, "exception": {"type": "string"},
    },
}

REMARK = {
    "type": "object",
    "required": ["pass", "instruction", "kind", "message", "data", "derived_from", "index"],
    "properties": {
        "pass": {"type": "string"}, "instruction": _STR_OR_NULL,
        "kind": {"type": "string"}, "message": {"type": "string"},
        "data": {"type": "object"}, "derived_from": {"type": "array", "items": {"type": "string"}},
        "index": {"type": "integer", "minimum": 1},
    },
}

NUMERICS_CHECK = {
    "type": "object",
    "required": ["index", "pass", "status"],
    "properties": {
        "index": _INT, "pass": {"type": "string"},
        "status": {"enum": ["ok", "mismatch", "unevaluable"]},
        "message": {"type": "string"}, "seconds": _NUM,
        "max_abs_error": _NUM, "max_abs_change": _NUM, "worst_ratio": _NUM,
        "worst": {"type": ["object", "null"]},
        "outputs": {"type": "array", "items": {"type": "object"}},
    },
}

#: ``compile --check-numerics``: present only with that option.
NUMERICS = {
    "type": "object",
    "required": ["mode", "seed", "rtol", "atol", "inputs", "checks", "first_mismatch", "notes"],
    "properties": {
        "mode": {"enum": ["each", "final"]}, "seed": _INT,
        "rtol": {"type": ["number", "null"]}, "atol": {"type": ["number", "null"]},
        "inputs": {"type": "array", "items": {"type": "string"}},
        "start_seconds": _NUM,
        "checks": {"type": "array", "items": NUMERICS_CHECK},
        "first_mismatch": {"type": ["object", "null"]},
        "notes": {"type": "array", "items": {"type": "string"}},
    },
}

#: --explain: a final kernel with its lineage and the decisions that made it
KERNEL = {
    "type": "object",
    "required": ["name", "category", "opcode", "shape", "hero", "origins", "decisions", "story"],
    "properties": {
        "name": {"type": "string"}, "category": {"type": "string"},
        "opcode": {"type": "string"}, "shape": {"type": "string"}, "hero": _STR_OR_NULL,
        "origins": {"type": "array", "items": {
            "type": "object", "required": ["name", "opcode", "op_name", "shape"]}},
        "decisions": {"type": "array", "items": {
            "type": "object", "required": ["index", "path", "pass", "instruction", "kind",
                                           "message", "data", "derived_from"]}},
        "story": {"type": "array", "items": {"type": "string"}},
    },
}

SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "hlorun.compile/1",
    "title": "hlorun compile --format json",
    "type": "object",
    "required": ["schema", "input", "module", "pipeline", "target", "status", "exit_code",
                 "passes", "violations", "failure", "remarks", "autotune", "disabled",
                 "stopped_by_pass_limit", "notes", "summary", "output", "dump_dir", "repro"],
    "additionalProperties": False,
    "properties": {
        "schema": {"const": "hlorun.compile/1"},
        "input": {"type": "string"},
        "module": {"type": "string"},
        "pipeline": {"type": "object", "required": ["name", "file"],
                     "properties": {"name": {"type": "string"}, "file": _STR_OR_NULL}},
        "target": {"type": "object", "required": ["platform", "device", "compute_capability"],
                   "properties": {"platform": {"type": "string"}, "device": {"type": "string"},
                                  "compute_capability": {"type": "string"}}},
        "status": {"enum": ["ok", "violation", "pass-failure", "numerics-mismatch"]},
        "exit_code": {"enum": [0, 2]},
        "passes": {"type": "array", "items": PASS},
        "violations": {"type": "array", "items": VIOLATION},
        "failure": FAILURE,
        "remarks": {"type": "array", "items": REMARK},
        "autotune": {"type": "array", "items": {"type": "object"}},
        "disabled": {"type": "object", "required": ["mode", "matched"],
                     "properties": {"mode": {"enum": ["all", "disable", "enable-only", "none"]},
                                    "matched": {"type": "object"}}},
        "stopped_by_pass_limit": {"type": "boolean"},
        "notes": {"type": "array", "items": {"type": "string"}},
        "summary": {
            "type": "object",
            "required": ["passes_run", "passes_changed", "instructions_before",
                         "instructions_after", "seconds"],
            "properties": {
                "passes_run": _INT, "passes_changed": _INT,
                "instructions_before": _INT, "instructions_after": _INT,
                "seconds": {"type": "object",
                            "required": ["total", "parse", "passes", "checkers", "fingerprints",
                                         "listeners"],
                            "properties": {"total": _NUM, "parse": _NUM, "passes": _NUM,
                                           "checkers": _NUM, "fingerprints": _NUM,
                                           "listeners": {"type": "object"}}},
            },
        },
        "output": _STR_OR_NULL,
        "dump_dir": _STR_OR_NULL,
        "repro": {"type": ["object", "null"]},
        "numerics": NUMERICS,
        "kernels": {"type": "array", "items": KERNEL},
        # Proportionate by default: heavy parts only with --json-include.
        "remarks_total": _INT,
        "omitted": {"type": "array", "items": {"enum": ["remarks", "candidates"]}},
        "diffs": {"type": "array", "items": {"type": "object", "required": ["pass", "lines"],
                                             "properties": {"pass": {"type": "string"},
                                                            "lines": {"type": "array"}}}},
        "module_text": _STR_OR_NULL,
    },
}

_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def _is(value: Any, t: str) -> bool:
    if t == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if t == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, _TYPES[t])


def validate(doc: Any, schema: dict[str, Any] = SCHEMA, path: str = "$") -> list[str]:
    """Errors (``path: problem``) of ``doc`` against ``schema``; [] if valid."""
    errs: list[str] = []
    t = schema.get("type")
    if t is not None:
        types = t if isinstance(t, list) else [t]
        if not any(_is(doc, x) for x in types):
            return [f"{path}: expected {' or '.join(types)}, got {type(doc).__name__}"]
    if "const" in schema and doc != schema["const"]:
        errs.append(f"{path}: expected {schema['const']!r}")
    if "enum" in schema and doc not in schema["enum"]:
        errs.append(f"{path}: {doc!r} not in {schema['enum']}")
    if "minimum" in schema and _is(doc, "number") and doc < schema["minimum"]:
        errs.append(f"{path}: {doc} < {schema['minimum']}")
    if isinstance(doc, dict):
        for k in schema.get("required", []):
            if k not in doc:
                errs.append(f"{path}: missing '{k}'")
        props = schema.get("properties", {})
        for k, v in doc.items():
            if k in props:
                errs.extend(validate(v, props[k], f"{path}.{k}"))
            elif schema.get("additionalProperties") is False:
                errs.append(f"{path}: unexpected '{k}'")
    if isinstance(doc, list) and "items" in schema:
        for i, item in enumerate(doc):
            errs.extend(validate(item, schema["items"], f"{path}[{i}]"))
    return errs
