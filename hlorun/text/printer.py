"""IR -> HLO text, the way XLA prints it.

Presets:

* ``full`` (default): XLA's ``HloModule::ToString()`` with large constants:
  ``%`` sigils, program-shape signatures, metadata and backend configs.
  Parsing it back gives the same text (print is a fixed point).
* ``long``: ``full`` plus operand shapes (XLA's round-trip "long" form).
* ``short``: XLA's ``ShortParsable`` (no ``%``, no signatures, no metadata).
* ``diff``: ``full`` without metadata/backend_config noise; names kept, so a
  diff of two steps shows only what changed.  Used for pass diffs.
* ``canonical``: instruction names renumbered ``tmp_N`` in print order, no
  metadata/backend_config: equal for isomorphic modules (fingerprints).

Instructions print in XLA's post order (defs before uses) unless the module
is scheduled, in which case the stored order is the schedule.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable

from ..ir.attrs import (PRINT_RANK, format_buffer_donor, format_computation_layout,
                        format_input_output_alias)
from ..ir.module import Computation, Instruction, Module


@dataclass(frozen=True)
class PrintOptions:
    percent: bool = True
    operand_shapes: bool = False
    program_shape: bool = True
    metadata: bool = True
    backend_config: bool = True
    control_dependencies: bool = True
    index_annotation_interval: int = 5
    canonical_names: bool = False
    #: Print get-tuple-elements as ``%x#0`` operands (XLA's
    #: --xla_dump_compact_gte).  None: as the module was written.
    compact_gte: bool | None = None
    large_constants: bool = True
    stack_frames: bool = True


PRESETS: dict[str, PrintOptions] = {
    "full": PrintOptions(),
    # XLA's print_operand_shape and ShortParsable options: get-tuple-elements
    # are instructions there (compact ``%x#0`` operands are a dump flag).
    "long": PrintOptions(operand_shapes=True, compact_gte=False),
    "short": PrintOptions(percent=False, program_shape=False, metadata=False,
                          index_annotation_interval=0, control_dependencies=False,
                          stack_frames=False, compact_gte=False),
    "diff": PrintOptions(metadata=False, backend_config=False, stack_frames=False),
    "canonical": PrintOptions(percent=False, program_shape=False, metadata=False,
                              backend_config=False, canonical_names=True,
                              index_annotation_interval=0, operand_shapes=True,
                              stack_frames=False, control_dependencies=False),
}


def _options(form: str | PrintOptions | None, canonical: bool) -> PrintOptions:
    if isinstance(form, PrintOptions):
        return form
    if canonical:
        return PRESETS["canonical"]
    return PRESETS[form or "full"]


def print_module(module: Module, canonical: bool = False,
                 form: str | PrintOptions | None = None) -> str:
    """Print a module.  ``canonical=True`` is the fingerprint form."""
    opts = _options(form, canonical)
    if opts.compact_gte is None:
        opts = replace(opts, compact_gte=module.compact_gte)
    out: list[str] = []
    out.append(_header(module, opts))
    if opts.stack_frames and opts.metadata and module.stack_frames:
        out.append(_stack_frames(module))
    out.append("\n\n")
    for comp in module.print_order():
        out.append(print_computation(comp, opts, scheduled=module.is_scheduled))
        out.append("\n\n")
    return "".join(out)


def _header(module: Module, opts: PrintOptions) -> str:
    parts = ["HloModule " + module.name]
    if module.is_scheduled:
        parts.append("is_scheduled=true")
    if module.input_output_alias:
        parts.append("input_output_alias=" + format_input_output_alias(module.input_output_alias))
    if module.buffer_donor:
        parts.append("buffer_donor=" + format_buffer_donor(module.buffer_donor))
    h = module.header_attrs
    if "alias_passthrough_params" in h:
        parts.append("alias_passthrough_params=" + h["alias_passthrough_params"])
    ecl = h.get("entry_computation_layout")
    if ecl is None and module.entry is not None and module.entry.root is not None:
        params, result = module.entry.program_shape()
        ecl = format_computation_layout([p.with_default_layout_if_missing() for p in params],
                                        result.with_default_layout_if_missing())
    if ecl is not None:
        parts.append("entry_computation_layout=" + ecl)
    for key in ("allow_spmd_sharding_propagation_to_parameters",
                "allow_spmd_sharding_propagation_to_output", "replica_count",
                "num_partitions", "frontend_attributes", "origin_recovery_table"):
        if key in h:
            parts.append(f"{key}={h[key]}")
    text = ", ".join(parts)
    if "origin_recovery_table" in h:
        text += "\n"  # XLA ends the table with a newline of its own
    if "debug_attributes" in h:
        text += ",\ndebug_attributes=" + h["debug_attributes"]
    return text


def _stack_frames(module: Module) -> str:
    sf = module.stack_frames or {}
    out = []
    for i, section in enumerate(("FileNames", "FunctionNames", "FileLocations", "StackFrames")):
        out.append(("\n\n" if i == 0 else "\n") + section + "\n")
        for idx, text in sf.get(section, []):
            out.append(f"{idx} {text}\n")
    return "".join(out)


def instruction_order(comp: Computation, scheduled: bool = False) -> list[Instruction]:
    if scheduled:
        order = list(comp._instructions)
        seen: set[Instruction] = set()
        ok = True
        for i in order:
            for o in i.operands:
                if o not in seen:
                    ok = False
                    break
            if not ok:
                break
            seen.add(i)
        if ok:
            return order
    return comp.post_order()


def print_computation(comp: Computation, opts: PrintOptions | None = None,
                      scheduled: bool = False,
                      lines: "dict[Instruction, str] | None" = None) -> str:
    """A computation's text.  ``lines``: a cache of printed instructions
    (without indentation or ROOT) to use and fill; the caller drops the
    entries of instructions whose line may have changed (not with
    canonical names, which depend on the print order)."""
    opts = opts or PRESETS["full"]
    if opts.compact_gte is None:
        opts = replace(opts, compact_gte=bool(comp.module and comp.module.compact_gte))
    pct = "%" if opts.percent else ""
    head = ("ENTRY " if comp.is_entry else "") + pct + comp.name
    if opts.program_shape:
        params = []
        for p in comp.parameters:
            if p is None:
                continue
            params.append(f"{p.name}: {p.shape.to_string(False)}")
        result = comp.root.shape.to_string(False) if comp.root is not None else "()"
        head += " (" + ", ".join(params) + ") -> " + result
    order = instruction_order(comp, scheduled)
    names = _NameMap(opts)
    root = comp.root
    cache = lines if not opts.canonical_names else None
    out = [head + " {"]
    compact = opts.compact_gte
    for instr in order:
        if compact and instr.opcode == "get-tuple-element" and instr is not root:
            continue
        text = cache.get(instr) if cache is not None else None
        if text is None:
            text = print_instruction(instr, opts, names)
            if cache is not None:
                cache[instr] = text
        out.append(("  ROOT " + text) if instr is root else ("  " + text))
    tail = "}"
    if comp.execution_thread is not None and comp.execution_thread != "main":
        from ..ir.attrs import quote
        tail += f", execution_thread={quote(comp.execution_thread)}"
    out.append(tail)
    return "\n".join(out)


class _NameMap:
    __slots__ = ("canonical", "pct", "map")

    def __init__(self, opts: PrintOptions):
        self.canonical = opts.canonical_names
        self.pct = "%" if opts.percent else ""
        self.map: dict[Instruction, str] = {}

    def __call__(self, instr: Instruction) -> str:
        if not self.canonical:
            return self.pct + instr.name
        got = self.map.get(instr)
        if got is None:
            got = f"tmp_{len(self.map)}"
            self.map[instr] = got
        return got


def _operand_text(op: Instruction, opts: PrintOptions, names: _NameMap) -> str:
    if opts.compact_gte and op.opcode == "get-tuple-element":
        idx = []
        cur = op
        while cur.opcode == "get-tuple-element":
            idx.append(cur.attrs["index"])
            cur = cur.operands[0]
        text = names(cur) + "".join(f"#{i}" for i in reversed(idx))
    else:
        text = names(op)
    if opts.operand_shapes:
        return f"{op.shape} {text}"
    return text


def print_instruction(instr: Instruction, opts: PrintOptions | None = None,
                      names: "_NameMap | None" = None) -> str:
    """One instruction without indentation or ROOT: ``%x = f32[] add(%a, %b)``."""
    opts = opts or PRESETS["full"]
    if opts.compact_gte is None:
        opts = replace(opts, compact_gte=False)
    if names is None:
        names = _NameMap(opts)
    opcode = instr.opcode
    if opcode == "parameter":
        body = f"parameter({instr.parameter_number})"
    elif opcode == "constant":
        lit = instr.literal
        text = lit.text if lit is not None else ""
        if not opts.large_constants and lit is not None and lit.shape.is_array \
                and lit.shape.element_count > 10:
            text = "{...}"
        body = f"constant({text})"
    else:
        ops = instr.operands
        interval = opts.index_annotation_interval
        if not ops:
            body = opcode + "()"
        elif interval == 0 and not opts.operand_shapes and not opts.compact_gte \
                and not opts.canonical_names:
            pct = names.pct
            body = opcode + "(" + ", ".join([pct + o.name for o in ops]) + ")"
        else:
            parts = []
            for i, o in enumerate(ops):
                if i == 0:
                    parts.append(_operand_text(o, opts, names))
                elif interval and i % interval == 0:
                    parts.append(f", /*index={i}*/" + _operand_text(o, opts, names))
                else:
                    parts.append(", " + _operand_text(o, opts, names))
            body = opcode + "(" + "".join(parts) + ")"
    attrs = instr.attrs
    if attrs or instr.control_predecessors:
        body += _attrs_text(instr, opts, names)
    lhs = names(instr)
    return f"{lhs} = {instr.shape} {body}"


def _attrs_text(instr: Instruction, opts: PrintOptions, names: _NameMap) -> str:
    items = list(instr.attrs.items())
    if opts.control_dependencies and instr.control_predecessors:
        items.append(("control-predecessors", instr.control_predecessors))
    ranked = sorted(items, key=lambda kv: PRINT_RANK.get(kv[0], 0))
    out = []
    pct = names.pct
    for key, value in ranked:
        if key == "metadata" and not opts.metadata:
            continue
        if key == "backend_config" and not opts.backend_config:
            continue
        if isinstance(value, str):
            out.append(f", {key}={value}")
        elif isinstance(value, Computation):
            out.append(f", {key}={pct}{value.name}")
        elif isinstance(value, list):
            if value and isinstance(value[0], Instruction):
                out.append(f", {key}={{" + ", ".join(names(v) for v in value) + "}")
            else:
                out.append(f", {key}={{" + ", ".join(pct + c.name for c in value) + "}")
        elif isinstance(value, bool):
            out.append(f", {key}={'true' if value else 'false'}")
        else:
            out.append(f", {key}={value}")
    return "".join(out)


def module_to_text(module: Module, form: str = "full") -> str:
    return print_module(module, form=form)
