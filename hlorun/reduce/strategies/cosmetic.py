"""Strategies that shrink the text without cutting the graph: drop
metadata and frontend attributes, drop backend configs / sharding /
control dependencies / aliasing, default layouts, short names."""

from __future__ import annotations

from typing import Hashable, Sequence

from ...ir.module import Module
from ...ir.shape import Shape
from ..edit import entry_layout, index
from .base import Strategy, key

#: Instruction attributes that only describe provenance.
_METADATA_KEYS = ("metadata", "frontend_attributes", "statistics", "origin", "result_accuracy")
#: Module header attributes that only describe provenance or SPMD intent.
_HEADER_KEYS = ("frontend_attributes", "allow_spmd_sharding_propagation_to_parameters",
                "allow_spmd_sharding_propagation_to_output", "origin_recovery_table",
                "debug_attributes")
#: Instruction attributes that change how the compiler treats the op.
_CONFIG_KEYS = ("backend_config", "sharding", "schedule", "output_to_operand_aliasing")


class DropMetadata(Strategy):
    name = "metadata"
    description = "drop metadata, frontend attributes, stack frames and provenance headers"
    preserves_semantics = True

    def units(self, module: Module) -> list[Hashable]:
        out: list[Hashable] = []
        if module.stack_frames:
            out.append(("module", "stack_frames"))
        out += [("header", k) for k in _HEADER_KEYS if k in module.header_attrs]
        for comp in module.computation_post_order():
            for i in comp.post_order():
                if i.attrs:
                    out += [key(i) + (k,) for k in _METADATA_KEYS if k in i.attrs]
        return out

    def apply(self, module: Module, units: Sequence[Hashable]) -> bool:
        idx = index(module)
        for u in units:
            if u == ("module", "stack_frames"):
                module.stack_frames = None
            elif u[0] == "header":  # type: ignore[index]
                module.header_attrs.pop(u[1], None)  # type: ignore[index]
            else:
                i = idx.get(u[:2])  # type: ignore[index]
                if i is not None:
                    i.attrs.pop(u[2], None)  # type: ignore[index]
        return bool(units)


class DropConfigs(Strategy):
    name = "configs"
    description = "drop backend configs, sharding, control dependencies and buffer aliasing"

    def units(self, module: Module) -> list[Hashable]:
        out: list[Hashable] = []
        if module.input_output_alias:
            out.append(("module", "input_output_alias"))
        if module.buffer_donor:
            out.append(("module", "buffer_donor"))
        for comp in module.computation_post_order():
            for i in comp.post_order():
                if i.attrs:
                    out += [key(i) + (k,) for k in _CONFIG_KEYS if k in i.attrs]
                if i.control_predecessors:
                    out.append(key(i) + ("control-predecessors",))
        return out

    def apply(self, module: Module, units: Sequence[Hashable]) -> bool:
        idx = index(module)
        for u in units:
            if u == ("module", "input_output_alias"):
                module.input_output_alias = []
            elif u == ("module", "buffer_donor"):
                module.buffer_donor = []
            else:
                i = idx.get(u[:2])  # type: ignore[index]
                if i is None:
                    continue
                if u[2] == "control-predecessors":  # type: ignore[index]
                    for p in list(i.control_predecessors):
                        p.control_successors.remove(i)
                    i.control_predecessors = []
                else:
                    i.attrs.pop(u[2], None)  # type: ignore[index]
        return bool(units)


def _default(shape: Shape) -> Shape:
    if shape.is_tuple:
        return Shape.tuple(_default(s) for s in shape.tuple_shapes)
    if shape.is_array and shape.layout is not None:
        return shape.with_default_layout()
    return shape


def _is_default(shape: Shape) -> bool:
    return _default(shape) == shape


class DefaultLayouts(Strategy):
    name = "layouts"
    description = "give shapes (and the entry layout) the default descending layout"

    def units(self, module: Module) -> list[Hashable]:
        out: list[Hashable] = []
        ecl = entry_layout(module)
        if ecl is not None:
            params, result = ecl
            out += [("ecl", n) for n, s in enumerate(params) if not _is_default(s)]
            if not _is_default(result):
                out.append(("ecl", "result"))
        for comp in module.computation_post_order():
            out += [key(i) for i in comp.post_order() if not _is_default(i.shape)]
        return out

    def apply(self, module: Module, units: Sequence[Hashable]) -> bool:
        idx = index(module)
        ecl = entry_layout(module)
        params, result = (list(ecl[0]), ecl[1]) if ecl is not None else ([], None)
        ecl_changed = False
        for u in units:
            if u[0] == "ecl":  # type: ignore[index]
                if u[1] == "result":  # type: ignore[index]
                    result = _default(result)  # type: ignore[arg-type]
                else:
                    params[u[1]] = _default(params[u[1]])  # type: ignore[index]
                ecl_changed = True
                continue
            i = idx.get(u)  # type: ignore[arg-type]
            if i is not None:
                i.shape = _default(i.shape)
        if ecl_changed and result is not None:
            module.set_entry_computation_layout(params, result)
        return bool(units)


_SHORT = {"parameter": "p", "constant": "c", "get-tuple-element": "gte", "broadcast": "bcast",
          "reshape": "reshape", "transpose": "transpose"}


class ShortNames(Strategy):
    name = "rename"
    description = "rename instructions and computations to short names (p0, dot, add.1, ...)"
    preserves_semantics = True

    def _targets(self, module: Module) -> dict:
        """Deterministic short names: computations main / comp.N, then
        instructions by opcode in print order (p0, p1 for parameters)."""
        want: dict = {}
        used: set[str] = set()

        def fresh(base: str) -> str:
            if base not in used:
                used.add(base)
                return base
            n = 1
            while f"{base}.{n}" in used:
                n += 1
            used.add(f"{base}.{n}")
            return f"{base}.{n}"
        fused = {i.fused_computation for c in module.computations for i in c._instructions
                 if i.opcode == "fusion"}
        for comp in module.print_order():
            want[("computation", comp.name)] = fresh("main" if comp.is_entry else (
                "fused" if comp in fused else "comp"))
        for comp in module.print_order():
            for i in comp.post_order():
                if i.opcode == "parameter":
                    base = f"p{i.parameter_number}"
                else:
                    base = _SHORT.get(i.opcode, i.opcode)
                want[key(i)] = fresh(base)
        return want

    def units(self, module: Module) -> list[Hashable]:
        return [k for k, v in self._targets(module).items() if k[1] != v]

    def apply(self, module: Module, units: Sequence[Hashable]) -> bool:
        want = self._targets(module)
        idx = index(module)
        comps = {c.name: c for c in module.computations}
        taken = {c.name for c in module.computations} | {i.name for i in idx.values()}
        chosen = [u for u in units if u in want]
        moving = {u[1] for u in chosen}
        free = taken - moving
        for u in chosen:
            target = want[u]
            name = target
            n = 0
            while name in free:
                n += 1
                name = f"{target}.r{n}"
            free.add(name)
            if u[0] == "computation":
                c = comps.get(u[1])
                if c is not None:
                    c.name = name
            else:
                i = idx.get(u)
                if i is not None:
                    i.name = name
        for c in module.computations:
            c._names = None
        module._names = None
        return bool(chosen)


__all__ = ["DefaultLayouts", "DropConfigs", "DropMetadata", "ShortNames"]
