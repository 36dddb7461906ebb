"""Verifier rules for collectives: replica groups against the module's
replica/partition counts (XLA's ``CheckReplicaGroups``), the shard count of
all-gather and reduce-scatter, and their result shapes (all-reduce,
all-to-all, collective-permute, collective-broadcast, start/done pairs)."""

from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import Any

from ..ir.attrs import parse_int_list, parse_int_list_list
from ..ir.module import Instruction
from ..ir.shape import Shape
from ..ir.shape_inference import (infer_all_gather, infer_all_reduce, infer_all_to_all,
                                  infer_all_to_all_tuple, infer_collective_permute,
                                  infer_collective_permute_start, infer_reduce_scatter)
from ..ir.shape_inference.common import human
from .base import VerifyError, equal_with_layout

CROSS_REPLICA = "cross_replica"
CROSS_PARTITION = "cross_partition"
CROSS_REPLICA_AND_PARTITION = "cross_replica_and_partition"
FLATTENED_ID = "flattened_id"


@lru_cache(maxsize=1024)
def replica_groups(text: str | None) -> tuple[tuple[int, ...], ...] | None:
    """``{{0,1},{2,3}}`` or the iota form ``[2,2]<=[4]`` / ``[2,2]<=[2,2]T(1,0)``
    as explicit groups; None for forms not modelled here (mesh groups)."""
    if text is None:
        return ()
    t = text.strip()
    if t.startswith("{"):
        return parse_int_list_list(t)
    m = re.fullmatch(r"\[([\d,\s]*)\]<=\[([\d,\s]*)\](?:T\(([\d,\s]*)\))?", t)
    if not m:
        return None
    shape = [int(x) for x in m.group(1).split(",") if x.strip()]
    dims = [int(x) for x in m.group(2).split(",") if x.strip()]
    perm = [int(x) for x in m.group(3).split(",") if x.strip()] if m.group(3) else None
    if len(shape) != 2 or math.prod(shape) != math.prod(dims):
        return None
    ids = list(range(math.prod(dims)))
    if perm is not None:
        ids = _transpose(ids, dims, perm)
    size = shape[1]
    return tuple(tuple(ids[g * size:(g + 1) * size]) for g in range(shape[0]))


def _transpose(ids: list[int], dims: list[int], perm: list[int]) -> list[int]:
    """Row-major elements of ``reshape(ids, dims).transpose(perm)``."""
    strides = [math.prod(dims[i + 1:]) for i in range(len(dims))]
    out_dims = [dims[p] for p in perm]
    out = []
    for linear in range(len(ids)):
        idx, rest = [], linear
        for d in reversed(out_dims):
            idx.append(rest % d)
            rest //= d
        idx.reverse()
        out.append(ids[sum(idx[k] * strides[perm[k]] for k in range(len(perm)))])
    return out


def group_mode(has_channel: bool, use_global_device_ids: bool | None) -> str:
    """``GetCollectiveOpGroupMode``."""
    if not has_channel:
        if use_global_device_ids:
            raise VerifyError("Cannot have use_global_device_ids=true without channel_id")
        return CROSS_REPLICA
    if use_global_device_ids is None:
        return CROSS_PARTITION
    return FLATTENED_ID if use_global_device_ids else CROSS_REPLICA_AND_PARTITION


def _config(instr: Instruction) -> tuple[int, int]:
    module = instr.parent.module if instr.parent is not None else None
    attrs = module.header_attrs if module is not None else {}
    return int(attrs.get("replica_count", 1)), int(attrs.get("num_partitions", 1))


def _mode(instr: Instruction, with_global_ids: bool = True) -> str:
    ugdi = None
    if with_global_ids:
        ugdi = instr.attrs.get("use_global_device_ids", "false") == "true"
    return group_mode("channel_id" in instr.attrs, ugdi)


