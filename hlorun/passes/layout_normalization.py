"""layout_normalization: give every instruction a descending layout (XLA's
LayoutNormalization, xla/service/layout_normalization.cc).

An array ``S{L}`` with a non-descending layout ``L`` holds the same bytes as
the array of its dimensions listed major to minor with the descending
layout, ``normalize(S{L})``.  The pass rewrites each instruction on its
normalized operands (which are either already descending, or bitcasts of
descending instructions) into an instruction of normalized shape, adjusting
its dimension attributes (transpose/broadcast/concatenate/reverse/iota
dimensions, slice ranges, padding, windows, dynamic-slice indices,
convolution and scatter dimension numbers; cuDNN convolution calls through
:mod:`.conv_layout_normalization`), and bitcasts the result back to
the original shape for the users.  Copies and transposes become physical
transposes in descending layouts.  Instructions it does not know are
bracketed by bitcasts (``DefaultAction``).  The walk order and instruction
creation follow XLA's DfsHloRewriteVisitor, so the result matches XLA's.

Precondition: every reshape is a bitcast (``reshape-is-bitcast``; XLA
RET_CHECKs, which this pass reports as a PassError with XLA's message).
Postcondition: every instruction it handled has a descending layout; the
only non-descending layouts left are on bitcasts, parameters, and the
instructions it does not handle (tuples, the root keeps its shape).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir import attrs as A
from ..ir.module import Instruction, Module
from ..ir.shape import (SUB_BYTE_TYPES, Shape, change_element_type, compose_permutations,
                        inverse_permutation, is_descending_layout, is_f8,
                        make_shape_with_descending_layout_and_same_physical_layout,
                        permute, reshape_is_bitcast, with_element_size_in_bits)
from .base import Pass
from .conv_matching import format_conv_dims, make_conv_dims
from .dfs_rewrite import DfsRewriteVisitor, make



def normalize(shape: Shape) -> Shape:
    return make_shape_with_descending_layout_and_same_physical_layout(shape)


def to_transpose_dims(shape: Shape) -> list[int]:
    """The transposition from identity to the layout: minor_to_major reversed."""
    return list(reversed(shape.minor_to_major))


#: shape -> is it an array with the default layout (shapes are immutable;
#: a module has few distinct ones, and the visitor asks for every operand)
_DEFAULT_LAYOUT: dict[Shape, bool] = {}


def has_default_layout(instr: Instruction) -> bool:
    s = instr.shape
    got = _DEFAULT_LAYOUT.get(s)
    if got is None:
        got = _DEFAULT_LAYOUT[s] = s.is_array and is_descending_layout(s)
    return got


def _ints(values) -> str:
    return A.format_int_list([int(v) for v in values])


class _RetCheck(Exception):
    pass


def _ret_check(cond: bool, what: str, instr: Instruction) -> None:
    if not cond:
        raise _RetCheck(f"RET_CHECK failure (xla/service/layout_normalization.cc) {what}: "
                        f"{instr.name} = {instr.shape} {instr.opcode}("
                        + ", ".join(f"{o.shape} %{o.name}" for o in instr.operands) + ")")


class _Visitor(DfsRewriteVisitor):
    def __init__(self, owner: "LayoutNormalization"):
        super().__init__()
        self.owner = owner

    # -- helpers ------------------------------------------------------------------
    def should_process(self, hlo: Instruction) -> bool:
        if not has_default_layout(hlo):  # (an array with the default layout)
            return True
        for o in hlo.operands:
            if not has_default_layout(o):
                return True
        return False

    def run_on_computation(self, comp) -> None:
        # Handlers only run on instructions should_process accepts; where it
        # accepts none, the walk would change nothing (and so none becomes
        # acceptable during it): skip the walk.
        sp = self.should_process
        for i in comp._instructions:
            if sp(i):
                super().run_on_computation(comp)
                return

    def normalized_input(self, hlo: Instruction) -> Instruction:
        if has_default_layout(hlo):
            return hlo
        _ret_check(hlo.opcode == "bitcast", f"Unexpected HLO input: {hlo.name}", hlo)
        inp = hlo.operands[0]
        _ret_check(has_default_layout(inp), "HasDefaultLayout(input)", hlo)
        return inp

    def maybe_bitcast(self, hlo: Instruction, shape: Shape) -> Instruction:
        return hlo if hlo.shape == shape else make("bitcast", shape, [hlo])

    def replace(self, hlo: Instruction, new: Instruction, what: str) -> None:
        self.owner.remark(hlo, what, derived_from=[hlo])
        self.replace_instruction(hlo, new)

    def new(self, opcode, shape, operands, attrs=None, metadata_from=None, comp=None) -> Instruction:
        instr = make(opcode, shape, operands, attrs, metadata_from, comp)
        self.set_visited(instr)
        return instr

    # -- DefaultAction: bracket with bitcasts ---------------------------------------
    def default_action(self, hlo: Instruction) -> None:
        if not hlo._users:
            return
        users = hlo.users
        shape = hlo.shape
        if shape.is_tuple or shape.is_token or not shape.is_array:
            return
        bc_norm = self.maybe_bitcast(hlo, normalize(shape))
        self.set_visited(bc_norm)
        bc_orig = self.maybe_bitcast(bc_norm, shape)
        if bc_orig is not hlo:
            for u in users:
                u.replace_operand_with(hlo, bc_orig)
            self.mark_changed()
            self.owner.remark(hlo, "bracketed by bitcasts to and from the descending layout")

    def handle_custom_call(self, hlo: Instruction) -> None:
        # XLA:GPU's custom-call hook: cuDNN convolutions are renumbered
        from .conv_layout_normalization import is_dnn_convolution, normalize_conv
        if is_dnn_convolution(hlo):
            if normalize_conv(self, hlo):
                self.mark_changed()
            return
        self.default_action(hlo)

    # -- leaves ------------------------------------------------------------------
    def handle_constant(self, hlo: Instruction) -> None:
        shape = hlo.shape
        lit = hlo.literal
        if not shape.is_array or shape.element_count == 0 or lit is None or lit.shape.is_tuple:
            return
        import numpy as np
        from ..ir.literal import Literal
        normalized = normalize(shape)
        value = np.asarray(lit.value)
        new_value = np.transpose(value, to_transpose_dims(shape)) if value.ndim else value
        hlo.literal = Literal.from_array(new_value, normalized)
        hlo.shape = normalized
        bc = make("bitcast", shape, [hlo])
        for u in hlo.users:
            if u is not bc:
                u.replace_operand_with(hlo, bc)
        if hlo.is_root():
            hlo.parent.root = bc
        self.mark_changed()
        self.owner.remark(hlo, f"constant relaid out as {normalized}")

    def handle_iota(self, hlo: Instruction) -> None:
        s = hlo.shape
        inv = inverse_permutation(to_transpose_dims(s))
        dim = inv[int(hlo.attrs["iota_dimension"])]
        it = self.new("iota", normalize(s), [], {"iota_dimension": str(dim)}, comp=hlo.parent)
        self.replace(hlo, self.maybe_bitcast(it, s), "iota in descending layout")

    # -- layout-preserving ops ---------------------------------------------------
    def handle_elementwise_unary(self, hlo: Instruction) -> None:
        s, operand = hlo.shape, hlo.operands[0]
        _ret_check(s.minor_to_major == operand.shape.minor_to_major and
                   _same_layout_ignoring_element_size(s, operand.shape),
                   "Unexpected non-layout preserving elementwise unary", hlo)
        a0 = self.normalized_input(operand)
        op = hlo.opcode
        if op == "convert":
            new = self.make_convert(a0, s.element_type, hlo)
        elif op == "reduce-precision":
            new = make(op, a0.shape, [a0], {"exponent_bits": hlo.attrs["exponent_bits"],
                                            "mantissa_bits": hlo.attrs["mantissa_bits"]}, hlo)
        elif op == "bitcast-convert":
            new = a0 if a0.shape.element_type == s.element_type else \
                make(op, change_element_type(a0.shape, s.element_type), [a0], None, hlo)
        else:
            new = make(op, _unary_shape(op, a0.shape), [a0], None, hlo)
        if new is not a0:
            self.set_visited(new)
        self.replace(hlo, self.maybe_bitcast(new, s), f"{op} on the descending layout")

    def make_convert(self, a0: Instruction, element_type: str, hlo: Instruction) -> Instruction:
        """``MakeConvertToHlo``: same type is a no-op; sub-byte results get
        their element size in bits."""
        if a0.shape.element_type == element_type:
            return a0
        from ..ir.shape import bit_width
        shape = a0.shape.with_element_type(element_type)
        bits = bit_width(element_type) if element_type in SUB_BYTE_TYPES else 0
        if shape.layout is not None and shape.layout.element_size_in_bits != bits:
            shape = shape.with_layout(with_element_size_in_bits(shape.layout, bits))
        return make("convert", shape, [a0], None, hlo)

    def handle_elementwise_binary(self, hlo: Instruction) -> None:
        s = hlo.shape
        a, b = hlo.operands
        if hlo.opcode == "compare":
            ok = _same_layout_ignoring_element_size(a.shape, s)
        else:
            ok = a.shape.layout == s.layout
        _ret_check(ok, "layout_equal(a->shape().layout(), s.layout())", hlo)
        a0, b0 = self.normalized_input(a), self.normalized_input(b)
        et = "pred" if hlo.opcode == "compare" else _binary_type(hlo.opcode, a0.shape, b0.shape)
        attrs = {k: hlo.attrs[k] for k in ("direction", "type") if k in hlo.attrs} \
            if hlo.opcode == "compare" else None
        new = self.new(hlo.opcode, change_element_type(a0.shape, et), [a0, b0], attrs, hlo)
        self.replace(hlo, self.maybe_bitcast(new, s), f"{hlo.opcode} on the descending layout")

    def handle_select(self, hlo: Instruction) -> None:
        self.ternary(hlo)

    def handle_clamp(self, hlo: Instruction) -> None:
        self.ternary(hlo)

    def ternary(self, hlo: Instruction) -> None:
        s = hlo.shape
        arg0, arg1, arg2 = hlo.operands
        _ret_check(arg1.shape.layout == s.layout, "arg1->shape().layout() == s.layout()", hlo)
        if hlo.opcode == "select":
            _ret_check(arg2.shape.layout == s.layout, "arg2->shape().layout() == s.layout()", hlo)
        n0, n1, n2 = (self.normalized_input(x) for x in (arg0, arg1, arg2))
        shape = n1.shape if n1.shape.rank or not n2.shape.rank else n2.shape
        if hlo.opcode == "clamp" and not n1.shape.rank:
            shape = next((x.shape for x in (n0, n2) if x.shape.rank), n1.shape)
        new = self.new(hlo.opcode, shape.with_element_type(s.element_type), [n0, n1, n2],
                       None, hlo)
        self.replace(hlo, self.maybe_bitcast(new, s), f"{hlo.opcode} on the descending layout")

    def handle_reshape(self, hlo: Instruction) -> None:
        s, operand = hlo.shape, hlo.operands[0]
        if not reshape_is_bitcast(s, operand.shape):
            raise _RetCheck("RET_CHECK failure (xla/service/layout_normalization.cc:429) "
                            "ShapeUtil::ReshapeIsBitcast(s, operand->shape()): reshape "
                            f"%{hlo.name} from %{operand.name} {operand.shape} to {s} is not a bitcast")
        a0 = self.normalized_input(operand)
        new = self.new("reshape", normalize(s), [a0])
        self.replace(hlo, self.maybe_bitcast(new, s), "reshape between descending layouts")

    def handle_transpose(self, hlo: Instruction) -> None:
        s, operand = hlo.shape, hlo.operands[0]
        a0 = self.normalized_input(operand)
        l0 = inverse_permutation(to_transpose_dims(operand.shape))
        t = compose_permutations(l0, hlo.dimensions)
        dims = compose_permutations(t, to_transpose_dims(s))
        if list(dims) == list(range(len(dims))):
            new = a0
        else:
            new = self.new("transpose", normalize(s), [a0], {"dimensions": _ints(dims)})
        self.replace(hlo, self.maybe_bitcast(new, s), "transpose between descending layouts")

    def handle_copy(self, hlo: Instruction) -> None:
        s, operand = hlo.shape, hlo.operands[0]
        a0 = self.normalized_input(operand)
        l0 = inverse_permutation(to_transpose_dims(operand.shape))
        dims = compose_permutations(l0, to_transpose_dims(s))
        t = self.new("transpose", normalize(s), [a0], {"dimensions": _ints(dims)})
        self.replace(hlo, self.maybe_bitcast(t, s), "copy became a physical transpose")

    def handle_bitcast_convert(self, hlo: Instruction) -> None:
        operand = hlo.operands[0]
        if hlo.shape.rank == operand.shape.rank:
            return self.handle_elementwise_unary(hlo)
        extra = operand.shape if operand.shape.rank > hlo.shape.rank else hlo.shape
        if extra.minor_to_major and extra.minor_to_major[0] == extra.rank - 1:
            s = hlo.shape
            a0 = self.normalized_input(operand)
            new = self.new("bitcast-convert", normalize(s), [a0], None, hlo)
            self.replace(hlo, self.maybe_bitcast(new, s), "bitcast-convert on descending layouts")
            return
        self.default_action(hlo)

    # -- ops with dimension attributes ----------------------------------------------
    def handle_slice(self, hlo: Instruction) -> None:
        s, operand = hlo.shape, hlo.operands[0]
        _ret_check(s.layout == operand.shape.layout, "s.layout() == operand_shape.layout()", hlo)
        a0 = self.normalized_input(operand)
        perm = to_transpose_dims(s)
        ranges = permute(A.parse_slice(hlo.attrs["slice"]), perm)
        dims = [max(0, (hi - lo + st - 1) // st) for lo, hi, st in ranges]
        shape = Shape.array(s.element_type, dims, a0.shape.layout)
        new = self.new("slice", shape, [a0], {"slice": A.format_slice(ranges)}, hlo)
        self.replace(hlo, self.maybe_bitcast(new, s), "slice on the descending layout")

    def handle_concatenate(self, hlo: Instruction) -> None:
        s = hlo.shape
        inputs = [self.normalized_input(o) for o in hlo.operands]
        dim = inverse_permutation(to_transpose_dims(s))[hlo.dimensions[0]]
        new = self.new("concatenate", normalize(s), inputs, {"dimensions": _ints([dim])})
        self.replace(hlo, self.maybe_bitcast(new, s), "concatenate on descending layouts")

    def handle_broadcast(self, hlo: Instruction) -> None:
        s, operand = hlo.shape, hlo.operands[0]
        a0 = self.normalized_input(operand)
        dims = []
        if hlo.dimensions:
            inv = inverse_permutation(to_transpose_dims(s))
            dims = [inv[d] for d in compose_permutations(hlo.dimensions, to_transpose_dims(operand.shape))]
        new = self.new("broadcast", normalize(s), [a0], {"dimensions": _ints(dims)}, hlo)
        self.replace(hlo, self.maybe_bitcast(new, s), "broadcast on descending layouts")

    def handle_reverse(self, hlo: Instruction) -> None:
        s = hlo.shape
        a0 = self.normalized_input(hlo.operands[0])
        inv = inverse_permutation(to_transpose_dims(s))
        dims = sorted(inv[d] for d in hlo.dimensions)
        new = self.new("reverse", a0.shape, [a0], {"dimensions": _ints(dims)})
        self.replace(hlo, self.maybe_bitcast(new, s), "reverse on the descending layout")

    def handle_pad(self, hlo: Instruction) -> None:
        s = hlo.shape
        operand, value = hlo.operands
        a0 = self.normalized_input(operand)
        config = A.parse_padding(hlo.attrs["padding"])
        inv = inverse_permutation(to_transpose_dims(s))
        new_cfg = [(0, 0, 0)] * s.rank
        for d in range(s.rank):
            new_cfg[inv[d]] = config[d]
        new = self.new("pad", normalize(s), [a0, value], {"padding": A.format_padding(new_cfg)})
        self.replace(hlo, self.maybe_bitcast(new, s), "pad on the descending layout")

    def handle_reduce_window(self, hlo: Instruction) -> None:
        if hlo.shape.is_tuple:
            return
        s = hlo.shape
        operand, init = hlo.operands
        _ret_check(s.layout == operand.shape.layout, "hlo->shape().layout() == operand->shape().layout()", hlo)
        a0 = self.normalized_input(operand)
        window = permute(A.parse_window(hlo.attrs["window"]), to_transpose_dims(s))
        dims = [_window_output(a0.shape.dimensions[i], w) for i, w in enumerate(window)]
        shape = Shape.array(s.element_type, dims)
        new = self.new("reduce-window", shape, [a0, init],
                       {"window": A.format_window(window), "to_apply": hlo.attrs["to_apply"]}, hlo)
        self.replace(hlo, self.maybe_bitcast(new, s), "reduce-window on the descending layout")

    def handle_dynamic_slice(self, hlo: Instruction) -> None:
        s, operand = hlo.shape, hlo.operands[0]
        _ret_check(s.layout == operand.shape.layout, "s.layout() == operand_shape.layout()", hlo)
        a0 = self.normalized_input(operand)
        perm = to_transpose_dims(s)
        starts = permute(hlo.operands[1:], perm)
        sizes = permute(A.parse_int_list(hlo.attrs["dynamic_slice_sizes"]), perm)
        shape = Shape.array(s.element_type, sizes, a0.shape.layout)
        new = self.new("dynamic-slice", shape, [a0] + starts,
                       {"dynamic_slice_sizes": _ints(sizes)}, hlo)
        self.replace(hlo, self.maybe_bitcast(new, s), "dynamic-slice on the descending layout")

    def handle_dynamic_update_slice(self, hlo: Instruction) -> None:
        s, operand, update = hlo.shape, hlo.operands[0], hlo.operands[1]
        _ret_check(s.layout == operand.shape.layout, "s.layout() == operand_shape.layout()", hlo)
        perm = to_transpose_dims(s)
        new_operand = self.normalized_input(operand)
        new_update = self.normalized_input(update)
        starts = permute(hlo.operands[2:], perm)
        new = self.new("dynamic-update-slice", new_operand.shape,
                       [new_operand, new_update] + starts, None, hlo)
        self.replace(hlo, self.maybe_bitcast(new, s), "dynamic-update-slice on the descending layout")

    def handle_scatter(self, hlo: Instruction) -> None:
        n = (len(hlo.operands) - 1) // 2
        operands, indices, updates = hlo.operands[:n], hlo.operands[n], hlo.operands[n + 1:]
        if any(o.shape.layout != operands[0].shape.layout for o in operands):
            raise _RetCheck("FailedPrecondition: All scatter operands must have the same layout")
        new_operands = [self.normalized_input(o) for o in operands]
        if any(u.shape.layout != updates[0].shape.layout for u in updates):
            raise _RetCheck("FailedPrecondition: All scatter updates must have the same layout")
        new_updates = [self.normalized_input(u) for u in updates]
        uwd = list(hlo.int_list("update_window_dims"))
        iwd = list(hlo.int_list("inserted_window_dims"))
        s2o = list(hlo.int_list("scatter_dims_to_operand_dims"))
        ivd = int(hlo.attrs.get("index_vector_dim", "0"))
        if updates[0].shape.rank - len(uwd) > 1:
            raise _RetCheck("FailedPrecondition: There should be just a single scatter dimension. "
                            "Make sure to run ScatterSimplifier before LayoutNormalization")
        new_indices = self.normalized_input(indices)
        indices_perm = inverse_permutation(to_transpose_dims(indices.shape))
        layout_perm = to_transpose_dims(operands[0].shape)
        operand_perm = inverse_permutation(layout_perm)
        update_perm = inverse_permutation(to_transpose_dims(updates[0].shape))
        new_ivd = indices_perm[ivd] if ivd < len(indices_perm) else ivd
        new_s2o = [operand_perm[d] for d in s2o]
        new_uwd = [update_perm[d] for d in uwd]
        window: list[int] = []
        j = k = 0
        for i in range(len(operand_perm)):
            if j < len(iwd) and iwd[j] == i:
                window.append(-1)
                j += 1
            else:
                window.append(new_uwd[k])
                k += 1
        permuted = compose_permutations(window, layout_perm)
        attrs = {"update_window_dims": _ints([d for d in permuted if d != -1]),
                 "inserted_window_dims": _ints([i for i, d in enumerate(permuted) if d == -1]),
                 "scatter_dims_to_operand_dims": _ints(new_s2o),
                 "index_vector_dim": str(new_ivd)}
        for key in ("indices_are_sorted", "unique_indices", "to_apply"):
            if key in hlo.attrs:
                attrs[key] = hlo.attrs[key]
        shape = new_operands[0].shape if not hlo.shape.is_tuple else \
            Shape.tuple(o.shape for o in new_operands)
        new = self.new("scatter", shape, new_operands + [new_indices] + new_updates, attrs)
        self.replace(hlo, self.maybe_bitcast(new, hlo.shape), "scatter on descending layouts")

    def handle_convolution(self, hlo: Instruction) -> None:
        ops = [self.normalized_input(o) for o in hlo.operands]
        normalized = normalize(hlo.shape)
        if all(a is b for a, b in zip(ops, hlo.operands)) and normalized == hlo.shape:
            return
        d = A.parse_dim_labels(hlo.attrs["dim_labels"])

        def remap(shape, batch, feature, spatial):
            p = inverse_permutation(to_transpose_dims(shape))
            return p[batch], p[feature], [p[x] for x in spatial]

        ib, if_, isp = remap(hlo.operands[0].shape, d.input_batch, d.input_feature, d.input_spatial)
        ki, ko, ksp = remap(hlo.operands[1].shape, d.kernel_input_feature,
                            d.kernel_output_feature, d.kernel_spatial)
        ob, of, osp = remap(hlo.shape, d.output_batch, d.output_feature, d.output_spatial)
        attrs = dict(hlo.attrs)
        attrs["dim_labels"] = format_dim_labels(hlo.shape.rank, (ib, if_, isp), (ki, ko, ksp), (ob, of, osp))
        new = Instruction("convolution", normalized, ops, hlo.name, attrs)
        hlo.parent.add_instruction(new, hlo.name)
        self.replace(hlo, self.maybe_bitcast(new, hlo.shape), "convolution on descending layouts")


def _same_layout_ignoring_element_size(a: Shape, b: Shape) -> bool:
    la, lb = a.layout, b.layout
    if la is None or lb is None:
        return la is lb
    return with_element_size_in_bits(la, 0) == with_element_size_in_bits(lb, 0)


def _unary_shape(opcode: str, shape: Shape) -> Shape:
    """``ShapeInference::InferUnaryOpShape`` on a normalized operand."""
    t = shape.element_type
    if opcode == "is-finite":
        return change_element_type(shape, "pred")
    if opcode in ("real", "imag") or (opcode == "abs" and t in ("c64", "c128")):
        return change_element_type(shape, {"c64": "f32", "c128": "f64"}.get(t, t))
    return shape


def _binary_type(opcode: str, a: Shape, b: Shape) -> str:
    if opcode == "complex":
        return {"f32": "c64", "f64": "c128"}.get(a.element_type, a.element_type)
    if a.element_type != b.element_type and not is_f8(a.element_type):
        from ..ir.shape import bit_width
        return a.element_type if bit_width(a.element_type) >= bit_width(b.element_type) else b.element_type
    return a.element_type


def _window_output(size: int, w) -> int:
    padded = (size - 1) * w.base_dilation + 1 + w.padding_low + w.padding_high if size else 0
    window = (w.size - 1) * w.window_dilation + 1
    if padded < window:
        return 0
    return (padded - window) // w.stride + 1


def format_dim_labels(rank: int, lhs, rhs, out) -> str:
    """XLA's ConvolutionDimensionNumbersToString of (batch, feature, spatial)
    triples for the input, the kernel (input feature, output feature,
    spatial) and the output."""
    return format_conv_dims(make_conv_dims(*lhs, *rhs, *out), rank)


@dataclass(frozen=True)
class LayoutNormalization(Pass):
    """Rewrite instructions to descending layouts, bitcasting at the edges."""

    name = "layout_normalization"

    def run(self, module: Module) -> bool:
        visitor = _Visitor(self)
        try:
            return visitor.run_on_module(module)
        except _RetCheck as e:
            self.fail(str(e))
            return False
