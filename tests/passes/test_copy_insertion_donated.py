"""copy-insertion on donated parameters updated in place (XLA's CopyInsertion:
the in-place input/output pairs of a scatter fusion put the donated
parameter and the scatter's result in one buffer, so the root needs no copy
when the parameter's other readers run before the scatter).

The module is a recommender training step of the pattern JAX emits for
``jax.jit(step, donate_argnums=(0, 1))``: embedding lookup, a small MLP, and a
row-sparse Adagrad update by scatter-add into the donated table and
accumulator; the second scatter reads the updated accumulator."""

from __future__ import annotations

import pytest

import hlorun
from hlorun.analysis.kernels import kernel_list
from hlorun.passes.copy_insertion import CopyInsertion, _writes_in_place
from hlorun.text.parser import parse_module

_STEP = """HloModule jit_embed_adagrad_step, input_output_alias={ {0}: (0, {}, may-alias), {1}: (1, {}, may-alias) }, entry_computation_layout={(f32[5000,64]{1,0}, f32[5000,64]{1,0}, f32[128,256]{1,0}, f32[256,1]{1,0}, s32[4096,2]{1,0}, f32[4096]{0})->(f32[5000,64]{1,0}, f32[5000,64]{1,0}, f32[128,256]{1,0}, f32[256,1]{1,0}, f32[])}

%add_f32 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%add_f32.1 (a.1: f32[], b.1: f32[]) -> f32[] {
  %a.1 = f32[] parameter(0)
  %b.1 = f32[] parameter(1)
  ROOT %s.1 = f32[] add(%a.1, %b.1)
}

%sum (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %r = f32[] add(%x, %y)
}

ENTRY %main (table: f32[5000,64], accum: f32[5000,64], w1: f32[128,256], w2: f32[256,1], ids: s32[4096,2], y: f32[4096]) -> (f32[5000,64], f32[5000,64], f32[128,256], f32[256,1], f32[]) {
  %table = f32[5000,64]{1,0} parameter(0)
  %accum = f32[5000,64]{1,0} parameter(1)
  %w1 = f32[128,256]{1,0} parameter(2)
  %w2 = f32[256,1]{1,0} parameter(3)
  %ids = s32[4096,2]{1,0} parameter(4)
  %y = f32[4096]{0} parameter(5)
  %zero_i = s32[] constant(0)
  %vocab = s32[] constant(5000)
  %zi = s32[4096,2]{1,0} broadcast(%zero_i), dimensions={}
  %vi = s32[4096,2]{1,0} broadcast(%vocab), dimensions={}
  %neg_id = pred[4096,2]{1,0} compare(%ids, %zi), direction=LT
  %wrapped = s32[4096,2]{1,0} add(%ids, %vi)
  %idx = s32[4096,2]{1,0} select(%neg_id, %wrapped, %ids)
  %idx3 = s32[4096,2,1]{2,1,0} reshape(%idx)
  %rows = f32[4096,2,64]{2,1,0} gather(%table, %idx3), offset_dims={2}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=2, slice_sizes={1,64}
  %x = f32[4096,128]{1,0} reshape(%rows)
  %h = f32[4096,256]{1,0} dot(%x, %w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %zero = f32[] constant(0)
  %zh = f32[4096,256]{1,0} broadcast(%zero), dimensions={}
  %act = f32[4096,256]{1,0} maximum(%h, %zh)
  %pos = pred[4096,256]{1,0} compare(%h, %zh), direction=GT
  %logit2 = f32[4096,1]{1,0} dot(%act, %w2), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %logit = f32[4096]{0} reshape(%logit2)
  %e = f32[4096]{0} exponential(%logit)
  %one = f32[] constant(1)
  %ones = f32[4096]{0} broadcast(%one), dimensions={}
  %ep1 = f32[4096]{0} add(%e, %ones)
  %sig = f32[4096]{0} divide(%e, %ep1)
  %dl = f32[4096]{0} subtract(%sig, %y)
  %inv_n = f32[] constant(0.000244140625)
  %scale = f32[4096]{0} broadcast(%inv_n), dimensions={}
  %g = f32[4096]{0} multiply(%dl, %scale)
  %g2 = f32[4096,1]{1,0} reshape(%g)
  %gact = f32[4096,256]{1,0} dot(%g2, %w2), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  %gh = f32[4096,256]{1,0} select(%pos, %gact, %zh)
  %gx = f32[4096,128]{1,0} dot(%gh, %w1), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  %grows = f32[8192,64]{1,0} reshape(%gx)
  %flat = s32[8192]{0} reshape(%ids)
  %zf = s32[8192]{0} broadcast(%zero_i), dimensions={}
  %vf = s32[8192]{0} broadcast(%vocab), dimensions={}
  %negf = pred[8192]{0} compare(%flat, %zf), direction=LT
  %wrapf = s32[8192]{0} add(%flat, %vf)
  %fidx = s32[8192]{0} select(%negf, %wrapf, %flat)
  %fidx2 = s32[8192,1]{1,0} reshape(%fidx)
  %sq = f32[8192,64]{1,0} multiply(%grows, %grows)
  %new_accum = f32[5000,64]{1,0} scatter(%accum, %fidx2, %sq), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=%add_f32
  %acc_rows = f32[8192,64]{1,0} gather(%new_accum, %fidx2), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,64}
  %eps = f32[] constant(1e-10)
  %epsb = f32[8192,64]{1,0} broadcast(%eps), dimensions={}
  %den = f32[8192,64]{1,0} add(%acc_rows, %epsb)
  %rs = f32[8192,64]{1,0} rsqrt(%den)
  %upd = f32[8192,64]{1,0} multiply(%grows, %rs)
  %lr = f32[] constant(-0.05)
  %lrb = f32[8192,64]{1,0} broadcast(%lr), dimensions={}
  %step = f32[8192,64]{1,0} multiply(%upd, %lrb)
  %new_table = f32[5000,64]{1,0} scatter(%table, %fidx2, %step), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=%add_f32.1
  %gw1t = f32[256,128]{1,0} dot(%gh, %x), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  %gw1 = f32[128,256]{0,1} transpose(%gw1t), dimensions={1,0}
  %lr1 = f32[] constant(0.001)
  %lr1b = f32[128,256]{1,0} broadcast(%lr1), dimensions={}
  %d1 = f32[128,256]{0,1} multiply(%gw1, %lr1b)
  %new_w1 = f32[128,256]{1,0} subtract(%w1, %d1)
  %gw2 = f32[256,1]{1,0} dot(%act, %g2), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  %lr2b = f32[256,1]{1,0} broadcast(%lr1), dimensions={}
  %d2 = f32[256,1]{1,0} multiply(%gw2, %lr2b)
  %new_w2 = f32[256,1]{1,0} subtract(%w2, %d2)
  %nll = f32[4096]{0} multiply(%y, %logit)
  %sp = f32[4096]{0} log-plus-one(%e)
  %li = f32[4096]{0} subtract(%sp, %nll)
  %tot = f32[] reduce(%li, %zero), dimensions={0}, to_apply=%sum
  %n = f32[] constant(4096)
  %loss = f32[] divide(%tot, %n)
  ROOT %out = (f32[5000,64]{1,0}, f32[5000,64]{1,0}, f32[128,256]{1,0}, f32[256,1]{1,0}, f32[]) tuple(%new_table, %new_accum, %new_w1, %new_w2, %loss)
}
"""


