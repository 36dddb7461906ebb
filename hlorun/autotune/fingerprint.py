"""XLA's autotuning key: ``hlo_fingerprint`` of an instruction
(xla/backends/autotuner/autotune_fingerprint.cc, ``GetHloFingerprint``).

``tsl::Fingerprint128`` (FarmHash's Fingerprint128, the ``pyfarmhash``
package) of ``instr.ToString(options)`` with ``HloPrintOptions::
Fingerprint()`` plus ``print_backend_config``, ``sort_backend_config`` and
``print_operand_shape``; written as 32 hex digits, high 64 bits first.  The
text (:func:`fingerprint_text`) is XLA's canonical print:

* the instruction itself without a name: ``<shape> <opcode>(<operand shapes>)``;
* called computations as full bodies (``calls=\\n{...}``, ``to_apply=\\n{...}``),
  each with its own ``tmp_<n>`` names in print (post) order, instructions
  indented two spaces per nesting level, operands as ``<shape> tmp_<n>``;
* no metadata, no control dependencies, no ``/*index=*/`` comments;
  backend configs with their JSON keys sorted (compact);
* constants only when essential: ``0`` / ``1`` when every element is, the
  literal of an integer constant, else ``{...}``.

The instruction must look exactly as XLA's did when it autotuned it (its
fusion body in XLA's instruction order, the same backend config): checked
against XLA's own pre-autotuning modules and ``autotune_results.textproto``
(tests/autotune/test_fingerprint.py).
"""

from __future__ import annotations

import json

from ..ir.attrs import PRINT_RANK
from ..ir.module import Computation, Instruction

#: attributes that name called computations and how XLA prints their bodies
_TO_APPLY_OPS = frozenset({"call", "map", "reduce-window", "reduce", "all-reduce", "scatter",
                           "sort", "all-reduce-start", "reduce-scatter"})


def available() -> bool:
    try:
        import farmhash  # noqa: F401
    except ImportError:
        return False
    return True


def fingerprint128(text: str) -> str:
    """``tsl::Fingerprint128`` as XLA writes it (high64, low64 in hex)."""
    import farmhash
    low, high = farmhash.fingerprint128(text)
    return f"{high:016x}{low:016x}"


def _sorted_backend_config(raw: str) -> str:
    """``SortJson``: keys sorted at every level, compact; other text as is."""
    try:
        value = json.loads(raw)
    except ValueError:
        return raw
    if not isinstance(value, dict):
        return raw
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _constant_text(instr: Instruction) -> str:
    lit = instr.literal
    if lit is None:
        return "{...}"
    if lit.is_scalar_value(0):
        return "0"
    if lit.is_scalar_value(1):
        return "1"
    t = instr.shape.element_type
    if t[0] in "su" and t[1:].isdigit():
        text = lit.text.strip()
        return " ".join(text.split())
    return "{...}"


class _Names:
    def __init__(self) -> None:
        self.map: dict[Instruction, str] = {}

    def __call__(self, instr: Instruction) -> str:
        got = self.map.get(instr)
        if got is None:
            got = self.map[instr] = f"tmp_{len(self.map)}"
        return got


def _computation_text(comp: Computation, indent: int) -> str:
    tab = "  " * indent
    names = _Names()
    lines = [tab + "{"]
    for instr in comp.post_order():
        root = "ROOT " if instr is comp.root else ""
        lines.append(f"{tab}  {root}{_instruction_text(instr, indent + 1, names)}")
    return "\n".join(lines) + "\n" + tab + "}"


def _instruction_text(instr: Instruction, indent: int, names: _Names | None) -> str:
    """``PrintWithCanonicalNameMap``; ``names`` None: the top-level call."""
    op = instr.opcode
    if op == "parameter":
        operands = str(instr.parameter_number)
    elif op == "constant":
        operands = _constant_text(instr)
    elif names is None:
        operands = ", ".join(str(o.shape) for o in instr.operands)
    else:
        operands = ", ".join(f"{o.shape} {names(o)}" for o in instr.operands)
    head = f"{names(instr)} = " if names is not None else ""
    text = f"{head}{instr.shape} {op}({operands})"
    for key, value in sorted(instr.attrs.items(), key=lambda kv: PRINT_RANK.get(kv[0], 0)):
        if key in ("metadata", "control-predecessors"):
            continue
        if key == "backend_config":
            text += f", backend_config={_sorted_backend_config(str(value))}"
        elif isinstance(value, Computation):
            label = "to_apply" if key == "to_apply" or op in _TO_APPLY_OPS else key
            text += f", {label}=\n{_computation_text(value, indent)}"
        elif isinstance(value, list) and value and isinstance(value[0], Computation):
            text += ", calls=\n" + ", ".join(_computation_text(c, indent) for c in value)
        elif isinstance(value, list):
            continue
        elif isinstance(value, bool):
            text += f", {key}={'true' if value else 'false'}"
        else:
            text += f", {key}={value}"
    return text


def fingerprint_text(instr: Instruction) -> str:
    """The text XLA fingerprints for ``instr``."""
    return _instruction_text(instr, 0, None)


def xla_fingerprint(instr: Instruction) -> str:
    """``GetHloFingerprint(instr)`` as written in autotune_results.textproto."""
    return fingerprint128(fingerprint_text(instr))


__all__ = ["available", "fingerprint128", "fingerprint_text", "xla_fingerprint"]
