"""config-assigner: the emitter choice of XLA:GPU's config-assigner pipeline
(the autotuner with the NATIVE_EMITTER and BLOCK_LEVEL_EMITTER backends,
xla/backends/gpu/autotuner/{native_emitter,block_level_emitter}.cc) for
fusions that are not GEMMs.

Which fusions may become generic Triton fusions is XLA's rule
(``BlockLevelEmitterBackend::IsSupported``): a fusion (not a custom one)
without a dot, containing a reduce or a transpose, whose computation the
Triton emitter supports (:mod:`.triton_support`; multi-output fusions are
not).  XLA then *measures* both emitters on the device and keeps the faster
(``Autotuner::PickBestConfig``, minimum duration; the block-level side is
the performance model's top-k tilings, plus TMA variants where recommended;
identical fusions of a module share one measurement).  So one fusion can go
either way in two programs on the same GPU: 23 fusion bodies of the dumps
were measured both ways (pointnet's f32[128,128] column sum went Triton,
mobilenet's 28 copies of it native), which costs any rule on the fusion
alone at least 38 of 1496 candidates (``bench/config_assigner_choices.py``).
hlorun cannot measure, so it decides by which native emitter the fusion
would get (the model below; on the candidate fusions of XLA's own
after_optimizations modules in the dumps it makes XLA's choice for 353 of
373, tests/passes/test_config_assigner_dumps.py; 1149 of 1442 with the 101
held-out dumps of testdata/xla-dumps-holdout, main 1065440.  On 4b58a17 it
was 413/433 and 1370/1675: the symbolic-tile check of
:mod:`.triton_indexing` takes 233 native XLA fusions out of the candidates,
221 of which hlorun already kept native; disagreements 305 -> 293):

* native emitter kept -- the reduction emitter (a row or column reduction
  hero: its tiled, vectorised kernels are what Triton is measured against
  and they usually win), the loop emitter over a transpose that keeps
  the minor dimension (coalesced anyway) or moves it to a result whose
  minor rows are shorter than one 32-byte memory sector (a Triton tile
  writes no more coalesced than the loop emitter: cnn_fp16's NCHW->NHWC
  input and first filter, depthwise_conv_fp16's f16[384,3,3,1] filter), and a
  shared-memory transpose of at most one 32x32 tile (one thread block
  either way: convnet_train_bf16's first filter and its gradient);
* native emitter kept -- any reduction whose reduced dimension is a
  bitcast/reshape collapse of two or more dimensions longer than 1 (the
  Triton tile would have to span the collapsed extent; XLA kept all 99 such
  reductions in the dumps native), whatever class below it would fall in;
* native emitter kept -- any fusion holding a concatenate (the generic
  Triton emitter of JAX 0.11.2's XLA accepts concatenates, see
  :mod:`.triton_support`, but XLA measured the transformers' fused
  Q/K/V concatenations, transposed or split-K-reduced, native in every
  known dump, and softcap_mqa_train_bf16's too; one held-out reduction of a
  concatenate, lstm_scan_train_f32's, went Triton);
* block-level Triton chosen -- a column reduction whose kept minor extent
  is narrower than a warp (32): the native column-reduction emitter gives
  each warp 32 adjacent columns, so most lanes idle (XLA picked Triton for
  all 4 such fusions in the dumps: bias gradients of 10-class heads, an
  8-expert router);
* block-level Triton chosen -- a full reduction to one value (a single
  row) of a plain vector: a gradient leaf's sum of squares, the second
  stage of a split sum (adamw_clip_tree's global norm, clip_loss's means):
  one thread block either way, measured faster as one Triton tile -- but
  the native emitter is kept when the row is a bitcast or reshape of an
  array with two or more non-trivial dimensions (the transformers' loss
  mean over f32[4,128,1], cross-entropy over f32[8,256]: XLA kept every
  such one native);
* block-level Triton chosen -- a row reduction of fewer rows than the GPU
  has SMs, each at most 256 elements long (the loss reductions that
  TreeReductionRewriter splits: dropout's f32[128,256] -> f32[128] -> f32[],
  moe's router sums): the native kernel is a fraction of one wave either
  way, and XLA measured the single Triton block faster -- unless the rows
  are so short that the native emitter reduces several per warp
  (``RowReductionGetRowsPerWarp`` > 1: rows shorter than 32 that divide
  it, groupnorm's 128 rows of 4), which XLA kept native;
* block-level Triton chosen -- a row reduction whose rows are exactly one
  warp (32 elements) long: the native row emitter gives each row a warp
  that reads one element per lane and spends its time in the shuffle tree
  (rows shorter than a warp are packed several to a warp instead, see
  above); XLA picked Triton for all 4 such fusions in the dumps (the
  second stage of ctc_loss_scan_f32's and sparse_topk_attn_bf16's split
  softmax sums, f32[1024,32] and f32[4096,32] -> rows);
* block-level Triton chosen -- an f32 column reduction of at most 512 rows
  whose outputs fill fewer 32-column tiles than the GPU has SMs (the second
  stage of a split batch-norm or bias-gradient sum): less than a wave of
  native column tiles, measured slower than one Triton tile per block;
* block-level Triton chosen -- an f32 column reduction of at most 64 rows
  however wide (the second stage of a split-K weight gradient:
  embed_adagrad_rows_f32's f32[32,128,256] -> f32[128,256],
  gnn_message_passing_f32's f32[64,128,64] -> f32[128,64]; 3 of 3 went Triton);
* block-level Triton chosen -- the tiled-transpose emitter (shared-memory
  transposes) of elements narrower than 4 bytes, counting the output's
  element type when it is narrower than the transposed one (f32 transposes
  written as f32 measured faster native; fp8 scaling's f32 transposes
  written as f8e4m3fn went Triton), a loop transpose that moves the minor dimension to a
  result whose minor rows fill a 32-byte sector or more (uncoalesced natively:
  cnn_fp16's OIHW->OHWI filters, moe_topk_train's f32[512,8] transpose),
  and loop fusions that compute reductions elementally (a
  reduce that is not the hero, or too small for the reduction emitter:
  split-K epilogues, small softmax-like reductions), where the native loop
  emitter re-reads the reduced dimension per output element -- once their
  output fills a wave of the GPU (SMs x 512 elements; smaller ones measured
  faster on the native emitter in the dumps).

A chosen fusion becomes ``kind=kCustom`` with ``{"kind":"__triton",
"block_level_fusion_config":...}`` (:func:`.triton_support.block_level_config_for`),
as ``BlockLevelEmitterBackend::ApplyConfig`` writes it; a fusion that
already has a block-level config keeps it.  Every decision is a remark.

Postcondition: every candidate fusion the model prefers on Triton is a
``__triton`` fusion.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.module import Instruction, Module
from ..ir.opcode import ELEMENTWISE
from .base import Pass
from .priority_fusion.analysis import (WARP_SIZE, find_hero, fusible_computations,
                                       fusion_backend_kind, is_real_reduction_hero,
                                       reduction_dims, tiled_transpose)
from .priority_fusion.model import device_of
from .triton_support import make_block_level, triton_supported_computation


def _real_reduce(i: Instruction) -> bool:
    """A reduce that reduces something (XLA's simplifier and
    ReductionDegenerateDimRemover turn reductions of size-1 dimensions
    into bitcasts before fusion; hlorun's do not yet, so they are ignored here)."""
    if i.opcode != "reduce":
        return False
    return any(i.operands[0].shape.dimensions[d] != 1 for d in i.dimensions)


def block_level_candidate(fusion: Instruction) -> str | None:
    """``BlockLevelEmitterBackend::IsSupported``: None, or why not."""
    if fusion.opcode != "fusion" or fusion.fused_computation is None:
        return "not a fusion"
    if fusion.fusion_kind == "kCustom":
        return "a custom fusion"
    instrs = fusion.fused_computation.instructions
    ops = {i.opcode for i in instrs}
    if ops & {"dot", "scaled-dot"}:
        return "a dot fusion (GEMM fusion decides those)"
    if not any(i.opcode == "transpose" or _real_reduce(i) for i in instrs):
        return "no reduce or transpose"
    return triton_supported_computation(fusion)


def native_emitter(fusion: Instruction, cores: int = 132) -> str:
    """The native emitter the fusion gets: reduction, transpose, loop-transpose
    (a layout-keeping permutation), loop-reduction (reductions computed
    elementally) or loop; ``short-row-reduction``: a row reduction of fewer
    rows than the device has SMs (``cores``), each at most
    :data:`SHORT_ROW` long; ``short-column-reduction``: an f32 column
    reduction of at most :data:`SHORT_COLUMN` rows whose outputs fill fewer
    32-column tiles than there are SMs; ``warp-row-reduction``: rows of
    exactly one warp; ``split-column-reduction``: any other
    f32 column reduction of at most :data:`SPLIT_COLUMN` rows."""
    body = fusion.fused_computation
    members = set(body.instructions)
    hero = find_hero(body.root, members)
    if hero.opcode == "reduce" and is_real_reduction_hero(body.root, hero):
        dims = reduction_dims(hero)
        if _reduced_dimension_collapsed(hero, members):
            return "row-reduction" if dims.is_row else "column-reduction"
        if dims.is_row:
            if dims.dims[0] * dims.dims[1] == 1:
                # a full reduction to one value: Triton unless its input is an
                # array collapsed into the row (see _collapses_into_row)
                return "row-reduction" if _collapses_into_row(hero) else "single-row-reduction"
            if dims.dims[2] == WARP_SIZE:
                return "warp-row-reduction"
            if dims.dims[2] <= SHORT_ROW and dims.dims[0] * dims.dims[1] < cores and \
                    _rows_per_warp(dims.dims[2]) == 1:
                return "short-row-reduction"
            return "row-reduction"
        if dims.dims[2] < WARP_SIZE:
            return "narrow-column-reduction"
        if (hero.operands[0].shape.element_type == "f32" and dims.dims[1] <= SHORT_COLUMN
                and dims.dims[0] * dims.dims[2] < cores * WARP_SIZE):
            return "short-column-reduction"
        if hero.operands[0].shape.element_type == "f32" and dims.dims[1] <= SPLIT_COLUMN:
            return "split-column-reduction"
        return "column-reduction"
    if tiled_transpose(hero):
        return "transpose"
    if any(_real_reduce(i) for i in members):
        return "loop-reduction"
    transposes = [i for i in members if i.opcode == "transpose"]
    if any(_moves_minor(t) for t in transposes):
        return "loop-transpose-minor"
    if transposes:
        return "loop-transpose"
    return "loop"


def _rows_per_warp(row: int) -> int:
    """XLA's ``RowReductionGetRowsPerWarp``: rows shorter than a warp that
    divide it are reduced several to a warp by the native emitter (its
    multi-row strategy), which XLA measured faster than a Triton block on
    every such short-row reduction in the dumps (groupnorm's f32[4,32,4] ->
    f32[4,32]: 128 rows of 4)."""
    if row >= WARP_SIZE or WARP_SIZE % row:
        return 1
    return WARP_SIZE // row


def _reduced_dimension_collapsed(reduce: Instruction, members: set) -> bool:
    """Whether a reduced dimension of ``reduce`` is a bitcast or reshape
    (inside the fusion, reaching the reduce through same-shape elementwise
    ops) that collapses two or more dimensions longer than 1
    (``f32[4,64,256]`` -> ``f32[256,256]`` reduced over dimension 0): the
    block-level emitter would have to tile the reduced extent through that
    reshape (``SymbolicTileAnalysis`` puts the collapsed sizes' divisibility
    constraints on the tile).  XLA kept every such reduction on the native
    reduction emitter in the dumps (99 of 99: the transformers' bias and
    layer-norm gradient column sums, encdec_cross_attn's [4,64] -> 256
    column sums, single-row loss means), so none of the Triton-favoring
    short/narrow classes below applies to it.

    The reshapes are composed as the tile analysis composes their indexing
    maps: a chain of bitcasts and one-operand elementwise ops (converts) is
    followed to where it starts, so ``[512,384] -> [4,128,384] -> convert ->
    [512,384]`` collapses nothing (a plain [512,384] column, like XLA's
    gpt_ln_3l layer-norm gradient sums, which it measured Triton)."""
    from .triton_tiling import _reshape_feeding, collapsed_groups
    src = _reshape_feeding(reduce.operands[0], members)
    if src is None or not src.operands[0].shape.is_array:
        return False
    start = _chain_start(src.operands[0], members)
    groups = collapsed_groups(tuple(start.shape.dimensions), tuple(src.shape.dimensions))
    return any(len([s for s in groups.get(d, ()) if s != 1]) > 1 for d in reduce.dimensions)


def _collapses_into_row(reduce: Instruction) -> bool:
    """Whether the reduce's input is computed from a bitcast or reshape of an
    array with two or more dimensions longer than 1 (``f32[4,128,1]`` ->
    ``f32[512]``, ``f32[8,256]`` -> ``f32[2048]``): the block-level emitter
    must tile the collapsed row through that reshape, and XLA measured the
    native kernel faster on every such single-row reduction in the dumps
    (transformer losses, cross-entropy means, lstm's f32[32,8] sum), while
    single rows read as plain vectors (a gradient leaf's sum of squares,
    ``f32[512,1,1]``) went to Triton."""
    seen: set[int] = set()
    stack = [reduce.operands[0]]
    while stack:
        i = stack.pop()
        if id(i) in seen or i.opcode == "parameter":
            continue
        seen.add(id(i))
        if i.opcode in ("bitcast", "reshape"):
            src = _chain_start(i.operands[0]).shape
            if src.is_array and sum(1 for d in src.dimensions if d != 1) >= 2:
                return True
        stack.extend(i.operands)
    return False


def _chain_start(i: Instruction, members: set | None = None) -> Instruction:
    """Where a chain of bitcasts, reshapes and one-operand elementwise ops
    (converts) ending at ``i`` starts (within ``members`` if given): the
    tile analysis composes their indexing maps, so a round trip
    ``[512,384] -> [4,128,384] -> [512,384]`` is no reshape at all."""
    while len(i.operands) == 1 and i.shape.is_array and i.operands[0].shape.is_array and (
            i.opcode in ("bitcast", "reshape") or i.opcode in ELEMENTWISE) and (
            members is None or i in members):
        i = i.operands[0]
    return i


def _moves_minor(t: Instruction) -> bool:
    """A transpose whose result's most minor dimension is not the operand's
    (descending layouts: the last dimension)."""
    from .priority_fusion.transpose_emitter import normalized_transpose
    _, perm = normalized_transpose(list(t.operands[0].shape.dimensions), list(t.dimensions))
    return len(perm) >= 2 and perm[-1] != len(perm) - 1


#: the shortest result minor row, in bytes, a block-level transpose tile is
#: measured worth it for: one 32-byte DRAM sector (in the dumps f16 rows of
#: 3 and 9 elements stayed native, f16 rows of 16 and f32 rows of 512 went
#: Triton; the f32 rows of 8 of conv1d_tcn are slow loop transposes that
#: fusion-block-level-rewriter makes Triton anyway)
MIN_TRITON_TRANSPOSE_ROW_BYTES = 32
#: a shared-memory transpose tile (NUM_SHMEM_BANKS x NUM_SHMEM_BANKS elements)
ONE_TRANSPOSE_TILE = 32 * 32


#: The longest row a "short-row-reduction" has (fitted: single rows of 8
#: and 128 elements and 128 rows of 256 went Triton in the dumps, rows of
#: 512 or more mostly native; a single row of 256 went both ways)
SHORT_ROW = 256

#: The longest f32 column a "short-column-reduction" has (fitted: f32
#: columns of 64 to 512 rows with fewer outputs than SMs x 32 went Triton in
#: the dumps -- resnet's split batch-norm sums [128, 64] -> [64], the
#: mlp_train_f32 bias gradients [256, 1024], gpt_ln_3l's layer-norm
#: gradient sums [512, 384] -> [384] (7 of 7); the transformers' 512-row
#: columns that stayed native are collapsed from [4,128] (see
#: _reduced_dimension_collapsed); 2 plain 512-row columns stayed native
#: (mp_adam_transformer, clip_loss_train_f32); bf16 columns stayed native)
SHORT_COLUMN = 512

#: The longest f32 column a "split-column-reduction" has, whatever its
#: width: the second stage of a split-K GEMM or of a split reduction sums a
#: few partial results per output (fitted: f32 columns of 32 and 64 rows
#: went Triton in the dumps however many outputs -- embed_adagrad_rows_f32's
#: [32, 32768] weight gradient, gnn_message_passing_f32's [64, 8192] (3 of
#: 3); the native column emitter's 32x32 shared-memory tiles do at most two
#: rows of tiles of work per block there)
SPLIT_COLUMN = 64

#: Native emitters the model expects the block-level emitter to beat.
TRITON_WINS = frozenset({"transpose", "loop-reduction", "narrow-column-reduction",
                         "warp-row-reduction",
                         "loop-transpose-minor", "short-row-reduction",
                         "short-column-reduction", "split-column-reduction",
                         "single-row-reduction"})
#: Elements per SM below which a loop fusion computing reductions elementally
#: stays native (fitted to XLA's measured choices on the dumps: split-K
#: epilogues with <= 65536 outputs stay native, >= 98304 go to Triton on
#: the 132-SM H100/H200).
ONE_WAVE_PER_SM = 512


#: Reduced elements per output, summed over the fusion's reduces, from which
#: a loop fusion computing reductions elementally stays native (see
#: :func:`_long_elemental_reductions`)
MANY_PARTIALS = 12
#: ... once its outputs fill more than this many waves (SMs x ONE_WAVE_PER_SM)
MANY_PARTIALS_WAVES = 1.5


def _long_elemental_reductions(fusion: Instruction, cores: int) -> str | None:
    """Why a loop fusion that computes its reductions elementally stays on
    the native loop emitter although its outputs fill a wave, or None: its
    reduces read 12 or more elements per output in all and it has more than
    1.5 waves of outputs.  These are the gradient adds of split-K weight
    gradients -- three k=4 partial sums added (llama_swiglu's, retnet's,
    scan_layers' and deberta's three-way adds), k=8 plus k=4 (vit's and
    perceiver's residual-gradient adds), a single k=16 sum (gumbel_vq's
    weight updates): the native loop emitter reads the partial sums
    coalesced along the kept minor dimension, and XLA measured it faster.

    Fitted to XLA's measured choices on the loop-reduction candidates of the
    dumps' own fusions (432; the one-wave rule alone agrees with 326, with
    this rule 344): 19 of the 20 fusions with >= 12 partials per output and
    more than 1.5 waves stayed native; at 98304 outputs (1.45 waves)
    dot_algorithms' k=16 f32 sums went Triton.  A further rule for f32
    results of one k >= 8 reduce (gpt_bf16x3_f32_train's and
    bf16x6_algo_mlp_f32's split-K weight updates, 27 native against 4 Triton
    in the dumps) agrees with 362 of 432 but loses kinds on
    transformer_2l_f32_algo_bf16, whose k=8 f32 sums XLA fuses into their
    layer-norm consumer (multi-output fusion) and hlorun does not; left out."""
    import math
    if _outputs(fusion) <= MANY_PARTIALS_WAVES * cores * ONE_WAVE_PER_SM:
        return None
    ks = [math.prod(r.operands[0].shape.dimensions[d] for d in r.dimensions)
          for r in fusion.fused_computation.instructions if _real_reduce(r)]
    if sum(ks) >= MANY_PARTIALS:
        return (f"its reduces read {sum(ks)} elements per output (>= {MANY_PARTIALS}) for "
                f"{_outputs(fusion)} outputs")
    return None


def _transpose_width(fusion: Instruction) -> int:
    """Byte width of the elements the fusion's tiled transpose moves: the
    hero's, or the fusion's output elements when those are narrower (the
    tile is written in the output type: fp8 scaling casts an f32 transpose
    to f8e4m3fn, and XLA measured both such fusions faster on Triton)."""
    from ..ir.shape import byte_width
    body = fusion.fused_computation
    hero = find_hero(body.root, set(body.instructions))
    out = min((byte_width(s.element_type) for _, s in fusion.shape.leaves() if s.is_array),
              default=byte_width(hero.shape.element_type))
    return min(byte_width(hero.shape.element_type), out)


def _hero_elements(fusion: Instruction) -> int:
    import math
    body = fusion.fused_computation
    return math.prod(find_hero(body.root, set(body.instructions)).shape.dimensions)


def _result_minor(fusion: Instruction) -> tuple[int, int]:
    """(elements, bytes) of the minor row of the (first) minor-moving
    transpose's result."""
    from ..ir.shape import byte_width
    from .priority_fusion.transpose_emitter import normalized_transpose
    for t in fusion.fused_computation.instructions:
        if t.opcode == "transpose" and _moves_minor(t):
            dims, _ = normalized_transpose(list(t.operands[0].shape.dimensions), list(t.dimensions))
            return dims[-1], dims[-1] * byte_width(t.shape.element_type)
    return 0, 0


def _outputs(fusion: Instruction) -> int:
    import math
    root = fusion.fused_computation.root
    return math.prod(root.shape.dimensions) if root.shape.is_array else 0


@dataclass(frozen=True)
class ConfigAssigner(Pass):
    """Choose the native or the block-level (generic Triton) emitter for reduce/transpose fusions."""

    name = "config-assigner"

    def run(self, module: Module) -> bool:
        changed = False
        for comp in fusible_computations(module):
            for instr in comp.post_order():
                if instr.opcode == "fusion":
                    changed |= self._assign(instr)
        return changed

    def _assign(self, fusion: Instruction) -> bool:
        if fusion_backend_kind(fusion) in ("__triton", "__triton_gemm",
                                           "__triton_nested_gemm_fusion"):
            return False
        why = block_level_candidate(fusion)
        if why is not None:
            return False
        cores = device_of(self.target).cores
        emitter = native_emitter(fusion, cores)
        if any(i.opcode == "concatenate" for i in fusion.fused_computation.instructions):
            self.remark(fusion, f"{fusion.name} stays on the native {emitter} emitter: it "
                                f"reads a concatenate (XLA measured such fusions native)",
                        "missed", rule="native", emitter=emitter)
            return False
        wave = cores * ONE_WAVE_PER_SM
        if emitter == "loop-reduction" and _outputs(fusion) < wave:
            self.remark(fusion, f"{fusion.name} stays on the native loop emitter: its "
                                f"{_outputs(fusion)} outputs fill less than one wave "
                                f"({wave} = SMs x {ONE_WAVE_PER_SM})", "missed",
                        rule="native", emitter=emitter)
            return False
        if emitter == "loop-reduction":
            why = _long_elemental_reductions(fusion, cores)
            if why is not None:
                self.remark(fusion, f"{fusion.name} stays on the native loop emitter: {why}",
                            "missed", rule="native", emitter=emitter)
                return False
        if emitter == "transpose" and _hero_elements(fusion) <= ONE_TRANSPOSE_TILE:
            self.remark(fusion, f"{fusion.name} stays on the native transpose emitter: "
                                f"{_hero_elements(fusion)} elements fit one 32x32 shared-memory "
                                f"tile (one thread block either way)", "missed",
                        rule="native", emitter=emitter)
            return False
        if emitter == "loop-transpose-minor" and \
                _result_minor(fusion)[1] < MIN_TRITON_TRANSPOSE_ROW_BYTES:
            n, nbytes = _result_minor(fusion)
            self.remark(fusion, f"{fusion.name} stays on the native loop emitter: the transposed "
                                f"result's minor rows have {n} elements ({nbytes} bytes), less "
                                f"than a {MIN_TRITON_TRANSPOSE_ROW_BYTES}-byte sector", "missed",
                        rule="native", emitter=emitter)
            return False
        if emitter == "transpose" and _transpose_width(fusion) >= 4:
            self.remark(fusion, f"{fusion.name} stays on the native transpose emitter: 4-byte "
                                f"elements fill its 32x32 shared-memory tiles coalesced", "missed",
                        rule="native", emitter=emitter)
            return False
        if emitter not in TRITON_WINS:
            self.remark(fusion, f"{fusion.name} stays on the native {emitter} emitter (the model "
                                f"expects it to beat the block-level emitter)", "missed",
                        rule="native", emitter=emitter)
            return False
        tiles = make_block_level(fusion)
        self.remark(fusion, f"{fusion.name} becomes a block-level Triton fusion (native emitter "
                            f"would be {emitter}); output tile [{','.join(tiles)}]", "applied",
                    rule="block-level", emitter=emitter)
        return True


__all__ = ["ConfigAssigner", "TRITON_WINS", "block_level_candidate", "native_emitter"]