def check_replica_groups(instr: Instruction, mode: str, uniform: bool = True) -> None:
    """``CheckReplicaGroups``: groups name 0..n-1 once each, n matches the
    replica/partition count for the group mode, equal sizes when uniform."""
    groups = replica_groups(instr.attrs.get("replica_groups"))
    if groups is None:
        return
    if not groups:
        if mode == FLATTENED_ID:
            raise VerifyError("Replica groups must be specified in flattened-id mode")
        return
    n = 0
    for g in groups:
        if not g:
            raise VerifyError("Instruction cannot have an empty replica group")
        n += len(g)
    seen = [False] * n
    for g in groups:
        for i in g:
            if i < 0 or i >= n:
                raise VerifyError(f"Replica {i} is out of range (should be in [0, {n}) range) in "
                                  "instruction's replica-groups")
            if seen[i]:
                raise VerifyError(f"Replica {i} is repeated in instruction's replica-groups")
            seen[i] = True
    replicas, partitions = _config(instr)
    if mode in (CROSS_REPLICA, CROSS_REPLICA_AND_PARTITION):
        if replicas != 1 and n != replicas:
            raise VerifyError(f"In {mode} mode, replica groups should contain {replicas} "
                              f"replicas, but found {n}")
    elif mode == CROSS_PARTITION:
        if partitions != 1 and n != partitions:
            raise VerifyError(f"In {mode} mode, replica groups should contain {partitions} "
                              f"partitions, but found {n}")
    elif replicas * partitions != 1 and n != replicas * partitions:
        raise VerifyError(f"In {mode} mode, replica groups should contain "
                          f"{replicas * partitions} flattened IDs, but found {n}")
    if uniform and any(len(g) != len(groups[0]) for g in groups):
        raise VerifyError("Replica groups expected to be of uniform size")


def subgroup_size(instr: Instruction, mode: str) -> int | None:
    """``GetSubgroupSize`` (None when the groups are not modelled)."""
    groups = replica_groups(instr.attrs.get("replica_groups"))
    if groups is None:
        return None
    replicas, partitions = _config(instr)
    if mode in (CROSS_REPLICA, CROSS_REPLICA_AND_PARTITION):
        size = len(groups[0]) if groups else replicas
        return size * partitions if mode == CROSS_REPLICA_AND_PARTITION else size
    if mode == FLATTENED_ID:
        return len(groups[0]) if groups else None
    return len(groups[0]) if groups else partitions


def _dim(instr: Instruction) -> int:
    dims = parse_int_list(instr.attrs.get("dimensions", "{}"))
    if len(dims) != 1:
        raise VerifyError(f"{instr.opcode} needs exactly one dimension, has {list(dims)}")
    return dims[0]


