"""Dot algorithms against what XLA on an H200 did with JAX's presets
(testdata/xla-dumps/dot_algorithms: info.json lists the presets XLA compiled
and the ones it refused)."""

from __future__ import annotations

import json

import hlorun
from hlorun.ir.attrs import DOT_ALGORITHMS
from hlorun.passes import Target
from hlorun.passes.algorithm_util import ALGORITHMS, algorithm_of, operand_type_allowed, supported_on_gpu

from ..conftest import TESTDATA

DUMP = TESTDATA / "xla-dumps" / "dot_algorithms"
H200 = Target("cuda", "H200", "9.0")


def test_parser_and_algorithm_table_know_the_same_algorithms():
    assert set(DOT_ALGORITHMS) == set(ALGORITHMS)


def test_every_dot_xla_compiled_is_supported_on_the_h200():
    module = hlorun.load_module(next(DUMP.glob("*before_optimizations.txt*")))
    dots = [i for i in module.entry.instructions if i.opcode == "dot"]
    info = json.loads((DUMP / "info.json").read_text())
    assert len(dots) == len(info["algorithms"]) == 11
    for dot in dots:
        alg = algorithm_of(dot)
        lhs, rhs = (o.shape.element_type for o in dot.operands)
        assert supported_on_gpu(alg, H200, lhs, rhs, dot.shape.element_type), dot.name
        assert operand_type_allowed(alg, lhs) or alg == "dot_bf16_bf16_f32", dot.name


def test_the_presets_xla_refused_are_unsupported():
    refused = json.loads((DUMP / "info.json").read_text())["algorithms_refused"]
    assert set(refused) == {"F16_F16_F16", "BF16_BF16_BF16"}
    assert not supported_on_gpu("dot_f16_f16_f16", H200, "f16", "f16", "f16")
    assert not supported_on_gpu("dot_bf16_bf16_bf16", H200, "bf16", "bf16", "bf16")


def test_generation_limits():
    t4, a100 = Target("cuda", "T4", "7.5"), Target("cuda", "A100", "8.0")
    assert not supported_on_gpu("dot_bf16_bf16_f32", t4, "bf16", "bf16", "f32")
    assert supported_on_gpu("dot_bf16_bf16_f32", a100, "bf16", "bf16", "f32")
    assert not supported_on_gpu("dot_any_f8_any_f8_f32", a100, "f8e4m3fn", "f8e4m3fn", "f32")
    assert supported_on_gpu("dot_any_f8_any_f8_f32", H200, "f8e5m2", "f8e4m3fn", "bf16")
    assert not supported_on_gpu("dot_any_f8_any_f8_f32", H200, "f8e5m2", "f8e5m2", "f32")
    mi300 = Target("rocm", "MI300X", "gfx942")
    assert supported_on_gpu("dot_tf32_tf32_f32", mi300, "f32", "f32", "f32")
    assert supported_on_gpu("dot_any_f8_any_f8_f32", mi300, "f8e4m3fnuz", "f8e4m3fnuz", "f32")
