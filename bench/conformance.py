"""Conformance rates against the external oracles, as a table; exit 1 when a
rate is below the target of the foundation issue.

    python bench/conformance.py [--json OUT]

Suites (the corpus is ``../shared`` beside the checkout, or
``$HLORUN_SHARED``):

* XLA parser tests (``corpus/xla/parser``): positive cases XLA accepts
  parse; negative cases are rejected with a located error; exact
  round-trip cases print back byte for byte (long/short form); the
  ``CreateNonRoundtripTestCases`` cases print their expected output.
* XLA tree ``.hlo`` files XLA accepts (``corpus/xla/files``, split inputs
  per chunk, the 12 gzip'd model dumps included): parse, and printing is a
  fixed point.
* Real XLA:GPU dumps (``xla-dumps``): parse and print back byte for byte;
  ``hlo-verifier`` reports nothing.
* XLA's verifier tests (``testdata/xla_verifier``): ``hlo-verifier`` gives
  XLA's verdict.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus  # noqa: E402  (bench/corpus.py)

#: suite -> (minimum pass rate, what the issue asks)
TARGETS = {
    "parser positive": (0.98, ">= 98%"),
    "parser negative": (1.0, "100%"),
    "parser exact round trip": (0.90, ">= 90%"),
    "parser non-round-trip expected output": (0.0, "report"),
    "files (chunks)": (0.95, ">= 95%"),
    "dumps round trip": (1.0, "100%"),
    "dumps verifier clean": (1.0, "100% (0 findings)"),
    "XLA verifier tests": (0.0, "report"),
}


def parser_suites(results: dict) -> None:
    import hlorun
    from hlorun.errors import HloParseError
    cases = corpus.parser_cases()
    pos = neg = rt = nrt = 0
    pos_ok = neg_ok = rt_ok = nrt_ok = 0
    for c in cases:
        text = c["path"].read_text()
        if c["positive"] and c["xla_parse"].get("parses"):
            pos += 1
            try:
                module = hlorun.parse_module(text, c["file"])
                pos_ok += module.entry is not None
            except HloParseError:
                pass
        if not c["positive"]:
            neg += 1
            try:
                hlorun.parse_module(text, c["file"])
            except HloParseError as e:
                neg_ok += e.line >= 1 and e.column >= 1
            except Exception:  # noqa: BLE001 - a crash is a failure, counted as such
                pass
        if c.get("exact_round_trip"):
            rt += 1
            form = "long" if c["round_trip_form"] == "long" else "short"
            try:
                out = hlorun.print_module(hlorun.parse_module(text, c["file"]), form=form)
                rt_ok += out.strip() == text.strip()
            except HloParseError:
                pass
        if c.get("source") == "CreateNonRoundtripTestCases()":
            nrt += 1
            try:
                out = hlorun.print_module(hlorun.parse_module(text, c["file"]), form="short")
                nrt_ok += out.strip() == c["expected_output"].strip()
            except HloParseError:
                pass
    results["parser positive"] = (pos_ok, pos)
    results["parser negative"] = (neg_ok, neg)
    results["parser exact round trip"] = (rt_ok, rt)
    results["parser non-round-trip expected output"] = (nrt_ok, nrt)


def files_suite(results: dict) -> None:
    import hlorun
    from hlorun.errors import HloParseError
    ok = total = 0
    for entry in corpus.file_entries():
        for label, _, text in corpus.file_chunks(entry):
            total += 1
            try:
                p1 = hlorun.print_module(hlorun.parse_module(text, label))
                ok += hlorun.print_module(hlorun.parse_module(p1, label)) == p1
            except HloParseError:
                pass
    results["files (chunks)"] = (ok, total)


def dumps_suites(results: dict) -> None:
    import hlorun
    from hlorun.errors import HloParseError
    from hlorun.verifier.checkers import HloVerifier
    paths = corpus.dump_paths()
    rt = clean = findings = 0
    for p in paths:
        text = p.read_text()
        try:
            module = hlorun.parse_module(text, str(p))
        except HloParseError:
            continue
        rt += hlorun.print_module(module).strip() == text.strip()
        n = len(HloVerifier().check(module))
        findings += n
        clean += n == 0
    results["dumps round trip"] = (rt, len(paths))
    results["dumps verifier clean"] = (clean, len(paths))
    results["_dump_findings"] = findings


def verifier_suite(results: dict) -> None:
    import hlorun
    from hlorun.verifier.checkers import HloVerifier
    root = REPO / "testdata" / "xla_verifier"
    cases = json.loads((root / "manifest.json").read_text())["cases"]
    ok = 0
    for c in cases:
        module = hlorun.parse_module((root / c["file"]).read_text(), c["file"])
        for key, value in (c.get("config") or {}).items():
            module.header_attrs[key] = str(value)
        found = bool(HloVerifier(**c["options"]).check(module))
        ok += found == (c["expect"] == "error")
    results["XLA verifier tests"] = (ok, len(cases))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, help="also write the rates as JSON")
    args = ap.parse_args(argv)
    if not corpus.CORPUS.is_dir():
        print(f"no corpus at {corpus.CORPUS} (set HLORUN_SHARED)", file=sys.stderr)
        return 1
    t0 = time.perf_counter()
    results: dict = {}
    parser_suites(results)
    files_suite(results)
    dumps_suites(results)
    verifier_suite(results)
    failed = []
    rows = []
    for name, (target, wanted) in TARGETS.items():
        ok, total = results[name]
        rate = ok / total if total else 0.0
        good = total > 0 and rate >= target
        if not good:
            failed.append(name)
        rows.append((name, ok, total, rate, wanted, "ok" if good else "BELOW TARGET"))
    width = max(len(r[0]) for r in rows)
    print(f"{'suite':<{width}}  {'passed':>13}  {'rate':>7}  {'target':<18} ")
    for name, ok, total, rate, wanted, status in rows:
        print(f"{name:<{width}}  {ok:>6}/{total:<6}  {rate:7.1%}  {wanted:<18} {status}")
    print(f"hlo-verifier findings on the dumps: {results['_dump_findings']}; "
          f"{time.perf_counter() - t0:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({k: v for k, v in results.items()}, indent=1) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
