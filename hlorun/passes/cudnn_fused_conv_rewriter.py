"""cudnn-fused-convolution-rewriter: XLA:GPU's CudnnFusedConvRewriter
(xla/backends/gpu/transforms/cudnn_fused_conv_rewriter.cc), the float
subset.

Patterns fused into a cuDNN forward convolution (a non-depthwise
``__cudnn$convForward`` / ``__cudnn$convBiasActivationForward`` whose
result tuple element 0 has that single use), in XLA's order, "inside out":

1. ``FuseConvAlpha``: ``gte * broadcast(scalar constant)`` -> ``conv_result_scale``
   (CUDA only; the scale must be exact in f32 -- f64 for f64 convs);
2. ``FuseBiasOrSideInput`` (twice): ``gte + addend``: a broadcast of a
   vector along the output-feature dimension (or of a scalar), losslessly
   convertible to the conv type, becomes the bias operand; any other addend
   becomes the side input (``side_input_scale`` 1, not on ROCm); a
   ``__cudnn$convForward`` is upgraded to ``__cudnn$convBiasActivationForward``
   (``cudnn-conv-bias-activation``, zero bias) first.  Not fused once an
   activation is set (bias and side input come before it);
3. ``FuseRelu``: ``maximum(gte, broadcast(0))`` -> ``activation_mode kRelu``.

Each fusion is a remark (``applied``), each blocked one says why
(``missed``: the conv result has other users, an activation is already
fused, the addend is not a bias and both slots are taken ...).

Not implemented (stated): FP8 graph convolutions (``F8GraphConv``),
integer (s8) convolutions and their converts, ``FuseConvertToF16``, side
input scaling (``FuseSideInputAlpha``), and elu / relu6 / leaky-relu, which
XLA only fuses with ``--xla_gpu_use_runtime_fusion`` (off by default).

Postcondition: no conv + bias / side input / relu chain of the forms above
remains unfused.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.attrs import parse_dim_labels, quote
from ..ir.module import Computation, Instruction, Module
from ..ir.shape import Shape, is_floating
from .base import Pass
from .conv_rewriter import CONV_BIAS_ACTIVATION, CONV_FORWARD
from .dfs_rewrite import add_instruction, nonfusion_computations


def is_conv_call(i: Instruction) -> bool:
    return i.opcode == "custom-call" and i.custom_call_target in (CONV_FORWARD, CONV_BIAS_ACTIVATION)


def is_depthwise(conv: Instruction) -> bool:
    groups = int(conv.attrs.get("feature_group_count", "1"))
    if groups == 1:
        return False
    dl = parse_dim_labels(conv.attrs["dim_labels"])
    return conv.operands[0].shape.dimensions[dl.input_feature] == groups


def _conv_gte(x: Instruction) -> tuple[Instruction, Instruction] | None:
    """(gte, conv) when ``x`` is ``get-tuple-element(conv, 0)`` of a
    non-depthwise cuDNN forward convolution."""
    if x.opcode != "get-tuple-element" or x.tuple_index != 0:
        return None
    conv = x.operands[0]
    if not is_conv_call(conv) or is_depthwise(conv):
        return None
    return x, conv


def _scalar_constant(x: Instruction):
    """The value of an effective-scalar constant, or None."""
    if x.opcode != "constant" or x.literal is None:
        return None
    try:
        import numpy as np
        v = np.asarray(x.literal.value)
    except Exception:
        return None
    flat = v.reshape(-1)
    if flat.size == 0 or not (flat == flat[0]).all():
        return None
    return flat[0]


def _lossless(x: Instruction, t: str) -> bool:
    """``IsLosslesslyConvertibleTo`` (constants, converts, data movement)."""
    if x.shape.element_type == t:
        return True
    if x.opcode == "convert" and x.operands[0].shape.element_type == t:
        from ..ir.shape import bit_width
        a, b = t, x.shape.element_type
        return (is_floating(a) and is_floating(b) and bit_width(b) >= bit_width(a))
    if x.opcode == "constant":
        v = _scalar_constant(x)
        if v is None:
            return False
        import numpy as np
        from ..ir.literal import numpy_dtype
        try:
            back = np.asarray(v).astype(numpy_dtype(t)).astype(np.asarray(v).dtype)
        except (TypeError, ValueError):
            return False
        return bool(back == v)
    if x.opcode in ("broadcast", "reshape", "transpose"):
        return _lossless(x.operands[0], t)
    return False


def _config(conv: Instruction) -> dict:
    return conv.backend_config or {}


@dataclass(frozen=True)
class CudnnFusedConvRewriter(Pass):
    """Fuse scale, bias, side input and ReLU into cuDNN convolutions."""

    name = "cudnn-fused-convolution-rewriter"

    def run(self, module: Module) -> bool:
        changed = False
        for comp in nonfusion_computations(module):
            if not any(i.opcode == "custom-call" and is_conv_call(i) for i in comp._instructions):
                continue  # every pattern starts at a cuDNN convolution of this computation
            for step in (self.fuse_alpha, self.fuse_bias_or_side_input,
                         self.fuse_bias_or_side_input, self.fuse_relu,
                         self.fuse_bias_or_side_input, self.fuse_bias_or_side_input,
                         self.fuse_relu):
                changed |= step(comp)
        return changed

    # -- helpers ------------------------------------------------------------------------
    def _ensure_bias_activation(self, conv: Instruction) -> Instruction:
        """``EnsureIsConvBiasActivation``: a plain forward conv gets a zero
        bias and the bias-activation target (name cudnn-conv-bias-activation)."""
        if conv.custom_call_target == CONV_BIAS_ACTIVATION:
            return conv
        comp = conv.parent
        shape = conv.shape.tuple_shapes[0]
        dl = parse_dim_labels(conv.attrs["dim_labels"])
        features = shape.dimensions[dl.output_feature]
        bias_t = "f32" if not is_floating(shape.element_type) else shape.element_type
        from ..ir.build import make_broadcast, make_constant
        zero = make_constant(comp, bias_t, 0)
        bias = make_broadcast(zero, Shape.array(bias_t, [features]), [])
        new = self._clone(conv, list(conv.operands) + [bias])
        new.attrs["custom_call_target"] = quote(CONV_BIAS_ACTIVATION)
        old = conv.name
        self._replace_call(conv, new)
        self._uniquify(new, "cudnn-conv-bias-activation")
        self.remark(new, f"{old} upgraded to {CONV_BIAS_ACTIVATION} ({new.name}, zero bias)",
                    "analysis", derived_from=[old], rule="bias-activation")
        return new

    @staticmethod
    def _clone(conv: Instruction, operands: list[Instruction]) -> Instruction:
        new = Instruction("custom-call", conv.shape, operands, "", dict(conv.attrs))
        return add_instruction(conv.parent, new)

    @staticmethod
    def _replace_call(old: Instruction, new: Instruction) -> None:
        """Uses of ``old`` read ``new``; ``old`` and operands that became
        dead go (the zero bias a fused bias replaced)."""
        from ..ir.edit import remove_instruction_and_unused_operands
        comp = old.parent
        old.replace_all_uses_with(new)
        remove_instruction_and_unused_operands(comp, old)

    @staticmethod
    def _uniquify(instr: Instruction, base: str) -> None:
        comp = instr.parent
        if comp._names is not None:
            comp._names.pop(instr.name, None)
        instr.name = comp.module.unique_name(base)
        comp._names = None

    def _replace(self, comp: Computation, old: Instruction, new: Instruction) -> None:
        from ..ir.edit import replace_instruction
        replace_instruction(comp, old, new)

    # -- patterns -----------------------------------------------------------------------
    def fuse_alpha(self, comp: Computation) -> bool:
        if self.target.is_rocm:
            return False
        changed = False
        for instr in comp.post_order():
            if instr.parent is not comp or instr.opcode != "multiply":
                continue
            for a, b in ((0, 1), (1, 0)):
                got = _conv_gte(instr.operands[a])
                other = instr.operands[b]
                if got is None or other.opcode != "broadcast":
                    continue
                gte, conv = got
                alpha = _scalar_constant(other.operands[0])
                if gte.user_count != 1 or alpha is None:
                    continue
                alpha_t = "f64" if gte.shape.element_type == "f64" else "f32"
                if not _lossless(other.operands[0], alpha_t):
                    continue
                cfg = _config(conv)
                if cfg.get("cudnn_conv_backend_config", {}).get("conv_result_scale", 1) != 1:
                    continue
                conv = self._ensure_bias_activation(conv)
                cfg = _config(conv)
                cfg["cudnn_conv_backend_config"]["conv_result_scale"] = float(alpha)
                conv.set_backend_config(cfg)
                self.remark(conv, f"scale {float(alpha):g} ({instr.name}) fused as conv_result_scale",
                            derived_from=[instr], rule="alpha")
                self._replace(comp, instr, gte)
                changed = True
                break
        return changed

    def fuse_bias_or_side_input(self, comp: Computation) -> bool:
        changed = False
        for instr in comp.post_order():
            if instr.parent is not comp or instr.opcode != "add":
                continue
            for a, b in ((0, 1), (1, 0)):
                got = _conv_gte(instr.operands[a])
                if got is None:
                    continue
                gte, conv = got
                addend = instr.operands[b]
                if conv.user_count != 1 or gte.user_count != 1:
                    self.remark(conv, f"{instr.name} not fused: the convolution result has other "
                                      f"users", "missed", derived_from=[instr])
                    continue
                cfg = _config(conv).get("cudnn_conv_backend_config", {})
                if cfg.get("activation_mode", "kNone") != "kNone":
                    self.remark(conv, f"{instr.name} not fused: an activation "
                                      f"({cfg['activation_mode']}) is already fused and bias / "
                                      f"side input are added before it", "missed",
                                derived_from=[instr])
                    continue
                if self._fuse_add(comp, instr, gte, conv, addend):
                    changed = True
                    break
        return changed

    def _fuse_add(self, comp, instr, gte, conv, addend) -> bool:
        can_accept_bias = len(conv.operands) < 3 or (
            conv.operands[2].opcode == "broadcast"
            and _scalar_constant(conv.operands[2].operands[0]) == 0)
        can_accept_side_input = len(conv.operands) < 4 and not self.target.is_rocm
        conv_t = gte.shape.element_type
        bias_t = conv_t if is_floating(conv_t) else "f32"
        dl = parse_dim_labels(conv.attrs["dim_labels"])
        bcast = addend.opcode == "broadcast"
        rank1 = bcast and addend.dimensions == (dl.output_feature,) and _lossless(addend, bias_t)
        rank0 = bcast and addend.dimensions == () and _lossless(addend, bias_t)
        if not rank1 and not rank0 and self.target.is_rocm:
            self.remark(conv, f"{instr.name} not fused: ROCm only fuses a bias broadcast along the "
                              f"output features", "missed", derived_from=[instr])
            return False
        if not ((can_accept_bias and (rank1 or rank0)) or can_accept_side_input):
            self.remark(conv, f"{instr.name} not fused: the convolution already has a bias and a "
                              f"side input", "missed", derived_from=[instr])
            return False
        conv = self._ensure_bias_activation(conv)
        ops = list(conv.operands)
        cfg = _config(conv)
        from ..ir.build import make_broadcast, make_convert
        src = addend.operands[0] if bcast else None
        if can_accept_bias and rank1:
            ops[2] = make_convert(src, bias_t, src.attrs.get("metadata"))
            what = f"bias {src.name} (broadcast along output features)"
        elif can_accept_bias and rank0:
            features = gte.shape.dimensions[dl.output_feature]
            ops[2] = make_broadcast(make_convert(src, bias_t, src.attrs.get("metadata")),
                                    Shape.array(bias_t, [features]), [])
            what = f"scalar bias {src.name}"
        else:
            ops.append(addend)
            cfg["cudnn_conv_backend_config"]["side_input_scale"] = 1
            what = f"side input {addend.name}"
        new = self._clone(conv, ops)
        new.set_backend_config(cfg)
        old_name = conv.name
        self._replace_call(conv, new)
        self._uniquify(new, old_name)
        new_gte = add_instruction(comp, Instruction("get-tuple-element", gte.shape, [new], "",
                                                    {"index": "0"}))
        self.remark(new, f"{instr.name}: {what} fused into {new.name} "
                         f"({CONV_BIAS_ACTIVATION})", derived_from=[instr, addend, old_name],
                    rule="bias" if "bias" in what else "side-input")
        self._replace(comp, instr, new_gte)
        return True

    def fuse_relu(self, comp: Computation) -> bool:
        changed = False
        for instr in comp.post_order():
            if instr.parent is not comp or instr.opcode != "maximum":
                continue
            for a, b in ((0, 1), (1, 0)):
                zero = instr.operands[b]
                got = _conv_gte(instr.operands[a])
                if got is None or zero.opcode != "broadcast" \
                        or _scalar_constant(zero.operands[0]) != 0:
                    continue
                gte, conv = got
                if conv.user_count != 1 or gte.user_count != 1:
                    self.remark(conv, f"ReLU {instr.name} not fused: the convolution result has "
                                      f"other users", "missed", derived_from=[instr])
                    continue
                cfg = _config(conv).get("cudnn_conv_backend_config", {})
                if cfg.get("activation_mode", "kNone") != "kNone":
                    continue
                conv = self._ensure_bias_activation(conv)
                cfg = _config(conv)
                cfg["cudnn_conv_backend_config"]["activation_mode"] = "kRelu"
                conv.set_backend_config(cfg)
                self.remark(conv, f"ReLU {instr.name} fused into {conv.name} (activation_mode kRelu)",
                            derived_from=[instr], rule="relu")
                self._replace(comp, instr, gte)
                changed = True
                break
        return changed
