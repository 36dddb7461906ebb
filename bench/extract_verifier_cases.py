"""Extract the HLO modules of XLA's ``hlo_verifier_test.cc`` with XLA's
verdicts, as a conformance oracle for ``hlo-verifier``.

Usage: python bench/extract_verifier_cases.py XLA_SRC OUT_DIR

Writes ``OUT_DIR/NAME.hlo`` (the module text, as written in the test) and
``OUT_DIR/manifest.json``.  A test is taken when it parses one raw-string
module, runs the verifier on it without changing it in C++ first, and states
the outcome (ok, or an error with a message substring).  The verifier
options come from the test fixture (layout sensitivity, mixed precision)
or from an ``HloVerifierOpts{}...`` expression in the test.  Everything else
(modules built in C++, mutated modules, templated texts) is skipped and
counted in the manifest.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

#: fixture -> HloVerifier options (the test base constructor arguments)
FIXTURES = {
    "HloVerifierTest": {},
    "HloVerifierTestAllowMixedPrecision": {"allow_mixed_precision": True},
    "HloVerifierTestLayoutSensitive": {"layout_sensitive": True, "verify_layout_changes": True},
    "HloVerifierTestLayoutSensitiveAndAllowMixedPrecision": {
        "layout_sensitive": True, "allow_mixed_precision": True, "verify_layout_changes": True},
    "HloVerifierTestLayoutFusion": {"layout_sensitive": True},
    "HloVerifierTestForCollectiveDeadlocks": {"verify_no_collective_deadlocks": True},
    "HloVeriferSkipCheckReplicaGroups": {"check_replica_groups": False},
}

#: HloVerifierOpts builder calls -> options
OPTS = {
    "MakeLayoutSensitive()": {"layout_sensitive": True},
    "WithLayoutSensitive(true)": {"layout_sensitive": True},
    "WithLayoutSensitive(false)": {"layout_sensitive": False},
    "AllowMixedPrecision()": {"allow_mixed_precision": True},
    "WithAllowMixedPrecision(true)": {"allow_mixed_precision": True},
    "WithAllowMixedPrecision(false)": {"allow_mixed_precision": False},
    "VerifyBroadcastDimensionsOrder()": {"verify_broadcast_dimensions_order": True},
    "VerifyReshapeIsBitcast()": {"verify_reshape_is_bitcast": True},
    "VerifyCallNestedComputationThreadName()": {
        "verify_call_nested_computation_thread_name": True},
    "WithAllowUnboundedDynamism(true)": {"allow_unbounded_dynamism": True},
    "WithCheckReplicaGroups(false)": {"check_replica_groups": False},
    "WithVerifyShardingDeviceNumbers(false)": {},
    "WithVerifyShardingDeviceNumbers(true)": {},
}

_RAW = re.compile(r'R"(\w*)\((.*?)\)\1"', re.S)
_TEST = re.compile(r"^TEST(?:_F)?\((\w+),\s*(\w+)\)", re.M)
_MUTATION = re.compile(r"->set_|ReplaceOperandWith|ReplaceAllUsesWith|AddInstruction|"
                       r"RemoveInstruction|mutable_|->Clone|AppendOperand|set_root|"
                       r"ReplaceInstruction|AddEmbeddedComputation|SetAndUniquify|"
                       r"->add_|DropAllControlDeps|AddControlDependencyTo|set_schedule|"
                       r"config\(\)|Cast<|->shape\(\)|SetFrontendAttribute|CreateFromProto|"
                       r"ToProto|set_entry|mutable_config")


def _options(body: str, fixture: str) -> dict | None:
    opts = dict(FIXTURES.get(fixture, {}))
    if fixture not in FIXTURES:
        return None
    m = re.search(r"HloVerifier(?:\s+\w+)?\s*[{(]\s*HloVerifierOpts\s*\{\s*\}"
                  r"((?:\s*\.\s*\w+\([^()]*\))*)", body)
    if m:
        opts = {}
        for call in re.findall(r"\.\s*(\w+\([^()]*\))", m.group(1)):
            call = re.sub(r"\s+", "", call)
            if call not in OPTS:
                return None
            opts.update(OPTS[call])
    elif re.search(r"HloVerifier(?:\s+\w+)?\s*[{(]", body):
        m2 = re.search(r"HloVerifier\s*[{(]\s*/\*layout_sensitive=\*/\s*(true|false)\s*,\s*"
                       r"/\*allow_mixed_precision=\*/\s*(true|false)\s*[})]", body)
        if not m2:
            return None
        opts = {"layout_sensitive": m2.group(1) == "true",
                "allow_mixed_precision": m2.group(2) == "true"}
    return opts


def _verdict(rest: str) -> tuple[str | None, list[str]]:
    """'ok' / 'error' and the expected message substrings, from the code
    after the verifier call."""
    subs = re.findall(r'HasSubstr\(\s*((?:"(?:[^"\\]|\\.)*"\s*)+)\)', rest)
    substrings = ["".join(re.findall(r'"((?:[^"\\]|\\.)*)"', s)) for s in subs]
    rest = re.sub(r"StatusIs\(\s*absl::StatusCode::kOk\s*\)", "IsOk()", rest)
    bad = re.search(r"(ASSERT|EXPECT)_FALSE\([^;]*ok\(\)\)|StatusIs\(|HasSubstr|"
                    r"Not\(IsOk\(\)\)|EXPECT_(?:THAT|NE)\([^;]*(?:absl::StatusCode|Internal|"
                    r"InvalidArgument|FailedPrecondition)", rest)
    good = re.search(r"(?:TF_)?(?:EXPECT|ASSERT)_OK\(|EXPECT_TRUE\([^;]*ok\(\)\)|"
                     r"ASSERT_TRUE\([^;]*ok\(\)\)|IsOk\(\)|IsOkAndHolds", rest)
    if bad and not good:
        return "error", substrings
    if good and not bad:
        return "ok", []
    return None, []


def extract(src: Path) -> dict:
    text = src.read_text()
    tests = list(_TEST.finditer(text))
    cases, skipped = [], {}
    for k, t in enumerate(tests):
        fixture, name = t.group(1), t.group(2)
        body = text[t.end(): tests[k + 1].start() if k + 1 < len(tests) else len(text)]
        raws = _RAW.findall(body)

        def skip(why: str) -> None:
            skipped[why] = skipped.get(why, 0) + 1

        if len(raws) != 1:
            skip("not exactly one module string")
            continue
        hlo = raws[0][1]
        if re.search(r"StrFormat|Substitute|StrCat|StrReplaceAll|absl::StrJoin", body):
            skip("templated module")
            continue
        opts = _options(body, fixture)
        if opts is None:
            skip("verifier options not modelled")
            continue
        config = {}
        for key, value in re.findall(r"config\.set_(\w+)\(([^()]*)\)", body):
            if key in ("replica_count", "num_partitions") and value.strip().isdigit():
                config[key] = int(value)
            else:
                config = None
                break
        if config is None:
            skip("module config not modelled")
            continue
        verified = re.search(r"ParseAndReturnVerifiedModule\(", body)
        runs = re.findall(r"\.Run\(", body)
        if verified and not runs:
            after = body[verified.start():]
            if re.search(r"(?:TF_)?ASSERT_OK_AND_ASSIGN\([^;]*ParseAndReturnVerifiedModule", body):
                verdict, subs = "ok", []
            else:
                verdict, subs = _verdict(after)
        elif len(runs) == 1 and re.search(r"ParseAndReturnUnverifiedModule\(", body):
            parse = body.index("ParseAndReturnUnverifiedModule(")
            run = body.index(".Run(")
            if _MUTATION.search(body[parse:run]) or _MUTATION.search(body[:parse]):
                skip("module changed in C++ before verification")
                continue
            stmt = max(body.rfind(";", 0, run), body.rfind("{", 0, run)) + 1
            verdict, subs = _verdict(body[stmt:])
        else:
            skip("not a single verification")
            continue
        if verdict is None:
            skip("outcome not stated plainly")
            continue
        cases.append({"name": f"{fixture}.{name}", "file": f"{fixture}.{name}.hlo",
                      "line": text.count("\n", 0, t.start()) + 1, "options": opts, "config": config,
                      "expect": verdict, "expected_substrings": subs, "hlo": hlo})
    return {"cases": cases, "skipped": skipped}


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 1
    src = Path(argv[1]) / "xla" / "service" / "hlo_verifier_test.cc"
    out = Path(argv[2])
    out.mkdir(parents=True, exist_ok=True)
    data = extract(src)
    for c in data["cases"]:
        (out / c["file"]).write_text(c.pop("hlo").strip("\n") + "\n")
    manifest = {
        "source_file": "xla/service/hlo_verifier_test.cc",
        "notes": "One entry per test of hlo_verifier_test.cc that verifies one module "
                 "given as HLO text, unchanged; expect is XLA's verdict (ok or error), "
                 "expected_substrings the error text the test checks, options the "
                 "HloVerifierOpts of the test (fixture or explicit), config the "
                 "HloModuleConfig replica/partition counts the test sets.",
        "cases": data["cases"], "skipped": data["skipped"]}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"{len(data['cases'])} cases; skipped: {data['skipped']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
