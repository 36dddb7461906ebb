"""Which dimensions must shrink together: a union-find over (instruction,
tuple index, dimension) slots following each opcode's dimension
correspondence (see :mod:`.dims`).  A slot an opcode cannot follow is
frozen, and so is its whole class."""

from __future__ import annotations

import math

from ...ir import attrs as A
from ...ir.module import Computation, Instruction, Module
from ...ir.opcode import ELEMENTWISE
from ...ir.shape import bit_width, common_factors

_SAME_SHAPE = ELEMENTWISE | {"map", "copy", "reduce-precision", "reverse", "add-dependency",
                             "domain"}
_TUPLE_PASSTHROUGH = {"opt-barrier", "optimization-barrier"}
_CALLERS_TIED = {"fusion", "call", "while", "conditional"}


class DimGraph:
    def __init__(self, module: Module):
        self.module = module
        self.slot: dict[tuple[int, tuple[int, ...], int], int] = {}
        self.where: list[tuple[Instruction, tuple[int, ...], int]] = []
        self.parent: list[int] = []
        self.frozen: list[bool] = []
        self.size: list[int] = []
        comps = module.computation_post_order()
        for comp in comps:
            for i in comp.post_order():
                for idx, leaf in i.shape.leaves():
                    if not leaf.is_array:
                        continue
                    for d, n in enumerate(leaf.dimensions):
                        k = len(self.parent)
                        self.slot[(i.id, idx, d)] = k
                        self.where.append((i, idx, d))
                        self.parent.append(k)
                        self.size.append(n)
                        self.frozen.append(n <= 1 or leaf.is_dynamic_dimension(d))
        tied: set[Computation] = set()
        for comp in comps:
            for i in comp._instructions:
                if i.opcode in _CALLERS_TIED:
                    tied.update(i.called_computations())
        for comp in comps:
            for i in comp._instructions:
                if i.attrs and i.opcode not in _CALLERS_TIED:
                    for callee in i.called_computations():
                        if callee not in tied:
                            self._freeze_computation_boundary(callee)
                self._relate(i)

    # -- union-find --------------------------------------------------------------------
    def find(self, k: int) -> int:
        p = self.parent
        while p[k] != k:
            p[k] = p[p[k]]
            k = p[k]
        return k

    def link(self, a: int | None, b: int | None) -> None:
        if a is None or b is None:
            return
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            if rb < ra:
                ra, rb = rb, ra
            self.parent[rb] = ra
            self.frozen[ra] = self.frozen[ra] or self.frozen[rb]

    def s(self, i: Instruction, idx: tuple[int, ...], d: int) -> int | None:
        return self.slot.get((i.id, idx, d))

    def freeze_slot(self, k: int | None) -> None:
        if k is not None:
            self.frozen[k] = True
            r = self.find(k)
            self.frozen[r] = True

    def freeze(self, i: Instruction) -> None:
        for idx, leaf in i.shape.leaves():
            for d in range(leaf.rank if leaf.is_array else 0):
                self.freeze_slot(self.s(i, idx, d))

    def link_shapes(self, a: Instruction, aidx: tuple[int, ...], b: Instruction,
                    bidx: tuple[int, ...]) -> None:
        """Tie every dimension of a's subshape at aidx to b's at bidx."""
        try:
            sa, sb = a.shape.subshape(aidx), b.shape.subshape(bidx)
        except IndexError:
            self.freeze(a)
            self.freeze(b)
            return
        for (ia, la), (ib, lb) in zip(sa.leaves(aidx), sb.leaves(bidx)):
            if not (la.is_array and lb.is_array) or la.rank != lb.rank:
                continue
            for d in range(la.rank):
                self.link(self.s(a, ia, d), self.s(b, ib, d))

    def _freeze_computation_boundary(self, comp: Computation) -> None:
        for p in comp.parameters:
            if p is not None:
                self.freeze(p)
        if comp.root is not None:
            self.freeze(comp.root)

    # -- opcode rules ------------------------------------------------------------------
    def _relate(self, i: Instruction) -> None:
        op = i.opcode
        ops = i.operands
        s = i.shape
        if op in ("parameter", "constant", "iota", "rng", "partition-id", "replica-id",
                  "after-all"):
            if op == "constant" and s.is_tuple:
                self.freeze(i)
            return
        if op == "bitcast-convert":
            if ops[0].shape.is_array and bit_width(ops[0].shape.element_type) == bit_width(s.element_type):
                self.link_shapes(i, (), ops[0], ())
            else:
                self.freeze(i)
                self.freeze(ops[0])
            return
        if op in _SAME_SHAPE:
            for o in ops:
                if o.shape.is_array and s.is_array and o.shape.rank == s.rank and s.rank:
                    self.link_shapes(i, (), o, ())
            return
        if op in ("sort", "all-reduce") or op in _TUPLE_PASSTHROUGH:
            for k, o in enumerate(ops):
                self.link_shapes(i, (k,) if s.is_tuple else (), o, ())
                if op == "sort" and k:
                    self.link_shapes(o, (), ops[0], ())
            return
        handler = getattr(self, "_" + op.replace("-", "_"), None)
        if handler is not None:
            try:
                handler(i, ops, s)
            except (ValueError, KeyError, IndexError):
                self.freeze(i)
                for o in ops:
                    self.freeze(o)
            return
        self.freeze(i)
        for o in ops:
            self.freeze(o)

    def _broadcast(self, i, ops, s):
        for k, d in enumerate(i.int_list("dimensions")):
            self.link(self.s(ops[0], (), k), self.s(i, (), d))

    def _transpose(self, i, ops, s):
        for k, d in enumerate(i.int_list("dimensions")):
            self.link(self.s(i, (), k), self.s(ops[0], (), d))

    def _reshape(self, i, ops, s):
        a, b = ops[0].shape.dimensions, s.dimensions
        bounds = common_factors(a, b)
        for (a0, b0), (a1, b1) in zip(bounds, bounds[1:]):
            ga = [d for d in range(a0, a1) if a[d] > 1]
            gb = [d for d in range(b0, b1) if b[d] > 1]
            if ga and gb:
                self.link(self.s(ops[0], (), ga[0]), self.s(i, (), gb[0]))
                for d in ga[1:]:
                    self.freeze_slot(self.s(ops[0], (), d))
                for d in gb[1:]:
                    self.freeze_slot(self.s(i, (), d))
            else:
                for d in ga:
                    self.freeze_slot(self.s(ops[0], (), d))
                for d in gb:
                    self.freeze_slot(self.s(i, (), d))

    def _reduce(self, i, ops, s):
        n = len(ops) // 2
        dims = set(i.int_list("dimensions"))
        rank = ops[0].shape.rank
        kept = [d for d in range(rank) if d not in dims]
        for k in range(n):
            out = (k,) if s.is_tuple else ()
            for j, d in enumerate(kept):
                self.link(self.s(ops[k], (), d), self.s(i, out, j))
            if k:
                for d in dims:
                    self.link(self.s(ops[k], (), d), self.s(ops[0], (), d))

    def _dot(self, i, ops, s):
        if "sparsity" in i.attrs or len(ops) != 2:
            raise ValueError("sparse dot")
        lhs, rhs = ops
        lb, rb = i.int_list("lhs_batch_dims"), i.int_list("rhs_batch_dims")
        lc, rc = i.int_list("lhs_contracting_dims"), i.int_list("rhs_contracting_dims")
        out = 0
        for x, y in zip(lb, rb):
            self.link(self.s(lhs, (), x), self.s(rhs, (), y))
            self.link(self.s(lhs, (), x), self.s(i, (), out))
            out += 1
        for x, y in zip(lc, rc):
            self.link(self.s(lhs, (), x), self.s(rhs, (), y))
        for operand, batch, contr in ((lhs, lb, lc), (rhs, rb, rc)):
            for d in range(operand.shape.rank):
                if d not in batch and d not in contr:
                    self.link(self.s(operand, (), d), self.s(i, (), out))
                    out += 1

    def _convolution(self, i, ops, s):
        if i.attrs.get("feature_group_count", "1") != "1" or i.attrs.get("batch_group_count", "1") != "1":
            raise ValueError("grouped convolution")
        dn = A.parse_dim_labels(i.attrs["dim_labels"])
        lhs, rhs = ops
        self.link(self.s(lhs, (), dn.input_batch), self.s(i, (), dn.output_batch))
        self.link(self.s(rhs, (), dn.kernel_output_feature), self.s(i, (), dn.output_feature))
        self.link(self.s(lhs, (), dn.input_feature), self.s(rhs, (), dn.kernel_input_feature))
        for d in dn.input_spatial:
            self.freeze_slot(self.s(lhs, (), d))
        for d in dn.kernel_spatial:
            self.freeze_slot(self.s(rhs, (), d))
        for d in dn.output_spatial:
            self.freeze_slot(self.s(i, (), d))

    def _concatenate(self, i, ops, s):
        cat = i.int_list("dimensions")[0]
        for o in ops:
            for d in range(s.rank):
                if d == cat:
                    self.freeze_slot(self.s(o, (), d))
                else:
                    self.link(self.s(o, (), d), self.s(i, (), d))
        self.freeze_slot(self.s(i, (), cat))

    def _slice(self, i, ops, s):
        for d, (lo, hi, st) in enumerate(A.parse_slice(i.attrs["slice"])):
            if lo == 0 and st == 1 and hi == ops[0].shape.dimensions[d]:
                self.link(self.s(ops[0], (), d), self.s(i, (), d))
            else:
                self.freeze_slot(self.s(ops[0], (), d))
                self.freeze_slot(self.s(i, (), d))

    def _pad(self, i, ops, s):
        for d, cfg in enumerate(A.parse_padding(i.attrs["padding"])):
            if tuple(cfg) == (0, 0, 0):
                self.link(self.s(ops[0], (), d), self.s(i, (), d))
            else:
                self.freeze_slot(self.s(ops[0], (), d))
                self.freeze_slot(self.s(i, (), d))

    def _dynamic_slice(self, i, ops, s):
        sizes = i.int_list("dynamic_slice_sizes")
        for d, n in enumerate(sizes):
            if n == ops[0].shape.dimensions[d]:
                self.link(self.s(ops[0], (), d), self.s(i, (), d))
            else:
                self.freeze_slot(self.s(ops[0], (), d))
                self.freeze_slot(self.s(i, (), d))

    def _dynamic_update_slice(self, i, ops, s):
        self.link_shapes(i, (), ops[0], ())
        for d in range(s.rank):
            if ops[1].shape.dimensions[d] == s.dimensions[d]:
                self.link(self.s(ops[1], (), d), self.s(i, (), d))
            else:
                self.freeze_slot(self.s(ops[1], (), d))
                self.freeze_slot(self.s(i, (), d))

    def _tuple(self, i, ops, s):
        for k, o in enumerate(ops):
            self.link_shapes(i, (k,), o, ())

    def _get_tuple_element(self, i, ops, s):
        self.link_shapes(i, (), ops[0], (i.tuple_index,))

    def _fusion(self, i, ops, s):
        self._call_like(i, ops, i.fused_computation)

    def _call(self, i, ops, s):
        self._call_like(i, ops, i.to_apply)

    def _call_like(self, i, ops, callee):
        if callee is None or callee.num_parameters != len(ops):
            raise ValueError("callee")
        for k, o in enumerate(ops):
            p = callee.parameters[k]
            if p is not None:
                self.link_shapes(p, (), o, ())
        self.link_shapes(i, (), callee.root, ())

    def _while(self, i, ops, s):
        body, cond = i.attrs.get("body"), i.attrs.get("condition")
        if not isinstance(body, Computation) or not isinstance(cond, Computation):
            raise ValueError("while")
        self.link_shapes(i, (), ops[0], ())
        for comp in (body, cond):
            if comp.parameters and comp.parameters[0] is not None:
                self.link_shapes(comp.parameters[0], (), ops[0], ())
        self.link_shapes(body.root, (), ops[0], ())

    def _conditional(self, i, ops, s):
        branches = i.attrs.get("branch_computations")
        if not branches:
            branches = [i.attrs.get("true_computation"), i.attrs.get("false_computation")]
        for k, comp in enumerate(branches):
            if not isinstance(comp, Computation):
                raise ValueError("conditional")
            if comp.parameters and comp.parameters[0] is not None:
                self.link_shapes(comp.parameters[0], (), ops[k + 1], ())
            self.link_shapes(i, (), comp.root, ())

    # -- classes -------------------------------------------------------------------------
    def classes(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for k in range(len(self.parent)):
            out.setdefault(self.find(k), []).append(k)
        return out

    def describe(self, k: int) -> tuple:
        i, idx, d = self.where[k]
        return (i.parent.name if i.parent else "", i.name, idx, d)

    def shrinkable(self) -> list[tuple[tuple, list[int], int]]:
        """(key, slots, gcd) of every class that may shrink."""
        out = []
        for root, members in self.classes().items():
            if self.frozen[root] or any(self.frozen[m] for m in members):
                continue
            g = 0
            for m in members:
                g = math.gcd(g, self.size[m])
            if g > 1:
                out.append((self.describe(members[0]), members, g))
        return out


__all__ = ["DimGraph"]