def _all_gather(instr: Instruction, opts: Any) -> Shape:
    """``CheckCommonAllGatherInvariants`` + ``InferAllGather(Start)Shape``."""
    mode = _mode(instr)
    if opts.check_replica_groups:
        check_replica_groups(instr, mode)
    dim = _dim(instr)
    if dim < 0 or not instr.operands:
        raise VerifyError("all-gather needs a non-negative dimension and operands")
    n = len(instr.operands)
    shape = instr.shape
    if instr.opcode == "all-gather-start":
        if not shape.is_tuple or len(shape.tuple_shapes) != 2:
            raise VerifyError("all-gather-start must have an (operands, results) tuple shape")
        shape = shape.tuple_shapes[1]
    if n > 1 and (not shape.is_tuple or len(shape.tuple_shapes) != n):
        raise VerifyError(f"all-gather with {n} operands must have a {n}-tuple result")
    outs = [shape] if n == 1 else list(shape.tuple_shapes)
    for o, out in zip(instr.operands, outs):
        if not o.shape.is_array or dim >= o.shape.rank or not out.is_array or dim >= out.rank:
            raise VerifyError(f"all-gather dimension {dim} out of range for {human(o.shape)} -> "
                              f"{human(out)}")
    a, b = outs[0].dimensions[dim], instr.operands[0].shape.dimensions[dim]
    shards = -(-a // b) if b else 0
    sub = subgroup_size(instr, mode)
    if sub is not None and sub != 1 and shards != sub:
        raise VerifyError(f"shard_count = {shards}, subgroup_size = {sub}")
    gathered = infer_all_gather([o.shape for o in instr.operands], dim, shards)
    if instr.opcode == "all-gather-start":
        inputs = instr.operands[0].shape if n == 1 else Shape.tuple(
            [o.shape for o in instr.operands])
        return Shape.tuple([inputs, gathered])
    return gathered


def _reduce_scatter(instr: Instruction, opts: Any) -> Shape:
    mode = _mode(instr)
    if opts.check_replica_groups:
        check_replica_groups(instr, mode)
    dim = _dim(instr)
    n = len(instr.operands)
    if n > 1 and (not instr.shape.is_tuple or len(instr.shape.tuple_shapes) != n):
        raise VerifyError(f"reduce-scatter with {n} operands must have a {n}-tuple result")
    outs = [instr.shape] if n == 1 else list(instr.shape.tuple_shapes)
    for o, out in zip(instr.operands, outs):
        if not o.shape.is_array or dim >= o.shape.rank or not out.is_array or dim >= out.rank:
            raise VerifyError(f"reduce-scatter dimension {dim} out of range for "
                              f"{human(o.shape)} -> {human(out)}")
    a, b = instr.operands[0].shape.dimensions[dim], outs[0].dimensions[dim]
    shards = -(-a // b) if b else 0
    sub = subgroup_size(instr, mode)
    if sub is not None and sub != 1 and shards != sub:
        raise VerifyError(f"shard_count = {shards}, subgroup_size = {sub}")
    return infer_reduce_scatter([o.shape for o in instr.operands], dim, shards)


def _all_reduce(instr: Instruction, opts: Any) -> Shape:
    if opts.check_replica_groups:
        check_replica_groups(instr, _mode(instr), uniform=False)
    if "channel_id" in instr.attrs and int(instr.attrs["channel_id"]) <= 0:
        raise VerifyError("All reduce channel id must be greater than 0")
    return infer_all_reduce([o.shape for o in instr.operands])


def _all_to_all(instr: Instruction, opts: Any) -> Shape:
    mode = _mode(instr, with_global_ids=False)
    if opts.check_replica_groups:
        check_replica_groups(instr, mode)
    count = subgroup_size(instr, mode)
    dims = parse_int_list(instr.attrs.get("dimensions", "{}"))
    if dims:
        if len(instr.operands) != 1:
            raise VerifyError("an array all-to-all (with dimensions) has one operand")
        if count is None:
            return instr.shape
        return infer_all_to_all(instr.operands[0].shape, dims[0], dims[0], count)
    if count is not None and len(instr.operands) != count:
        raise VerifyError(f"all-to-all has {len(instr.operands)} operands, its groups have "
                          f"{count} members")
    first = instr.operands[0].shape if instr.operands else None
    for i, o in enumerate(instr.operands):
        if not equal_with_layout(first, o.shape, ignore_memory_space=True):
            raise VerifyError(f"HLO all-to-all has operands with different shapes: the 0th "
                              f"operand shape {first}, but the {i}th operand has shape "
                              f"{o.shape}.")
    return infer_all_to_all_tuple([o.shape for o in instr.operands])


def _ragged_all_to_all(instr: Instruction, opts: Any) -> Shape:
    if opts.check_replica_groups:
        check_replica_groups(instr, _mode(instr, with_global_ids=False))
    s = [o.shape for o in instr.operands]
    if len(s) != 6:
        raise VerifyError(f"ragged-all-to-all has 6 operands, not {len(s)}")
    for i in range(3, 6):
        if s[i - 1].rank not in (1, 2):
            raise VerifyError(f"RaggedAllToAll operand {i - 1} must be rank 1 or 2")
        if s[i - 1] != s[i]:
            raise VerifyError(f"RaggedAllToAll operands have different shapes ({i - 1}, {i})")
    if not s[1].is_array:
        raise VerifyError("operand 1 of ragged-all-to-all must be an array")
    return s[1]


def _permute_pairs(instr: Instruction) -> None:
    """``CheckDuplicatedSourceOrTarget``."""
    pairs = parse_int_list_list(instr.attrs.get("source_target_pairs", "{}"))
    inplace = "slice_sizes" in instr.attrs
    allowed = 1
    if inplace and len(instr.operands) == 4:
        offsets = instr.operands[2].shape
        if instr.operands[0].shape.is_array:
            allowed = len(offsets.tuple_shapes or ())
        elif offsets.tuple_shapes and offsets.tuple_shapes[0].tuple_shapes is not None:
            allowed = len(offsets.tuple_shapes[0].tuple_shapes)
    replicas, partitions = _config(instr)
    mode = _mode(instr, with_global_ids=False)
    limit = replicas if mode == CROSS_REPLICA else partitions
    if limit == 1:
        for p in pairs:
            limit = max(limit, *(x + 1 for x in p)) if p else limit
    src: dict[int, int] = {}
    dst: dict[int, int] = {}
    for p in pairs:
        if len(p) != 2:
            raise VerifyError(f"source_target_pairs entry {list(p)} is not a pair")
        for what, x, seen in (("Source", p[0], src), ("Target", p[1], dst)):
            if x < 0:
                raise VerifyError(f"{what} {x} in the instruction's source-target pair must be "
                                  ">= 0")
            if x >= limit:
                raise VerifyError(f"{what} {x} in the instruction's source-target pair must be "
                                  f"< {limit}")
            if seen.get(x, 0) == allowed:
                raise VerifyError(f"{what} {x} appears more than "
                                  + ("once" if allowed == 1 else f"{allowed} times")
                                  + " in instruction's source-target pairs")
            seen[x] = seen.get(x, 0) + 1


def _buffer_offset(buffer: Shape, offset: Shape) -> None:
    """``CheckBufferOffset``: a tuple of index arrays (or of index tuples),
    one index per buffer dimension."""
    if not offset.is_tuple:
        raise VerifyError("Buffer offset is not tuple.")
    parts = offset.tuple_shapes
    arrays = all(p.is_array for p in parts)
    tuples = all(p.is_tuple for p in parts)
    if not arrays and not tuples:
        raise VerifyError("Buffer offset should either be a tuple of arrays or  a tuple of "
                          "tuples.")
    if tuples:
        if any(len(p.tuple_shapes) != buffer.rank for p in parts):
            raise VerifyError("Buffer offset index should have the same number of elements as "
                              "the buffer's rank.")
    elif len(parts) != buffer.rank:
        raise VerifyError("Buffer offset index should have the same number of elements as the "
                          "buffer's rank.")


def _inplace_permute(instr: Instruction) -> None:
    """``CheckInplaceCollectivePermute``."""
    if len(instr.operands) != 4:
        raise VerifyError(f"Unexpected number of operands: {len(instr.operands)}.")
    ib, ob, io, oo = (o.shape for o in instr.operands)
    if ib.is_array and ob.is_array:
        _buffer_offset(ib, io)
        _buffer_offset(ob, oo)
    elif ib.is_tuple and ob.is_tuple:
        if len(ib.tuple_shapes) != len(ob.tuple_shapes):
            raise VerifyError("Unmatching input buffers and output buffers.")
        if not io.is_tuple or len(io.tuple_shapes) != len(ib.tuple_shapes):
            raise VerifyError("Unmatching input buffers and input offset.")
        for b, o in zip(ib.tuple_shapes, io.tuple_shapes):
            _buffer_offset(b, o)
        if not oo.is_tuple or len(oo.tuple_shapes) != len(ob.tuple_shapes):
            raise VerifyError("Unmatching output buffers and output offset.")
        for b, o in zip(ob.tuple_shapes, oo.tuple_shapes):
            _buffer_offset(b, o)
    else:
        raise VerifyError("Unmatching input buffers and output buffers.")


def _collective_permute(instr: Instruction, opts: Any) -> Shape:
    if "slice_sizes" in instr.attrs:
        _inplace_permute(instr)
    _permute_pairs(instr)
    inplace = "slice_sizes" in instr.attrs
    shapes = [o.shape for o in instr.operands]
    if instr.opcode == "collective-permute":
        return infer_collective_permute(shapes, inplace)
    context = list(instr.shape.tuple_shapes[2:]) if instr.shape.is_tuple else []
    return infer_collective_permute_start(shapes, context, inplace)


def _tuple_element(instr: Instruction, i: int) -> Shape:
    s = instr.operands[0].shape
    if not s.is_tuple or len(s.tuple_shapes) <= i:
        raise VerifyError(f"{instr.opcode} operand must be a tuple with element {i}, got "
                          f"{human(s)}")
    return s.tuple_shapes[i]


def check_collective(instr: Instruction, opts: Any) -> Shape | None:
    """The inferred shape of a collective (after its own checks)."""
    op = instr.opcode
    if op in ("all-gather", "all-gather-start"):
        return _all_gather(instr, opts)
    if op in ("all-gather-done", "collective-permute-done"):
        return _tuple_element(instr, 1)
    if op in ("all-reduce", "all-reduce-start"):
        return _all_reduce(instr, opts)
    if op == "all-reduce-done":
        return instr.operands[0].shape
    if op == "reduce-scatter":
        return _reduce_scatter(instr, opts)
    if op == "all-to-all":
        return _all_to_all(instr, opts)
    if op == "ragged-all-to-all":
        return _ragged_all_to_all(instr, opts)
    if op == "collective-broadcast":
        if instr.attrs.get("has_dynamic_root") == "true":
            return None
        if not instr.operands[0].shape.is_array:
            raise VerifyError("Expected array argument for operand of collective-broadcast")
        return instr.operands[0].shape
    if op in ("collective-permute", "collective-permute-start"):
        return _collective_permute(instr, opts)
    return None
