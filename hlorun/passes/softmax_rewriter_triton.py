"""softmax-rewriter-triton: XLA:GPU's SoftmaxRewriterTriton
(xla/backends/gpu/transforms/softmax_rewriter_triton.cc), at the end of
hlo_normalization (after layout normalization, before fusion).

It finds *normalization diamonds* and makes each a generic Triton fusion
(``triton_softmax``, ``kind=kCustom``, ``{"kind":"__triton",
"block_level_fusion_config":...}``), which priority fusion then grows
(a producer or consumer fuses into a Triton fusion only if the result is
Triton-supported).  A diamond (``MatchesTritonCompatibleClosedReductionDiamond``):

* the root is a Triton-supported elementwise binary op;
* its operand 1 reaches a broadcast through *trivially fusible* ops (single
  user, default layout: bitcasts, Triton-supported unary elementwise ops,
  binary ops of one value with itself or with exactly one splat -- a
  broadcast of a scalar constant or of a parameter), which reaches a reduce
  the same way;
* the broadcast and the reduce have default layouts and one user each, the
  broadcast does not produce the last dimension (it re-expands the reduced
  one), the reduce is Triton-supported, reduces exactly the last dimension
  and starts from a constant (or a convert of one);
* the reduce's input, walked up through trivially fusible ops, is the
  *producer*; it has a default layout and reaches the root's operand 0
  trivially (which must have one user unless it is the producer).

The fusion holds everything between the producer (its parameter 0) and the
root, plus constants, splats and the parameters those read.  Diamonds are
fused last to first, so a diamond whose producer is the previous diamond's
root reads that fusion.

Not modelled (stated): XLA also requires SymbolicTileAnalysis to tile the
diamond and, with ``only_fuse_if_profitable``, compares the tiled cost
model's time with the priority-fusion result without the rewrite; hlorun
fuses every matched diamond.

Postcondition: every matched diamond is a ``__triton`` fusion.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.edit import remove_instruction_and_unused_operands
from ..ir.module import Computation, Instruction, Module
from ..ir.opcode import ELEMENTWISE_BINARY, ELEMENTWISE_UNARY
from .base import Pass
from .priority_fusion.analysis import fusible_computations
from .triton_support import block_level_config_for, unsupported_instruction


def _default_layout(shape) -> bool:
    if not shape.is_array:
        return False
    if shape.layout is None:
        return True
    return tuple(shape.minor_to_major) == tuple(reversed(range(shape.rank)))


def _supported(instr: Instruction) -> bool:
    return unsupported_instruction(instr) is None


def _splat(x: Instruction) -> bool:
    """``IsBroadcastOfScalarConstant`` or ``IsBroadcastOfParameter``."""
    if x.opcode != "broadcast":
        return False
    o = x.operands[0]
    return (o.opcode == "constant" and o.shape.is_array and o.shape.rank == 0) or \
        o.opcode == "parameter"


def _unary(x: Instruction) -> bool:
    return x.opcode in ELEMENTWISE_UNARY and len(x.operands) == 1


def _binary(x: Instruction) -> bool:
    return x.opcode in ELEMENTWISE_BINARY and len(x.operands) == 2


def trivially_fusible(x: Instruction, users: int = 1) -> bool:
    if x.user_count > users or not _default_layout(x.shape):
        return False
    if x.opcode == "bitcast":
        return True
    if _unary(x):
        return _supported(x)
    if _binary(x):
        a, b = x.operands
        if a is b:
            return _supported(x)
        if _splat(a) != _splat(b):
            return _supported(x)
    return False


def _choose_operand(x: Instruction) -> Instruction:
    if len(x.operands) > 1 and _splat(x.operands[0]):
        return x.operands[1]
    return x.operands[0]


def _trivial_edge(consumer: Instruction, opcode: str) -> Instruction | None:
    while consumer.opcode != opcode:
        if not trivially_fusible(consumer):
            return None
        consumer = _choose_operand(consumer)
    return consumer


def _trivially_connected(producer: Instruction, consumer: Instruction) -> bool:
    if producer is consumer:
        return True
    while True:
        found = _trivial_edge(consumer, producer.opcode)
        if found is None:
            return False
        if found is producer:
            return True
        if not trivially_fusible(found):
            return False
        consumer = found.operands[0]


def _constant_identity(reduce: Instruction) -> bool:
    ident = reduce.operands[1]
    return ident.opcode == "constant" or (ident.opcode == "convert" and
                                          ident.operands[0].opcode == "constant" and
                                          _supported(ident))


def match_diamond(root: Instruction) -> Instruction | str:
    """The diamond's producer, or why ``root`` is not a diamond root."""
    if not _binary(root):
        return "Root is not elementwise binary."
    if not _supported(root):
        return "Root is not supported for Triton instruction."
    broadcast = _trivial_edge(root.operands[1], "broadcast")
    if broadcast is None:
        return "Could not find a trivial connection from root to a broadcast."
    reduce = _trivial_edge(broadcast.operands[0], "reduce")
    if reduce is None:
        return "Could not find a trivial connection from matched broadcast to a reduction."
    if not (_default_layout(broadcast.shape) and _default_layout(reduce.shape)):
        return "Broadcast or reduce have non-default layouts."
    if not _supported(reduce):
        return "The reduction is not supported by Triton."
    rank = reduce.operands[0].shape.rank
    if tuple(reduce.dimensions) != (rank - 1,):
        return ("The reductions in the diamond must reduce 1 dimension and that dimension "
                "must be the last dimension of the operand.")
    if not _constant_identity(reduce):
        return "Reduction identity is not a constant or a supported convert of a constant."
    if broadcast.user_count != 1 or reduce.user_count != 1:
        return "More than one use of broadcast or reduce."
    if broadcast.shape.rank - 1 in broadcast.dimensions:
        return "Broadcast is not along the reduction dimension."
    producer = reduce.operands[0]
    while trivially_fusible(producer):
        producer = _choose_operand(producer)
    if not _default_layout(producer.shape):
        return "Producer has non-default layout."
    if not _trivially_connected(producer, root.operands[0]):
        return "Producer is not trivially connected."
    if producer is not root.operands[0] and root.operands[0].user_count != 1:
        return "Unsupported root-producer connection."
    return producer


