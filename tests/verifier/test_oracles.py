"""hlo-verifier against external oracles.

* XLA's own verifier tests (testdata/xla_verifier, extracted from
  hlo_verifier_test.cc): the verdict (ok / error) must be XLA's, with the
  options of the test fixture.
* Real XLA:GPU dumps: valid compiled modules, zero findings; the files after
  layout assignment also with XLA:GPU's post-layout options.
* XLA's parser and pass tests that parse with ParseAndReturnVerifiedModule:
  zero findings (the test base allows mixed precision).
* XLA's .hlo files: the findings are exactly the known malformed modules.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import hlorun
from hlorun.text.fileio import read_text
from hlorun.text.parser import split_input_file
from hlorun.verifier.checkers import HloVerifier

from ..conftest import SHARED, TESTDATA

CASES_DIR = TESTDATA / "xla_verifier"
CASES = json.loads((CASES_DIR / "manifest.json").read_text())["cases"]

NOT_HLO = ("buffer-assignment", "memory-usage-report", "live-range", "thunk_",
           "priority_fusion_dump")
DUMPS = sorted(p for p in (SHARED / "xla-dumps").glob("**/*.txt")
               if not any(s in p.name for s in NOT_HLO)) if (SHARED / "xla-dumps").exists() else []


def _check(case: dict) -> list:
    module = hlorun.parse_module((CASES_DIR / case["file"]).read_text(), case["file"])
    for key, value in (case.get("config") or {}).items():
        module.header_attrs[key] = str(value)
    return HloVerifier(**case["options"]).check(module)


def test_xla_verifier_cases_present():
    assert len(CASES) >= 200
    assert sum(c["expect"] == "ok" for c in CASES) >= 40


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["name"])
def test_verdict_matches_xla(case):
    diags = _check(case)
    if case["expect"] == "ok":
        assert diags == [], [d.message for d in diags]
    else:
        assert diags, f"XLA rejects this module ({case['expected_substrings']})"
        assert all(d.line for d in diags if d.instruction), "findings are located"


def test_messages_say_what_xla_says():
    """Where XLA's test names the error text, ours contains it for most
    cases (the rest quote C++ conditions of TF_RET_CHECKs)."""
    total = hits = 0
    for case in CASES:
        if case["expect"] != "error" or not case["expected_substrings"]:
            continue
        total += 1
        diags = _check(case)
        hits += any(all(s in d.message for s in case["expected_substrings"]) for d in diags)
    assert total > 120
    assert hits / total >= 0.9, f"{hits}/{total}"


def test_dumps_present(shared):
    assert len(DUMPS) > 400


@pytest.mark.parametrize("path", DUMPS, ids=lambda p: f"{p.parent.name}/{p.name[:60]}")
def test_dump_has_no_findings(path):
    module = hlorun.parse_module(path.read_text(), str(path))
    assert [d.render() for d in HloVerifier().check(module)] == []


def _after_layout_assignment(path: Path) -> bool:
    """Dumps written after layout assignment ran (the files of a pass-by-pass
    folder from the layout-assignment step on, and final modules)."""
    if "after_optimizations" in path.name:
        return True
    m = re.match(r"module_\d+\.[^.]+\.(\d{4})\.", path.name)
    if not m:
        return False
    steps = [int(re.match(r"module_\d+\.[^.]+\.(\d{4})\.", p.name).group(1))
             for p in path.parent.glob("module_*layout_assignment.after_layout-assignment*")]
    return bool(steps) and int(m.group(1)) >= min(steps)


def test_dumps_after_layout_assignment_pass_gpu_post_layout_options(shared):
    """XLA:GPU verifies post-layout modules layout-sensitively, with
    LayoutAssignment::InstructionCanChangeLayout and the deadlock check."""
    gpu = HloVerifier(layout_sensitive=True, verify_layout_changes=True,
                      verify_broadcast_dimensions_order=True,
                      verify_no_collective_deadlocks=True)
    checked = 0
    for path in DUMPS:
        if not _after_layout_assignment(path):
            continue
        checked += 1
        module = hlorun.parse_module(path.read_text(), str(path))
        assert [d.render() for d in gpu.check(module)] == [], path.name
    assert checked > 150


def _corpus(name: str) -> dict:
    return json.loads((SHARED / "corpus/xla" / name / "manifest.json").read_text())


def test_parser_cases_xla_verifies_have_no_findings(shared):
    cases = [c for c in _corpus("parser")["cases"] if c["positive"] and c.get("verifier")]
    assert len(cases) >= 40
    v = HloVerifier(allow_mixed_precision=True)
    for c in cases:
        text = (SHARED / "corpus/xla/parser" / c["file"]).read_text()
        assert [d.message for d in v.check(hlorun.parse_module(text, c["file"]))] == [], c["file"]


def test_pass_test_modules_xla_verifies_have_no_findings(shared):
    mods = [m for m in _corpus("passes")["modules"]
            if m.get("file") and (m.get("xla_parse") or {}).get("parses")
            and any("ParseAndReturnVerifiedModule" in x for x in m["checks"])]
    assert len(mods) >= 80
    v = HloVerifier(allow_mixed_precision=True)
    for m in mods:
        text = (SHARED / "corpus/xla/passes" / m["file"]).read_text()
        assert [d.message for d in v.check(hlorun.parse_module(text, m["file"]))] == [], m["file"]


#: (file[:first line of the chunk], instruction) -> why the module is malformed
#: for XLA's HloVerifier (each checked against hlo_verifier.cc /
#: shape_inference.cc; the files are inputs of importer and tool tests that
#: parse without verifying).
KNOWN_MALFORMED = {
    ("xla__hlo__builder__tests__math_next_after.hlo:64", "custom-call.2"): "entry layout says f32",
    ("xla__hlo__builder__tests__math_next_after.hlo:64", "Arg_0.1"): "entry layout says f32",
    ("xla__hlo__builder__tests__math_next_after.hlo:64", "Arg_1.2"): "entry layout says f32",
    ("xla__hlo__tools__tests__generate_hlo_test_checks_test_input.hlo:61",
     "call-foo.bar.baz.0"): "f32[4] passed to an f32[] parameter",
    ("xla__hlo__tools__tests__generate_hlo_test_checks_test_input.hlo:61",
     "call-foo.bar.baz_0"): "f32[4] passed to an f32[] parameter",
    ("xla__hlo__tools__tests__generate_hlo_test_checks_test_output.hlo:88",
     "call-foo.bar.baz.0"): "f32[4] passed to an f32[] parameter",
    ("xla__hlo__tools__tests__generate_hlo_test_checks_test_output.hlo:88",
     "call-foo.bar.baz_0"): "f32[4] passed to an f32[] parameter",
    ("xla__hlo__transforms__tests__operand_upcaster.hlo", "result"):
        "dot without contracting dims is an outer product s32[8,8]",
    ("xla__hlo__transforms__tests__rewrite_bf16_conv_to_onednn.hlo:20", "convolution"):
        "pad=-1_-1 gives spatial size 0 and the batch is 8, not 4",
    **{(f"xla__hlo__transforms__tests__rng_expander.hlo{s}", "result"):
       "rng takes 2 operands (the test feeds a third, the shape)"
       for s in (":1", ":383", ":789", ":1198", ":1608", ":2018")},
    ("xla__hlo__translate__hlo_to_mhlo__tests__custom_call.hlo", "arg1"): "unbounded '?' dims",
    ("xla__hlo__translate__hlo_to_mhlo__tests__custom_call.hlo", "custom-call"): "'?' dims",
    ("xla__hlo__translate__hlo_to_mhlo__tests__custom_call.hlo", "Arg_0.1"): "'?' dims",
    ("xla__hlo__translate__hlo_to_mhlo__tests__custom_call.hlo", "custom-call.12"): "'?' dims",
    ("xla__hlo__translate__hlo_to_mhlo__tests__import.hlo", "all-to-all"):
        "all-to-all operands with different layouts",
    ("xla__hlo__translate__hlo_to_mhlo__tests__import.hlo", "convolution.4"):
        "3x3 window on a 2x2 kernel",
    ("xla__hlo__translate__hlo_to_mhlo__tests__import.hlo", "map"): "map computation returns a tuple",
    ("xla__hlo__translate__hlo_to_mhlo__tests__import.hlo", "reduce.2"): "reducer returns f32[4]",
    ("xla__hlo__translate__hlo_to_mhlo__tests__import.hlo", "select-and-scatter"):
        "select returns a tuple",
    ("xla__hlo__translate__hlo_to_mhlo__tests__import.hlo", "sorted"): "comparator returns a tuple",
    ("xla__hlo__translate__hlo_to_mhlo__tests__import.hlo", "Arg_0.1"): "'?' dims",
    ("xla__hlo__translate__hlo_to_mhlo__tests__import.hlo", "abs.2"): "'?' dims",
    ("xla__hlo__translate__hlo_to_mhlo__tests__import_async.hlo:27", "all-gather-start.2"):
        "array-shaped all-gather-start (old async form)",
    ("xla__hlo__translate__hlo_to_mhlo__tests__import_async.hlo:27", "all-gather-done.3"):
        "array-shaped all-gather-start (old async form)",
    ("xla__hlo__translate__hlo_to_mhlo__tests__import_async.hlo:62", "collective-permute-start.2"):
        "array-shaped collective-permute-start (old async form)",
    ("xla__hlo__translate__hlo_to_mhlo__tests__import_async.hlo:62", "collective-permute-done.3"):
        "array-shaped collective-permute-start (old async form)",
    ("xla__hlo__translate__hlo_to_mhlo__tests__import_async.hlo:168", "ar-start"):
        "tuple-shaped all-reduce-start of one operand (old async form)",
    ("xla__hlo__translate__hlo_to_mhlo__tests__import_async.hlo:168", "ar-done"):
        "tuple-shaped all-reduce-start of one operand (old async form)",
    ("xla__hlo__translate__hlo_to_mhlo__tests__import_emit_stablehlo.hlo:2565", "Arg_0.1"):
        "'?' dims",
    ("xla__hlo__translate__hlo_to_mhlo__tests__import_emit_stablehlo.hlo:2565", "abs.2"): "'?' dims",
    ("xla__hlo__translate__hlo_to_mhlo__tests__layouts_and_names.hlo:14", "input"):
        "entry layout says f32, the computation f16",
    ("xla__hlo__translate__hlo_to_mhlo__tests__while.hlo", "broadcast.1"):
        "broadcast f32[1] -> f32[3] (HLO broadcast does not expand size-1 dims)",
    ("xla__tools__print_indexing_test.hlo", "fusion"): "s32[1024] passed to an s32[] parameter",
    ("xla__tools__tests__data__invalid_concat.hlo", "cat.3"): "deliberately invalid concatenate",
}


@pytest.mark.slow
def test_corpus_file_findings_are_the_known_malformed_modules(shared):
    data = _corpus("files")
    files = [f for f in data["files"] if f.get("stored") and f["format"] == "hlo_text"
             and (f["xla_parse"].get("parses") or f["xla_parse"].get("chunks_parsed"))]
    v = HloVerifier(allow_mixed_precision=True)
    found: dict[tuple[str, str], int] = {}
    for f in files:
        text = read_text(SHARED / "corpus/xla/files" / f["stored"])
        chunks = ([(f"{f['stored']}:{line}", c) for line, c in split_input_file(text)]
                  if f.get("split_input_file_chunks") else [(f["stored"], text)])
        for label, chunk in chunks:
            try:
                module = hlorun.parse_module(chunk, label)
            except hlorun.HloParseError:
                continue  # XLA rejects some chunks of split files too
            for d in v.check(module):
                found[(label, d.instruction)] = found.get((label, d.instruction), 0) + 1
    assert set(found) == set(KNOWN_MALFORMED)
    assert sum(found.values()) == 43
