"""dot-merger: XLA's DotMerger (xla/hlo/transforms/simplifiers/dot_merger.cc).

Two dots that read the same instruction, neither depending on the other,
become one dot over the concatenation of their other operands, and two
slices of its result take their places.  XLA:GPU runs it in the
optimization pipeline right after the simplification fixed point, with
``max_size_to_merge = xla_gpu_dot_merger_threshold_mb << 20`` (32 MiB by
default): a pair merges only if at least one of the two dots, counting its
result and its operands, is that small.  Typical merges are the gate
projections of an LSTM/GRU cell (``x @ Wr``, ``x @ Wz``, ``x @ Wn``) and
separate Q/K/V projections of one activation: one GEMM kernel instead of
several.

The rules, as XLA has them:

* candidates: every dot of a non-fusion computation without control
  dependencies is put in the class of each of its operands, and of the
  operand of an operand that is a transpose (DotDecomposer's normal form);
  classes with one dot, or none small enough, are dropped;
* classes in the order of their key's id, dots in id order, every pair
  (i < j) tried while neither is dead: at least one of the two small, no
  path between them, same ``operation_queue_id``, then
* ``TryMergeOperand``: equal result layouts, operand precisions and
  sparsity, a merged dimension that is a multiple of 16 elements (what
  JAX 0.11.2's XLA does, measured: see ``MERGED_ALIGNMENT``); then the same operand on the same side (equal element types and
  dimension numbers, the other operands with one non-contracting dimension
  and equal layouts: concatenated along it), else the lhs of one equal to
  the transposed rhs of the other (rank-2 dots in canonical form, no batch
  dimensions: the other lhs is transposed into the concatenation, its
  result sliced and transposed back);
* the merged dot keeps the first dot's precision config and metadata (the
  second's if the first has no op_name); the merged dot takes the first's
  place in later pairs of the class.

Reachability is a pruned search over a topological order repaired after
each merge (:class:`~hlorun.passes.multi_output_fusion.reach.DfsReach`;
XLA keeps a GraphCycles, the same dynamic topological order), so the pass
stays near linear on large modules.

Postcondition: the merged dots' slices have the original dots' shapes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ..ir.attrs import format_int_list, format_slice
from ..ir.build import permute_dimensions
from ..ir.edit import has_control_dependencies
from ..ir.module import Computation, Instruction, Module
from ..ir.shape import Shape, byte_size_of_elements
from ..ir.shape_inference.compute import infer_dot
from .base import Pass
from .dfs_rewrite import make, nonfusion_computations
from .multi_output_fusion.reach import DfsReach

_DNUMS = ("lhs_batch_dims", "rhs_batch_dims", "lhs_contracting_dims", "rhs_contracting_dims")
#: The merged (concatenated) dimension must be a multiple of this many
#: elements.  Not in the DotMerger sources we could read; measured on JAX
#: 0.11.2's XLA (H100, bf16 [512,256] x [256,n1] and x [256,n2]): merged for
#: (n1, n2) = (8, 8), (16, 4096), (32, 2048), (64, 128), (512, 4096), not for
#: (8, 512), (8, 1024), (8, 2048), (8, 4096) -- the moe_topk_train router and
#: expert GEMMs stay apart in XLA's own dump.
MERGED_ALIGNMENT = 16
#: the precision config XLA's CreateDot copies from the first dot
_PRECISION = ("operand_precision", "algorithm")


def _dims(dot: Instruction, key: str) -> list[int]:
    return list(dot.int_list(key)) if key in dot.attrs else []


def _queue_id(dot: Instruction):
    cfg = dot.attrs.get("backend_config")
    if not cfg:
        return 0
    try:
        data = json.loads(cfg) if isinstance(cfg, str) else cfg
    except (TypeError, ValueError):
        return 0
    return data.get("operation_queue_id", 0) if isinstance(data, dict) else 0


def _has_op_name(dot: Instruction) -> bool:
    return 'op_name="' in str(dot.attrs.get("metadata", "")) and \
        'op_name=""' not in str(dot.attrs.get("metadata", ""))


def _flattened_rows(dot: Instruction, lhs: Instruction) -> list[int] | None:
    """The leading dimensions ``[d0, ..., dk]`` a rank-2 dot's rows come
    from when its lhs is DotDecomposer's flattening of an activation
    ``X[d0, ..., dk, c]`` (``reshape`` to ``[d0*...*dk, c]``, contracting
    dimension last, no batch dimensions); None otherwise.

    Observed, not read: XLA merges such dots (``x @ Wq``, ``x @ Wk``,
    ``x @ Wv`` of one ``x[b, s, d]``) with the slices in the unflattened
    result space -- JAX 0.11.2's dumps (llama_swiglu_2l_bf16: the merged
    ``[512,1536]`` GEMM is read through ``bitcast [2,256,1536]`` and
    ``slice [2,256,512]``, one ``{0,2,1}`` transpose per projection before the
    RoPE slices) -- as if the dots were merged before being flattened.  The
    slice then feeds the per-head reshape directly, so layout assignment's
    copy lands on the whole projection (MoveCopyToUsers stops at the
    reshape) instead of being sunk below the RoPE/head slices of the
    flattened value (one transpose per slice)."""
    if lhs.opcode != "reshape" or dot.shape.rank != 2 or lhs.shape.rank != 2 \
            or _dims(dot, "lhs_batch_dims") or _dims(dot, "lhs_contracting_dims") != [1]:
        return None
    src = lhs.operands[0].shape
    if src.rank < 3 or src.dimensions[-1] != lhs.shape.dimensions[1]:
        return None
    rows = list(src.dimensions[:-1])
    if any(d == 1 for d in rows):
        return None
    return rows


class _Reach(DfsReach):
    """DfsReach over a graph where the instructions the merges create
    (concatenations, slices, transposes) have no position of their own:
    they stand at the latest of their operands' positions, and searches
    and repairs pass through them."""

    def _at(self, x: Instruction) -> int:
        k = self.pos.get(x)
        if k is not None:
            return k
        return max(self._at(o) for o in x.operands)

    def neighbours(self, x: Instruction) -> tuple[list[Instruction], list[Instruction]]:
        pos = self.pos
        out: tuple[list[Instruction], list[Instruction]] = ([], [])
        for side, start in ((0, list(x.operands) + list(x.control_predecessors)),
                            (1, list(x.users) + list(x.control_successors))):
            stack, seen = start, set()
            while stack:
                s = stack.pop()
                if s in seen:
                    continue
                seen.add(s)
                if s in pos:
                    out[side].append(s)
                elif side == 0:
                    stack.extend(s.operands)
                else:
                    stack.extend(s.users)
        return out


class _Merger:
    def __init__(self, owner: "DotMerger", comp: Computation):
        self.owner = owner
        self.comp = comp
        self.reach: _Reach | None = None

    def small(self, dot: Instruction) -> bool:
        n = byte_size_of_elements(dot.shape)
        for o in dot.operands:
            n += byte_size_of_elements(o.shape)
        return n <= self.owner.max_size_to_merge

    def connected(self, a: Instruction, b: Instruction) -> bool:
        if self.reach is None:
            self.reach = _Reach(self.comp)
        return self.reach.connected(a, b)

    # -- TryMergeOperand ----------------------------------------------------------
    def try_merge(self, a: Instruction, b: Instruction) -> Instruction | None:
        if a.shape.layout != b.shape.layout:
            return None
        if a.attrs.get("operand_precision") != b.attrs.get("operand_precision"):
            return None
        if a.attrs.get("sparsity") != b.attrs.get("sparsity"):
            return None
        plan = self.same_operand(a, b)
        if plan is None and "sparsity" not in a.attrs:
            plan = self.lhs_with_rhs(a, b) or self.lhs_with_rhs(b, a)
        return plan

    def same_operand(self, a: Instruction, b: Instruction):
        """TryMergeSameOperand: a plan (callable doing the merge) or None."""
        (a0, a1), (b0, b1) = a.operands[:2], b.operands[:2]
        if a0 is not b0 and a1 is not b1:
            return None
        if (a0.shape.element_type, a1.shape.element_type, a.shape.element_type) != \
                (b0.shape.element_type, b1.shape.element_type, b.shape.element_type):
            return None
        if any(_dims(a, k) != _dims(b, k) for k in _DNUMS):
            return None
        if "sparsity" in a.attrs:
            return None  # sparse dots: hlorun does not model the metadata operands
        lhs_same = a0 is b0
        shared, diff_a, diff_b = (a0, a1, b1) if lhs_same else (a1, a0, b0)
        if diff_a.shape.layout != diff_b.shape.layout:
            return None
        side = "rhs" if lhs_same else "lhs"
        shared_side = "lhs" if lhs_same else "rhs"
        used = set(_dims(a, f"{side}_contracting_dims")) | set(_dims(a, f"{side}_batch_dims"))
        if len(used) + 1 != diff_a.shape.rank:
            return None
        outer = 0
        for d in sorted(used):
            if d != outer:
                break
            outer += 1
        if (diff_a.shape.dimensions[outer] + diff_b.shape.dimensions[outer]) % MERGED_ALIGNMENT:
            return None
        shared_free = shared.shape.rank - len(_dims(a, f"{shared_side}_batch_dims")) - \
            len(_dims(a, f"{shared_side}_contracting_dims"))

        def merge() -> Instruction:
            cdims = list(diff_a.shape.dimensions)
            cdims[outer] += diff_b.shape.dimensions[outer]
            cshape = Shape.array(diff_a.shape.element_type, cdims, diff_a.shape.layout)
            concat = make("concatenate", cshape, [diff_a, diff_b],
                          {"dimensions": format_int_list([outer])}, comp=self.comp)
            lhs, rhs = (shared, concat) if lhs_same else (concat, shared)
            new_dot = self.new_dot(a, b, lhs, rhs)
            rows = _flattened_rows(a, shared) if lhs_same else None
            if rows is not None:
                # sliced in the dot's unflattened result space (see
                # _flattened_rows), then flattened back for the users
                n = new_dot.shape.dimensions[-1]
                full = make("reshape", Shape.array(new_dot.shape.element_type, rows + [n]),
                            [new_dot], metadata_from=new_dot, comp=self.comp)
                n_a = a.shape.dimensions[-1]
                starts, lim = [0] * (len(rows) + 1), rows + [n]
                parts = []
                for x, lo, hi in ((a, 0, n_a), (b, n_a, n)):
                    st, li = list(starts), list(lim)
                    st[-1], li[-1] = lo, hi
                    piece = self.slice(full, Shape.array(x.shape.element_type, rows + [hi - lo]),
                                       st, li)
                    parts.append(make("reshape", x.shape, [piece], comp=self.comp))
                return self.finish(a, b, new_dot, parts[0], parts[1])
            rank = new_dot.shape.rank
            slice_dim = rank - (1 if lhs_same else 1 + shared_free)
            lim = list(new_dot.shape.dimensions)
            starts = [0] * rank
            lim_a = list(lim)
            lim_a[slice_dim] = a.shape.dimensions[slice_dim]
            new_a = self.slice(new_dot, a.shape, starts, lim_a)
            starts_b = list(starts)
            starts_b[slice_dim] = lim_a[slice_dim]
            new_b = self.slice(new_dot, b.shape, starts_b, lim)
            return self.finish(a, b, new_dot, new_a, new_b)
        return merge

    def lhs_with_rhs(self, a: Instruction, b: Instruction):
        """TryMergeLHSWithRHSOperand: a's lhs is b's rhs transposed."""
        if any(_dims(x, k) for x in (a, b) for k in ("lhs_batch_dims", "rhs_batch_dims")):
            return None
        for x in (a, b):
            if x.operands[0].shape.rank != 2 or x.operands[1].shape.rank != 2 or \
                    _dims(x, "lhs_contracting_dims") != [1] or \
                    _dims(x, "rhs_contracting_dims") != [0]:
                return None
        a_lhs, a_rhs = a.operands[:2]
        b_lhs, b_rhs = b.operands[:2]
        if a.shape.element_type != b.shape.element_type or \
                a_rhs.shape.element_type != b_lhs.shape.element_type:
            return None
        if a.shape.dimensions[0] != b.shape.dimensions[1]:
            return None
        if (a.shape.dimensions[1] + b.shape.dimensions[0]) % MERGED_ALIGNMENT:
            return None

        def transposed(x: Instruction, y: Instruction) -> bool:
            return x.opcode == "transpose" and x.operands[0] is y and \
                list(x.int_list("dimensions")) == [1, 0]
        if not (transposed(a_lhs, b_rhs) or transposed(b_rhs, a_lhs)):
            return None

        def merge() -> Instruction:
            b_lhs_t = make("transpose", permute_dimensions([1, 0], b_lhs.shape), [b_lhs],
                           {"dimensions": format_int_list([1, 0])}, comp=self.comp)
            n_a, n_b = a.shape.dimensions[1], b.shape.dimensions[0]
            cshape = Shape.array(a_rhs.shape.element_type, [a_rhs.shape.dimensions[0], n_a + n_b],
                                 a_rhs.shape.layout)
            concat = make("concatenate", cshape, [a_rhs, b_lhs_t],
                          {"dimensions": format_int_list([1])}, comp=self.comp)
            new_dot = self.new_dot(a, b, a_lhs, concat)
            m = a.shape.dimensions[0]
            new_a = self.slice(new_dot, a.shape, [0, 0], [m, n_a])
            b_t = permute_dimensions([1, 0], b.shape)
            b_slice = self.slice(new_dot, b_t, [0, n_a], [b.shape.dimensions[1], n_a + n_b])
            new_b = make("transpose", b.shape, [b_slice], {"dimensions": format_int_list([1, 0])},
                         comp=self.comp)
            return self.finish(a, b, new_dot, new_a, new_b)
        return merge

    # -- building ---------------------------------------------------------------
    def new_dot(self, a: Instruction, b: Instruction, lhs: Instruction, rhs: Instruction
                ) -> Instruction:
        shape = infer_dot(lhs.shape, rhs.shape, _dims(a, "lhs_contracting_dims"),
                          _dims(a, "rhs_contracting_dims"), _dims(a, "lhs_batch_dims"),
                          _dims(a, "rhs_batch_dims"), a.shape.element_type)
        shape = shape.with_layout(a.shape.layout) if a.shape.layout is not None else shape
        attrs = {k: a.attrs[k] for k in _DNUMS + _PRECISION if k in a.attrs}
        src = a if _has_op_name(a) or not _has_op_name(b) else b
        return make("dot", shape, [lhs, rhs], attrs, metadata_from=src, comp=self.comp)

    def slice(self, x: Instruction, shape: Shape, starts, limits) -> Instruction:
        return make("slice", shape, [x],
                    {"slice": format_slice([(s, e, 1) for s, e in zip(starts, limits)])},
                    comp=self.comp)

    def finish(self, a: Instruction, b: Instruction, new_dot: Instruction,
               new_a: Instruction, new_b: Instruction) -> Instruction:
        reach = self.reach
        before_b = reach.neighbours(b) if reach is not None else None
        a.replace_all_uses_with(new_a)
        b.replace_all_uses_with(new_b)
        if reach is not None:
            reach.replaced(a, new_dot)
            reach.merged(new_dot, b, before_b)
        self.owner.remark(new_dot, (f"merged {a.name} {a.shape.to_string(False)} and {b.name} "
                                    f"{b.shape.to_string(False)} into one dot "
                                    f"{new_dot.shape.to_string(False)}"),
                          derived_from=[a, b])
        return new_dot

    # -- MergeDots ----------------------------------------------------------------
    def run(self) -> bool:
        classes: dict[Instruction, dict[Instruction, None]] = {}
        for instr in self.comp.instructions:
            if instr.opcode != "dot" or has_control_dependencies(instr):
                continue
            for o in instr.operands[:2]:
                classes.setdefault(o, {})[instr] = None
                if o.opcode == "transpose":
                    classes.setdefault(o.operands[0], {})[instr] = None
        keys = [k for k, v in classes.items() if len(v) > 1 and any(self.small(d) for d in v)]
        if not keys:
            return False
        dead: set[Instruction] = set()
        for key in sorted(keys, key=lambda k: k.id):
            dots: list[Instruction | None] = sorted(classes[key], key=lambda d: d.id)
            for i in range(len(dots)):
                for j in range(i + 1, len(dots)):
                    a, b = dots[i], dots[j]
                    if a is None or b is None or a in dead or b in dead:
                        continue
                    if not self.small(a) and not self.small(b):
                        continue
                    if _queue_id(a) != _queue_id(b):
                        continue
                    # the merge's own conditions are pure checks, tested first;
                    # XLA tests reachability first: the outcome is the same
                    plan = self.try_merge(a, b)
                    if plan is None or self.connected(a, b):
                        continue
                    merged = plan()
                    dead.add(a)
                    dead.add(b)
                    dots[i] = merged
                    dots[j] = None
        for instr in dead:
            self.comp.remove_instruction(instr)
        return bool(dead)


@dataclass(frozen=True)
class DotMerger(Pass):
    """Dots sharing an operand become one dot and slices of it."""

    name = "dot-merger"
    #: ``xla_gpu_dot_merger_threshold_mb << 20`` (XLA:GPU's default: 32 MiB)
    max_size_to_merge: int = 32 << 20

    def run(self, module: Module) -> bool:
        changed = False
        for comp in nonfusion_computations(module):
            changed |= _Merger(self, comp).run()
        return changed


__all__ = ["DotMerger"]
