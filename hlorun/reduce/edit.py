"""Module edits the reduction strategies share: new entry parameters, zero
constants, removing unused entry parameters (with aliasing fixed up),
keeping ``entry_computation_layout`` consistent, and the cleanup every
candidate gets (dead code and uncalled computations removed)."""

from __future__ import annotations

from ..ir.literal import Literal
from ..ir.module import Computation, Instruction, Module
from ..ir.shape import Shape, compatible


def index(module: Module) -> dict[tuple[str, str], Instruction]:
    """(computation name, instruction name) -> instruction."""
    return {(c.name, i.name): i for c in module.computations for i in c._instructions}


def entry_layout(module: Module) -> tuple[list[Shape], Shape] | None:
    try:
        return module.entry_computation_layout()
    except Exception:  # unreadable header: rebuilt from the entry on print
        return None


def fix_entry_layout(module: Module, old: tuple[list[Shape], Shape] | None = None) -> None:
    """Make ``entry_computation_layout`` describe the entry's parameters and
    root again, keeping the old layouts wherever the shape still matches
    (the header's layouts are constraints layout assignment honours)."""
    entry = module.entry
    if entry is None or entry.root is None:
        return
    if old is None:
        old = entry_layout(module)
    if old is None:
        module.header_attrs.pop("entry_computation_layout", None)
        return
    params_old, result_old = old
    params = []
    for i, p in enumerate(entry.parameters):
        shape = p.shape if p is not None else Shape.tuple(())
        prev = params_old[i] if i < len(params_old) else None
        params.append(prev if prev is not None and compatible(prev, shape) and prev.has_layout
                      else shape.with_default_layout_if_missing())
    root = entry.root.shape
    result = result_old if compatible(result_old, root) and result_old.has_layout \
        else _merge_layouts(result_old, root)
    module.set_entry_computation_layout(params, result)


def _merge_layouts(old: Shape, new: Shape) -> Shape:
    """``new`` with ``old``'s layout where the (sub)shapes agree in rank."""
    if new.is_tuple:
        olds = old.tuple_shapes if old.is_tuple else ()
        return Shape.tuple(_merge_layouts(olds[i] if i < len(olds) else new.tuple_shapes[i], s)
                           for i, s in enumerate(new.tuple_shapes))
    if new.is_array and old.is_array and old.rank == new.rank and old.layout is not None:
        return new.with_layout(old.layout)
    return new.with_default_layout_if_missing()


def add_entry_parameter(module: Module, shape: Shape, name: str) -> Instruction:
    entry = module.entry
    assert entry is not None
    p = Instruction("parameter", shape, (), name)
    p.parameter_number = entry.num_parameters
    if name:
        entry.add_instruction(p)  # keeps ``name`` (the caller made it free)
    else:
        entry.add_instruction(p, "parameter")
    return p


def zeros(comp: Computation, shape: Shape, name: str | None = None) -> Instruction:
    """A zero of ``shape``: ``constant(0)`` for scalars, ``broadcast`` of a
    scalar zero constant otherwise (``false`` for pred)."""
    et = shape.element_type
    scalar = Shape.array(et, [])
    text = "false" if et == "pred" else "0"
    c = Instruction("constant", scalar, (), "")
    c.literal = Literal(text, scalar)
    if not shape.dimensions:
        c.shape = shape  # keep the layout text the shape had ({} for scalars)
        comp.add_instruction(c, name or "constant")
        return c
    comp.add_instruction(c, "constant")
    b = Instruction("broadcast", shape, [c], "", {"dimensions": "{}"})
    comp.add_instruction(b, name or "broadcast")
    return b


def remove_unused_entry_parameters(module: Module) -> bool:
    """Drop entry parameters nothing uses, renumbering the others in place
    (names kept) and fixing input_output_alias / buffer_donor and the entry
    layout."""
    entry = module.entry
    if entry is None:
        return False
    params = entry.parameters
    dead = [p for p in params if p is not None and not p._users and p is not entry.root
            and not p.control_successors]
    if not dead:
        return False
    old_layout = entry_layout(module)
    dead_nums = {p.parameter_number for p in dead}
    mapping: dict[int, int] = {}
    kept: list[Instruction] = []
    for p in params:
        if p is None or p.parameter_number in dead_nums:
            continue
        mapping[p.parameter_number] = len(kept)  # type: ignore[index]
        kept.append(p)
    for p in dead:
        p.parameter_number = None
        entry.remove_instruction(p)
    for i, p in enumerate(kept):
        p.parameter_number = i
    entry.parameters = list(kept)
    module.input_output_alias = [(o, mapping[n], pi, k) for o, n, pi, k in module.input_output_alias
                                 if n in mapping]
    module.buffer_donor = [(mapping[n], pi) for n, pi in module.buffer_donor if n in mapping]
    if old_layout is not None:
        ps, r = old_layout
        new_ps = [ps[old] for old in sorted(mapping) if old < len(ps)]
        if len(new_ps) == len(kept):
            module.set_entry_computation_layout(new_ps, r)
    fix_entry_layout(module)
    return True


def fix_aliasing(module: Module) -> None:
    """Drop input_output_alias / buffer_donor entries that no longer name a
    parameter or an output of the right shape."""
    entry = module.entry
    if entry is None or entry.root is None:
        return
    root = entry.root.shape
    out = []
    for o, n, pi, k in module.input_output_alias:
        try:
            osub = root.subshape(o)
            p = entry.parameters[n] if n < entry.num_parameters else None
            psub = p.shape.subshape(pi) if p is not None else None
        except IndexError:
            continue
        if psub is not None and compatible(osub, psub):
            out.append((o, n, pi, k))
    module.input_output_alias = out
    donors = []
    for n, pi in module.buffer_donor:
        p = entry.parameters[n] if n < entry.num_parameters else None
        try:
            if p is not None:
                p.shape.subshape(pi)
                donors.append((n, pi))
        except IndexError:
            pass
    module.buffer_donor = donors


def cleanup(module: Module, keep_signature: bool = False) -> None:
    """Dead instructions and uncalled computations go (XLA's DCE); unused
    entry parameters too unless ``keep_signature``."""
    from ..passes.dce import HloDCE
    HloDCE().run(module)
    if not keep_signature:
        remove_unused_entry_parameters(module)
    fix_aliasing(module)
    fix_entry_layout(module)


__all__ = ["add_entry_parameter", "cleanup", "entry_layout", "fix_aliasing", "fix_entry_layout",
           "index", "remove_unused_entry_parameters", "zeros"]
