"""Each hlo-verifier rule on realistic HLO: real XLA:GPU dumps and XLA test
modules are clean, and a deliberately broken copy (one edit) gets a finding
that names the rule, the instruction and its line."""

from __future__ import annotations

import re

import pytest

import hlorun
from hlorun.text.fileio import read_text
from hlorun.text.parser import split_input_file
from hlorun.verifier.checkers import HloVerifier

from ..conftest import shared_path


def dump(folder: str, pattern: str) -> str:
    paths = sorted(shared_path("xla-dumps", folder).glob(pattern))
    assert paths, pattern
    return paths[0].read_text()


def corpus_file(name: str, module: str | None = None) -> str:
    text = read_text(shared_path("corpus", "xla", "files", name))
    if module is None:
        return text
    for _, chunk in split_input_file(text):
        if re.search(rf"^HloModule {re.escape(module)}\b", chunk, re.M):
            return chunk
    raise AssertionError(f"no module {module} in {name}")


SOURCES = {
    "gelu": lambda: dump("gemm_bias_gelu_bf16", "*.0000.*.txt"),
    "fp8": lambda: dump("fp8_matmul_scaled", "*.0000.*.txt"),
    "permute": lambda: dump("permute_rows_donated", "*.0000.*.txt"),
    "permute_final": lambda: dump("permute_rows_donated", "*gpu_after_optimizations.txt"),
    "cnn_conv": lambda: dump("cnn_fp16", "*.0000.*.txt"),
    "cpu": lambda: corpus_file("xla__backends__cpu__tests__thunk_coverage__cpu.hlo"),
    "scatter": lambda: corpus_file(
        "xla__backends__gpu__codegen__emitters__tests__scatter__scatter_s4_unique_indices.hlo"),
    **{op: (lambda op=op: corpus_file(
        "xla__hlo__translate__hlo_to_mhlo__tests__frontend_attributes.hlo",
        f"frontend_attributes_{op}"))
       for op in ("pad", "slice", "dynamic_slice", "dynamic_update_slice", "iota",
                  "concatenate", "reverse", "topk", "sort", "map", "rng")},
}


def findings(text: str, **options):
    return HloVerifier(**options).check(hlorun.parse_module(text, "t.hlo"))


def line_of(text: str, name: str) -> int:
    for i, ln in enumerate(text.split("\n"), 1):
        if re.match(rf"\s*(ROOT\s+)?%?{re.escape(name)} = ", ln):
            return i
    raise AssertionError(name)