def _make_fusion(comp: Computation, root: Instruction, producer: Instruction) -> Instruction:
    """``MakeFusionForDiamond``: a ``triton_softmax`` fusion (not yet in place)."""
    module = comp.module
    body = Computation(module.unique_name("triton_softmax_computation"))
    body.module = module
    mapping: dict[Instruction, Instruction] = {}
    operands: list[Instruction] = []

    def param(src: Instruction) -> Instruction:
        p = Instruction("parameter", src.shape)
        p.parameter_number = len(operands)
        body.add_instruction(p, f"parameter_{len(operands)}")
        operands.append(src)
        return p
    mapping[producer] = param(producer)
    stack = [(root, False)]
    while stack:
        x, ready = stack.pop()
        if x in mapping:
            continue
        if x.opcode == "parameter":
            mapping[x] = param(x)
            continue
        if not ready:
            stack.append((x, True))
            stack.extend((o, False) for o in reversed(x.operands) if o not in mapping)
            continue
        c = Instruction(x.opcode, x.shape, [mapping[o] for o in x.operands], "", dict(x.attrs))
        c.literal = x.literal
        body.add_instruction(c, x.name)
        mapping[x] = c
    body.root = mapping[root]
    from .priority_fusion.fuse import _register
    _register(module, body, comp)
    fusion = Instruction("fusion", root.shape, operands, "",
                         {"kind": "kCustom", "calls": body})
    comp.add_instruction(fusion, "triton_softmax")
    fusion.set_backend_config({
        "device_type": "DEVICE_TYPE_INVALID", "force_earliest_schedule": False,
        "fusion_backend_config": {"block_level_fusion_config": block_level_config_for(fusion),
                                  "kind": "__triton"},
        "operation_queue_id": "0", "reification_cost": []})
    return fusion


@dataclass(frozen=True)
class SoftmaxRewriterTriton(Pass):
    """Fuse normalization diamonds (softmax, layer norm ...) into generic Triton fusions."""

    name = "softmax-rewriter-triton"

    def run(self, module: Module) -> bool:
        changed = False
        for comp in fusible_computations(module):
            diamonds = []
            for instr in comp.post_order():
                got = match_diamond(instr)
                if isinstance(got, Instruction):
                    diamonds.append((instr, got))
            for root, producer in reversed(diamonds):
                if root.parent is not comp or producer.parent is not comp:
                    continue
                fusion = _make_fusion(comp, root, producer)
                name = root.name
                was_root = comp.root is root
                root.replace_all_uses_with(fusion)
                if was_root:
                    comp.root = fusion
                remove_instruction_and_unused_operands(comp, root)
                self.remark(fusion, f"normalization diamond {producer.name} -> {name} fused into "
                                    f"the Triton fusion {fusion.name}", "applied",
                            derived_from=[name], rule="diamond", producer=producer.name)
                changed = True
        return changed


__all__ = ["SoftmaxRewriterTriton", "match_diamond", "trivially_fusible"]
