"""Module-level rules of XLA's HloVerifier: the entry computation layout
against the entry's parameters and root (``VerifyEntryComputationLayout``),
input/output aliasing and buffer donors, send/recv channels
(``VerifyChannels``), and layout-constrained all-reduces."""

from __future__ import annotations

from typing import Any, Iterator

from ..ir.module import Computation, Instruction, Module
from ..ir.shape import Shape
from ..ir.shape_inference.common import compatible, human

Finding = tuple["Instruction | None", "Computation | None", str]


def entry_layout(module: Module, opts: Any) -> Iterator[Finding]:
    """``VerifyEntryComputationLayout``."""
    layout = module.entry_computation_layout()
    entry = module.entry
    if layout is None or entry.root is None:
        return
    params, result = layout
    if not _layout_compatible(entry.root.shape, result, opts):
        yield entry.root, entry, (
            f"Shape of the root instruction of entry computation ({human(entry.root.shape)}) "
            f"should be compatible to one specified in module's entry computation layout "
            f"({human(result)})")
    if len(params) != entry.num_parameters:
        yield None, entry, (f"Number of parameters in entry computation layout ({len(params)}) "
                            f"must be same as number of parameters of entry computation "
                            f"({entry.num_parameters})")
        return
    for i, (want, p) in enumerate(zip(params, entry.parameters)):
        if p is not None and not _layout_compatible(p.shape, want, opts):
            yield p, entry, (f"Shape of the entry computation parameter {i} is "
                             f"{human(p.shape)} should be compatible to the one specified in "
                             f"module's entry computation layout {human(want)}")
    # A must-alias pair shares one buffer: same shape, layout and memory space.
    for out_index, pnum, pindex, kind in module.input_output_alias:
        if kind != "must-alias" or not 0 <= pnum < len(params):
            continue
        try:
            rs, ps = result.subshape(out_index), params[pnum].subshape(pindex)
        except IndexError:
            continue
        if rs != ps:
            yield None, entry, (f"Shape and memory space of the result at index "
                                f"{{{','.join(map(str, out_index))}}} ({rs}) must be the same "
                                f"as the shape and memory space of aliased parameter {pnum} at "
                                f"index {{{','.join(map(str, pindex))}}} ({ps})")


def _layout_compatible(a: Shape, b: Shape, opts: Any) -> bool:
    """Equal ignoring tiles, tail padding and memory space when
    layout-sensitive; compatible otherwise."""
    if not compatible(a, b):
        return False
    if not opts.layout_sensitive:
        return True
    for (_, x), (_, y) in zip(a.leaves(), b.leaves()):
        if x.layout is not None and y.layout is not None and x.is_array and (
                x.layout.minor_to_major != y.layout.minor_to_major
                or x.layout.element_size_in_bits != y.layout.element_size_in_bits):
            return False
    return True


def aliasing(module: Module, opts: Any) -> Iterator[Finding]:
    """``HloInputOutputAliasConfig::Verify`` and ``HloBufferDonorConfig::Verify``."""
    entry = module.entry
    layout = module.entry_computation_layout()
    if layout is None:
        params = [p.shape if p is not None else Shape.tuple(()) for p in entry.parameters]
        result = entry.root.shape if entry.root is not None else Shape.tuple(())
    else:
        params, result = layout
    seen: set[tuple[int, tuple[int, ...]]] = set()
    for out_index, pnum, pindex, _kind in module.input_output_alias:
        where = f"input_output_alias {{{','.join(map(str, out_index))}}}: ({pnum}, ...)"
        if not 0 <= pnum < min(entry.num_parameters, len(params)):
            yield None, entry, f"{where}: parameter {pnum} does not exist"
            continue
        try:
            ps = params[pnum].subshape(pindex)
            rs = result.subshape(out_index)
        except IndexError as e:
            yield None, entry, f"{where}: {e}"
            continue
        if not ps.is_array or not rs.is_array:
            yield None, entry, f"{where}: aliased buffers must be arrays"
            continue
        if opts.layout_sensitive and ps.byte_size() != rs.byte_size():
            yield None, entry, (f"Expected aliased input {pnum} at index {list(pindex)} and "
                                f"output at index {list(out_index)} to have the same size. "
                                f"Input sub-shape is {ps} with size {ps.byte_size()}, output "
                                f"sub-shape is {rs} with size {rs.byte_size()}")
        if (pnum, tuple(pindex)) in seen:
            yield None, entry, f"{where}: parameter {pnum} {list(pindex)} is aliased twice"
        seen.add((pnum, tuple(pindex)))
    for pnum, pindex in module.buffer_donor:
        if not 0 <= pnum < min(entry.num_parameters, len(params)):
            yield None, entry, f"buffer_donor: parameter {pnum} does not exist"
            continue
        try:
            ps = params[pnum].subshape(pindex)
        except IndexError as e:
            yield None, entry, f"buffer_donor: {e}"
            continue
        if not ps.is_array:
            yield None, entry, f"buffer_donor: parameter {pnum} {list(pindex)} is not an array"
        if (pnum, tuple(pindex)) in seen:
            yield None, entry, (f"Input {pnum} at index {list(pindex)} is registered as a buffer "
                                "donor. However, it is also in the input output alias config.")


def channels(module: Module) -> Iterator[Finding]:
    """``VerifyChannels``: a send/recv with a channel has one user; its
    done shares the channel and host-transfer flag; host-transfer
    send/recvs on one channel are identical up to operands."""
    by_channel: dict[str, list[Instruction]] = {}
    for comp in module.computations:
        for instr in comp._instructions:
            op = instr.opcode
            if op not in ("send", "recv") or "channel_id" not in instr.attrs:
                continue
            host = instr.attrs.get("is_host_transfer") == "true"
            if host:
                by_channel.setdefault(instr.attrs["channel_id"], []).append(instr)
            users = instr.users
            if len(users) != 1:
                continue  # reported with the asynchronous pairs
            done = users[0]
            if done.opcode == op + "-done":
                if done.attrs.get("channel_id") != instr.attrs.get("channel_id"):
                    yield done, comp, ("Expected to have the same channel id, actual channel "
                                       f"ids are: {instr.name} ({instr.attrs.get('channel_id')}), "
                                       f"{done.name} ({done.attrs.get('channel_id', -1)})")
                elif (done.attrs.get("is_host_transfer") == "true") != host:
                    yield done, comp, ("Expected instructions to have the same "
                                       f"is-host-transfer property: {instr.name}, {done.name}")
    for channel, instrs in by_channel.items():
        ref = instrs[0]
        for other in instrs[1:]:
            if (other.opcode != ref.opcode or other.shape != ref.shape
                    or [o.shape for o in other.operands] != [o.shape for o in ref.operands]
                    or _core_attrs(other) != _core_attrs(ref)):
                yield other, other.parent, (
                    "Host-transfer send/recv instructions that use the same channel must be "
                    f"identical up to having different operands. Found different instructions "
                    f"with the same channel ID {channel}: {ref.name} vs {other.name}.")
                break


def _core_attrs(instr: Instruction) -> dict:
    return {k: v for k, v in instr.attrs.items()
            if k not in ("metadata", "control-predecessors", "backend_config")}


def layout_constrained_all_reduce(module: Module) -> Iterator[Finding]:
    first: bool | None = None
    for instr in module.instructions():
        if instr.opcode in ("all-reduce", "all-reduce-start"):
            c = instr.attrs.get("constrain_layout") == "true"
            if first is None:
                first = c
            elif c != first:
                yield instr, instr.parent, ("HloModule has a mix of layout constrained and "
                                            "unconstrained AllReduce instructions.")
                return
