"""Launch dimensions (blocks, threads per block) of the emitter a kernel
gets: XLA's ``LaunchDimensions`` of the loop, reduction, transpose and
concatenate emitters, with ``ComputeLoopFusionConfig``'s unrolling."""

from __future__ import annotations

from ...ir.module import Instruction
from ...ir.shape import bit_width, byte_width
from .analysis import FusionView, concatenate_hero, reduction_dims
from .device import DEVICES, Device
from .reductions import MIN_THREADS_X_ROW_REDUCTION, WARP_SIZE
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
            return row_reduction_launch(r.dims, view, root, device)
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


#: RowReductionFusion's threads per block (``kThreadsPerBlockTarget``)
ROW_THREADS_PER_BLOCK_TARGET = 256


def _input_output_bits(view: FusionView, root: Instruction) -> tuple[int, int]:
    """``HloFusionAnalysis::InputOutputInfo``: the narrowest element width
    (bits) of the fusion's arguments (an operand no member computes; 0 when
    it has none: XLA's ``int`` max) and of its roots."""
    members = view.member_set()
    smallest = None
    for m in view.members:
        for o in m.operands:
            o = view.resolve(o)
            if o in members or not o.shape.is_array:
                continue
            b = bit_width(o.shape.element_type)
            if smallest is None or b < smallest:
                smallest = b
    return (smallest if smallest is not None else 0), _output_bits(root)


def _row_vector_size(minor: int, threads: int, in_bits: int) -> int:
    """``GetVectorSizeForMlir`` for a row reduction (``threads`` along the
    reduced minor dimension)."""
    if minor % 2 != 0 or threads * 2 > minor:
        return 1
    if in_bits == 0 or in_bits >= 32:
        return 2
    if threads * 4 > minor:
        return 2
    return 4 if minor % 4 == 0 else 2


def _multi_row_threads(kept: int, row: int, vec: int) -> tuple[int, int]:
    reduced = row // vec
    return (kept if kept * reduced <= ROW_THREADS_PER_BLOCK_TARGET
            else max(1, ROW_THREADS_PER_BLOCK_TARGET // reduced)), reduced


def row_reduction_launch(dims, view: FusionView, root: Instruction,
                         device: "Device | None" = None) -> tuple[int, int]:
    """(blocks, threads per block) of XLA's MLIR row-reduction emitters
    (``CreateReductionFusion``): ``MultiRowReductionFusion`` when a row of
    a power-of-2 length fits one warp's vectors (its vector size from the
    narrowest and widest input/output element, halved while the blocks would
    not fill the GPU), else ``RowReductionFusion`` (threads along the row:
    one per 16 elements, rounded up to warps, at most 1024; further rows of
    the block up to 256 threads; blocks over the rows kept and over the row
    when one block's tile does not cover it)."""
    _, kept, row = dims
    cores = (device or DEVICES["H100"]).cores
    in_bits, out_bits = _input_output_bits(view, root)
    if row > 0 and row & (row - 1) == 0:
        small = min(in_bits, out_bits) if in_bits else out_bits
        large = max(in_bits, out_bits) if in_bits else out_bits
        vec = min(row, 64 // max(1, small))
        if large >= 32:
            vec = min(128 // large, vec)
        if row <= WARP_SIZE * vec:
            while vec > 1 and -(-kept // _multi_row_threads(kept, row, vec)[0]) < cores:
                vec //= 2
            if row <= WARP_SIZE * vec:
                nk, nr = _multi_row_threads(kept, row, vec)
                return max(1, -(-kept // nk)), nk * nr
    per_thread = 16
    reduced = min(MIN_THREADS_X_ROW_REDUCTION, -(-(-(-row // per_thread)) // WARP_SIZE) * WARP_SIZE)
    kept_threads = 1
    if reduced * 2 <= ROW_THREADS_PER_BLOCK_TARGET:
        kept_threads = kept if kept * reduced <= ROW_THREADS_PER_BLOCK_TARGET \
            else ROW_THREADS_PER_BLOCK_TARGET // reduced
    vec = _row_vector_size(row, reduced, in_bits)
    width = row // vec
    tile = min(per_thread // vec, -(-width // reduced))
    blocks = -(-kept // kept_threads) * -(-width // max(1, tile * reduced))
    return max(1, blocks), kept_threads * reduced


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
