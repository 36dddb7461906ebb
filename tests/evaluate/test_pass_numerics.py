"""Every registered pass preserves the numbers: on its fixtures
(testdata/passes/<pass>/*.hlo) and on the real XLA dump modules that XLA
itself fed to the pass of the same name.  New passes are picked up from
the registry automatically.  And ``compile --check-numerics`` names a
deliberately wrong pass."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from hlorun.cli import cli
from hlorun.evaluate import (EvaluationError, compare_values, evaluate, output_types, random_inputs,
                             tolerance_types, unsupported_ops)
from hlorun.text.parser import parse_module
from hlorun.passes import REGISTRY
from hlorun.testing.fixtures import fixture_files, load_fixture_file, run_passes

from ..broken_passes import ALIGN_INPUT_MODULE, ALIGN_INPUT_PIPELINE
from ..broken_passes import SwappedReshapeDecomposer as BrokenDecomposer
from ..conftest import SHARED, TESTDATA

MAX_BYTES = 1 << 30
CUDA = {"platform": "cuda", "device": "H100", "compute_capability": "9.0"}


def _check_numbers(module, passes, target, label):
    """Evaluate, run the passes, evaluate again on the same inputs, compare."""
    missing = unsupported_ops(module)
    if missing:
        pytest.skip(f"{label}: input not evaluable ({', '.join(missing)})")
    too_big = [p.name for p in module.entry.parameters if p.shape.byte_size() > MAX_BYTES]
    if too_big:  # XLA's own pass tests use shapes of hundreds of GiB
        pytest.skip(f"{label}: parameter {too_big[0]} is over {MAX_BYTES >> 20} MiB")
    args = random_inputs(module, 0)
    types = output_types(module)
    # the narrowest types the outputs pass through, read before the pass runs
    # (a pass that removes a rounding, like simplify-fp-conversions' excess
    # precision, must be judged at the precision the input computed in)
    tol_types = tolerance_types(module)
    signature = [p.shape.to_string(False) for p in module.entry.parameters]
    try:
        before = evaluate(module, args, max_bytes=MAX_BYTES, max_while_iterations=1000)
    except EvaluationError as e:
        pytest.skip(f"{label}: input not evaluable: {e.message}")
    changed = run_passes(module, passes, target)
    if [p.shape.to_string(False) for p in module.entry.parameters] != signature:
        pytest.skip(f"{label}: the pass changed the entry parameters")
    after = evaluate(module, args, max_bytes=MAX_BYTES, max_while_iterations=1000)
    cmp = compare_values(before, after, types, tolerance_types=tol_types)
    assert cmp.ok, f"{label}: " + "; ".join(leaf.describe() for leaf in cmp.leaves if not leaf.ok)
    return changed


def _fixture_cases():
    out = []
    for path in fixture_files(TESTDATA):
        if path.parent.parent.name != "passes" or path.parent.name not in REGISTRY:
            continue
        for case in load_fixture_file(path):
            if case.expect_error is None:
                out.append(pytest.param(case, id=case.name))
    return out


@pytest.mark.parametrize("case", _fixture_cases())
def test_pass_fixture_preserves_numbers(case):
    module = parse_module(case.text, str(case.path))
    _check_numbers(module, case.passes, case.target or CUDA, case.name)


def test_every_registered_pass_has_an_evaluable_fixture():
    """So that the parametrized check above covers every pass, not just runs."""
    covered = set()
    for p in _fixture_cases():
        case = p.values[0]
        module = parse_module(case.text, str(case.path))
        if not unsupported_ops(module):
            covered.update(name for name, _ in case.passes)
    assert not set(REGISTRY) - covered, f"passes without an evaluable fixture: {set(REGISTRY) - covered}"


def _dump_inputs():
    """(pass, module file) pairs: the module XLA's pass of that name received
    (the dump before its ``after_<pass>`` file, or a ``before_<pass>`` file)."""
    root = SHARED / "xla-dumps"
    if not root.exists():
        return [pytest.param(None, None, marks=pytest.mark.skip(reason="shared dumps not available"))]
    seqs = {}
    for d in sorted(p for p in root.iterdir() if p.is_dir() and p.name != "gemm_sweep"):
        seqs[d] = sorted(p for p in d.glob("*.txt") if re.search(r"\.\d{4}\.", p.name))
    out = []
    for name in REGISTRY:
        inputs = set()
        for d, seq in seqs.items():
            for i, p in enumerate(seq):
                if f".after_{name}." in p.name and i > 0:
                    inputs.add(seq[i - 1])
                if p.name.endswith(f".before_{name}.txt"):
                    inputs.add(p)
        for p in sorted(inputs):
            slow = p.parent.name == "cnn_fp16"
            out.append(pytest.param(name, p, id=f"{name}:{p.parent.name}:{p.name.split('.')[2]}",
                                    marks=[pytest.mark.slow] if slow else []))
    return out


@pytest.mark.parametrize("name,path", _dump_inputs())
def test_pass_preserves_numbers_on_the_real_module_xla_gave_it(name, path):
    module = parse_module(path.read_text(), str(path))
    _check_numbers(module, [(name, {})], CUDA, f"{name} on {path.name}")


# ---------------------------------------------------------------------------
# A deliberately wrong pass
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SwappedReshapeDecomposer(BrokenDecomposer):
    """The broken reshape-decomposer under a name of its own."""

    name = "test-swapped-reshape-decomposer"


@pytest.fixture
def broken_pass(monkeypatch):
    monkeypatch.setitem(REGISTRY, "test-swapped-reshape-decomposer",
                        "tests.evaluate.test_pass_numerics:SwappedReshapeDecomposer")


def _compile(tmp_path: Path, decomposer: str, *extra: str):
    (tmp_path / "m.hlo").write_text(ALIGN_INPUT_MODULE)
    (tmp_path / "p.yaml").write_text(ALIGN_INPUT_PIPELINE.replace("DECOMPOSER", decomposer))
    return CliRunner().invoke(cli, ["compile", "--check-numerics", str(tmp_path / "m.hlo"),
                                    "-p", str(tmp_path / "p.yaml"), "--diff", "none", *extra])


def test_check_numerics_names_the_wrong_pass(tmp_path, broken_pass):
    r = _compile(tmp_path, "test-swapped-reshape-decomposer")
    assert r.exit_code == 2, r.output
    assert "numerics mismatch" in r.output
    assert "pass #2 layout_normalization/test-swapped-reshape-decomposer changed the result" in r.output
    assert re.search(r"worst at \[\d+,\d+\]", r.output)


def test_check_numerics_json_report(tmp_path, broken_pass):
    from hlorun.report.schema import validate
    r = _compile(tmp_path, "test-swapped-reshape-decomposer", "--format", "json")
    assert r.exit_code == 2
    doc = json.loads(r.stdout)
    assert validate(doc) == []
    assert doc["status"] == "numerics-mismatch" and doc["exit_code"] == 2
    first = doc["numerics"]["first_mismatch"]
    assert first["pass"] == "layout_normalization/test-swapped-reshape-decomposer"
    assert first["index"] == 2 and first["worst"]["mismatches"] > 0
    assert len(first["worst"]["worst_index"]) == 2


def test_check_numerics_passes_with_the_real_pass(tmp_path):
    r = _compile(tmp_path, "reshape-decomposer")
    assert r.exit_code == 0, r.output
    assert re.search(r"numerics: [23] check\(s\) after every changed pass agree", r.output)


def test_check_numerics_final_only_compares_start_and_end(tmp_path, broken_pass):
    r = _compile(tmp_path, "test-swapped-reshape-decomposer", "--check-numerics=final", "--format", "json")
    assert r.exit_code == 2
    doc = json.loads(r.stdout)
    assert doc["numerics"]["mode"] == "final"
    assert [c["pass"] for c in doc["numerics"]["checks"]] == ["pipeline-end"]


def test_check_numerics_before_the_file_argument(tmp_path):
    (tmp_path / "m.hlo").write_text(ALIGN_INPUT_MODULE)
    r = CliRunner().invoke(cli, ["compile", "--check-numerics", str(tmp_path / "m.hlo"),
                                 "--rtol", "1e-6", "--seed", "4", "--diff", "none", "--no-table"])
    assert r.exit_code == 0, r.output
    assert "seed 4" in r.output


def test_tolerance_options_need_check_numerics(tmp_path):
    (tmp_path / "m.hlo").write_text(ALIGN_INPUT_MODULE)
    r = CliRunner().invoke(cli, ["compile", str(tmp_path / "m.hlo"), "--rtol", "1e-3"])
    assert r.exit_code == 1
    assert "need --check-numerics" in r.output
