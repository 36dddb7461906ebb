"""Launch dimensions (blocks, threads per block) of the emitter a kernel
gets: XLA's ``LaunchDimensions`` of the loop, reduction, transpose and
concatenate emitters, with ``ComputeLoopFusionConfig``'s unrolling."""

from __future__ import annotations

from ...ir.module import Instruction
from ...ir.shape import byte_width
from .analysis import FusionView, concatenate_hero, reduction_dims
from .device import DEVICES, Device
from .sizes import _element_shape_elements, _elements, _output_bits


def column_vector_size(elem_bytes: int, minor: int) -> int:
    """``GetVectorSizeForMlir`` for a column reduction (32 threads along the
    kept minor dimension): no vectorization for an odd minor dimension or
    one under 2 x 32; 2 for 4-byte (or wider) inputs; narrower inputs 4
    when the minor dimension has 4 x 32 elements and divides by 4, else 2."""
    if minor % 2 != 0 or 2 * 32 > minor:
        return 1
    if elem_bytes >= 4:
        return 2
    if 4 * 32 > minor:
        return 2
    return 4 if minor % 4 == 0 else 2


def launch_dims(kind: str, view: FusionView, root: Instruction,
                device: "Device | None" = None) -> tuple[int, int]:
    """(blocks, threads per block) of the emitter ``kind``."""
    if kind == "reduction":
        hero = view.hero()
        r = reduction_dims(hero)
        elem = byte_width(hero.operands[0].shape.element_type)
        if r.is_row:
            batch, kept, row = r.dims
            vec = 2 if elem <= 2 and row % 2 == 0 else 1
            tx = min(1024, max(32, -(-(row // vec) // 32) * 32))
            rows_per_block = max(1, 1024 // tx) if row <= 512 else 1
            return max(1, batch * -(-kept // rows_per_block)), tx * rows_per_block
        batch, _, minor = r.dims
        return max(1, batch * -(-minor // (32 * column_vector_size(elem, minor)))), 1024
    n = max(1, _elements(root))
    if kind == "concatenate":
        # ConcatenateFusion: one thread per element of the largest operand,
        # unrolled as a loop fusion of that shape (ComputeLoopFusionConfig):
        # only when it fills the GPU
        hero = concatenate_hero(view)
        if hero is not None:
            n = max(1, max(_elements(o) for o in hero.operands))
            n = -(-n // loop_unroll_factor(view, root, n, device))
            return max(1, -(-n // 128)), max(1, min(128, n))
    if kind == "transpose":
        return max(1, -(-n // 1024)), 128
    if kind == "loop":
        n = _element_shape_elements(root)
        unroll = loop_unroll_factor(view, root, n, device)
        n = -(-n // unroll)
        return max(1, -(-n // 128)), max(1, min(128, n))
    unroll = 4 if n % 4 == 0 and n >= 4 * 128 else 1
    return max(1, -(-n // (128 * unroll))), min(128, n)


#: ``DeviceDescription::threads_per_core_limit`` (resident threads per SM)
THREADS_PER_CORE = 2048
#: ``MayPreventVectorization``: concatenates with more operands are not unrolled
MAX_CONCAT_ARGUMENTS_FOR_UNROLLING = 10



_MAY_PREVENT = frozenset({"dot", "sort", "concatenate", "reduce"})  # what the test below looks at


def loop_unroll_factor(view: FusionView, root: Instruction, n: int,
                       device: "Device | None" = None) -> int:
    """XLA's ``ComputeLoopFusionConfig``: a loop kernel unrolls (4, else 2 when
    that divides the elements) only when it has at least as many elements as
    the GPU has resident threads (``threads_per_core_limit x core_count``) and
    nothing in it prevents vectorization (a dot, a sort, a concatenate of more
    than 10 operands, a variadic reduce) -- smaller kernels run one thread per
    element; sub-byte outputs are unrolled so one thread writes whole bytes."""
    cores = (device or DEVICES["H100"]).cores
    unroll = 1
    if n >= THREADS_PER_CORE * cores and not (_MAY_PREVENT & view.opcodes() and any(
            m.opcode in ("dot", "sort")
            or (m.opcode == "concatenate" and len(m.operands) > MAX_CONCAT_ARGUMENTS_FOR_UNROLLING)
            or (m.opcode == "reduce" and m.shape.is_tuple)
            for m in view.members)):
        unroll = 4 if n % 4 == 0 else 2 if n % 2 == 0 else 1
    bits = _output_bits(root)
    return max(unroll, -(-8 // bits) if bits else 1)



__all__ = ["column_vector_size", "launch_dims", "loop_unroll_factor"]
