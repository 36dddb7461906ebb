"""cuDNN convolutions like XLA on the real dumps (issue 14, conv programs):
conv-rewriter's backward-input / backward-filter matching, layout
assignment's NHWC constraints and the layout normalization of the calls,
checked against XLA's own modules (cnn_fp16's pass-by-pass dump, the
after_optimizations of convnet_train_bf16), and the rewrites' numerics on
the JAX gradient programs of the fixture file."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from hlorun.evaluate import compare_values, evaluate, output_types, random_inputs, tolerance_types
from hlorun.passes import pass_class
from hlorun.text.parser import load_module, parse_module

from ..conftest import SHARED, TESTDATA

CNN = SHARED / "xla-dumps" / "cnn_fp16"
CONVNET = TESTDATA / "xla-dumps" / "convnet_train_bf16"
CONV = ("__cudnn$convForward", "__cudnn$convBiasActivationForward",
        "__cudnn$convBackwardInput", "__cudnn$convBackwardFilter")


def _module(d, pattern):
    paths = sorted(d.glob(pattern))
    if not paths:
        pytest.skip(f"no {pattern} in {d}")
    return load_module(paths[0])


def _convs(module):
    """(target, window, dim_labels, feature groups, operand shapes, result
    shape) of every cuDNN call, as a multiset."""
    out = Counter()
    for comp in module.computations:
        for i in comp.instructions:
            if i.opcode == "custom-call" and i.custom_call_target in CONV:
                out[(i.custom_call_target, i.attrs.get("window"), i.attrs["dim_labels"],
                     i.attrs.get("feature_group_count", "1"),
                     tuple(str(o.shape) for o in i.operands[:2]),
                     str(i.shape.tuple_shapes[0]))] += 1
    return out


def _compile(module, upto=None):
    from hlorun.pipeline.loader import load_pipeline
    from hlorun.pipeline.run import RunOptions, run_pipeline
    spec = load_pipeline("gpu-cuda")
    opts = RunOptions(enable_only=upto) if upto else RunOptions()
    res = run_pipeline(module, spec, opts)
    assert res.exit_code == 0, res.failure
    return module


def test_convnet_final_cudnn_calls_are_xlas():
    """3 forward, 3 backward-filter and 2 backward-input convolutions, NHWC
    data and OHWI filters, the same windows and dimension labels as XLA's
    after_optimizations module."""
    ours = _compile(_module(CONVNET, "*before_optimizations.txt"))
    theirs = _module(CONVNET, "*gpu_after_optimizations.txt*")
    assert _convs(ours) == _convs(theirs)
    kinds = Counter(k[0] for k in _convs(ours).elements())
    assert kinds == {"__cudnn$convForward": 3, "__cudnn$convBackwardFilter": 3,
                     "__cudnn$convBackwardInput": 2}


def test_cnn_fp16_calls_and_layout_transposes_are_xlas():
    """cnn_fp16 (f16 NCHW model): XLA's layout assignment gives the four
    bias+ReLU convolutions NHWC operands ({1,3,2,0} copies of the input and
    the filters, 5 copies), which layout normalization turns into transposes
    feeding b01f_o01i->b01f calls."""
    ours = _compile(_module(CNN, "*before_optimizations.txt"))
    theirs = _module(CNN, "*gpu_after_optimizations.txt")
    assert _convs(ours) == _convs(theirs)
    la = _module(CNN, "*.after_layout-assignment.*")
    ours_la = _compile(_module(CNN, "*before_optimizations.txt"),
                       ["pre-spmd-partitioner", "optimization", "conv_canonicalization",
                        "layout_assignment"])

    def copies(m):
        return sorted(str(i.shape) for i in m.entry.instructions if i.opcode == "copy"
                      and i.operands[0].opcode == "parameter")
    assert copies(ours_la) == copies(la)
    assert len(copies(la)) == 5


def _fixture_cases(path):
    text = path.read_text()
    return [c for c in re.split(r"^// -----$", text, flags=re.M) if "convolution(" in c or "custom-call(" in c]


_CONV_PASSES = ("conv-rewriter", "conv-padding-legalization", "cudnn_pad_for_convolutions")
_NUMERIC_CASES = [(name, i) for name in _CONV_PASSES
                  for i in range(len(_fixture_cases(TESTDATA / "passes" / name
                                                    / f"{name.replace('-', '_')}.hlo")))]


@pytest.mark.parametrize("pass_name,case", _NUMERIC_CASES)
def test_conv_passes_keep_the_numbers(pass_name, case):
    """Every fixture case of conv-rewriter (forward, backward input / filter,
    strided, dilated, grouped, batch-grouped), conv-padding-legalization
    (uneven SAME padding, window dilation) and cudnn_pad_for_convolutions
    (f16 features padded to 4 / 8) computes the same values after
    the pass, by the evaluator's cuDNN call semantics."""
    path = TESTDATA / "passes" / pass_name / f"{pass_name.replace('-', '_')}.hlo"
    text = _fixture_cases(path)[case]
    before = parse_module(text)
    if any(i.shape.rank > 5 for i in before.entry.instructions if i.shape.is_array):
        pytest.skip("4 spatial dimensions: stays a convolution")
    after = parse_module(text)
    assert pass_class(pass_name)().run(after) or "CHANGED: false" in text
    args = random_inputs(before, 0)
    ref, got = evaluate(before, args), evaluate(after, args)
    cmp = compare_values(ref, got, output_types(before), tolerance_types=tolerance_types(before))
    assert cmp.ok, "; ".join(leaf.describe() for leaf in cmp.leaves if not leaf.ok)
    assert not any(i.opcode == "convolution" for i in after.entry.instructions)


def test_cnn_fp16_layout_normalization_step_like_xla():
    """XLA's layout_normalization input (step 0036) through our
    layout_normalization: the same cuDNN calls (b01f_o01i->b01f on
    descending layouts) and the same transposes as XLA's step 0038 (after
    the simplifier folded the bitcasts XLA's custom-call hook leaves)."""
    from hlorun.testing.fixtures import run_passes
    module = _module(CNN, "*.0036.layout_normalization.*")
    expected = _module(CNN, "*.0038.layout_normalization.*")
    run_passes(module, [("layout_normalization", {})])
    assert _convs(module) == _convs(expected)

    def transposes(m):
        return sorted((str(i.operands[0].shape), str(i.shape), i.attrs["dimensions"])
                      for i in m.entry.instructions if i.opcode == "transpose")
    assert transposes(module) == transposes(expected)
    assert len(transposes(expected)) == 6


@pytest.mark.parametrize("folder", [CNN, CONVNET], ids=["cnn_fp16", "convnet_train_bf16"])
def test_conv_programs_compile_to_the_same_numbers(folder):
    """The default pipeline's output (NHWC cuDNN calls on transposed
    operands, backward convolutions, simplified convert chains) computes what
    the input module computes, by the evaluator."""
    before = _module(folder, "*before_optimizations.txt")
    args = random_inputs(before, 0)
    ref = evaluate(before, args)
    after = _compile(_module(folder, "*before_optimizations.txt"))
    cmp = compare_values(ref, evaluate(after, args), output_types(before),
                         tolerance_types=tolerance_types(before))
    assert cmp.ok, "; ".join(leaf.describe() for leaf in cmp.leaves if not leaf.ok)