def _copies(module):
    return [i for i in module.entry.instructions if i.opcode == "copy"]


def test_scatter_updates_are_in_the_donated_buffers():
    """Unfused: each scatter's updated operand is its donated parameter."""
    m = parse_module(_STEP)
    e = m.entry
    assert _writes_in_place(e.get_instruction("new_table"), e.get_instruction("table"))
    assert _writes_in_place(e.get_instruction("new_accum"), e.get_instruction("accum"))
    assert not _writes_in_place(e.get_instruction("acc_rows"), e.get_instruction("accum"))


def test_no_root_copy_when_other_readers_run_first():
    """The table's lookup gather feeds the gradient that feeds the table's
    scatter, so it runs first; the accumulator's only reader is its scatter
    (the later gather reads the updated accumulator, the same buffer after
    the update): neither output is copied."""
    m = parse_module(_STEP)
    CopyInsertion().run(m)
    assert _copies(m) == []


def test_root_copy_kept_when_a_reader_may_run_after_the_update():
    """Make the loss also read the old table after nothing orders it before
    the table's scatter: the scatter cannot write over the donated buffer the
    late reader still needs, so XLA's live ranges interfere and a copy stays."""
    text = _STEP.replace(
        "%nll = f32[4096]{0} multiply(%y, %logit)",
        "%old = f32[5000]{0} reduce(%table, %zero), dimensions={1}, to_apply=%sum\n"
        "  %old1 = f32[4096]{0} slice(%old), slice={[0:4096]}\n"
        "  %yo = f32[4096]{0} add(%y, %old1)\n"
        "  %nll = f32[4096]{0} multiply(%yo, %logit)")
    m = parse_module(text)
    CopyInsertion().run(m)
    copies = _copies(m)
    assert [c.operands[0].name for c in copies] == ["new_table"]


def test_permuted_rows_into_a_donated_buffer_keep_a_copy():
    """A gather of permuted rows written as the donated output is not an
    in-place update: XLA keeps the copy (testdata permute_rows_donated)."""
    m = parse_module("""HloModule perm, input_output_alias={ {}: (0, {}, may-alias) }

ENTRY e {
  p = f32[1000,16]{1,0} parameter(0)
  i = s32[1000,1]{1,0} parameter(1)
  ROOT g = f32[1000,16]{1,0} gather(p, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,16}
}
""")
    CopyInsertion().run(m)
    assert m.entry.root.opcode == "copy"


@pytest.fixture(scope="module")
def step_result():
    return hlorun.compile(parse_module(_STEP))


def test_gpu_cuda_step_has_no_copy_kernels(step_result):
    """On the default pipeline the two scatter fusions (the second reads the
    updated accumulator) write the donated buffers and are the root's
    elements; XLA's kernel list for this pattern has no copy."""
    assert not step_result.failures
    m = step_result.module
    kernels = kernel_list(m)
    assert not [k for k in kernels if k.kind == "copy"]
    root = m.entry.root
    for out in root.operands[:2]:
        assert out.opcode == "fusion"
        assert any(i.opcode == "scatter" for i in out.fused_computation.instructions)


def test_split_k_reduce_of_the_weight_gradient_is_block_level(step_result):
    """The split-K second stage (32 rows of f32 partial sums, 32768 outputs)
    becomes a generic Triton fusion, as XLA's measured choice on
    embed_adagrad_rows_f32 (input_reduce_fusion.3, kind __triton).  (XLA
    computes this gradient as dot(x, gh), f32[32,128,256]; so does hlorun
    with algsimp's enable_transpose_of_dot, on by default; without it,
    JAX's dot(gh, x) + transpose, f32[32,256,128].)"""
    from hlorun.passes.priority_fusion.analysis import fusion_backend_kind
    m = step_result.module
    gemm = next(i for i in m.entry.instructions if i.opcode == "fusion" and i.shape.is_array
                and i.shape.rank == 3 and i.shape.dimensions[0] == 32)
    (reduce_fusion,) = [u for u in gemm.users if u.opcode == "fusion"]
    assert fusion_backend_kind(reduce_fusion) == "__triton"
