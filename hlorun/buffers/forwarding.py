"""How forwarding instructions get their value sets (part of
:class:`~hlorun.buffers.values.Dataflow`): XLA's ``Update*ValueSet`` for
bitcast, get-tuple-element, tuple, copy, parameters of control-flow
computations, call, while and conditional (phis), send/recv-done,
copy-start/done, all-reduce-done, all-gather, collective-permute and the
async ops."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ir.module import Computation, Instruction
from ..ir.shape import Shape

if TYPE_CHECKING:
    from .values import HloValue

Index = tuple


def _tuple_shaped(shape: Shape, index: Index) -> bool:
    return shape.subshape(index).is_tuple if index else shape.is_tuple


def _is_array_or_token(shape: Shape) -> bool:
    return shape.is_array or shape.is_token


class Forwarding:
    """Mixin: expects ``value_sets``, ``call_graph``, ``_deleted``,
    ``_phi_inputs`` and ``_new_value`` from the dataflow analysis."""

    def _assign(self, instr: Instruction, index: Index, new: list[HloValue]) -> bool:
        vs = self.value_sets[instr]
        if vs.get(index) != new:
            vs[index] = list(new)
            return True
        return False

    def _forward_all(self, instr: Instruction, src: Instruction) -> bool:
        """The whole value set of ``src`` becomes ``instr``'s."""
        changed = False
        svs = self.value_sets[src]
        for ix in self.value_sets[instr]:
            changed |= self._assign(instr, ix, svs.get(ix, []))
        return changed

    def _update(self, instr: Instruction) -> bool:
        op = instr.opcode
        ops = instr.operands
        if op in ("bitcast", "add-dependency", "domain", "opt-barrier"):
            return bool(ops) and self._forward_all(instr, ops[0])
        if op == "get-tuple-element":
            k = int(instr.attrs.get("index", 0))
            svs = self.value_sets[ops[0]]
            changed = False
            for ix in self.value_sets[instr]:
                changed |= self._assign(instr, ix, svs.get((k,) + ix, []))
            return changed
        if op == "tuple":
            changed = False
            for k, o in enumerate(ops):
                for ix, vals in self.value_sets[o].items():
                    changed |= self._assign(instr, (k,) + ix, vals)
            return changed
        if op == "copy":
            changed = False
            svs = self.value_sets[ops[0]]
            for ix in self.value_sets[instr]:
                if ix:
                    changed |= self._assign(instr, ix, svs.get(ix, []))
            return changed
        if op == "parameter":
            return self._update_parameter(instr)
        if op == "call":
            callee = instr.to_apply
            return callee is not None and callee.root is not None and \
                self._forward_all(instr, callee.root)
        if op == "while":
            body = instr.attrs.get("body")
            if not isinstance(body, Computation) or body.root is None or not ops:
                return False
            return self._phi(instr, [self.value_sets[body.root], self.value_sets[ops[0]]])
        if op == "conditional":
            roots = [b.root for b in branches(instr) if b.root is not None]
            return self._phi(instr, [self.value_sets[r] for r in roots])
        if op == "send":
            changed = False
            for ix, vals in self.value_sets[ops[0]].items():
                changed |= self._assign(instr, (0,) + ix, vals)
            return changed
        if op == "recv-done":
            changed = False
            svs = self.value_sets[ops[0]]
            for ix in self.value_sets[instr]:
                if ix and ix[0] == 0:
                    changed |= self._assign(instr, ix, svs.get(ix, []))
            return changed
        if op == "copy-start":
            return self._assign(instr, (1,), self.value_sets[ops[0]].get((), []))
        if op == "copy-done":
            return self._assign(instr, (), self.value_sets[ops[0]].get((0,), []))
        if op == "all-reduce-done":
            return self._forward_all(instr, ops[0])
        if op == "all-gather-start":
            changed = False
            for k, o in enumerate(ops):
                out = (0, k) if len(ops) > 1 else (0,)
                changed |= self._assign(instr, out, self.value_sets[o].get((), []))
            return changed
        if op == "all-gather-done":
            changed = False
            svs = self.value_sets[ops[0]]
            for ix in self.value_sets[instr]:
                if not _tuple_shaped(instr.shape, ix):
                    changed |= self._assign(instr, ix, svs.get((1,) + ix, []))
            return changed
        if op == "collective-permute-start":
            return self._update_cp_start(instr)
        if op == "collective-permute-done":
            svs = self.value_sets[ops[0]]
            if instr.shape.is_tuple:
                changed = False
                for k in range(len(instr.shape.tuple_shapes)):
                    changed |= self._assign(instr, (k,), svs.get((1, k), []))
                return changed
            return self._assign(instr, (), svs.get((1,), []))
        if op in ("async-start", "async-update", "async-done"):
            return self._update_async(instr)
        return False

    def _update_parameter(self, param: Instruction) -> bool:
        comp = param.parent
        cg = self.call_graph
        if comp is None or cg.context.get(comp) != "control" or not cg.callers.get(comp):
            return False
        inputs: list[dict] = []
        need_phi = False
        for site in cg.callers[comp]:
            op = site.opcode
            n = param.parameter_number or 0
            if op == "call":
                if n < len(site.operands):
                    inputs.append(self.value_sets[site.operands[n]])
            elif op == "while":
                inputs.append(self.value_sets[site.operands[0]])
                body = site.attrs.get("body")
                if isinstance(body, Computation) and body.root is not param and body.root is not None:
                    inputs.append(self.value_sets[body.root])
                need_phi = True
            elif op == "conditional":
                for j, b in enumerate(branches(site)):
                    if b is comp and j + 1 < len(site.operands):
                        inputs.append(self.value_sets[site.operands[j + 1]])
                        break
                need_phi = True
            elif op == "async-start":
                bound = async_bound_operands(site)
                if n < len(bound):
                    inputs.append(self.value_sets[bound[n]])
        if not inputs:
            return False
        if need_phi:
            return self._phi(param, inputs)
        changed = False
        for ix in self.value_sets[param]:
            union: dict[int, HloValue] = {}
            for inp in inputs:
                for v in inp.get(ix, []):
                    union[v.id] = v
            changed |= self._assign(param, ix, [union[k] for k in sorted(union)])
        return changed

    def _update_cp_start(self, instr: Instruction) -> bool:
        ops = instr.operands
        changed = False
        inplace = len(ops) == 4
        if not inplace and len(ops) > 1:
            for k, o in enumerate(ops):
                changed |= self._assign(instr, (0, k), self.value_sets[o].get((), []))
        elif ops[0].shape.is_tuple:
            for k in range(len(ops[0].shape.tuple_shapes)):
                changed |= self._assign(instr, (0, k), self.value_sets[ops[0]].get((k,), []))
        else:
            changed |= self._assign(instr, (0,), self.value_sets[ops[0]].get((), []))
        return changed

    def _update_async(self, instr: Instruction) -> bool:
        changed = False
        shape = instr.shape
        vs = self.value_sets[instr]
        op = instr.opcode
        if op in ("async-start", "async-update"):
            bound = instr.operands if op == "async-start" else async_bound_operands(instr)
            for k, o in enumerate(bound):
                for ix, vals in self.value_sets[o].items():
                    sub = o.shape.subshape(ix) if ix else o.shape
                    if _is_array_or_token(sub) and (0, k) + ix in vs:
                        changed |= self._assign(instr, (0, k) + ix, vals)
        if op == "async-update" and instr.operands:
            prev = self.value_sets[instr.operands[0]]
            for ix in vs:
                if ix and ix[0] > 1 and not _tuple_shaped(shape, ix):
                    changed |= self._assign(instr, ix, prev.get(ix, []))
        wrapped = async_wrapped(instr)
        if wrapped is not None and wrapped.root is not None:
            root = wrapped.root
            pre = (1,) if op != "async-done" else ()
            for ix, vals in self.value_sets[root].items():
                sub = root.shape.subshape(ix) if ix else root.shape
                if not _is_array_or_token(sub):
                    continue
                out = pre + ix
                if out in vs and not _tuple_shaped(shape, out):
                    changed |= self._assign(instr, out, vals)
        return changed

    # -- phis ---------------------------------------------------------------------------
    def _phi(self, instr: Instruction, inputs: list[dict]) -> bool:
        changed = False
        vs = self.value_sets[instr]
        for ix, cur_list in vs.items():
            cur = cur_list[0] if len(cur_list) == 1 else None
            ids: list[HloValue] = []
            for inp in inputs:
                ids.extend(inp.get(ix, ()))
            defined_here = cur is not None and cur.instruction is instr and cur.index == ix
            if not ids:
                continue
            if len(ids) == 1:
                new = ids[0]
                if cur is None or cur is not new:
                    if cur is not None and defined_here:
                        self._deleted.add(cur.id)
                    vs[ix] = [new]
                    changed = True
            else:
                if cur is None or not (defined_here and cur.is_phi):
                    phi = self._new_value(instr, ix, is_phi=True)
                    vs[ix] = [phi]
                    self._phi_inputs[phi.id] = [v.id for v in ids]
                    changed = True
                else:
                    new_ids = [v.id for v in ids]
                    if set(self._phi_inputs.get(cur.id, ())) != set(new_ids):
                        self._phi_inputs[cur.id] = new_ids
                        changed = True
        return changed


def branches(instr: Instruction) -> list[Computation]:
    b = instr.attrs.get("branch_computations")
    if isinstance(b, list):
        return b
    out = []
    for key in ("true_computation", "false_computation"):
        c = instr.attrs.get(key)
        if isinstance(c, Computation):
            out.append(c)
    return out


def async_wrapped(instr: Instruction) -> Computation | None:
    cur = instr
    for _ in range(64):
        c = cur.attrs.get("calls")
        if isinstance(c, Computation):
            return c
        if isinstance(c, list) and c:
            return c[0]
        if not cur.operands or cur.operands[0].opcode not in ("async-start", "async-update"):
            return None
        cur = cur.operands[0]
    return None


def async_bound_operands(instr: Instruction) -> list[Instruction]:
    """Operands bound so far along an async chain (start's operands plus
    each update's extra operands)."""
    chain: list[Instruction] = []
    cur = instr
    while cur.opcode in ("async-update", "async-done") and cur.operands:
        chain.append(cur)
        cur = cur.operands[0]
    bound = list(cur.operands) if cur.opcode == "async-start" else []
    for c in reversed(chain):
        bound.extend(c.operands[1:])
    return bound
