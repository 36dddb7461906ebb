"""The evaluator against XLA itself: every case of
testdata/evaluate/opcodes.hlo and every real ``before_optimizations``
module of the shared dumps runs on XLA:CPU (through jaxlib) and with our
evaluator on the same seeded inputs; the results must agree within the
per-dtype tolerance.  Skipped where jax is not installed."""

from __future__ import annotations

import re

import pytest

from hlorun.evaluate import compare_values, evaluate, output_types, random_inputs, tolerance_types
from hlorun.evaluate.session import leaves
from hlorun.text.fileio import read_text
from hlorun.text.parser import parse_module, split_input_file

from ..conftest import SHARED, TESTDATA
from . import xla_oracle

pytestmark = pytest.mark.skipif(not xla_oracle.available(), reason="jax is not installed")

#: cases XLA's HLO -> StableHLO import cannot take (bitcast with layouts)
NOT_CONVERTIBLE = {"layouts_bitcast_transpose"}


def _cases():
    text = read_text(TESTDATA / "evaluate" / "opcodes.hlo")
    out = []
    for line, chunk in split_input_file(text):
        name = chunk.split("HloModule", 1)[1].split()[0].strip(",")
        out.append(pytest.param(chunk, id=name,
                                marks=[pytest.mark.skip(reason="not importable by XLA")]
                                if name in NOT_CONVERTIBLE else []))
    return out


def _check(text: str, filename: str, seed: int) -> None:
    module = parse_module(text, filename)
    args = random_inputs(module, seed)
    ours = [v for _, v in leaves(evaluate(module, args))]
    theirs = xla_oracle.run_on_xla_cpu(text, args)
    cmp = compare_values(tuple(theirs), tuple(ours), output_types(module),
                         tolerance_types=tolerance_types(module))
    assert cmp.ok, "\n".join(leaf.describe() for leaf in cmp.leaves if not leaf.ok)


@pytest.mark.parametrize("text", _cases())
@pytest.mark.parametrize("seed", [0, pytest.param(7, marks=pytest.mark.slow)])
def test_opcode_cases_agree_with_xla_cpu(text, seed):
    _check(text, "opcodes.hlo", seed)


def _dump_modules():
    root = SHARED / "xla-dumps"
    if not root.exists():
        return [pytest.param(None, marks=pytest.mark.skip(reason="shared dumps not available"))]
    out = []
    for path in sorted(root.glob("*/*before_optimizations.txt")) + \
            sorted(root.glob("gemm_sweep/*/*before_optimizations.txt")):
        case = path.parent.name
        m = re.search(r"_m(\d+)_n(\d+)_k(\d+)", case)
        flops = 2 * int(m.group(1)) * int(m.group(2)) * int(m.group(3)) if m else 0
        marks = [pytest.mark.slow] if flops > 3e8 or case == "cnn_fp16" else []
        if flops > 2e10:
            marks = [pytest.mark.skip(reason="too large for the test suite")]
        out.append(pytest.param(path, id=case, marks=marks))
    return out


@pytest.mark.parametrize("path", _dump_modules())
def test_real_before_optimizations_modules_agree_with_xla_cpu(path):
    _check(read_text(path), str(path), 0)