#: (id, source, text to replace, replacement, instruction flagged, message)
CASES = [
    # elementwise
    ("binary-shape", "gelu", "%add.11 = bf16[256,1024]{1,0} add(",
     "%add.11 = bf16[256,512]{1,0} add(", "add.11",
     "Expected instruction to have shape equal to bf16[256,1024], actual shape is bf16[256,512]"),
    ("binary-types", "permute", "%add.3 = s32[64]{0} add(%perm.1, %add.2)",
     "%add.3 = s32[64]{0} add(%perm.1, %lt.3)", "add.3",
     "Binary op add with different element types: s32[64] and pred[64]"),
    ("implicit-broadcast", "gelu", "multiply(%integer_pow.3, %mul.9)",
     "multiply(%integer_pow.3, %constant.7)", "mul.10", "Implicit broadcast is not allowed"),
    ("unary-type", "gelu", "%tanh.1 = bf16[256,1024]{1,0} tanh(",
     "%tanh.1 = f32[256,1024]{1,0} tanh(", "tanh.1",
     "Expected instruction to have shape equal to bf16[256,1024], actual shape is f32"),
    ("compare-result", "permute", "%lt.3 = pred[64]{0} compare(",
     "%lt.3 = s32[64]{0} compare(", "lt.3", "equal to pred[64]"),
    ("compare-type", "permute", "direction=LT", "direction=LT, type=FLOAT", "lt.3",
     "Expected comparison type SIGNED"),
    ("select-pred", "permute", "select(%lt.3, %add.3, %perm.1)",
     "select(%add.3, %add.3, %perm.1)", "select_n.1",
     "Select's pred operand must have PRED element type"),
    ("clamp-shapes", "fp8", "clamp(%clamp.4, %mul.11, %clamp.3)",
     "clamp(%mul.7, %mul.11, %clamp.3)", "clamp.5", "Clamp with incompatible shapes"),
    ("convert-dims", "fp8", "%convert_element_type.6 = bf16[32,64]{1,0} convert(",
     "%convert_element_type.6 = bf16[64,32]{1,0} convert(", "convert_element_type.6",
     "equal to bf16[32,64], actual shape is bf16[64,32]"),
    # shape-changing ops
    ("broadcast-dims", "gelu", "broadcast(%add.9), dimensions={1}",
     "broadcast(%add.9), dimensions={0}", "add.10",
     "broadcast operand dimension 0 (size 1024) maps to result dimension 0"),
    ("broadcast-type", "gelu", "%mul.9 = bf16[256,1024]{1,0} broadcast(",
     "%mul.9 = f32[256,1024]{1,0} broadcast(", "mul.9", "broadcast changes the element type"),
    ("reshape-count", "gelu", "%add.9 = bf16[1024]{0} reshape(",
     "%add.9 = bf16[1000]{0} reshape(", "add.9", "reshape changes the element count"),
    ("bitcast-bytes", "permute_final", "%bitcast.1.0 = f32[64,256]{1,0} bitcast(",
     "%bitcast.1.0 = f32[64,128]{1,0} bitcast(", "bitcast.1.0",
     "Bitcast cannot have different shape sizes of output (32768) and operand (65536)"),
    ("transpose-dims", "fp8", "%transpose.1 = bf16[64,128]{0,1} transpose(",
     "%transpose.1 = bf16[128,64]{0,1} transpose(", "transpose.1",
     "equal to bf16[64,128], actual shape is bf16[128,64]"),
    ("transpose-perm", "fp8", "transpose(%mul.9), dimensions={1,0}",
     "transpose(%mul.9), dimensions={1,1}", "transpose.1", "are not a permutation"),
    # dot
    ("dot-contracting", "gelu", "lhs_contracting_dims={1}, rhs_contracting_dims={0}",
     "lhs_contracting_dims={1}, rhs_contracting_dims={1}", "dot_general.1",
     "Contracting dimension sizes are not compatible"),
    ("dot-result", "cpu", "dot_res = f32[10,15]{1,0} dot(", "dot_res = f32[15,10]{1,0} dot(",
     "dot_res", "equal to f32[10,15], actual shape is f32[15,10]"),
    ("dot-batch", "cpu", "lhs_contracting_dims={1}, rhs_contracting_dims={0}",
     "lhs_contracting_dims={1}, rhs_contracting_dims={0}, lhs_batch_dims={0}", "dot_res",
     "Must the same number of batch dimensions"),
    # reduce and called computations
    ("reduce-result", "cpu", "ROOT reduce_res = f32[] reduce(",
     "ROOT reduce_res = f32[128] reduce(", "reduce_res", "equal to f32[], actual shape is f32[128]"),
    ("reduce-signature", "cpu", "  ROOT add = f32[] add(p0, p1)\n}",
     "  ROOT add = f32[2] broadcast(p0), dimensions={}\n}", "reduce_res",
     "Reduction function must return a scalar or tuple of scalars"),
    ("reduce-dims", "cpu", "dimensions={0},\n      to_apply=add_computation",
     "dimensions={1},\n      to_apply=add_computation", "reduce_res",
     "Reducing out-of-bounds dimension 1"),
    ("call-signature", "cpu", "call_res = f32[] call(param_call_in)",
     "call_res = f32[] call(param_cond_idx)", "call_res", "shape does not match parameter"),
    ("call-result", "cpu", "call_res = f32[] call(", "call_res = f32[2] call(", "call_res",
     "equal to f32[], actual shape is f32[2]"),
    ("while-body", "cpu", "  ROOT res = (s32[], f32[128]{0}) tuple(next_iteration, next_val)",
     "  ROOT res = (s32[], f32[128]{0}, s32[]) tuple(next_iteration, next_val, one)",
     "while_res", "equal to (s32[], f32[128], s32[]), actual shape is (s32[], f32[128])"),
    ("while-condition", "cpu", "  ROOT res = pred[] compare(iteration, limit), direction=LT",
     "  ROOT res = s32[] add(iteration, limit)", "while_res",
     "Conditional computation shape does not lead to a scalar predicate"),
    ("conditional-branch", "cpu", "  ROOT res = f32[128]{0} exponential(p0)",
     "  ROOT res = f32[128]{0} exponential(p0)\n  r2 = f32[128]{0} negate(p0)",
     None, None),  # an unused instruction is fine outside fusions
    ("conditional-result", "cpu", "  ROOT res = f32[128]{0} exponential(p0)",
     "  ROOT res = f32[64]{0} slice(p0), slice={[0:64]}", "cond_res",
     "equal to f32[64], actual shape is f32[128]"),
    ("conditional-operand", "cpu", "param_cond_val, param_cond_val),",
     "param_cond_val, param_dot_lhs),", "cond_res",
     "shape does not match parameter"),
    ("gte-index", "cpu", "while_res_1 = f32[128]{0} get-tuple-element(while_res), index=1",
     "while_res_1 = f32[128]{0} get-tuple-element(while_res), index=0", "while_res_1",
     "equal to s32[], actual shape is f32[128]"),
    ("tuple-shape", "cpu", "while_init = (s32[], f32[128]{0}) tuple(",
     "while_init = (s32[], f32[127]{0}) tuple(", "while_init",
     "equal to (s32[], f32[128]), actual shape is (s32[], f32[127])"),
    ("sort-comparator", "sort", "ROOT cmp = pred[] compare(param0, param1), direction=LT",
     "ROOT cmp = f32[] add(param0, param1)", "sort",
     "The Sort compare computation shape does not lead to a scalar predicate shape"),
    ("map-signature", "map", "ROOT map = f32[4] map(", "ROOT map = s32[4] map(", "map",
     "equal to f32[4], actual shape is s32[4]"),
    # data movement
    ("slice-limit", "slice", "slice={[0:4:1]}", "slice={[0:11:1]}", "slice",
     "limit index (11) must be less than or equal to dimension size (10)"),
    ("slice-result", "slice", "ROOT slice = f32[4] slice(", "ROOT slice = f32[5] slice(",
     "slice", "equal to f32[4], actual shape is f32[5]"),
    ("dynamic-slice-sizes", "dynamic_slice", "dynamic_slice_sizes={1,2}",
     "dynamic_slice_sizes={1,5}", "ds", "Slice dim size 5 greater than dynamic slice dimension: 4"),
    ("dynamic-slice-indices", "dynamic_slice", "dynamic-slice(operand, idx0, idx1)",
     "dynamic-slice(operand, idx0)", "ds", "Dynamic slice start number of dimensions 1 must match"),
    ("dus-update", "dynamic_update_slice", "update = f32[1,1] parameter(1)",
     "update = f32[1,3] parameter(1)", "dus", "Update dim size 3 greater than dynamic slice"),
    ("pad-result", "pad", "ROOT pad = f32[6] pad(", "ROOT pad = f32[7] pad(", "pad",
     "equal to f32[6], actual shape is f32[7]"),
    ("pad-interior", "pad", "padding=1_1_0", "padding=1_1_1", "pad",
     "equal to f32[9], actual shape is f32[6]"),
    ("concatenate-dims", "concatenate", "operand1 = f32[4,2] parameter(1)",
     "operand1 = f32[5,2] parameter(1)", "concatenate",
     "Cannot concatenate arrays that differ in dimensions other than the one being"),
    ("iota-dimension", "iota", "iota(), iota_dimension=0", "iota(), iota_dimension=1", "iota",
     "The iota dimension cannot go beyond the operation rank"),
    ("reverse-dims", "reverse", "dimensions={0}", "dimensions={1}", "reverse",
     "One of the reverse dimensions (1) is out-of-bounds"),
    ("topk-k", "topk", "(f32[4,2], s32[4,2]) topk(operand), k=2",
     "(f32[4,3], s32[4,3]) topk(operand), k=2", "topk", "equal to (f32[4,2], s32[4,2])"),
    ("gather-slice-sizes", "permute", "slice_sizes={1,256}", "slice_sizes={1,300}", "gather.1",
     "Slice size at index 1 in gather op is out of range"),
    ("gather-result", "permute", "offset_dims={1}", "offset_dims={0}", "gather.1",
     "equal to f32[256,64], actual shape is f32[64,256]"),
    ("scatter-updates", "scatter", "%p1 = s4[64,4,1]{2,1,0:E(4)} parameter(1)",
     "%p1 = s4[32,4,1]{2,1,0:E(4)} parameter(1)", "scatter",
     "Bounds of the scatter dimensions of updates must be same as the bounds"),
    ("scatter-window", "scatter", "update_window_dims={1,2}", "update_window_dims={1}",
     "scatter", "Updates tensor must be of rank 2; got 3"),
    # fusion, entry layout, rng, collectives, custom-call
    ("fusion-parameter", "permute_final", "%param_1.3 = s32[64]{0} parameter(1)",
     "%param_1.3 = s32[32]{0} parameter(1)", "loop_gather_fusion",
     "Shape mismatch between parameter number 1 and its operand"),
    ("fusion-root", "permute_final", "%loop_gather_fusion = f32[64,1,256]{2,1,0} fusion(",
     "%loop_gather_fusion = f32[64,256]{1,0} fusion(", "loop_gather_fusion",
     "Fused computation shape (f32[64,1,256]{2,1,0}) is not equal to the fusion shape"),
    ("entry-layout-parameter", "permute", "entry_computation_layout={(f32[64,256]{1,0}, s32[64]{0})",
     "entry_computation_layout={(f32[64,256]{1,0}, s32[32]{0})", "perm.1",
     "Shape of the entry computation parameter 1 is s32[64] should be compatible"),
    ("entry-layout-count", "permute", "entry_computation_layout={(f32[64,256]{1,0}, s32[64]{0})",
     "entry_computation_layout={(f32[64,256]{1,0})", None,
     "Number of parameters in entry computation layout (1) must be same as number of "
     "parameters of entry computation (2)"),
    ("alias-parameter", "permute", "input_output_alias={ {}: (0, {}, may-alias) }",
     "input_output_alias={ {}: (2, {}, may-alias) }", None, "parameter 2 does not exist"),
    ("rng-types", "rng", "param1 = f32[] parameter(1)", "param1 = s32[] parameter(1)", "rng",
     "Expected compatible element types for the result and the two operands of Rng"),
    ("all-reduce", "cpu", "all_reduce = f32[2]{0} all-reduce(", "all_reduce = f32[3]{0} all-reduce(",
     "all_reduce", "equal to f32[2], actual shape is f32[3]"),
    ("partition-id", "cpu", "pid = u32[] partition-id()", "pid = u32[] partition-id()", None, None),
    ("convolution-window", "cpu", "window={size=2x2},", "window={size=3x3},", "conv",
     "Window dimensions do not match RHS shape"),
    ("convolution-result", "cpu", "conv = f32[2,15,15,2]{3,2,1,0} convolution(",
     "conv = f32[2,16,16,2]{3,2,1,0} convolution(", "conv",
     "equal to f32[2,15,15,2], actual shape is f32[2,16,16,2]"),
    ("fft", "cpu", "fft_type=FFT, fft_length={4}", "fft_type=RFFT, fft_length={4}", "fft",
     "RFFT requires F32 or F64 input type, found C64"),
    ("custom-call-no-inference", "cpu",
     "topk_res = (f32[10]{0}, s32[10]{0}) custom-call(param_call_in),",
     "topk_res = (f32[10]{0}, s32[10]{0}, u8[77]) custom-call(param_call_in),", None, None),
    ("get-rng-seed", "cpu", "rng_seed = u64[] custom-call(),", "rng_seed = u32[] custom-call(),",
     "rng_seed", "GetRngSeed custom call must return U64 type"),
]


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_sources_are_clean(source):
    assert [d.render() for d in findings(SOURCES[source]())] == []


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_rule_fires_on_broken_module(case):
    _, source, old, new, instr, message = case
    text = SOURCES[source]()
    assert text.count(old) == 1, f"edit anchor not unique: {old!r}"
    broken = text.replace(old, new)
    diags = findings(broken)
    if message is None:
        assert [d.message for d in diags] == []
        return
    hits = [d for d in diags if message in d.message]
    assert hits, [d.message for d in diags]
    d = hits[0]
    assert d.rule == "hlo-verifier" and d.filename == "t.hlo"
    if instr is not None:
        assert d.instruction == instr
        assert d.line == line_of(broken, instr)
        assert d.column >= 1
        assert d.render(broken).startswith(f"t.hlo:{d.line}:{d.column}: error: ")


def test_layout_of_another_rank_written_by_a_pass_is_a_finding_on_the_instruction():
    """``LayoutUtil::ValidateLayoutInShape``: the parser refuses such text,
    so the layout is set the way a buggy pass would (layout-assignment once
    wrote {1,0} on a rank-3 bitcast operand of XLA's gemm_bias_gelu module,
    which layout_normalization then hit as an IndexError)."""
    from hlorun.ir.shape import Layout
    module = hlorun.parse_module(dump("gemm_bias_gelu_bf16", "*gpu_after_optimizations.txt"), "t.hlo")
    instr = next(i for c in module.computations for i in c.instructions if i.name == "bitcast.1.0")
    instr.shape = instr.shape.with_layout(Layout((1, 0)))
    diags = [d for d in HloVerifier().check(module) if d.instruction == "bitcast.1.0"]
    assert diags and "layout minor_to_major field contains 2 elements, but shape is rank 3" \
        in diags[0].message, [d.message for d in diags]
